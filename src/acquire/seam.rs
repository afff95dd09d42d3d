//! The seam under the waiting policy: what it needs of a lock, and the lock's answer.

use std::future::Future;

use tokio::time::Instant;

use crate::cluster::notify::{Subscription, Wake};
use crate::config::LockConfig;
use crate::error::Result;
use crate::mode::Mode;
use crate::raw::{GiveBack, RawLock};
use crate::scripts::{AttemptReply, Intent};

/// What the waiting policy needs of a lock: its calls, its release messages, its
/// settings. [`RawLock`] is the lock; the unit tests below put a fake under the policy,
/// as `lock_api`'s `RawRwLock` makes guards testable, to test its decisions without a
/// server.
pub(crate) trait Seam: Clone + Send + Sync + 'static {
    /// The release messages of the lock, once subscribed.
    type Wakes: Wakes;
    /// The lock's name (for metrics and traces).
    fn name(&self) -> &str;
    /// The client's settings.
    fn config(&self) -> &LockConfig;
    /// The lease of the lock's holds (the client's, or the lock handle's own).
    fn lease(&self) -> std::time::Duration;
    /// A hold id never used before by this client.
    fn next_hold_id(&self) -> u64;
    /// Whether this client lately found the lock's slot busy or shared (see
    /// `contention`): a waiter's first attempt then skips the function's fast path.
    fn contended_lately(&self) -> bool;
    /// An attempt found the lock busy, or shared after its grant.
    fn mark_contended(&self);
    /// Whether this client's grants are confirmed by replicas (a probe's grant is then
    /// sent again to be confirmed; see [`Intent::Probe`]).
    fn confirms(&self) -> bool;
    /// Subscribes to the lock's release messages: `None` when notifications are off.
    fn join(&self) -> Option<impl Future<Output = Self::Wakes> + Send + '_>;
    /// One attempt at hold `id` of `mode`, unconfirmed when a probe (see
    /// [`RawLock::acquire`]).
    fn acquire<'a>(
        &'a self,
        owner: &'a str,
        mode: Mode,
        id: u64,
        intent: Intent,
        deadline: Option<Instant>,
    ) -> impl Future<Output = Result<AttemptReply>> + Send + 'a;
    /// One attempt to upgrade (see [`RawLock::upgrade`]).
    fn upgrade<'a>(
        &'a self,
        owner: &'a str,
        from: u64,
        to: u64,
        wait: bool,
        deadline: Option<Instant>,
    ) -> impl Future<Output = Result<AttemptReply>> + Send + 'a;
    /// Gives back what an attempt left, or a hold (see [`RawLock::give_back`]).
    fn give_back<'a>(
        &'a self,
        owner: &'a str,
        what: GiveBack,
    ) -> impl Future<Output = Result<bool>> + Send + 'a;
    /// [`give_back`](Self::give_back) in the background (the lock's own follows the
    /// cluster for longer: see [`RawLock::give_back_later`]).
    fn give_back_later(&self, owner: std::sync::Arc<str>, what: GiveBack) {
        let lock = self.clone();
        self.spawn(async move {
            // (what it found does not matter: the caller gave up)
            let _ = lock.give_back(&owner, what).await;
        });
    }
    /// Runs `task` in the background.
    fn spawn<F: Future<Output = ()> + Send + 'static>(&self, task: F);
    /// [`Error::NotReplicated`](crate::Error::NotReplicated) for the last confirmation
    /// on the lock's master, if it fell short no earlier than `since` and none was
    /// confirmed after it.
    fn short_since(&self, since: Instant) -> Option<crate::Error> {
        let _ = since;
        None
    }
}

/// A lock's release messages, as a waiter reads them.
pub(crate) trait Wakes: Send {
    /// Whether messages still arrive (the subscription is up).
    fn is_live(&self) -> bool;
    /// The next message.
    fn next(&mut self) -> impl Future<Output = Wake> + Send + '_;
}

impl Wakes for Subscription {
    fn is_live(&self) -> bool {
        Subscription::is_live(self)
    }
    fn next(&mut self) -> impl Future<Output = Wake> + Send + '_ {
        Subscription::next(self)
    }
}

impl Seam for RawLock {
    type Wakes = Subscription;
    fn name(&self) -> &str {
        RawLock::name(self)
    }
    fn config(&self) -> &LockConfig {
        RawLock::config(self)
    }
    fn lease(&self) -> std::time::Duration {
        RawLock::lease(self)
    }
    fn next_hold_id(&self) -> u64 {
        RawLock::next_hold_id(self)
    }
    fn contended_lately(&self) -> bool {
        RawLock::contended_lately(self, Instant::now())
    }
    fn mark_contended(&self) {
        RawLock::mark_contended(self, Instant::now())
    }
    fn confirms(&self) -> bool {
        RawLock::confirms(self)
    }
    fn join(&self) -> Option<impl Future<Output = Subscription> + Send + '_> {
        self.notifier().map(|n| n.join(self.channel(), self.slot()))
    }
    fn acquire<'a>(
        &'a self,
        owner: &'a str,
        mode: Mode,
        id: u64,
        intent: Intent,
        deadline: Option<Instant>,
    ) -> impl Future<Output = Result<AttemptReply>> + Send + 'a {
        RawLock::acquire(self, owner, mode, id, intent, deadline)
    }
    fn upgrade<'a>(
        &'a self,
        owner: &'a str,
        from: u64,
        to: u64,
        wait: bool,
        deadline: Option<Instant>,
    ) -> impl Future<Output = Result<AttemptReply>> + Send + 'a {
        RawLock::upgrade(self, owner, from, to, wait, deadline)
    }
    fn give_back<'a>(
        &'a self,
        owner: &'a str,
        what: GiveBack,
    ) -> impl Future<Output = Result<bool>> + Send + 'a {
        RawLock::give_back(self, owner, what)
    }
    fn give_back_later(&self, owner: std::sync::Arc<str>, what: GiveBack) {
        RawLock::give_back_later(self, owner, what)
    }
    fn spawn<F: Future<Output = ()> + Send + 'static>(&self, task: F) {
        RawLock::spawn(self, task)
    }
    fn short_since(&self, since: Instant) -> Option<crate::Error> {
        let u = RawLock::master_short_since(self, since.into_std())?;
        Some(crate::Error::NotReplicated {
            wanted: u.wanted,
            acked: u.acked,
            silent: u.silent,
        })
    }
}
