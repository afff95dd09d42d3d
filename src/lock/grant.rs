//! RAII guards: a granted hold, renewed while it lives, released when dropped.

use crate::book::HoldState;
use crate::error::{Error, Result};
use crate::hold::Hold;
use crate::hold::Patience;
use crate::mode::Mode;

use super::RwLock;

/// What every guard has: the grant's fence, its owner, its lost signal and the lock it
/// holds. [`ReadGuard`], [`WriteGuard`], [`UpgradableReadGuard`] and [`AnyGuard`] deref
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
    pub fn guarded(&self) -> super::guarded::Guarded<'_> {
        super::guarded::Guarded::new(self)
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

/// Each guard derefs to its [`Grant`], releases with `release`, and shows its grant in
/// `Debug`.
macro_rules! guard_basics {
    ($t:ident) => {
        impl std::ops::Deref for $t {
            type Target = Grant;
            fn deref(&self) -> &Grant {
                &self.0
            }
        }

        impl std::fmt::Debug for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_tuple(stringify!($t)).field(&self.0).finish()
            }
        }

        impl $t {
            /// Releases the hold now. Fails with [`Error::LockLost`] when the lease had
            /// been lost (the hold was gone, or it was no longer protected), and with
            /// [`Error::Connection`] or [`Error::Unavailable`] when Redis could not be
            /// reached twice (the hold then expires after its lease).
            ///
            /// # Cancel safety
            /// A release cancelled half way is finished in the background.
            ///
            /// ```no_run
            /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
            /// let guard = lock.write().await?;
            /// match guard.release().await {
            ///     Err(cluster_rwlock::Error::LockLost) => eprintln!("the lease had been lost"),
            ///     other => other?,
            /// }
            /// # Ok(()) }
            /// ```
            pub async fn release(self) -> Result<()> {
                self.0.release().await
            }
        }
    };
}

/// The grant's methods on each guard itself, so that each guard's own page lists them
/// (not only under "Methods from Deref"): each is [`Grant`]'s method of the same name.
macro_rules! grant_methods {
    ($t:ident, $take:literal) => {
        impl $t {
            #[doc = concat!("Guarded calls under this hold: see [`Grant::guarded`].\n\n```no_run\n# async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {\nlet guard = ", $take, ";\nlet status = guard.guarded().get(\"orders:{42}:status\").run().await?;\n# Ok(()) }\n```")]
            pub fn guarded(&self) -> super::guarded::Guarded<'_> {
                std::ops::Deref::deref(self).guarded()
            }

            #[doc = concat!("This grant's fencing token: see [`Grant::fence`].\n\n```no_run\n# async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {\nlet guard = ", $take, ";\nprintln!(\"fence {}\", guard.fence());\n# Ok(()) }\n```")]
            pub fn fence(&self) -> u64 {
                std::ops::Deref::deref(self).fence()
            }

            #[doc = concat!("The mode of the hold: see [`Grant::mode`].\n\n```no_run\n# async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {\nlet guard = ", $take, ";\nprintln!(\"{:?}\", guard.mode());\n# Ok(()) }\n```")]
            pub fn mode(&self) -> Mode {
                std::ops::Deref::deref(self).mode()
            }

            #[doc = concat!("Whether the lease was lost: see [`Grant::is_lost`].\n\n```no_run\n# async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {\nlet guard = ", $take, ";\nif guard.is_lost() {\n    return Ok(()); // not protected any more\n}\n# Ok(()) }\n```")]
            pub fn is_lost(&self) -> bool {
                std::ops::Deref::deref(self).is_lost()
            }

            #[doc = concat!("Resolves when (and only if) the lease is lost: see [`Grant::lost`].\n\n```no_run\n# async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {\nlet guard = ", $take, ";\ntokio::select! {\n    _ = guard.lost() => eprintln!(\"lost\"),\n    _ = tokio::time::sleep(std::time::Duration::from_millis(10)) => {}\n}\n# Ok(()) }\n```")]
            pub fn lost(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
                std::ops::Deref::deref(self).lost()
            }

            #[doc = concat!("A handle that tells when the lease is lost: see [`Grant::lost_signal`].\n\n```no_run\n# async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {\nlet guard = ", $take, ";\nlet signal = guard.lost_signal();\ntokio::spawn(async move { signal.lost().await; eprintln!(\"lost\") });\n# Ok(()) }\n```")]
            pub fn lost_signal(&self) -> LostSignal {
                std::ops::Deref::deref(self).lost_signal()
            }

            #[doc = concat!("The owner token of this hold: see [`Grant::owner`].\n\n```no_run\n# async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {\nlet guard = ", $take, ";\nprintln!(\"held by {}\", guard.owner());\n# Ok(()) }\n```")]
            pub fn owner(&self) -> &str {
                std::ops::Deref::deref(self).owner()
            }

            #[doc = concat!("A second read hold of the same owner: see [`Grant::read_again`].\n\n# Cancel safety\nAs [`Grant::read_again`].\n\n```no_run\n# async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {\nlet guard = ", $take, ";\nlet again = guard.read_again().await?;\n# Ok(()) }\n```")]
            pub async fn read_again(&self) -> Result<ReadGuard> {
                std::ops::Deref::deref(self).read_again().await
            }

            #[doc = concat!("The lock this guard holds: see [`Grant::lock`].\n\n```no_run\n# async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {\nlet guard = ", $take, ";\nprintln!(\"{}\", guard.lock().name());\n# Ok(()) }\n```")]
            pub fn lock(&self) -> &RwLock {
                std::ops::Deref::deref(self).lock()
            }
        }
    };
}

/// A shared (read) hold. Dropping it releases it in the background.
///
/// ```no_run
/// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
/// let guard = lock.read().await?;
/// tokio::select! {
///     _ = guard.lost() => eprintln!("lease lost: stop reading"),
///     _ = tokio::time::sleep(std::time::Duration::from_millis(10)) => {}
/// }
/// guard.release().await?;
/// # Ok(()) }
/// ```
#[must_use = "if unused the lock is released at once (in the background)"]
pub struct ReadGuard(pub(crate) Grant);

guard_basics!(ReadGuard);
grant_methods!(ReadGuard, "lock.read().await?");

/// An exclusive (write) hold. Dropping it releases it in the background.
///
/// ```no_run
/// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
/// let guard = lock.write().await?;
/// let fence = guard.fence();
/// let read = guard.downgrade().await?; // no writer gets in between
/// assert!(read.fence() > fence);
/// read.release().await?;
/// # Ok(()) }
/// ```
#[must_use = "if unused the lock is released at once (in the background)"]
pub struct WriteGuard(pub(crate) Grant);

guard_basics!(WriteGuard);
grant_methods!(WriteGuard, "lock.write().await?");

impl WriteGuard {
    /// Turns this write hold into a read hold in one step: no writer can take the lock in
    /// between, and readers may join. The read hold gets a new fence.
    ///
    /// # Cancel safety
    /// If the future is dropped, the write hold is released, and the read hold, if the
    /// call had made it already, is given back too (both in the background): nothing is
    /// left on the server that nobody renews or gives back.
    ///
    /// # Errors
    /// [`Error::LockLost`] when the lease had been lost; [`Error::Unavailable`] or
    /// [`Error::Connection`] when the lock's master cannot be reached in time (the write hold
    /// is then released; when the call ran on the server and only its reply was lost, the
    /// read hold it made is given back as well, in the background, after the call on the
    /// same connection).
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// let read = lock.write().await?.downgrade().await?;
    /// read.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn downgrade(self) -> Result<ReadGuard> {
        Ok(ReadGuard(Grant::new(
            self.0.hold.downgrade(Mode::Read).await?,
            self.0.lock,
        )))
    }

    /// Turns this write hold into an upgradable read hold in one step: readers may join,
    /// no writer can take the lock in between, and it can be upgraded again.
    ///
    /// # Cancel safety
    /// As [`downgrade`](Self::downgrade).
    ///
    /// # Errors
    /// As [`downgrade`](Self::downgrade).
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// let up = lock.write().await?.downgrade_to_upgradable().await?;
    /// let write = up.upgrade().await?;
    /// write.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn downgrade_to_upgradable(self) -> Result<UpgradableReadGuard> {
        Ok(UpgradableReadGuard(Grant::new(
            self.0.hold.downgrade(Mode::Upgradable).await?,
            self.0.lock,
        )))
    }

    /// Takes another write hold as this guard's owner: granted at once. The new guard is
    /// released on its own (the lock stays written until both are released).
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
    /// let w = lock.write().await?;
    /// let w2 = w.write_again().await?; // reentrant, on purpose
    /// assert!(w2.fence() > w.fence());
    /// # Ok(()) }
    /// ```
    pub async fn write_again(&self) -> Result<WriteGuard> {
        Ok(WriteGuard(Grant::new(
            self.0.hold.again(Mode::Write).await?,
            self.0.lock.clone(),
        )))
    }
}

/// An upgradable read hold: shared with plain readers, at most one owner at a time, and
/// no writer while it lasts. Dropping it releases it in the background.
///
/// ```no_run
/// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
/// let up = lock.upgradable_read().await?;
/// let stale = true; // read, and decide whether to write
/// if stale {
///     let w = up.upgrade().await?; // no other writer in between
///     w.release().await?;
/// } else {
///     up.release().await?;
/// }
/// # Ok(()) }
/// ```
#[must_use = "if unused the lock is released at once (in the background)"]
pub struct UpgradableReadGuard(pub(crate) Grant);

guard_basics!(UpgradableReadGuard);
grant_methods!(UpgradableReadGuard, "lock.upgradable_read().await?");

impl UpgradableReadGuard {
    /// Waits until the plain readers have left and turns this hold into the write hold,
    /// with a new, higher fence. Meanwhile new readers wait behind it as behind a queued
    /// writer, and it becomes write before any queued writer: no other writer gets in
    /// between.
    ///
    /// # Cancel safety
    /// Dropping the future gives up the upgrade AND this upgradable hold (the guard was
    /// moved into the future): both are released in the background. To keep the hold,
    /// use [`upgrade_timeout`](Self::upgrade_timeout) or
    /// [`try_upgrade`](Self::try_upgrade).
    ///
    /// # Errors
    /// [`Error::LockLost`] when the lease had been lost; [`Error::Unavailable`] or
    /// [`Error::Connection`] when the lock's master cannot be reached within the command
    /// timeout; [`Error::NotReplicated`] with replica acks. The upgradable hold is
    /// released on error.
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// let up = lock.upgradable_read().await?;
    /// let read_fence = up.fence();
    /// let w = up.upgrade().await?;
    /// assert!(w.fence() > read_fence);
    /// # Ok(()) }
    /// ```
    pub async fn upgrade(self) -> Result<WriteGuard> {
        match self.upgrade_with(Patience::Wait(None)).await? {
            Ok(write) => Ok(write),
            // (waiting without a deadline, the upgrade is never given up as busy)
            Err(_kept) => Err(Error::Timeout(std::time::Duration::MAX)),
        }
    }

    /// The write hold made from this one, or this guard back, unchanged, when the
    /// readers did not leave within `patience`.
    async fn upgrade_with(
        self,
        patience: Patience,
    ) -> Result<std::result::Result<WriteGuard, UpgradableReadGuard>> {
        let Grant { hold, lock } = self.0;
        Ok(match hold.upgrade(patience).await? {
            Ok(write) => Ok(WriteGuard(Grant::new(write, lock))),
            Err(kept) => Err(UpgradableReadGuard(Grant::new(kept, lock))),
        })
    }

    /// [`upgrade`](Self::upgrade) for at most `timeout`: the write hold, or this guard
    /// back when the plain readers did not leave in time. Meanwhile new readers wait
    /// behind it as behind a queued writer; on timeout they may enter again, and the
    /// upgradable hold is kept (a write hold granted just as the time ran out turns
    /// back into it). Returns within `timeout` and one round trip: the pending upgrade
    /// is withdrawn before the guard comes back, so that the guard is known to hold. When
    /// that round trip fails or takes over half a second (the command timeout, if less),
    /// the call fails with that error and the upgradable hold is given up.
    ///
    /// # Cancel safety
    /// As [`upgrade`](Self::upgrade): dropping the future gives up the upgrade and this
    /// upgradable hold.
    ///
    /// # Errors
    /// As [`upgrade`](Self::upgrade); also when the withdrawal after the timeout fails
    /// (the upgradable hold is then released, as on any error).
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// use std::time::Duration;
    /// let up = lock.upgradable_read().await?;
    /// match up.upgrade_timeout(Duration::from_millis(500)).await? {
    ///     Ok(write) => write.release().await?,
    ///     Err(up) => up.release().await?, // readers stayed; still upgradable
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn upgrade_timeout(
        self,
        timeout: std::time::Duration,
    ) -> Result<std::result::Result<WriteGuard, UpgradableReadGuard>> {
        self.upgrade_with(Patience::Wait(Some(timeout))).await
    }

    /// One attempt to upgrade: the write hold if no plain reader of another owner holds,
    /// else this guard back, unchanged.
    ///
    /// # Cancel safety
    /// As [`upgrade`](Self::upgrade).
    ///
    /// # Errors
    /// As [`upgrade`](Self::upgrade).
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// let up = lock.upgradable_read().await?;
    /// match up.try_upgrade().await? {
    ///     Ok(write) => write.release().await?,
    ///     Err(up) => up.release().await?, // readers still hold
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn try_upgrade(self) -> Result<std::result::Result<WriteGuard, UpgradableReadGuard>> {
        self.upgrade_with(Patience::Once).await
    }

    /// Turns this hold into a plain read hold in one step (another owner may then take
    /// the upgradable read). The read hold gets a new fence.
    ///
    /// # Cancel safety
    /// As [`WriteGuard::downgrade`].
    ///
    /// # Errors
    /// As [`WriteGuard::downgrade`].
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// let read = lock.upgradable_read().await?.downgrade().await?;
    /// read.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn downgrade(self) -> Result<ReadGuard> {
        Ok(ReadGuard(Grant::new(
            self.0.hold.downgrade(Mode::Read).await?,
            self.0.lock,
        )))
    }
}

/// Any of the three guards, for code that picks the mode at run time (a command line
/// flag, a setting): it derefs to the [`Grant`] every guard has (fence, mode, lost
/// signal, owner) and releases with [`release`](Self::release). Made with `From` of each
/// guard.
///
/// ```no_run
/// # async fn demo(lock: cluster_rwlock::RwLock, exclusive: bool) -> cluster_rwlock::Result<()> {
/// use cluster_rwlock::AnyGuard;
/// let guard: AnyGuard = if exclusive {
///     lock.write().await?.into()
/// } else {
///     lock.read().await?.into()
/// };
/// println!("{:?} under fence {}", guard.mode(), guard.fence());
/// tokio::select! {
///     _ = guard.lost() => eprintln!("lease lost"),
///     _ = tokio::time::sleep(std::time::Duration::from_millis(10)) => {}
/// }
/// guard.release().await?;
/// # Ok(()) }
/// ```
#[must_use = "if unused the lock is released at once (in the background)"]
#[derive(Debug)]
pub enum AnyGuard {
    /// A read hold.
    Read(ReadGuard),
    /// A write hold.
    Write(WriteGuard),
    /// An upgradable read hold.
    Upgradable(UpgradableReadGuard),
}

impl std::ops::Deref for AnyGuard {
    type Target = Grant;
    fn deref(&self) -> &Grant {
        match self {
            AnyGuard::Read(g) => &g.0,
            AnyGuard::Write(g) => &g.0,
            AnyGuard::Upgradable(g) => &g.0,
        }
    }
}

impl AnyGuard {
    /// Releases the hold now, as each guard's `release` (e.g.
    /// [`WriteGuard::release`]).
    ///
    /// # Cancel safety
    /// A release cancelled half way is finished in the background.
    ///
    /// # Errors
    /// As [`WriteGuard::release`].
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// cluster_rwlock::AnyGuard::from(lock.read().await?).release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn release(self) -> Result<()> {
        match self {
            AnyGuard::Read(g) => g.0.release().await,
            AnyGuard::Write(g) => g.0.release().await,
            AnyGuard::Upgradable(g) => g.0.release().await,
        }
    }
}

grant_methods!(
    AnyGuard,
    "cluster_rwlock::AnyGuard::from(lock.write().await?)"
);

impl From<ReadGuard> for AnyGuard {
    fn from(g: ReadGuard) -> AnyGuard {
        AnyGuard::Read(g)
    }
}

impl From<WriteGuard> for AnyGuard {
    fn from(g: WriteGuard) -> AnyGuard {
        AnyGuard::Write(g)
    }
}

impl From<UpgradableReadGuard> for AnyGuard {
    fn from(g: UpgradableReadGuard) -> AnyGuard {
        AnyGuard::Upgradable(g)
    }
}
