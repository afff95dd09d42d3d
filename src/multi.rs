//! Several locks at once, in any slots, without deadlock: [`MultiLock`] and
//! [`MultiGuard`] (their guarantees are on [`MultiLock`]).

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::{join_all, select_all};
use tokio::time::Instant;

use crate::cluster::lane::Gather;
use crate::error::{Error, Result};
use crate::lock::{AnyGuard, RwLock};
use crate::mode::Mode;

/// Several locks taken together, in one global order.
///
///
/// # Why no deadlock
/// Every multi-lock takes its members in ONE global order, the order of their keys
/// (`<prefix>:{name}`), whatever order the caller listed them in; it waits only for a
/// member while holding members earlier in that order. (It first tries every member at
/// once, which waits for nothing: one confirmed round per master when they are free.
/// If one is busy, it keeps the members before it, gives back those after it, and
/// waits for the rest in order.) A cycle of waiting
/// callers would need one of them to wait for a lock earlier than one it holds, which
/// never happens. A single-lock caller holds one lock and waits for none, so it cannot
/// close a cycle either; a queued writer holds nothing of the lock it waits for. Code
/// that takes single locks one by one in its own order can still deadlock with itself:
/// take them through a multi-lock instead.
///
/// Each member is an ordinary hold: the phase-fair queue, hand-offs by release message,
/// fences, leases and confirmation are those of [`RwLock`]. Waiting for a member uses
/// its release messages, not polling.
///
/// # Fairness: what a read multi-lock can expect
/// The queue is per lock: a reader waits for the writers of that lock that came before
/// it (and no others). A read multi-lock waits for its members in turn, so on names that
/// writers keep busy it waits, for EACH member, one after the other, for the writers
/// queued there when it came, while holding the members it took (which keeps writers of
/// those out meanwhile). Its wait grows with the number of busy members and the writers
/// queued on each: bounded, but a read of many members under a steady stream of writes
/// waits longer than a read of one. Give such a reader a timeout, take fewer members at
/// a time, or make it a writer of one name that the writers also take in read mode (a
/// lock over the set).
///
/// # Failure
/// On a timeout, an error or a dropped future, the members already taken are released
/// (at once, or in the background for a dropped future), and the member being waited
/// for leaves no queued writer or pending hold behind (as [`RwLock`]'s acquires).
///
/// # Use
/// Made by [`LockClient::multi`](crate::LockClient::multi). Like [`RwLock`], every acquire through it is a hold of
/// its own per member. Cheap to clone.
///
/// ```no_run
/// # async fn demo(client: cluster_rwlock::LockClient) -> cluster_rwlock::Result<()> {
/// use cluster_rwlock::Mode;
/// let transfer = client.multi([("accounts:17", Mode::Write), ("accounts:4", Mode::Write)])?;
/// let guard = transfer.lock_timeout(std::time::Duration::from_secs(5)).await?;
/// for (name, fence) in guard.fences() {
///     println!("{name} under fence {fence}");
/// }
/// guard.release().await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct MultiLock {
    /// The members in the global order (by key).
    members: Vec<(RwLock, Mode)>,
}

impl MultiLock {
    /// The multi-lock of these members, put in the global order (by key); a name given
    /// twice is an error.
    pub(crate) fn of(mut locks: Vec<(RwLock, Mode)>) -> Result<MultiLock> {
        locks.sort_by(|a, b| a.0.key().cmp(b.0.key()));
        if let Some(w) = locks.windows(2).find(|w| w[0].0.key() == w[1].0.key()) {
            return Err(Error::InvalidName(format!(
                "{:?} is given twice in one multi-lock",
                w[0].0.name()
            )));
        }
        Ok(MultiLock { members: locks })
    }
}

/// Releases every guard at once, concurrently; the first error, `LockLost` first.
async fn release_all(guards: Vec<AnyGuard>) -> Result<()> {
    let results = join_all(guards.into_iter().map(AnyGuard::release)).await;
    let mut first = None;
    for r in results {
        match r {
            Err(Error::LockLost) => return Err(Error::LockLost),
            Err(e) => {
                first.get_or_insert(e);
            }
            Ok(()) => {}
        }
    }
    first.map_or(Ok(()), Err)
}

impl MultiLock {
    /// The same multi-lock whose members' holds have lease `lease` instead of the
    /// client's (see [`RwLock::with_lease`]).
    ///
    /// ```no_run
    /// # async fn demo(client: cluster_rwlock::LockClient) -> cluster_rwlock::Result<()> {
    /// use cluster_rwlock::Mode;
    /// use std::time::Duration;
    /// let both = client
    ///     .multi([("orders:{42}", Mode::Write), ("customers:7", Mode::Read)])?
    ///     .with_lease(Duration::from_secs(3))?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`RwLock::with_lease`].
    pub fn with_lease(&self, lease: std::time::Duration) -> Result<MultiLock> {
        let members = self
            .members
            .iter()
            .map(|(l, m)| Ok((l.with_lease(lease)?, *m)))
            .collect::<Result<_>>()?;
        Ok(MultiLock { members })
    }

    /// The members, in the order they are taken (by key), with their modes.
    ///
    /// ```no_run
    /// # async fn demo(client: cluster_rwlock::LockClient) -> cluster_rwlock::Result<()> {
    /// use cluster_rwlock::Mode;
    /// let m = client.multi([("b", Mode::Read), ("a", Mode::Write)])?;
    /// let names: Vec<&str> = m.members().map(|(lock, _)| lock.name()).collect();
    /// assert_eq!(names, ["a", "b"]);
    /// # Ok(()) }
    /// ```
    pub fn members(&self) -> impl Iterator<Item = (&RwLock, Mode)> {
        self.members.iter().map(|(l, m)| (l, *m))
    }

    /// Takes the members: all at once first, unless a member's slot was lately found
    /// busy, then the members not taken in order; on an error, gives back what it took.
    ///
    /// The first round sends every member's attempt at the same moment, so each
    /// connection's lane sends the attempts to its master in one batch, under one
    /// `WAIT`: a multi-lock of free members takes one confirmed round per master, not one
    /// per member. When a member is busy (or its attempt failed), the members before it
    /// are kept, those after it are given back (holding a member later in the global
    /// order while waiting for an earlier one could close a cycle of waiters), and the
    /// members from it on are taken in order, waiting as [`RwLock`]'s acquires wait. The
    /// busy member's slot is remembered for a second (see `contention`; so is the slot
    /// of any lock of this client that an attempt found busy or shared): under
    /// contention, rounds that give members back cost more than they save, so the
    /// multi-locks of this client with a member there take their members in order only.
    async fn take(&self, timeout: Option<Duration>) -> Result<MultiGuard> {
        let began = Instant::now();
        let deadline = timeout.and_then(|t| began.checked_add(t));
        let contended = self.members.iter().any(|(l, _)| l.contended_lately(began));
        let (mut taken, start) = if contended {
            (Vec::with_capacity(self.members.len()), 0)
        } else {
            match self.all_at_once(began, deadline, timeout).await? {
                Round::All(guard) => return Ok(guard),
                Round::Part(taken, start) => (taken, start),
            }
        };
        for (lock, mode) in &self.members[start..] {
            // what is left of the time, for this member (`None`: as long as it takes)
            let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            match lock.acquire_any(*mode, left).await {
                Ok(g) => taken.push(g),
                Err(e) => {
                    // given back in the background: a `*_timeout` returns in its time even
                    // when a member's master hangs
                    drop(taken);
                    return Err(match (e, timeout) {
                        (Error::Timeout(_), Some(t)) => Error::Timeout(t),
                        (e, _) => e,
                    });
                }
            }
        }
        Ok(MultiGuard { members: taken })
    }

    /// One attempt at every member at once, each member's result in order: a batch built,
    /// then sent (see `cluster::lane::Gather`). Every attempt is handed to the batch
    /// first; once each member's attempt is in it (or ended without a call: a refused
    /// name, no route), the batch is sent, one pipeline and one `WAIT` per master.
    async fn try_all(&self) -> Vec<Result<Option<AnyGuard>>> {
        let gather = Arc::new(Gather::new());
        let ended = AtomicUsize::new(0);
        let tries = join_all(self.members.iter().map(|(lock, mode)| {
            let (gather, ended) = (gather.clone(), &ended);
            async move {
                let tried = lock.try_any_in(gather, *mode).await;
                ended.fetch_add(1, Ordering::AcqRel);
                tried
            }
        }));
        let mut tries = std::pin::pin!(tries);
        let members = self.members.len();
        std::future::poll_fn(|cx| {
            let polled = tries.as_mut().poll(cx);
            // every member has handed its call over, or will hand none: send (a member
            // still on its way is waited for, however long its way is)
            if gather.gathered() + ended.load(Ordering::Acquire) >= members {
                gather.flush();
            }
            polled
        })
        .await
    }

    /// The first round of [`take`](Self::take): one attempt at every member at once.
    async fn all_at_once(
        &self,
        began: Instant,
        deadline: Option<Instant>,
        timeout: Option<Duration>,
    ) -> Result<Round> {
        // made in full, however short the timeout (as a single lock's first attempt),
        // and stopped at the deadline after that
        let until = deadline.map(|d| d.max(began + crate::acquire::FIRST_ATTEMPT));
        let tries = self.try_all();
        let tries = match until {
            Some(until) => match tokio::time::timeout_at(until, tries).await {
                Ok(tries) => tries,
                // the attempts in flight leave nothing behind (as a dropped try)
                Err(_) => return Err(Error::Timeout(timeout.unwrap_or_default())),
            },
            None => tries.await,
        };
        let mut taken: Vec<AnyGuard> = Vec::with_capacity(self.members.len());
        let mut behind = Vec::new();
        let mut next = None;
        for (i, ((lock, _), tried)) in self.members.iter().zip(tries).enumerate() {
            match tried {
                Ok(Some(g)) if next.is_none() => taken.push(g),
                Ok(Some(g)) => behind.push(g),
                // busy, or an attempt that failed: the member is taken in order, whose
                // acquire tries again or says what is wrong
                Ok(None) | Err(_) => {
                    if next.is_none() {
                        lock.mark_contended(Instant::now());
                    }
                    next.get_or_insert(i);
                }
            }
        }
        Ok(match next {
            None => Round::All(MultiGuard { members: taken }),
            Some(start) => {
                // given back in the background (each guard's drop): a release waits for
                // nothing
                drop(behind);
                Round::Part(taken, start)
            }
        })
    }

    /// Waits until every member is held.
    ///
    /// # Cancel safety
    /// Cancel safe: the members taken are released in the background, and the member
    /// being waited for leaves nothing behind.
    ///
    /// # Errors
    /// As [`RwLock::write`] for any member; the members taken are released (in the
    /// background).
    ///
    /// ```no_run
    /// # async fn demo(client: cluster_rwlock::LockClient) -> cluster_rwlock::Result<()> {
    /// use cluster_rwlock::Mode;
    /// let guard = client.multi([("a", Mode::Write), ("b", Mode::Read)])?.lock().await?;
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn lock(&self) -> impl Future<Output = Result<MultiGuard>> + Send + '_ {
        self.take(None)
    }

    /// [`lock`](Self::lock) for at most `timeout` in all.
    ///
    /// # Cancel safety
    /// As [`lock`](Self::lock).
    ///
    /// # Errors
    /// [`Error::Timeout`] when not every member was held in time (none stays held); else
    /// as [`lock`](Self::lock).
    ///
    /// ```no_run
    /// # async fn demo(client: cluster_rwlock::LockClient) -> cluster_rwlock::Result<()> {
    /// use cluster_rwlock::Mode;
    /// let m = client.multi([("a", Mode::Write), ("b", Mode::Write)])?;
    /// match m.lock_timeout(std::time::Duration::from_millis(200)).await {
    ///     Ok(g) => g.release().await?,
    ///     Err(cluster_rwlock::Error::Timeout(_)) => eprintln!("busy"),
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn lock_timeout(
        &self,
        timeout: Duration,
    ) -> impl Future<Output = Result<MultiGuard>> + Send + '_ {
        self.take(Some(timeout))
    }

    /// One attempt at every member, all at once (one confirmed round per master): the
    /// guard when every member was free for its mode, else `None` (what was taken is
    /// given back, in the background).
    ///
    /// # Cancel safety
    /// As [`lock`](Self::lock).
    ///
    /// # Errors
    /// As [`RwLock::try_write`] for any member (the first error in the global order); the
    /// members taken are released (in the background).
    ///
    /// ```no_run
    /// # async fn demo(client: cluster_rwlock::LockClient) -> cluster_rwlock::Result<()> {
    /// use cluster_rwlock::Mode;
    /// if let Some(g) = client.multi([("a", Mode::Write), ("b", Mode::Write)])?.try_lock().await? {
    ///     g.release().await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn try_lock(&self) -> Result<Option<MultiGuard>> {
        let tries = self.try_all().await;
        let mut taken: Vec<AnyGuard> = Vec::with_capacity(self.members.len());
        let mut busy = false;
        for tried in tries {
            match tried {
                Ok(Some(g)) => taken.push(g),
                Ok(None) => busy = true,
                // the guards taken are given back in the background, as below
                Err(e) => return Err(e),
            }
        }
        if busy {
            // given back in the background
            return Ok(None);
        }
        Ok(Some(MultiGuard { members: taken }))
    }
}

/// What the all-at-once round of a multi-lock took.
enum Round {
    /// Every member.
    All(MultiGuard),
    /// The members before the first that was not taken (whose index is given).
    Part(Vec<AnyGuard>, usize),
}

/// Every member of a [`MultiLock`] held; released together. Dropping it releases every
/// member in the background.
///
/// ```no_run
/// # async fn demo(client: cluster_rwlock::LockClient) -> cluster_rwlock::Result<()> {
/// use cluster_rwlock::Mode;
/// let guard = client.multi([("a", Mode::Write), ("b", Mode::Write)])?.lock().await?;
/// tokio::select! {
///     _ = guard.lost() => eprintln!("a member's lease was lost"),
///     _ = tokio::time::sleep(std::time::Duration::from_millis(10)) => {}
/// }
/// guard.release().await?;
/// # Ok(()) }
/// ```
#[must_use = "if unused the locks are released at once (in the background)"]
#[derive(Debug)]
pub struct MultiGuard {
    members: Vec<AnyGuard>,
}

impl MultiGuard {
    /// Each member's name with the fence of its grant, in the order they were taken.
    ///
    /// ```no_run
    /// # async fn demo(client: cluster_rwlock::LockClient) -> cluster_rwlock::Result<()> {
    /// use cluster_rwlock::Mode;
    /// let guard = client.multi([("a", Mode::Write), ("b", Mode::Read)])?.lock().await?;
    /// let fences = guard.fences();
    /// assert_eq!(fences.len(), 2);
    /// # Ok(()) }
    /// ```
    pub fn fences(&self) -> Vec<(&str, u64)> {
        self.members
            .iter()
            .map(|g| (g.lock().name(), g.fence()))
            .collect()
    }

    /// The fence of member `name`'s grant (`None`: not a member).
    ///
    /// ```no_run
    /// # async fn demo(client: cluster_rwlock::LockClient) -> cluster_rwlock::Result<()> {
    /// use cluster_rwlock::Mode;
    /// let guard = client.multi([("a", Mode::Write), ("b", Mode::Read)])?.lock().await?;
    /// assert!(guard.fence("a").is_some());
    /// assert_eq!(guard.fence("c"), None);
    /// # Ok(()) }
    /// ```
    pub fn fence(&self, name: &str) -> Option<u64> {
        self.members
            .iter()
            .find(|g| g.lock().name() == name)
            .map(|g| g.fence())
    }

    /// The members' guards, in the order they were taken.
    ///
    /// ```no_run
    /// # async fn demo(client: cluster_rwlock::LockClient) -> cluster_rwlock::Result<()> {
    /// use cluster_rwlock::Mode;
    /// let guard = client.multi([("a", Mode::Write), ("b", Mode::Read)])?.lock().await?;
    /// assert_eq!(guard.guards()[1].mode(), Mode::Read);
    /// # Ok(()) }
    /// ```
    pub fn guards(&self) -> &[AnyGuard] {
        &self.members
    }

    /// Whether any member's lease was lost.
    ///
    /// ```no_run
    /// # async fn demo(client: cluster_rwlock::LockClient) -> cluster_rwlock::Result<()> {
    /// use cluster_rwlock::Mode;
    /// let guard = client.multi([("a", Mode::Write), ("b", Mode::Read)])?.lock().await?;
    /// assert!(!guard.is_lost());
    /// # Ok(()) }
    /// ```
    pub fn is_lost(&self) -> bool {
        self.members.iter().any(|g| g.is_lost())
    }

    /// Resolves when (and only if) any member's lease is lost; borrows nothing (see
    /// [`Grant::lost`](crate::Grant::lost) for how to use it).
    ///
    /// ```no_run
    /// # async fn demo(client: cluster_rwlock::LockClient) -> cluster_rwlock::Result<()> {
    /// use cluster_rwlock::Mode;
    /// let guard = client.multi([("a", Mode::Write), ("b", Mode::Read)])?.lock().await?;
    /// tokio::spawn(guard.lost()); // resolves when any member is lost
    /// # Ok(()) }
    /// ```
    pub fn lost(&self) -> impl Future<Output = ()> + Send + 'static {
        let all: Vec<_> = self.members.iter().map(|g| Box::pin(g.lost())).collect();
        async move {
            let _ = select_all(all).await;
        }
    }

    /// Releases every member, concurrently (one round trip each, all at once). Fails
    /// with [`Error::LockLost`] when any member's lease had been lost, else with the
    /// first other error (the members that failed expire after their lease).
    ///
    /// # Cancel safety
    /// A release cancelled half way is finished in the background.
    ///
    /// ```no_run
    /// # async fn demo(client: cluster_rwlock::LockClient) -> cluster_rwlock::Result<()> {
    /// use cluster_rwlock::Mode;
    /// let guard = client.multi([("a", Mode::Write), ("b", Mode::Read)])?.lock().await?;
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn release(self) -> Result<()> {
        release_all(self.members).await
    }

    /// The members' guards, to release one by one.
    ///
    /// ```no_run
    /// # async fn demo(client: cluster_rwlock::LockClient) -> cluster_rwlock::Result<()> {
    /// use cluster_rwlock::Mode;
    /// let guard = client.multi([("a", Mode::Write), ("b", Mode::Read)])?.lock().await?;
    /// for g in guard.into_guards() {
    ///     g.release().await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn into_guards(self) -> Vec<AnyGuard> {
        self.members
    }
}
