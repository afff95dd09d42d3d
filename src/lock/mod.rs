//! The lock handle. The rules it follows (ownership, reentrancy, fairness, upgradable
//! reads) are stated once, on the crate page.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

mod finished; // `Finished`: what `with_read`/`with_write` return
mod grant; // `Grant` (what every guard has) and `LostSignal`
pub mod guarded; // guarded calls: commands that run only while the hold lasts
mod guards; // the guards, and the conversions between modes
mod listen; // a lock's release messages, as they come
mod scoped; // `with_read` and `with_write`: a hold for the time a closure runs
mod state; // `LockState` and `Holder`: what `state()` reads

#[cfg(test)]
use crate::keys::client_name_of;
pub use finished::Finished;
pub use grant::{Grant, LostSignal};
pub use guards::{AnyGuard, ReadGuard, UpgradableReadGuard, WriteGuard};
pub use listen::ReleaseMessages;
pub use state::{Holder, LockState};

use crate::error::{Error, Result};
use crate::hold::Hold;
use crate::mode::Mode;
use crate::raw::RawLock;
use crate::shared::Shared;

/// A distributed read/write lock: the handle is the lock.
///
/// **Every acquire through a handle is a hold of its own** that excludes every other
/// writer: clones and `Arc`s of one handle shared by several tasks contend as tokio's
/// `RwLock` does. Holds are reentrant only on purpose: through a guard
/// ([`read_again`](Grant::read_again), [`WriteGuard::write_again`]), or for holds taken as one
/// explicit owner token ([`with_owner`](Self::with_owner)). The crate docs state the
/// guarantees and fairness rules.
///
/// Cheap to clone.
///
/// ```no_run
/// # async fn demo(client: cluster_rwlock::LockClient) -> cluster_rwlock::Result<()> {
/// let lock = client.rwlock("orders:42")?;
/// assert_eq!(lock.key(), "rwlock:{orders:42}");
/// // eight tasks share one handle: never two writers at once
/// let tasks: Vec<_> = (0..8)
///     .map(|_| {
///         let lock = lock.clone();
///         tokio::spawn(async move {
///             let guard = lock.write().await?;
///             // ... exclusive work ...
///             guard.release().await
///         })
///     })
///     .collect();
/// for t in tasks {
///     t.await.expect("task")?;
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RwLock {
    raw: RawLock,
    owner: Arc<str>,
    /// The owner token was given by the user: every hold is taken as it (reentrant).
    explicit: bool,
}

impl std::fmt::Debug for RwLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RwLock")
            .field("name", self.raw.name())
            .field("key", self.raw.key())
            .field("slot", &self.raw.slot())
            .field("owner", &self.owner)
            .field("explicit_owner", &self.explicit)
            .finish()
    }
}

/// Writes the `# Cancel safety` and `# Errors` sections of an acquire method.
macro_rules! acquire_doc {
    (waits) => {
        concat!(
            "# Cancel safety\n",
            "Cancel safe: dropping the future (e.g. in `tokio::select!` or under a timeout) ",
            "leaves no hold and no place in the writer queue behind; a grant that lands ",
            "for a dropped future is given back at once.\n\n",
            "# Errors\n",
            "- [`Error::InvalidOwner`]: the explicit owner token is empty, longer than 256 ",
            "bytes, or contains whitespace.\n",
            "- [`Error::UpgradeDeadlock`]: (explicit owners only) the owner holds read and ",
            "asks for write.\n",
            "- [`Error::WrongType`], [`Error::Corrupt`]: the key is not a lock of this ",
            "library (nothing is changed).\n",
            "- [`Error::NotReplicated`]: the replicas that could be promoted did not ",
            "acknowledge the grant in time (see [`Durability`](crate::Durability)); it was undone ",
            "(methods with a timeout try again until it runs out, and return this error ",
            "when it ran out after such a refusal); `silent` names the replicas that did not ",
            "acknowledge.\n",
            "- [`Error::Unavailable`], [`Error::Connection`]: the lock's master did not answer ",
            "within the command timeout, or the connection failed (methods with a timeout ",
            "retry until it runs out); [`Error::Closed`]: the client was closed.\n",
        )
    };
    (timeout) => {
        "- [`Error::Timeout`]: not granted within `timeout` (the lock was busy).\n"
    };
}

impl RwLock {
    pub(crate) fn new(inner: Arc<Shared>, name: &str, owner: String, explicit: bool) -> RwLock {
        RwLock {
            raw: RawLock::new(inner, name),
            owner: owner.into(),
            explicit,
        }
    }

    fn read_guard(&self, hold: crate::hold::Hold) -> ReadGuard {
        ReadGuard(grant::Grant::new(hold, self.clone()))
    }

    fn write_guard(&self, hold: crate::hold::Hold) -> WriteGuard {
        WriteGuard(grant::Grant::new(hold, self.clone()))
    }

    fn upgradable_guard(&self, hold: crate::hold::Hold) -> UpgradableReadGuard {
        UpgradableReadGuard(grant::Grant::new(hold, self.clone()))
    }

    /// The guard of `hold`, in its mode.
    fn any_guard(&self, hold: crate::hold::Hold) -> AnyGuard {
        match hold.mode() {
            Mode::Read => self.read_guard(hold).into(),
            Mode::Write => self.write_guard(hold).into(),
            Mode::Upgradable => self.upgradable_guard(hold).into(),
        }
    }

    /// Waits for a hold of `mode`, at most `timeout` (`None`: as long as it takes): what
    /// `read`, `write` and the others do, for a mode chosen at run time (multi-locks).
    pub(crate) async fn acquire_any(
        &self,
        mode: Mode,
        timeout: Option<Duration>,
    ) -> Result<AnyGuard> {
        let hold = self.wait(mode, timeout).await?;
        Ok(self.any_guard(hold))
    }

    /// Whether a multi-lock of this client lately found this lock's slot busy.
    pub(crate) fn contended_lately(&self, now: tokio::time::Instant) -> bool {
        self.raw.contended_lately(now)
    }

    /// A multi-lock found this lock busy at `now`.
    pub(crate) fn mark_contended(&self, now: tokio::time::Instant) {
        self.raw.mark_contended(now);
    }

    /// One attempt at a hold of `mode`: `try_read` and the others, for a mode chosen at
    /// run time.
    pub(crate) async fn try_any(&self, mode: Mode) -> Result<Option<AnyGuard>> {
        let hold = self.try_once(mode).await?;
        Ok(hold.map(|hold| self.any_guard(hold)))
    }

    /// [`try_any`](Self::try_any), the attempt going in the batch `gather` builds (a
    /// multi-lock's round: see `cluster::lane::Gather`).
    pub(crate) async fn try_any_in(
        &self,
        gather: Arc<crate::cluster::lane::Gather>,
        mode: Mode,
    ) -> Result<Option<AnyGuard>> {
        let hold = Hold::try_acquire(&self.raw, self.hold_owner(), mode, Some(gather)).await?;
        Ok(hold.map(|hold| self.any_guard(hold)))
    }

    /// [`read`](Self::read), [`write`](Self::write) or
    /// [`upgradable_read`](Self::upgradable_read), for a mode chosen at run time: the
    /// guard of that mode in an [`AnyGuard`].
    ///
    #[doc = acquire_doc!(waits)]
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// use cluster_rwlock::{AnyGuard, Mode};
    /// let exclusive = std::env::args().any(|a| a == "--write");
    /// let guard = lock.acquire(if exclusive { Mode::Write } else { Mode::Read }).await?;
    /// assert!(matches!(guard, AnyGuard::Write(_)) == exclusive);
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn acquire(&self, mode: Mode) -> Result<AnyGuard> {
        self.acquire_any(mode, None).await
    }

    /// [`acquire`](Self::acquire) for at most `timeout` (as
    /// [`write_timeout`](Self::write_timeout): zero is one attempt made in full).
    ///
    #[doc = acquire_doc!(waits)]
    #[doc = acquire_doc!(timeout)]
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// use std::time::Duration;
    /// let guard = lock
    ///     .acquire_timeout(cluster_rwlock::Mode::Upgradable, Duration::from_secs(5))
    ///     .await?;
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn acquire_timeout(&self, mode: Mode, timeout: Duration) -> Result<AnyGuard> {
        self.acquire_any(mode, Some(timeout)).await
    }

    /// One attempt at a hold of `mode` ([`try_read`](Self::try_read) and the others, for
    /// a mode chosen at run time); `None` when the lock is busy for that mode.
    ///
    #[doc = acquire_doc!(waits)]
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// if let Some(guard) = lock.try_acquire(cluster_rwlock::Mode::Read).await? {
    ///     guard.release().await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn try_acquire(&self, mode: Mode) -> Result<Option<AnyGuard>> {
        self.try_any(mode).await
    }

    /// The lock's name.
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// assert_eq!(lock.name(), "orders:42");
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &str {
        self.raw.name()
    }

    /// The hash key that holds the lock's state: `<prefix>:{<name>}`, or `<prefix>:<name>`
    /// when the name has a non-empty hashtag of its own (`orders:{42}` becomes
    /// `rwlock:orders:{42}`, in the slot of `{42}`, with the application's `orders:{42}:*`
    /// keys).
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// assert_eq!(lock.key(), format!("rwlock:{{{}}}", lock.name()));
    /// # Ok(()) }
    /// ```
    pub fn key(&self) -> &str {
        self.raw.key()
    }

    /// The channel that release messages go to: `<key>:released` (same slot).
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// assert!(lock.channel().ends_with(":released"));
    /// # Ok(()) }
    /// ```
    pub fn channel(&self) -> &str {
        self.raw.channel()
    }

    /// The lock's release messages from now on, from the library's own subscription
    /// (see [`ReleaseMessages`]): what `cluster-rwlock watch` prints.
    ///
    /// # Cancel safety
    /// Cancel safe: a subscription made for a dropped call is left at once.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] when the client's notifications are off
    /// ([`LockConfig::notifications`](crate::LockConfig::notifications)).
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// let mut messages = lock.release_messages().await?;
    /// println!("{:?}", messages.next().await);
    /// # Ok(()) }
    /// ```
    pub async fn release_messages(&self) -> Result<ReleaseMessages> {
        let Some(notifier) = self.raw.notifier() else {
            return Err(Error::InvalidConfig(
                "release messages need notifications, which this client has off".into(),
            ));
        };
        let subscription = notifier.join(self.raw.channel(), self.raw.slot()).await;
        Ok(ReleaseMessages::new(subscription))
    }

    /// Whether `key` (a key of the application's data) is in this lock's slot: the lock
    /// can then guard it in the same node, and a script may touch both. A name whose tag
    /// differs from the data's (`acct:{ 3}` for `acct:{3}:balance`) is a legal name of
    /// another slot: this is how to catch it.
    ///
    /// ```no_run
    /// # async fn demo(client: cluster_rwlock::LockClient) -> cluster_rwlock::Result<()> {
    /// assert!(client.rwlock("acct:{3}")?.same_slot_as("acct:{3}:balance"));
    /// assert!(!client.rwlock("acct:{ 3}")?.same_slot_as("acct:{3}:balance"));
    /// # Ok(()) }
    /// ```
    pub fn same_slot_as(&self, key: &str) -> bool {
        crate::slot::key_slot(key.as_bytes()) == self.slot()
    }

    /// The key's cluster hash slot, computed locally; equals `CLUSTER KEYSLOT <key>`.
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// assert_eq!(lock.slot(), cluster_rwlock::slot::key_slot(lock.key().as_bytes()));
    /// # Ok(()) }
    /// ```
    pub fn slot(&self) -> u16 {
        self.raw.slot()
    }

    /// The owner token: the one given to [`with_owner`](Self::with_owner), or, for a
    /// handle from [`LockClient::rwlock`](crate::LockClient::rwlock), the prefix of its
    /// holds' tokens (each hold is taken as `<owner>:<n>`, an owner of its own; a guard's
    /// [`owner`](Grant::owner) tells which).
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// let guard = lock.read().await?;
    /// assert!(guard.owner().starts_with(lock.owner()));
    /// # Ok(()) }
    /// ```
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// The same lock whose holds have a lease of their own instead of the client's
    /// ([`LockConfig::lease`](crate::LockConfig::lease)): renewed every third of it while
    /// held, and lost (told to the holder, as every loss is) when not renewed in time. A
    /// short lease for one kind of lock (an order, say) needs no second client: the
    /// handle is cheap, and one renewal task renews every lease at its own pace. Holds
    /// taken through it, upgrades and downgrades of them included, have this lease.
    ///
    /// ```no_run
    /// # async fn demo(client: cluster_rwlock::LockClient) -> cluster_rwlock::Result<()> {
    /// use std::time::Duration;
    /// let order = client.rwlock("orders:{42}")?.with_lease(Duration::from_secs(3))?;
    /// let guard = order.write().await?; // renewed every second; lost 3 s after a freeze
    /// assert_eq!(order.lease(), Duration::from_secs(3));
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidConfig`](crate::Error::InvalidConfig) for a lease the client's
    /// configuration would refuse (under 30 ms, over [`MAX_LEASE`](crate::config::MAX_LEASE), or
    /// under twice an explicit [`clock_margin`](crate::LockConfig::clock_margin)).
    pub fn with_lease(&self, lease: std::time::Duration) -> crate::Result<RwLock> {
        self.raw.config().check_lease(lease)?;
        Ok(RwLock {
            raw: self.raw.with_lease(lease),
            ..self.clone()
        })
    }

    /// The lease of this lock's holds: its own ([`with_lease`](Self::with_lease)), or the
    /// client's.
    ///
    /// ```no_run
    /// # fn demo(client: cluster_rwlock::LockClient) -> cluster_rwlock::Result<()> {
    /// let lock = client.rwlock("orders:{42}")?;
    /// assert_eq!(lock.lease(), client.config().get_lease());
    /// # Ok(()) }
    /// ```
    pub fn lease(&self) -> std::time::Duration {
        self.raw.lease()
    }

    /// The same lock with an explicit owner token (e.g. a job id): every hold taken
    /// through it is taken as that owner, and **holds of one explicit owner are
    /// reentrant**, wherever they are taken (other tasks, other processes). Give each
    /// contender its own token.
    ///
    /// # Errors
    /// [`Error::InvalidOwner`] when the token is empty, longer than 256 bytes or has
    /// whitespace (the functions split their arguments on spaces).
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// let job = lock.with_owner("job-17")?;
    /// assert!(lock.with_owner("two words").is_err());
    /// let w1 = job.write().await?;
    /// let w2 = job.write().await?; // the same owner: granted at once
    /// assert!(w2.fence() > w1.fence());
    /// # Ok(()) }
    /// ```
    pub fn with_owner(&self, owner: impl Into<String>) -> Result<RwLock> {
        let owner = owner.into();
        crate::keys::check_owner(&owner)?;
        Ok(RwLock {
            owner: owner.into(),
            explicit: true,
            ..self.clone()
        })
    }

    /// Waits for a new hold of `mode` (at most `timeout`), as the next owner token. Not
    /// an `async fn`: it hands out `Hold::acquire`'s future itself, one layer fewer in
    /// the futures users hold.
    fn wait(
        &self,
        mode: Mode,
        timeout: Option<Duration>,
    ) -> impl Future<Output = Result<Hold>> + Send + '_ {
        Hold::acquire(&self.raw, self.hold_owner(), mode, timeout)
    }

    /// One attempt at a new hold of `mode`, as the next owner token (not an `async fn`,
    /// as [`wait`](Self::wait)).
    fn try_once(&self, mode: Mode) -> impl Future<Output = Result<Option<Hold>>> + Send + '_ {
        Hold::try_acquire(&self.raw, self.hold_owner(), mode, None)
    }

    /// The owner token the next hold is taken as.
    fn hold_owner(&self) -> Arc<str> {
        if self.explicit {
            self.owner.clone()
        } else {
            format!("{}:{}", self.owner, self.raw.next_hold_id()).into()
        }
    }

    /// Waits until a read hold is granted.
    ///
    #[doc = acquire_doc!(waits)]
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// let guard = lock.read().await?;
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn read(&self) -> Result<ReadGuard> {
        let hold = self.wait(Mode::Read, None).await?;
        Ok(self.read_guard(hold))
    }

    /// Waits until the write hold is granted.
    ///
    #[doc = acquire_doc!(waits)]
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// let guard = lock.write().await?;
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn write(&self) -> Result<WriteGuard> {
        let hold = self.wait(Mode::Write, None).await?;
        Ok(self.write_guard(hold))
    }

    /// Waits until an upgradable read hold is granted: shared with plain readers, at most
    /// one owner at a time, no writer while it lasts; it can become write
    /// ([`UpgradableReadGuard::upgrade`]) without another writer in between.
    ///
    #[doc = acquire_doc!(waits)]
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// let guard = lock.upgradable_read().await?;
    /// // ... read, decide ...
    /// let write = guard.upgrade().await?; // waits for plain readers to leave
    /// write.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn upgradable_read(&self) -> Result<UpgradableReadGuard> {
        let hold = self.wait(Mode::Upgradable, None).await?;
        Ok(self.upgradable_guard(hold))
    }

    /// Waits at most `timeout` for a read hold.
    ///
    #[doc = acquire_doc!(waits)]
    #[doc = acquire_doc!(timeout)]
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// match lock.read_timeout(std::time::Duration::from_millis(200)).await {
    ///     Ok(guard) => guard.release().await?,
    ///     Err(cluster_rwlock::Error::Timeout(_)) => println!("busy"),
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn read_timeout(&self, timeout: Duration) -> Result<ReadGuard> {
        let hold = self.wait(Mode::Read, Some(timeout)).await?;
        Ok(self.read_guard(hold))
    }

    /// Waits at most `timeout` for the write hold.
    ///
    #[doc = acquire_doc!(waits)]
    #[doc = acquire_doc!(timeout)]
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// let guard = lock.write_timeout(std::time::Duration::from_secs(1)).await?;
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn write_timeout(&self, timeout: Duration) -> Result<WriteGuard> {
        let hold = self.wait(Mode::Write, Some(timeout)).await?;
        Ok(self.write_guard(hold))
    }

    /// Waits at most `timeout` for an upgradable read hold.
    ///
    #[doc = acquire_doc!(waits)]
    #[doc = acquire_doc!(timeout)]
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// let guard = lock.upgradable_read_timeout(std::time::Duration::from_secs(1)).await?;
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn upgradable_read_timeout(&self, timeout: Duration) -> Result<UpgradableReadGuard> {
        let hold = self.wait(Mode::Upgradable, Some(timeout)).await?;
        Ok(self.upgradable_guard(hold))
    }

    /// One attempt at a read hold; `None` when the lock is busy.
    ///
    #[doc = acquire_doc!(waits)]
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// if let Some(guard) = lock.try_read().await? {
    ///     guard.release().await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn try_read(&self) -> Result<Option<ReadGuard>> {
        let hold = self.try_once(Mode::Read).await?;
        Ok(hold.map(|hold| self.read_guard(hold)))
    }

    /// One attempt at the write hold; `None` when the lock is busy. Does not queue.
    ///
    #[doc = acquire_doc!(waits)]
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// if let Some(guard) = lock.try_write().await? {
    ///     guard.release().await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn try_write(&self) -> Result<Option<WriteGuard>> {
        let hold = self.try_once(Mode::Write).await?;
        Ok(hold.map(|hold| self.write_guard(hold)))
    }

    /// One attempt at an upgradable read hold; `None` when the lock is busy (a writer
    /// holds or waits, or another owner holds the upgradable read).
    ///
    #[doc = acquire_doc!(waits)]
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// if let Some(guard) = lock.try_upgradable_read().await? {
    ///     guard.release().await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn try_upgradable_read(&self) -> Result<Option<UpgradableReadGuard>> {
        let hold = self.try_once(Mode::Upgradable).await?;
        Ok(hold.map(|hold| self.upgradable_guard(hold)))
    }
}

#[cfg(test)]
mod tests; // the unit tests of this module
