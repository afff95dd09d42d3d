//! The raw lock: one lock on one client's connections, and one call per function, each
//! routed to the node that serves the lock's slot, sent (with its `WAIT` where the call
//! grants or renews) and read into a typed reply. Nothing here waits, retries a refusal
//! or cleans up: that is the policy above it.
//!
//! ```text
//!   LockClient              what a service makes first; its fenced and     (client/)
//!        |                  multi-lock methods
//!   RwLock, guards          the safe API: holds as RAII values; each     (lock/)
//!        |                  guard method is one call on Hold and a wrap
//!   Hold                    one granted hold: renewed, released, up-     (hold.rs)
//!        |                  and downgraded; the only caller of the policy
//!   acquire, renewal        the waiting policy: attempts, messages,      (acquire/)
//!        |                  hand-offs, clean-up; over a Seam (RawLock, or
//!        |                  the unit tests' fake); the renewal task and  (renewal.rs)
//!        |                  its calls
//!   RawLock                 one call per function: route, script, reply;   (raw.rs)
//!        |                  what every lock of a client shares, and its  (shared.rs)
//!        |                  confirmation (CallKind)
//!   Scripts                 the calls and the one transport of scripts   (scripts/)
//!   Router, Lane            routing; one pipeline and one WAIT per batch (cluster/)
//!   the base                the renewal book (book.rs), keys, errors, ...
//! ```

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::cluster::lane::Gather;
use crate::cluster::router::Link;
use crate::error::{Error, Result};
use crate::keys;
use crate::mode::Mode;
use crate::scripts::{
    AttemptReply, Breaking, GuardedCall, GuardedReply, Intent, Others, RawState, Released,
};
use crate::shared::{CallKind, Shared};
use crate::slot;

/// One function call on a lock, the body every call of [`RawLock`] shares: routed to the
/// node that serves its slot and sent again through redirects within the command
/// timeout ([`RawLock::call`]), or through redirects and timeouts within `budget` when
/// one is given (`within budget,`), its target built by [`Shared::on`] (which decides
/// its confirmation from `op`), and for an attempt (acquire, upgrade) of a lock that is
/// being gathered, in the batch being built. `|scripts, on| call` makes the call.
macro_rules! on_lock {
    ($lock:expr, $op:expr, $deadline:expr, within $budget:expr, |$scripts:ident, $on:ident| $call:expr) => {{
        let lock: &RawLock = $lock;
        let (inner, key) = (&lock.inner, &*lock.key);
        let gather = match $op {
            CallKind::Acquire | CallKind::Probe | CallKind::Upgrade => lock.gather.as_deref(),
            _ => None,
        };
        inner
            .call_within(lock.slot, $budget, |c| async move {
                let mut $on = inner.on(&c, key, $op, $deadline);
                $on.gather = gather;
                let $scripts = &inner.scripts;
                $call.await
            })
            .await
    }};
    ($lock:expr, $op:expr, $deadline:expr, |$scripts:ident, $on:ident| $call:expr) => {{
        let lock: &RawLock = $lock;
        on_lock!(lock, $op, $deadline, within lock.inner.config.command_timeout, |$scripts, $on| $call)
    }};
}

/// A lease in whole ms, as the server is sent it (a lease is at most a day).
fn whole_ms(lease: Duration) -> u32 {
    u32::try_from(lease.as_millis()).unwrap_or(u32::MAX)
}

/// One lock on one client: its name, key, release channel and slot, and the calls on it.
/// Its fields are its own: the policy above reads them, and the few parts of the client
/// it needs (configuration, hold ids, the renewal book, the subscriptions, the runtime),
/// through the accessors below.
#[derive(Clone)]
pub(crate) struct RawLock {
    inner: Arc<Shared>,
    name: Arc<str>,
    key: Arc<str>,
    channel: Arc<str>,
    slot: u16,
    /// The lease of this lock's holds in ms (the client's, or the handle's own): at most
    /// a day, and kept this small so that a lock handle, which every future of the API
    /// holds, is no bigger for it.
    lease_ms: u32,
    /// The batch being built that this lock's attempts go in (see
    /// [`gathered`](Self::gathered)); none for the lock itself.
    gather: Option<Arc<Gather>>,
}

/// What the policy reads of the lock and of its client.
impl RawLock {
    pub fn name(&self) -> &Arc<str> {
        &self.name
    }

    pub fn key(&self) -> &Arc<str> {
        &self.key
    }

    pub fn channel(&self) -> &Arc<str> {
        &self.channel
    }

    pub fn slot(&self) -> u16 {
        self.slot
    }

    pub fn config(&self) -> &crate::config::LockConfig {
        &self.inner.config
    }

    /// Whether this client's grants are confirmed by replicas (any durability but
    /// `MasterOnly`).
    pub fn confirms(&self) -> bool {
        self.inner.config.durability != crate::Durability::MasterOnly
    }

    /// The lease of this lock's holds (whole ms: what the server is sent).
    pub fn lease(&self) -> Duration {
        Duration::from_millis(u64::from(self.lease_ms))
    }

    /// This lock with holds of lease `lease` (checked by the caller: at most
    /// [`MAX_LEASE`](crate::config::MAX_LEASE)).
    pub fn with_lease(&self, lease: Duration) -> RawLock {
        RawLock {
            lease_ms: whole_ms(lease),
            ..self.clone()
        }
    }

    fn lease_ms(&self) -> u64 {
        u64::from(self.lease_ms)
    }

    /// A hold id no other hold of this process has.
    pub fn next_hold_id(&self) -> u64 {
        self.inner.next_hold_id()
    }

    /// The client's renewal book.
    pub fn book(&self) -> &crate::book::Book {
        &self.inner.book
    }

    /// What every lock of the client shares (the renewal task starts from it).
    pub fn shared(&self) -> &Arc<Shared> {
        &self.inner
    }

    /// The client's release subscriptions, unless notifications are off.
    pub fn notifier(&self) -> Option<&Arc<crate::cluster::notify::Notifier>> {
        self.inner.notifier()
    }

    /// This lock, whose attempts (acquires and upgrades) go in the batch `gather` builds
    /// until it is sent (see [`Gather`]); its other calls as the lock's own.
    pub fn gathered(&self, gather: Arc<Gather>) -> RawLock {
        RawLock {
            gather: Some(gather),
            ..self.clone()
        }
    }

    /// The last confirmation on the master that serves the lock's slot now, if it fell
    /// short no earlier than `since` and none was confirmed after it.
    pub fn master_short_since(
        &self,
        since: std::time::Instant,
    ) -> Option<crate::cluster::lane::Unconfirmed> {
        self.inner
            .cluster
            .router
            .node_for(self.slot)?
            .short_since(since)
    }

    /// Whether this client lately found a lock of this slot busy, or shared after a grant
    /// (see `contention`).
    pub fn contended_lately(&self, now: Instant) -> bool {
        self.inner.contention.recent(self.slot, now)
    }

    /// An attempt found this lock busy (or shared, after its grant) at `now`.
    pub fn mark_contended(&self, now: Instant) {
        self.inner.contention.mark(self.slot, now);
    }

    /// Runs `task`, a give-back, in the background, on the client's runtime; counted
    /// until it ends, so that [`LockClient::close`](crate::LockClient::close) sends it
    /// before closing.
    pub fn spawn<F>(&self, task: F)
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        self.inner.runtime.spawn(self.inner.pending.track(task));
    }
}

impl RawLock {
    pub fn new(inner: Arc<Shared>, name: &str) -> RawLock {
        let key = keys::lock_key(&inner.config.prefix, name);
        let channel = keys::channel(&key);
        RawLock {
            slot: slot::key_slot(key.as_bytes()),
            lease_ms: whole_ms(inner.config.lease),
            inner,
            name: name.into(),
            key: key.into(),
            channel: channel.into(),
            gather: None,
        }
    }

    /// One attempt at hold `id` of `mode` for `owner` (`lua/acquire.lua`), confirmed
    /// by the replicas unless it is a probe ([`Intent::Probe`], [`CallKind::Probe`]), never
    /// past `deadline`.
    pub async fn acquire(
        &self,
        owner: &str,
        mode: Mode,
        id: u64,
        intent: Intent,
        deadline: Option<Instant>,
    ) -> Result<AttemptReply> {
        let lease = self.lease_ms();
        // (the op from the intent, not a variable of its own: this future's size is
        // counted in every acquire's)
        on_lock!(
            self,
            CallKind::of_attempt(intent),
            deadline,
            |scripts, on| { scripts.acquire(on, mode, owner, id, lease, intent) }
        )
    }

    /// One attempt to turn upgradable hold `from` into write hold `to`
    /// (`lua/upgrade.lua`; `wait`: left pending while readers hold), confirmed by the
    /// replicas, never past `deadline`.
    pub async fn upgrade(
        &self,
        owner: &str,
        from: u64,
        to: u64,
        wait: bool,
        deadline: Option<Instant>,
    ) -> Result<AttemptReply> {
        let lease = self.lease_ms();
        on_lock!(self, CallKind::Upgrade, deadline, |scripts, on| scripts
            .upgrade(on, owner, from, to, lease, wait))
    }

    /// Turns hold `from` of `owner` into hold `to` of `mode` (`lua/downgrade.lua`): its
    /// fence, or `None` when `from` was gone. Not confirmed: a replica that misses it
    /// keeps the stronger hold.
    pub async fn downgrade(
        &self,
        owner: &str,
        from: u64,
        to: u64,
        mode: Mode,
    ) -> Result<Option<u64>> {
        let lease = self.lease_ms();
        on_lock!(self, CallKind::Downgrade, None, |scripts, on| scripts
            .downgrade(on, owner, from, to, mode, lease))
    }

    /// Gives back what `what` names, for `owner`: the ONE way a hold, or what an attempt
    /// may have left, goes back. The path follows from what it is, never from the
    /// caller's choice: a held hold (its grant answered, nothing of it in a lane) is
    /// released straight on the connection (a release needs no confirmation, and behind
    /// a batch on the wire it would wait for that batch's reply and then for a batch of
    /// its own); what an attempt left goes through the attempt's lane, after it, so that
    /// it never overtakes the grant it undoes (a writer withdraws: out of the queue, and
    /// the hold handed over meanwhile given back or, for an upgrade that keeps its
    /// upgradable hold, turned back into it). True when a held hold
    /// was there (see [`release`](Self::release)); an attempt's give-back says true.
    pub async fn give_back(&self, owner: &str, what: GiveBack) -> Result<bool> {
        // boxed, as the router's call is: every guard's release and every attempt's
        // clean-up holds this future, which would otherwise add the layout of both
        // scripts' calls to theirs
        let withdrawal = self.inner.config.command_timeout;
        Box::pin(self.give_back_now(owner, what, withdrawal)).await
    }

    /// [`give_back`](Self::give_back), an attempt's leftovers withdrawn within
    /// `withdrawal` (a held hold's release follows the cluster for a lease).
    async fn give_back_now(
        &self,
        owner: &str,
        what: GiveBack,
        withdrawal: Duration,
    ) -> Result<bool> {
        let budget = self.release_budget();
        match what {
            GiveBack::Held {
                id,
                fence,
                believed_until,
                others,
            } => {
                self.release(owner, id, (fence, believed_until), budget, true, others)
                    .await
            }
            GiveBack::Attempt { id, from } => self
                .withdraw(owner, id, from, withdrawal)
                .await
                .map(|()| true),
        }
    }

    /// [`give_back`](Self::give_back) in the background (tracked: `close` sends it
    /// first), for a caller that does not wait for it.
    ///
    /// Nobody waits for it, so an attempt's leftovers follow the cluster for as long as
    /// a held hold's release does (a lease), not for one command timeout: a withdrawal
    /// whose reply is lost is sent again, as a release is, and a hold it would give
    /// back (a grant or a downgrade whose reply was lost) is not left to its lease.
    pub fn give_back_later(&self, owner: Arc<str>, what: GiveBack) {
        let raw = self.clone();
        self.spawn(async move {
            let withdrawal = raw.release_budget();
            // (what it found does not matter: nobody is told)
            let _ = Box::pin(raw.give_back_now(&owner, what, withdrawal)).await;
        });
    }

    /// Gives back hold `id` of `owner`, granted with `fence` and believed until
    /// `believed_until` (`lua/release.lua`), following the cluster for at most `budget`:
    /// true when it was there. When a sending found nothing after an earlier one that got
    /// no answer (a timeout, a connection lost), the earlier one may have released it, or
    /// the hold was gone before (removed by a forced release, or run out): see
    /// [`gave_back_itself`] for when that is known. Otherwise false: the caller is told it
    /// may have lost the hold, never that all was well when that is not known. `direct`:
    /// straight on the connection, not through the lane (see
    /// [`give_back`](Self::give_back)). `others`: as the grant said (when others held or
    /// waited, the function skips its path for a lone holder, which would most likely
    /// fall through, and reads the queue's head the grant named first).
    async fn release(
        &self,
        owner: &str,
        id: u64,
        (fence, believed_until): (u64, Instant),
        budget: Duration,
        direct: bool,
        others: Others,
    ) -> Result<bool> {
        use std::sync::atomic::{AtomicBool, Ordering};
        let (inner, key) = (&self.inner, &*self.key);
        // a sending is "in flight" until its reply says whether the function ran
        let (in_flight, unsure) = (AtomicBool::new(false), AtomicBool::new(false));
        let found = inner
            .call_within(self.slot, budget, |c| {
                if in_flight.swap(true, Ordering::AcqRel) {
                    unsure.store(true, Ordering::Release);
                }
                let in_flight = &in_flight;
                async move {
                    let mut on = inner.on(&c, key, CallKind::Release, None);
                    if direct {
                        on.direct = true;
                    }
                    let reply = inner.scripts.release(on, owner, id, others).await;
                    if reply.is_ok() || redirected(&reply) {
                        in_flight.store(false, Ordering::Release);
                    }
                    reply
                }
            })
            .await?;
        Ok(match found {
            Released::Now => true,
            Released::NotThere {
                last_fence,
                broken_at,
            } => {
                unsure.load(Ordering::Acquire)
                    && gave_back_itself(
                        fence,
                        believed_until,
                        last_fence,
                        broken_at,
                        Instant::now(),
                    )
            }
        })
    }

    /// Runs `commands` on keys of the lock's slot while hold `id` of `owner` is on the
    /// server (`lua/guarded.lua`), confirmed by the replicas (see
    /// [`Scripts::guarded`](crate::scripts::Scripts::guarded)). Sent again only after a
    /// redirect (the function did not run there): after a sending that got no answer, the
    /// commands may have run, and running them twice could write twice, so the call
    /// fails with [`Error::Unavailable`] instead.
    pub async fn guarded(
        &self,
        owner: &str,
        id: u64,
        call: &GuardedCall<'_>,
    ) -> Result<GuardedReply> {
        use std::sync::atomic::{AtomicBool, Ordering};
        let (inner, key) = (&self.inner, &*self.key);
        let in_flight = AtomicBool::new(false);
        let outcome = self.call(|c| {
            let unsure = in_flight.swap(true, Ordering::AcqRel);
            let in_flight = &in_flight;
            async move {
                if unsure {
                    return Err(Error::Unavailable(
                        "a guarded call got no answer: its commands may have run, and are not sent again".into(),
                    ));
                }
                let on = inner.on(&c, key, CallKind::Guarded, None);
                let reply = inner
                    .scripts
                    .guarded(on, owner, id, call)
                    .await;
                if redirected(&reply) {
                    in_flight.store(false, Ordering::Release);
                }
                reply
            }
        })
        .await;
        match outcome {
            // the budget ran out on an error that does not say whether the function ran (a
            // connection lost, CLUSTERDOWN, a node that did not answer): an unknown
            // outcome, which is `Unavailable`, whatever the last error was. A refused
            // permission is the server's word that nothing ran, and stays one.
            Err(e @ (Error::Server(_) | Error::Connection(_)))
                if in_flight.load(Ordering::Acquire) && !e.is_permission_denied() =>
            {
                Err(Error::Unavailable(format!(
                    "a guarded call got no clear answer ({e}): its commands may have run, and are not sent again"
                )))
            }
            other => other,
        }
    }

    /// How long a release is followed through timeouts and failovers: a lease (a hold not
    /// given back by then has expired), and at least the command timeout.
    fn release_budget(&self) -> Duration {
        self.lease().max(self.inner.config.command_timeout)
    }

    /// Takes the writer `owner` out of the queue (or its upgrade out of pending) and gives
    /// back hold `id` if it was handed over meanwhile (`lua/withdraw.lua`); for an upgrade
    /// from the upgradable hold `from`, such a write hold turns back into that hold.
    /// Sent again (it is idempotent) through timeouts and failovers for `budget`.
    async fn withdraw(
        &self,
        owner: &str,
        id: u64,
        from: Option<u64>,
        budget: Duration,
    ) -> Result<()> {
        on_lock!(self, CallKind::Withdraw, None, within budget, |scripts, on| scripts
            .withdraw(on, owner, id, from))
    }

    /// Removes every hold, or `only`'s, wakes the waiters and raises the fence
    /// (`lua/force_release.lua`): the holds removed and the fence. Unconfirmed, as a
    /// release: a replica that misses it keeps more holds, never fewer.
    pub async fn force_release(&self, only: Breaking<'_>) -> Result<(u64, Option<u64>, u64)> {
        on_lock!(self, CallKind::ForceRelease, None, |scripts, on| scripts
            .force_release(on, only))
    }

    /// The fence, the holders and the queued writers (`lua/state.lua`).
    pub async fn state(&self) -> Result<RawState> {
        on_lock!(self, CallKind::State, None, |scripts, on| scripts.state(on))
    }

    /// Sends a command for this lock to the node that serves its slot (see
    /// [`Router::call`](crate::cluster::router::Router::call)).
    async fn call<T, F, Fut>(&self, op: F) -> Result<T>
    where
        F: FnMut(Link) -> Fut,
        Fut: std::future::Future<Output = Result<T>>,
    {
        self.inner.call(self.slot, op).await
    }
}

/// What goes back of one hold (see [`RawLock::give_back`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GiveBack {
    /// A hold whose grant was answered: hold `id`, granted with `fence`, believed until
    /// `believed_until` (a hold given back in the background: `fence` 0 and now, for
    /// nobody is told what it found); `others` as the grant said.
    Held {
        id: u64,
        fence: u64,
        believed_until: Instant,
        others: Others,
    },
    /// What an attempt at hold `id` may have left, its reply perhaps not read: its place
    /// in the queue (a writer's or a reader's) or its pending upgrade, and a hold granted
    /// or handed over meanwhile, which turns back into the upgradable hold `from` when
    /// one is given (an upgrade that keeps it) and is given back otherwise.
    Attempt { id: u64, from: Option<u64> },
}

/// A reply that is a redirect (`MOVED`, `ASK`): the function did not run on that node.
fn redirected<T>(reply: &Result<T>) -> bool {
    matches!(reply, Err(e) if e.server().is_some_and(crate::error::ServerError::is_redirect))
}

/// Whether a release that found its hold gone, after an earlier sending of it got no
/// answer, gave the hold back itself (that earlier sending ran): the hold was granted
/// with `fence` and believed until `believed_until`; the lock remembers `last_fence` and
/// the fence of its last forced release, `broken_at`; the answer came at `answered`.
///
/// A hold goes in three ways: given back, broken by a forced release, or run out. A break
/// after the grant raised the fence above the hold's (`broken_at > fence`): lost. With
/// none, the hold can only have run out, which it cannot have while the lease the holder
/// believes in lasts (the server's deadline is later): an answer read before
/// `believed_until` says the earlier sending gave it back, whatever it handed on to a
/// queued writer (who then raised the fence). Past that, only a fence that did not move
/// says so. A lock that remembers no fence, or one below the hold's, lost its hash (it
/// was deleted from outside): nothing is known.
pub(crate) fn gave_back_itself(
    fence: u64,
    believed_until: Instant,
    last_fence: Option<u64>,
    broken_at: Option<u64>,
    answered: Instant,
) -> bool {
    let Some(last) = last_fence else {
        return false;
    };
    if last < fence || broken_at.is_some_and(|b| b > fence) {
        return false;
    }
    last == fence || answered < believed_until
}

#[cfg(test)]
mod tests {
    use super::gave_back_itself;
    use std::time::Duration;
    use tokio::time::Instant;

    #[test]
    fn a_release_sent_again_knows_when_it_gave_the_hold_back_itself() {
        let now = Instant::now();
        let later = now + Duration::from_secs(5);
        // nothing granted since: the fence did not move
        assert!(gave_back_itself(10, now, Some(10), None, later));
        // handed on to a queued writer by the earlier sending, answered while the lease
        // the holder believes in lasts: given back
        assert!(gave_back_itself(10, later, Some(11), None, now));
        // the same answer once that lease may have run out: not known
        assert!(!gave_back_itself(10, now, Some(11), None, later));
        // broken after the grant: lost, however early the answer
        assert!(!gave_back_itself(10, later, Some(12), Some(11), now));
        assert!(!gave_back_itself(10, later, Some(11), Some(11), now));
        // a break before the grant says nothing of this hold
        assert!(gave_back_itself(10, later, Some(12), Some(9), now));
        // a hash that remembers nothing, or a lower fence: deleted from outside
        assert!(!gave_back_itself(10, later, None, None, now));
        assert!(!gave_back_itself(10, later, Some(9), None, now));
    }
}
