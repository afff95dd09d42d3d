//! A granted hold as every guard has it ([`Grant`]), and its lost signal ([`LostSignal`]).

use crate::book::HoldState;
#[cfg(doc)]
use crate::error::Error;
use crate::error::Result;
use crate::hold::Hold;
use crate::mode::Mode;

use super::guards::ReadGuard;
use super::RwLock;

/// What every guard has: the grant's fence, its owner, its lost signal and the lock it
/// holds. [`ReadGuard`](super::ReadGuard), [`WriteGuard`](super::WriteGuard), [`UpgradableReadGuard`](super::UpgradableReadGuard) and [`AnyGuard`](super::AnyGuard) deref
/// to it, so these methods are called on the guard itself. It is never made on its own.
///
/// ```no_run
/// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
/// use cluster_rwlock::Grant;
/// fn describe(grant: &Grant) -> String {
///     format!("{} holds {} under fence {}", grant.owner(), grant.lock().name(), grant.fence())
/// }
/// let read = lock.read().await?;
/// println!("{}", describe(&read));
/// # Ok(()) }
/// ```
pub struct Grant {
    pub(crate) hold: Hold,
    pub(crate) lock: RwLock,
}

impl Grant {
    /// Redis commands on keys of this lock's slot that run only while this hold is on
    /// the server: the check and the commands are one function call on one node, so a hold
    /// that is gone (its lease ran out by the server's clock, broken by
    /// [`force_release`](crate::LockClient::force_release), lost in a failover) writes
    /// NOTHING, and the call is [`Error::LockLost`](crate::Error::LockLost). Writes need
    /// a write hold; reads run under any. See [`Guarded`](crate::guarded::Guarded).
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// let guard = lock.write().await?; // the lock `orders:{42}`
    /// guard.guarded().set("orders:{42}:status", "paid").run().await?;
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn guarded(&self) -> super::guarded::Guarded<&Grant> {
        super::guarded::Guarded::bound(self)
    }
    pub(crate) fn new(hold: Hold, lock: RwLock) -> Grant {
        Grant { hold, lock }
    }

    /// The fencing token of this grant: strictly greater than every fence granted
    /// before for this lock name. Pass it to the resource you guard, and have the
    /// resource reject writes with a lower fence than it has seen.
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// let guard = lock.write().await?;
    /// println!("write with fence {}", guard.fence());
    /// # Ok(()) }
    /// ```
    pub fn fence(&self) -> u64 {
        self.hold.fence()
    }

    /// The mode of the hold.
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// let guard = lock.write().await?;
    /// assert_eq!(guard.mode(), cluster_rwlock::Mode::Write);
    /// # Ok(()) }
    /// ```
    pub fn mode(&self) -> Mode {
        self.hold.mode()
    }

    /// Whether the lease was lost: a renewal, or a call made under this guard (a guarded
    /// call, [`read_again`](Self::read_again), an upgrade or a downgrade), found the hold
    /// gone, or no renewal succeeded for a whole lease. Another owner may hold the lock
    /// now.
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// let guard = lock.write().await?;
    /// if guard.is_lost() {
    ///     return Ok(()); // stop: not protected any more
    /// }
    /// # Ok(()) }
    /// ```
    pub fn is_lost(&self) -> bool {
        self.hold.is_lost()
    }

    /// Resolves when (and only if) the lease is lost. The future borrows nothing: race
    /// it in `tokio::select!` against work that may stop half way, or move it into a
    /// task of its own (see [`lost_signal`](Self::lost_signal) for a handle that can be
    /// cloned).
    ///
    /// Do not race it against the commit itself: a write cancelled half way may leave
    /// the resource torn. Race it against the preparation, and have the commit carry the
    /// [`fence`](Self::fence), which the resource checks.
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// let guard = lock.write().await?;
    /// let prepared = tokio::select! {
    ///     _ = guard.lost() => None, // lease lost: stop preparing
    ///     data = async { /* read, compute */ "new value" } => Some(data),
    /// };
    /// if let Some(data) = prepared {
    ///     // commit `data` with `guard.fence()`: not cancelled, checked by the resource
    /// }
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn lost(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let signal = self.lost_signal();
        async move { signal.lost().await }
    }

    /// An owned handle on this hold's lost signal: `'static`, cheap to clone, and it
    /// outlives the guard (after a release it only ever reports what happened before).
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// let guard = lock.write().await?;
    /// let signal = guard.lost_signal();
    /// let watcher = tokio::spawn(async move {
    ///     signal.lost().await;
    ///     eprintln!("lease lost");
    /// });
    /// guard.release().await?;
    /// watcher.abort();
    /// # Ok(()) }
    /// ```
    pub fn lost_signal(&self) -> LostSignal {
        LostSignal {
            state: self.hold.state(),
        }
    }

    /// The owner token this hold was taken as: the explicit one of
    /// [`RwLock::with_owner`], or one of its own (`<handle's owner>:<n>`); it is what
    /// [`RwLock::state`] lists.
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// let guard = lock.read().await?;
    /// println!("holding as {}", guard.owner());
    /// # Ok(()) }
    /// ```
    pub fn owner(&self) -> &str {
        self.hold.owner()
    }

    /// Takes another read hold as this guard's owner: granted at once, without
    /// waiting for queued writers (the owner holds already). The new guard is
    /// released on its own.
    ///
    /// # Cancel safety
    /// Cancel safe: a hold granted for a dropped future is given back at once.
    ///
    /// # Errors
    /// [`Error::LockLost`] when this guard's lease was lost; [`Error::Unavailable`] or
    /// [`Error::Connection`] when the lock's master cannot be reached in time.
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// let guard = lock.read().await?;
    /// let again = guard.read_again().await?; // reentrant, on purpose
    /// again.release().await?;
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn read_again(&self) -> Result<ReadGuard> {
        let hold = self.hold.again(Mode::Read).await?;
        Ok(ReadGuard(Grant::new(hold, self.lock.clone())))
    }

    /// The lock this guard holds.
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// let guard = lock.read().await?;
    /// assert_eq!(guard.lock().name(), lock.name());
    /// # Ok(()) }
    /// ```
    pub fn lock(&self) -> &RwLock {
        &self.lock
    }

    /// Releases the hold (the guards' `release`).
    pub(crate) async fn release(self) -> Result<()> {
        self.hold.release().await
    }
}

impl std::fmt::Debug for Grant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Grant")
            .field("name", &self.lock.name())
            .field("owner", &self.hold.owner())
            .field("mode", &self.hold.mode())
            .field("fence", &self.hold.fence())
            .field("lost", &self.is_lost())
            .finish()
    }
}

/// A hold's lost signal, owned: made by [`Grant::lost_signal`]. Cheap to clone, `'static`,
/// so a task of its own can wait on it while the guard stays where the work is.
///
/// ```no_run
/// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
/// let guard = lock.write().await?;
/// let signal = guard.lost_signal();
/// assert!(!signal.is_lost());
/// tokio::spawn(signal.clone().lost());
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct LostSignal {
    state: std::sync::Arc<HoldState>,
}

impl LostSignal {
    /// Whether the lease was lost (as [`Grant::is_lost`]).
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// let signal = lock.read().await?.lost_signal();
    /// println!("lost: {}", signal.is_lost());
    /// # Ok(()) }
    /// ```
    pub fn is_lost(&self) -> bool {
        self.state.is_lost()
    }

    /// Resolves when (and only if) the lease is lost (as [`Grant::lost`]).
    ///
    /// # Cancel safety
    /// Cancel safe: it only waits.
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// let guard = lock.write().await?;
    /// let signal = guard.lost_signal();
    /// tokio::spawn(async move { signal.lost().await; eprintln!("lost") });
    /// # Ok(()) }
    /// ```
    pub async fn lost(self) {
        self.state.lost().await
    }
}

impl std::fmt::Debug for LostSignal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LostSignal")
            .field("lost", &self.is_lost())
            .finish()
    }
}
