//! The lock handle: acquiring, waiting, state.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::client::Inner;
use crate::cluster::notify::{Subscription, Wake};
use crate::error::{Error, Result};
use crate::guard::{Hold, ReadGuard, WriteGuard};
use crate::keys;
use crate::scripts::{Attempt, Mode, Target};
use crate::slot;

/// Pause between attempts after a Redis error, while a deadline allows retrying.
const ERROR_BACKOFF: Duration = Duration::from_millis(100);

/// A distributed read/write lock, with the owner token it acquires as.
///
/// Cheap to clone; clones share the owner token, so they are the same owner (holds add
/// up, as with a reentrant lock). [`with_owner`](Self::with_owner) gives the same lock
/// with another owner.
///
/// ```no_run
/// # async fn demo(client: cluster_rwlock::LockClient) -> cluster_rwlock::Result<()> {
/// let lock = client.rwlock("orders:42")?;
/// assert_eq!(lock.key(), "rwlock:{orders:42}");
/// {
///     let r1 = lock.read().await?;
///     let r2 = client.rwlock("orders:42")?.read().await?; // another owner: readers share
/// }
/// let w = lock.write_timeout(std::time::Duration::from_secs(1)).await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RwLock {
    pub(crate) inner: Arc<Inner>,
    name: Arc<str>,
    key: Arc<str>,
    channel: Arc<str>,
    slot: u16,
    owner: Arc<str>,
}

impl std::fmt::Debug for RwLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RwLock")
            .field("name", &self.name)
            .field("key", &self.key)
            .field("slot", &self.slot)
            .field("owner", &self.owner)
            .finish()
    }
}

/// One owner's holds, as [`RwLock::state`] reports them.
///
/// ```no_run
/// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
/// for h in lock.state().await?.holders {
///     println!("{}: {} read, {} write, {:?} left", h.owner, h.read_holds, h.write_holds, h.lease_left);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Holder {
    /// The owner token.
    pub owner: String,
    /// `Write` if the owner holds write (it may hold read too).
    pub mode: Mode,
    /// Number of holds (read and write).
    pub count: u32,
    /// Read holds.
    pub read_holds: u32,
    /// Write holds.
    pub write_holds: u32,
    /// Time left on the owner's lease, by the server's clock.
    pub lease_left: Duration,
}

/// A snapshot of a lock, read in one call.
///
/// ```no_run
/// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
/// let s = lock.state().await?;
/// println!("{:?}, fence {:?}, {} writers waiting", s.mode, s.fence, s.waiting_writers.len());
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct LockState {
    /// `None` when no one holds the lock.
    pub mode: Option<Mode>,
    /// Every owner that holds, with its holds.
    pub holders: Vec<Holder>,
    /// The last fence granted, while the lock's hash exists.
    pub fence: Option<u64>,
    /// Owner tokens of queued writers, first first.
    pub waiting_writers: Vec<String>,
}

enum Outcome {
    Granted(Hold),
    Busy(u64),
}

/// Undoes what an acquire left in Redis when it ends without a grant: a place in the
/// writer queue, a hold handed over while queued, or a grant whose reply was lost to an
/// error. Both steps are idempotent.
struct Leftovers {
    lock: RwLock,
    id: u64,
    write: bool,
    armed: bool,
}

impl Drop for Leftovers {
    fn drop(&mut self) {
        if self.armed {
            let (lock, id, write) = (self.lock.clone(), self.id, self.write);
            lock.inner
                .clone()
                .runtime
                .spawn(async move { lock.abandon(id, write).await });
        }
    }
}

impl RwLock {
    pub(crate) fn new(inner: Arc<Inner>, name: &str, owner: String) -> RwLock {
        let key = keys::lock_key(&inner.config.prefix, name);
        let channel = keys::channel(&key);
        RwLock {
            slot: slot::key_slot(key.as_bytes()),
            inner,
            name: name.into(),
            key: key.into(),
            channel: channel.into(),
            owner: owner.into(),
        }
    }

    /// The lock's name.
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// assert_eq!(lock.name(), "orders:42");
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &str {
        &self.name
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
        &self.key
    }

    /// The channel that release messages go to: `<key>:released` (same slot).
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// assert!(lock.channel().ends_with(":released"));
    /// # Ok(()) }
    /// ```
    pub fn channel(&self) -> &str {
        &self.channel
    }

    /// The key's cluster hash slot, computed locally; equals `CLUSTER KEYSLOT <key>`.
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// assert_eq!(lock.slot(), cluster_rwlock::slot::key_slot(lock.key().as_bytes()));
    /// # Ok(()) }
    /// ```
    pub fn slot(&self) -> u16 {
        self.slot
    }

    /// The owner token this handle acquires as.
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// println!("acquiring as {}", lock.owner());
    /// # Ok(()) }
    /// ```
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// The same lock with an explicit owner token (e.g. a job id). Holds of one owner add
    /// up, wherever they are taken; give each contender its own token.
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// let job = lock.with_owner("job-17");
    /// assert_eq!(job.owner(), "job-17");
    /// # Ok(()) }
    /// ```
    pub fn with_owner(&self, owner: impl Into<String>) -> RwLock {
        RwLock {
            owner: owner.into().into(),
            ..self.clone()
        }
    }

    /// Waits until a read hold is granted.
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// let guard = lock.read().await?;
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn read(&self) -> Result<ReadGuard> {
        let hold = self.acquire(Mode::Read, None).await?;
        Ok(ReadGuard { hold })
    }

    /// Waits until the write hold is granted.
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// let guard = lock.write().await?;
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn write(&self) -> Result<WriteGuard> {
        let hold = self.acquire(Mode::Write, None).await?;
        Ok(WriteGuard { hold })
    }

    /// Waits at most `timeout` for a read hold; [`Error::Timeout`] after that.
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
        let hold = self.acquire(Mode::Read, Some(timeout)).await?;
        Ok(ReadGuard { hold })
    }

    /// Waits at most `timeout` for the write hold; [`Error::Timeout`] after that.
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// let guard = lock.write_timeout(std::time::Duration::from_secs(1)).await?;
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn write_timeout(&self, timeout: Duration) -> Result<WriteGuard> {
        let hold = self.acquire(Mode::Write, Some(timeout)).await?;
        Ok(WriteGuard { hold })
    }

    /// One attempt at a read hold; `None` when the lock is busy.
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// if let Some(guard) = lock.try_read().await? {
    ///     guard.release().await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn try_read(&self) -> Result<Option<ReadGuard>> {
        Ok(self
            .try_acquire(Mode::Read)
            .await?
            .map(|hold| ReadGuard { hold }))
    }

    /// One attempt at the write hold; `None` when the lock is busy. Does not queue.
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// if let Some(guard) = lock.try_write().await? {
    ///     guard.release().await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn try_write(&self) -> Result<Option<WriteGuard>> {
        Ok(self
            .try_acquire(Mode::Write)
            .await?
            .map(|hold| WriteGuard { hold }))
    }

    /// The lock's current state, read in one call (expired entries are left out).
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// let state = lock.state().await?;
    /// for h in &state.holders {
    ///     println!("{} holds {:?} x{} for {:?} more", h.owner, h.mode, h.count, h.lease_left);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn state(&self) -> Result<LockState> {
        let inner = &self.inner;
        let t = self.target();
        let raw = self
            .call(|c| async move { inner.scripts.state(&c, &inner.counters, &t).await })
            .await?;
        let holders: Vec<Holder> = raw
            .holders
            .into_iter()
            .map(|(owner, r, w, left)| Holder {
                owner,
                mode: if w > 0 { Mode::Write } else { Mode::Read },
                count: r + w,
                read_holds: r,
                write_holds: w,
                lease_left: Duration::from_millis(left),
            })
            .collect();
        let mode = if holders.iter().any(|h| h.mode == Mode::Write) {
            Some(Mode::Write)
        } else if holders.is_empty() {
            None
        } else {
            Some(Mode::Read)
        };
        Ok(LockState {
            mode,
            holders,
            fence: raw.fence,
            waiting_writers: raw.queued,
        })
    }

    pub(crate) fn target(&self) -> Target<'_> {
        Target {
            key: &self.key,
            channel: &self.channel,
            publish: self.inner.publish,
        }
    }

    fn check_owner(&self) -> Result<()> {
        if self.owner.is_empty()
            || self.owner.len() > 256
            || self.owner.contains(char::is_whitespace)
        {
            return Err(Error::InvalidConfig(format!(
                "owner token {:?}: 1 to 256 bytes without whitespace",
                self.owner
            )));
        }
        Ok(())
    }

    /// Gives back hold `id` if it exists and, for a writer, leaves the queue, in one step.
    async fn abandon(&self, id: u64, write: bool) {
        let inner = &self.inner;
        let t = self.target();
        let _ = if write {
            self.call(|c| async move {
                inner
                    .scripts
                    .withdraw(&c, &inner.counters, &t, &self.owner, id)
                    .await
            })
            .await
        } else {
            self.release_hold(id, self.release_budget())
                .await
                .map(|_| ())
        };
    }

    /// How long a release is followed through timeouts and failovers: a lease (a hold not
    /// given back by then has expired), and at least the command timeout.
    pub(crate) fn release_budget(&self) -> Duration {
        let config = &self.inner.config;
        config.lease.max(config.command_timeout)
    }

    /// Gives back hold `id`, following the cluster for at most `budget`.
    pub(crate) async fn release_hold(&self, id: u64, budget: Duration) -> Result<bool> {
        let inner = &self.inner;
        let t = self.target();
        inner
            .call_within(self.slot, budget, |c| async move {
                inner
                    .scripts
                    .release(&c, &inner.counters, &t, &self.owner, id)
                    .await
            })
            .await
    }

    /// Sends a command for this lock to the node that serves its slot (see
    /// [`Router::call`](crate::cluster::router::Router::call)).
    async fn call<T, F, Fut>(&self, op: F) -> Result<T>
    where
        F: FnMut(fred::prelude::Client) -> Fut,
        Fut: std::future::Future<Output = Result<T>>,
    {
        self.inner.call(self.slot, op).await
    }

    pub(crate) async fn downgrade_hold(&self, write_id: u64, read_id: u64) -> Result<Option<u64>> {
        let inner = &self.inner;
        let t = self.target();
        self.call(|c| async move {
            inner
                .scripts
                .downgrade(
                    &c,
                    &inner.counters,
                    &t,
                    &self.owner,
                    write_id,
                    read_id,
                    inner.lease_ms(),
                )
                .await
        })
        .await
    }

    async fn try_acquire(&self, mode: Mode) -> Result<Option<Hold>> {
        self.check_owner()?;
        let id = self.inner.next_hold_id();
        let mut leftovers = Leftovers {
            lock: self.clone(),
            id,
            write: false,
            armed: true,
        };
        let outcome = self.attempt(mode, id, false).await;
        leftovers.armed = matches!(outcome, Err(Error::Redis(_)));
        match outcome? {
            Outcome::Granted(hold) => Ok(Some(hold)),
            Outcome::Busy(_) => Ok(None),
        }
    }

    /// The waiting loop: subscribe, attempt, sleep until a release message that concerns
    /// this waiter or the deadline the attempt returned, again.
    async fn acquire(&self, mode: Mode, timeout: Option<Duration>) -> Result<Hold> {
        self.check_owner()?;
        let deadline = timeout.map(|t| Instant::now() + t);
        let timed_out = || Error::Timeout(timeout.unwrap_or_default());
        let inner = &self.inner;
        let id = inner.next_hold_id();
        let write = mode == Mode::Write;
        let mut leftovers = Leftovers {
            lock: self.clone(),
            id,
            write,
            armed: false,
        };
        let mut sub: Option<Subscription> = None;
        let refresh = inner.config.lease / 3;
        loop {
            if sub.is_none() {
                if let Some(n) = inner.notifier() {
                    sub = Some(n.join(&self.channel, self.slot).await);
                }
            }
            leftovers.armed = true;
            let outcome = match deadline {
                None => self.attempt(mode, id, true).await,
                Some(d) => match tokio::time::timeout_at(d, self.attempt(mode, id, true)).await {
                    Ok(o) => o,
                    Err(_) => return Err(timed_out()),
                },
            };
            let wait = match outcome {
                Ok(Outcome::Granted(hold)) => {
                    leftovers.armed = false;
                    return Ok(hold);
                }
                Ok(Outcome::Busy(wait_ms)) => {
                    // a queued writer may be handed the lock until it leaves the queue
                    leftovers.armed = write;
                    // the queue entry lives one lease: come back before it lapses
                    Duration::from_millis(wait_ms).min(refresh)
                }
                // a failover or reconnect in progress: try again while time is left
                Err(Error::Redis(_)) if deadline.is_some() => ERROR_BACKOFF,
                Err(e) => return Err(e),
            };
            let until = match deadline {
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        return Err(timed_out());
                    }
                    (now + wait).min(d)
                }
                None => Instant::now() + wait,
            };
            match sub.as_mut().filter(|s| s.is_live()) {
                Some(s) => {
                    let owner = &self.owner;
                    let woken = tokio::select! {
                        w = async {
                            loop {
                                let w = s.next().await;
                                if w.concerns(write, owner) {
                                    break w;
                                }
                            }
                        } => Some(w),
                        _ = tokio::time::sleep_until(until) => None,
                    };
                    if let Some(Wake::Granted {
                        id: handed, fence, ..
                    }) = woken
                    {
                        if handed == id {
                            // the releaser handed the lock over: no further round trip
                            match self.handed_over(id, fence).await {
                                Ok(hold) => {
                                    leftovers.armed = false;
                                    return Ok(hold);
                                }
                                // gone again before it was confirmed: keep waiting
                                Err(Error::LockLost) => {}
                                Err(e) => return Err(e),
                            }
                        }
                    }
                }
                None => {
                    let retry = Instant::now() + inner.config.retry_interval;
                    tokio::time::sleep_until(until.min(retry)).await
                }
            }
            if let Some(d) = deadline {
                if Instant::now() >= d {
                    return Err(timed_out());
                }
            }
        }
    }

    /// Takes a hold that a release handed to this queued writer. With replica acks, the
    /// hold is first written again on this connection (a renewal), so that WAIT covers it.
    async fn handed_over(&self, id: u64, fence: u64) -> Result<Hold> {
        let hold = Hold::new(self.clone(), id, fence, Mode::Write, Instant::now());
        if let Some((wanted, timeout)) = self.inner.config.replica_acks {
            let inner = &self.inner;
            let owners = [self.owner()];
            let t = self.target();
            let present = self
                .call(|c| {
                    let (t, owners) = (&t, &owners);
                    async move {
                        inner
                            .scripts
                            .renew(&c, &inner.counters, t, inner.lease_ms(), owners)
                            .await
                    }
                })
                .await?;
            if !present.first().is_some_and(|ids| ids.contains(&id)) {
                let _ = hold.release().await;
                return Err(Error::LockLost);
            }
            let acked = self.wait_replicas(wanted, timeout).await?;
            if acked < wanted {
                let _ = hold.release().await;
                return Err(Error::NotReplicated { wanted, acked });
            }
        }
        Ok(hold)
    }

    /// One attempt (`queue`: the caller waits if it fails). Cancel safety comes from the
    /// caller's armed [`Leftovers`]: if this future is dropped after the command was
    /// sent, the give-back that `Leftovers` sends goes on the same connection, after it,
    /// so a grant that lands for a caller who is gone is released at once (and a queued
    /// writer leaves the queue); a hold made here releases itself when dropped.
    async fn attempt(&self, mode: Mode, id: u64, queue: bool) -> Result<Outcome> {
        let inner = &self.inner;
        let sent = Instant::now();
        let t = self.target();
        let attempt = self
            .call(|c| async move {
                inner
                    .scripts
                    .acquire(
                        &c,
                        &inner.counters,
                        &t,
                        mode,
                        &self.owner,
                        id,
                        inner.lease_ms(),
                        queue,
                    )
                    .await
            })
            .await?;
        match attempt {
            Attempt::Granted { fence } => {
                let hold = Hold::new(self.clone(), id, fence, mode, sent);
                if let Some((wanted, timeout)) = inner.config.replica_acks {
                    let acked = self.wait_replicas(wanted, timeout).await;
                    match acked {
                        Ok(acked) if acked >= wanted => {}
                        Ok(acked) => {
                            let _ = hold.release().await;
                            return Err(Error::NotReplicated { wanted, acked });
                        }
                        Err(e) => {
                            let _ = hold.release().await;
                            return Err(e);
                        }
                    }
                }
                Ok(Outcome::Granted(hold))
            }
            Attempt::Busy { wait_ms } => Ok(Outcome::Busy(wait_ms)),
            Attempt::UpgradeDeadlock => Err(Error::UpgradeDeadlock),
        }
    }

    /// WAIT on the master of the lock's slot (the node that ran the script).
    async fn wait_replicas(&self, wanted: u32, timeout: Duration) -> Result<u32> {
        use fred::interfaces::ClientLike;
        use fred::types::{ClusterHash, CustomCommand};
        let inner = &self.inner;
        inner
            .counters
            .round_trips
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // on the connection that sent the write (each slot has one per node): WAIT counts
        // that connection's writes
        let millis = i64::try_from(timeout.as_millis()).unwrap_or(i64::MAX);
        let acked: i64 = self
            .call(|c| async move {
                let cmd = CustomCommand::new_static("WAIT", ClusterHash::Random, false);
                Ok(c.custom(cmd, vec![i64::from(wanted), millis]).await?)
            })
            .await?;
        Ok(u32::try_from(acked.max(0)).unwrap_or(u32::MAX))
    }
}
