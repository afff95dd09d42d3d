//! Acquiring: one attempt, the waiting loop (subscribe, attempt, sleep until a release
//! message or a deadline), hand-offs, and the clean-up of attempts that end without a
//! grant.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::cluster::notify::Wake;
use crate::error::{Error, Result};
use crate::keys::check_owner;
use crate::mode::Mode;
use crate::observe;
use crate::raw::GiveBack;
use crate::scripts::{AttemptReply, Counted, Intent, CLAIM_WINDOW};

mod seam;
#[cfg(test)]
mod tests;

pub(crate) use seam::{Seam, Wakes};

/// Pause between attempts after a Redis error, while a deadline allows retrying.
const ERROR_BACKOFF: Duration = Duration::from_millis(100);
/// How long after the claim window of a hand-off to another waiter this waiter looks
/// again (the window counts from the release on the server; the message comes later).
const CLAIM_SLACK: Duration = Duration::from_millis(50);

/// A wait that runs out of time while confirmations on the lock's master fall short
/// says so ([`Error::NotReplicated`]) when the last one fell short at most this long
/// before it began (the wait before it, on the same lock, refused so) or during it.
const SHORT_BEFORE: Duration = Duration::from_secs(1);

/// What a timeout bounds: the wait for the lock, not the first attempt. However short
/// the timeout (zero too), the first attempt is made, and in full: the subscription to
/// the lock's messages is waited for until the deadline, or this long if later (the
/// attempt then goes without it: the deadline has passed, so a refusal ends the wait,
/// and no release can go unheard), then the call and its confirmation get this long at
/// least. Zero means one attempt now, as `try_*`, and a grant won in time
/// is never thrown away because its round trip outlasted the timeout. It is still short
/// enough that a `*_timeout` call returns soon while the slot's master hangs.
pub(crate) const FIRST_ATTEMPT: Duration = Duration::from_millis(100);

/// What an attempt asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ask {
    /// A new hold of this mode.
    Hold(Mode),
    /// Another hold of this mode for an owner that holds already (granted at once, or
    /// not at all).
    Again(Mode),
    /// The upgradable hold `from` becoming a write hold.
    Upgrade { from: u64 },
}

impl Ask {
    /// Whether the asker waits as a writer does (queued as a writer, or as a pending
    /// upgrade): a release may hand it the lock (it heeds the messages that do).
    fn writes(self) -> bool {
        matches!(self, Ask::Hold(Mode::Write) | Ask::Upgrade { .. })
    }

    /// The upgradable hold an upgrade starts from.
    fn upgrade_from(self) -> Option<u64> {
        match self {
            Ask::Upgrade { from } => Some(from),
            _ => None,
        }
    }

    /// The mode of the hold it gets.
    fn mode(self) -> Mode {
        match self {
            Ask::Hold(mode) | Ask::Again(mode) => mode,
            Ask::Upgrade { .. } => Mode::Write,
        }
    }
}

/// A writer the lock was handed to takes it without the server's clock
/// ([`Intent::Take`]) only while its first attempt under its hold id was sent less than
/// a lease / `TAKE_WITHIN` ago: its belief then still has at least half a lease (with
/// the default margin of a quarter), and it is renewed on time. A longer wait takes the
/// hold with the clock, which says the lease left.
const TAKE_WITHIN: u32 = 4;

/// At most this long past the caller's deadline, an upgrade that ran out of time waits
/// for the withdrawal that lets it keep its upgradable hold.
const SETTLE_BUDGET: Duration = Duration::from_millis(500);

/// A grant the policy won: what a `Hold` is made of.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Acquired {
    /// The hold id it was granted under.
    pub id: u64,
    /// Its fence.
    pub fence: u64,
    /// Its mode.
    pub mode: Mode,
    /// When the call that won it was sent: its lease counts from then.
    pub sent: Instant,
    /// The lease left from `sent`, in ms, when less than a whole one (a hold handed over
    /// while its waiter was queued); `None`: a whole lease. (In ms, not a `Duration`:
    /// this is part of every acquire future's size.)
    pub left: Option<std::num::NonZeroU32>,
    /// The grant said that another owner held, or someone waited, right after it: the
    /// release skips the function's path for a lone holder (see `AttemptReply::Granted`).
    pub others: bool,
}

enum Verdict {
    Granted(Acquired),
    /// A hold handed over, taken by an [`Intent::Take`]: its lease counts from the first
    /// attempt under its id, which the waiting loop knows (its `sent` is the take's).
    Taken(Acquired),
    /// A probe won a grant that was not confirmed: not believed until the same attempt,
    /// sent again, is.
    Unconfirmed,
    Busy(u64),
}

/// Undoes what an attempt left in Redis when it ends without a grant: a place in the
/// queue (a writer's or a reader's) or a pending upgrade, a hold handed over while
/// waiting, or a grant whose reply was lost to an error, in one withdrawal (idempotent).
struct Leftovers<L: Seam> {
    raw: L,
    owner: Arc<str>,
    id: u64,
    /// For an upgrade: the upgradable hold it starts from (a write hold granted as the
    /// upgrade gives up turns back into it).
    from: Option<u64>,
    armed: bool,
}

impl<L: Seam> Leftovers<L> {
    /// What goes back: the attempt's leftovers, a write hold handed over meanwhile
    /// turning back into `from` when one is given.
    fn what(&self, from: Option<u64>) -> GiveBack {
        GiveBack::Attempt { id: self.id, from }
    }

    /// Undoes what is left now, not in the background, for an upgrade that gives up and
    /// keeps its upgradable hold, which is not known to be intact until the withdrawal
    /// has run; within `SETTLE_BUDGET` (the caller's time is up already; the command
    /// timeout, if less). When it fails or takes longer, the caller gives the upgradable
    /// hold up, and `Drop` withdraws again in the background, now taking back a write
    /// hold granted meanwhile rather than turning it into an upgradable hold that nobody
    /// would release. Other attempts leave it all to `Drop`.
    async fn settle(&mut self) -> Result<()> {
        if !self.armed || self.from.is_none() {
            return Ok(());
        }
        let budget = self.raw.config().command_timeout.min(SETTLE_BUDGET);
        let withdraw = self.raw.give_back(&self.owner, self.what(self.from));
        let outcome = match tokio::time::timeout(budget, withdraw).await {
            Ok(Ok(_)) => {
                self.armed = false;
                return Ok(());
            }
            Ok(Err(e)) => e,
            Err(_) => Error::Unavailable(format!(
                "the withdrawal of an upgrade that ran out of time took over {budget:?}"
            )),
        };
        self.from = None;
        Err(outcome)
    }
}

impl<L: Seam> Drop for Leftovers<L> {
    /// What is left goes in the background. For an upgrade, a write hold granted meanwhile
    /// is taken back, NOT turned into the upgradable hold it came from: leftovers dropped
    /// armed mean the caller is gone or failed (a cancelled future, an error), and the
    /// upgradable hold is given back by its own `Hold` too, on its own path. Turned back,
    /// it could be recreated after that give-back had run (a release straight to the
    /// connection overtakes an upgrade still in the lane) and stay held, by nobody, for
    /// a lease. Taken back, the two give-backs leave nothing in either order. (An upgrade
    /// that runs out of time and keeps its upgradable hold withdraws in `settle` first.)
    fn drop(&mut self) {
        if self.armed {
            self.raw
                .give_back_later(self.owner.clone(), self.what(None));
        }
    }
}

/// One attempt for `owner`, without waiting: `None` when the lock is busy.
pub(crate) async fn try_once<L: Seam>(
    lock: &L,
    owner: Arc<str>,
    ask: Ask,
) -> Result<Option<Acquired>> {
    let began = Instant::now();
    let result = try_attempt(lock, owner, ask).await;
    let (fence, outcome) = match &result {
        Ok(Some(hold)) => (Some(hold.fence), observe::Ended::Granted),
        Ok(None) => (None, observe::Ended::Busy),
        Err(_) => (None, observe::Ended::Failed),
    };
    observe(lock, ask, began, 1, fence, outcome);
    result
}

fn observe<L: Seam>(
    lock: &L,
    ask: Ask,
    began: Instant,
    attempts: u32,
    fence: Option<u64>,
    outcome: observe::Ended,
) {
    let label_name = lock.config().metrics_lock_names;
    observe::acquired(
        lock.name(),
        label_name,
        ask.mode(),
        began.elapsed(),
        attempts,
        fence,
        outcome,
    );
}

async fn try_attempt<L: Seam>(lock: &L, owner: Arc<str>, ask: Ask) -> Result<Option<Acquired>> {
    check_owner(&owner)?;
    let id = lock.next_hold_id();
    let mut leftovers = Leftovers {
        raw: lock.clone(),
        owner: owner.clone(),
        id,
        from: ask.upgrade_from(),
        armed: true,
    };
    let outcome = attempt(lock, &owner, ask, id, Intent::Try, None).await;
    leftovers.armed = matches!(
        outcome,
        Err(Error::Server(_) | Error::Connection(_) | Error::Unavailable(_))
    );
    match outcome? {
        Verdict::Granted(hold) => Ok(Some(hold)),
        // (a try is never a take)
        Verdict::Taken(_) => Err(Error::Protocol("a try answered as a take".into())),
        // (a try is never a probe)
        Verdict::Unconfirmed | Verdict::Busy(_) => Ok(None),
    }
}

/// Waits for a grant (see `wait_loop`), traced and counted.
pub(crate) async fn wait<L: Seam>(
    lock: &L,
    owner: Arc<str>,
    ask: Ask,
    timeout: Option<Duration>,
) -> Result<Acquired> {
    let began = Instant::now();
    let _waiting = observe::Waiting::start();
    let mut attempts = 0;
    #[cfg(feature = "tracing")]
    let span = observe::acquire_span(lock.name(), ask.mode(), &owner);
    // (boxed: one allocation per acquire keeps the caller's future small however deep
    // the caller nests it; the loop's state is most of an acquire's)
    let wait = Box::pin(wait_loop(lock, owner, ask, timeout, &mut attempts));
    #[cfg(feature = "tracing")]
    let wait = tracing::Instrument::instrument(wait, span);
    let result = wait.await;
    let (fence, outcome) = match &result {
        Ok(hold) => (Some(hold.fence), observe::Ended::Granted),
        Err(Error::Timeout(_)) => (None, observe::Ended::TimedOut),
        // (a wait whose time ran out on grants the replicas did not confirm)
        Err(Error::NotReplicated { .. }) if timeout.is_some() => (None, observe::Ended::TimedOut),
        Err(_) => (None, observe::Ended::Failed),
    };
    observe(lock, ask, began, attempts, fence, outcome);
    result
}

/// The waiting loop: subscribe, attempt, sleep until a release message that concerns
/// this waiter or the deadline the attempt returned, again.
async fn wait_loop<L: Seam>(
    lock: &L,
    owner: Arc<str>,
    ask: Ask,
    timeout: Option<Duration>,
    attempts: &mut u32,
) -> Result<Acquired> {
    check_owner(&owner)?;
    let began = Instant::now();
    // a timeout too long to add to the clock (`Duration::MAX`) waits without a deadline
    let deadline = timeout.and_then(|t| began.checked_add(t));
    // the first attempt is made in full, however short the timeout (see FIRST_ATTEMPT);
    // later ones stop at the deadline
    let mut attempt_deadline = deadline.map(|d| d.max(began + FIRST_ATTEMPT));
    let timed_out = || Error::Timeout(timeout.unwrap_or_default());
    // the last grant the replicas did not confirm, if any: a wait that runs out after
    // one says so (and which replicas), not that the lock was busy. (A busy answer after
    // it does not clear it: the lock may be busy with that very grant, not given back
    // yet.) Without one, a wait whose time ran out while confirmations on the lock's
    // master fell short (the last one did, since shortly before the wait began, and none
    // was confirmed since) says so too: its own attempt may have been cut in its WAIT,
    // or found busy the grant a wait before it had to give back
    let mut refused: Option<Error> = None;
    let short_from = began.checked_sub(SHORT_BEFORE).unwrap_or(began);
    let mut id = lock.next_hold_id();
    let write = ask.writes();
    let mut leftovers = Leftovers {
        raw: lock.clone(),
        owner: owner.clone(),
        id,
        from: ask.upgrade_from(),
        armed: false,
    };
    // an upgrade that runs out of time withdraws before it returns (see `settle`)
    macro_rules! give_up {
        () => {
            return Err(match leftovers.settle().await {
                Ok(()) => refused
                    .take()
                    .or_else(|| lock.short_since(short_from))
                    .unwrap_or_else(timed_out),
                Err(e) => e,
            })
        };
    }
    // when the first attempt under `id` was sent, at the latest: a hold handed over and
    // taken by an `Intent::Take` counts its lease from then
    let mut id_since = began;
    let mut sub: Option<L::Wakes> = None;
    // a release message said the lock was handed to this waiter's current hold id
    let mut handed_to_me = false;
    // the last attempt found the lock busy, or this client lately found its slot busy or
    // shared: the next attempt skips the function's fast path (for a free lock), which would
    // most likely fall through
    let mut busy = lock.contended_lately();
    // the next attempt is expected to find the lock busy again: no release message came
    // that concerns this waiter since an attempt did (or, for a writer's first attempt,
    // this client lately found the slot busy or shared; not for a reader's, which a
    // lock shared by readers grants at once). It goes as a probe, not confirmed: a
    // waiter's refusals, most of a busy lock's calls, cost no `WAIT`; a grant it wins is
    // sent again, confirmed, before it is believed (one call more, and the hold kept on
    // the server a round trip longer than its holder uses it: so only where a refusal
    // is likely)
    let mut expect_busy = busy && ask == Ask::Hold(Mode::Write);
    loop {
        if sub.is_none() {
            if let Some(join) = lock.join() {
                // a join that outlasts the first attempt's time does not stop it: the
                // attempt goes without a subscription. The first join leaves the first
                // attempt FIRST_ATTEMPT of the caller's time, so that the two together
                // end by the caller's deadline (or FIRST_ATTEMPT after the start, for a
                // shorter timeout). A refusal then either ends the wait (its time ran
                // out) or is followed by a join and another attempt after it, which
                // finds any release the join might have missed
                let join_deadline = match attempt_deadline {
                    Some(d) if *attempts == 0 => {
                        Some(d.checked_sub(FIRST_ATTEMPT).unwrap_or(began).max(began))
                    }
                    other => other,
                };
                match within(join_deadline, join).await {
                    Some(joined) => sub = Some(joined),
                    None if *attempts == 0 => {}
                    None => give_up!(),
                }
                if *attempts == 0 {
                    // the first attempt's call is made in full whatever the join took
                    attempt_deadline = deadline.map(|d| d.max(Instant::now() + FIRST_ATTEMPT));
                }
            }
        }
        leftovers.armed = true;
        *attempts += 1;
        // (an upgrade, rare, is always confirmed)
        let intent = if expect_busy && matches!(ask, Ask::Hold(_)) && lock.confirms() {
            Intent::Probe
        } else if handed_to_me
            && ask == Ask::Hold(Mode::Write)
            && id_since.elapsed() < lock.lease() / TAKE_WITHIN
        {
            Intent::Take
        } else if busy {
            Intent::WaitBusy
        } else {
            Intent::Wait
        };
        let attempt = attempt(lock, &owner, ask, id, intent, attempt_deadline);
        let Some(outcome) = within(attempt_deadline, attempt).await else {
            give_up!();
        };
        attempt_deadline = deadline;
        expect_busy = true;
        let wait = match outcome {
            Ok(Verdict::Granted(hold)) => {
                leftovers.armed = false;
                if handed_to_me {
                    observe::handed_over(lock.name(), hold.fence);
                }
                return Ok(hold);
            }
            Ok(Verdict::Taken(hold)) => {
                // (a take follows a message that handed the lock to this waiter) its
                // lease counts from the first attempt under its id
                leftovers.armed = false;
                observe::handed_over(lock.name(), hold.fence);
                return Ok(Acquired {
                    sent: id_since,
                    ..hold
                });
            }
            Ok(Verdict::Unconfirmed) => {
                // the same attempt (the same hold id: the function finds the hold and
                // writes it again) at once, confirmed; its lease counts from then. Its
                // confirmation is part of the attempt that won the grant, made in full
                // as a first attempt is (see FIRST_ATTEMPT): a grant won in time is not
                // thrown away because the deadline passed meanwhile
                expect_busy = false;
                attempt_deadline = deadline.map(|d| d.max(Instant::now() + FIRST_ATTEMPT));
                continue;
            }
            Ok(Verdict::Busy(wait_ms)) => {
                busy = true;
                // a place in the queue is kept (and a writer may be handed the lock)
                // until it withdraws
                leftovers.armed = true;
                // a queue entry lives one lease: come back before it lapses
                Duration::from_millis(wait_ms).min(lock.lease() / 3)
            }
            // a failover or reconnect in progress, or a replica that is not in sync
            // yet (restarted, catching up): try again while time is left (the grant
            // the replicas did not confirm was undone)
            Err(
                e @ (Error::Server(_)
                | Error::Connection(_)
                | Error::Unavailable(_)
                | Error::NotReplicated { .. }),
            ) if deadline.is_some() => {
                expect_busy = false;
                if matches!(e, Error::NotReplicated { .. }) {
                    // the undo of that grant runs in the background: a retry under
                    // the same id could be granted and then undone by it
                    id = lock.next_hold_id();
                    id_since = Instant::now();
                    leftovers.id = id;
                    handed_to_me = false;
                    refused = Some(e);
                }
                ERROR_BACKOFF
            }
            Err(e) => return Err(e),
        };
        let until = match deadline {
            Some(d) => {
                let now = Instant::now();
                if now >= d {
                    give_up!();
                }
                (now + wait).min(d)
            }
            None => Instant::now() + wait,
        };
        match sub.as_mut().filter(|s| s.is_live()) {
            Some(s) => {
                let mut until = until;
                let woken = loop {
                    tokio::select! {
                        w = s.next() => {
                            if w.concerns(write, &owner) {
                                break Some(w);
                            }
                            if let Wake::Granted { .. } = w {
                                // handed to another waiter, which may have died: if it
                                // does not take the lock within the claim window, the
                                // lock moves on, and nothing would tell this waiter
                                until = until.min(Instant::now() + CLAIM_WINDOW + CLAIM_SLACK);
                            }
                        }
                        _ = tokio::time::sleep_until(until) => break None,
                    }
                };
                // an operator broke this waiter's client: its place went, and it stops
                // rather than take a new one at the tail
                if let Some(client) = woken.as_ref().and_then(|w| w.broke(&owner)) {
                    return Err(Error::Broken {
                        client: client.to_string(),
                    });
                }
                // a message that concerns this waiter: its next attempt may well be a grant
                expect_busy &= woken.is_none();
                if let Some(Wake::Granted { id: handed, .. }) = woken {
                    // the releaser handed the lock to this waiter: the message only
                    // wakes it. The next attempt, under the same id, finds the hold on
                    // the node that serves the slot now and is a grant like any other:
                    // its fence from the server, its lease counted from its own send
                    // time, confirmed by the replicas. A message alone proves nothing
                    // (a master that lost the slot, thawed, may still publish).
                    handed_to_me |= handed == id;
                }
            }
            None => {
                let retry = Instant::now() + lock.config().retry_interval;
                tokio::time::sleep_until(until.min(retry)).await
            }
        }
        if let Some(d) = deadline {
            if Instant::now() >= d {
                give_up!();
            }
        }
    }
}

/// One attempt, as `intent` says (a try, a waiter's attempt; for a new hold, the fast
/// path skipped or a probe: not confirmed, a grant it wins is [`Verdict::Unconfirmed`];
/// `Ask::Again` is always [`Intent::Again`]). Cancel safety comes from the
/// caller's armed [`Leftovers`]: if this future is dropped after the command was
/// sent, the give-back that `Leftovers` sends goes on the same connection, after it,
/// so a grant that lands for a caller who is gone is released at once (and a queued
/// writer leaves the queue); a grant returned here is made a `Hold` by the caller with no
/// await in between, and that hold releases itself when dropped.
async fn attempt<L: Seam>(
    lock: &L,
    owner: &Arc<str>,
    ask: Ask,
    id: u64,
    intent: Intent,
    deadline: Option<Instant>,
) -> Result<Verdict> {
    let sent = Instant::now();
    let reply = match ask {
        Ask::Again(mode) => lock.acquire(owner, mode, id, Intent::Again, deadline).await,
        Ask::Hold(mode) => lock.acquire(owner, mode, id, intent, deadline).await,
        Ask::Upgrade { from } => {
            let wait = intent != Intent::Try;
            lock.upgrade(owner, from, id, wait, deadline).await
        }
    };
    let reply = match reply {
        Err(e @ Error::NotReplicated { .. }) => {
            // the grant does not count: undone. An upgrade's undo turns the write hold
            // back into the upgradable hold it came from, which the next attempt needs:
            // it runs before that attempt (in the background, the next attempt could
            // find the upgradable hold gone and the undo a write hold it does not know);
            // other undos run in the background, and the next attempt takes a new id
            let from = ask.upgrade_from();
            let undone = GiveBack::Attempt { id, from };
            if from.is_some() {
                lock.give_back(owner, undone).await?;
            } else {
                lock.give_back_later(owner.clone(), undone);
            }
            return Err(e);
        }
        other => other?,
    };
    match reply {
        AttemptReply::Granted { .. } if intent == Intent::Probe => Ok(Verdict::Unconfirmed),
        AttemptReply::Granted {
            fence,
            others,
            lease,
        } => {
            if others {
                lock.mark_contended();
            }
            let granted = Acquired {
                id,
                fence,
                mode: ask.mode(),
                sent,
                others,
                left: None,
            };
            match lease {
                Counted::Whole => Ok(Verdict::Granted(granted)),
                Counted::Left(ms) => Ok(Verdict::Granted(Acquired {
                    left: Some(lease_left(ms)),
                    ..granted
                })),
                Counted::FromFirstAttempt if intent == Intent::Take => Ok(Verdict::Taken(granted)),
                // (only a take is answered so)
                Counted::FromFirstAttempt => Err(Error::Protocol(
                    "a grant counted from a first attempt, to an attempt that is no take".into(),
                )),
            }
        }
        AttemptReply::Busy { wait_ms } => {
            lock.mark_contended();
            Ok(Verdict::Busy(wait_ms))
        }
        AttemptReply::UpgradeDeadlock => Err(Error::UpgradeDeadlock),
        AttemptReply::Gone => Err(Error::LockLost),
    }
}

/// The lease left that a grant said, as [`Acquired::left`]: rounded down where it must be
/// (above `u32::MAX` ms, or 0: 1 ms), never up.
fn lease_left(ms: u64) -> std::num::NonZeroU32 {
    let ms = u32::try_from(ms).unwrap_or(u32::MAX);
    std::num::NonZeroU32::new(ms).unwrap_or(std::num::NonZeroU32::MIN)
}

/// `fut`, bounded by `deadline` when there is one: `None` when the deadline came first.
async fn within<T>(
    deadline: Option<Instant>,
    fut: impl std::future::Future<Output = T>,
) -> Option<T> {
    match deadline {
        None => Some(fut.await),
        Some(d) => tokio::time::timeout_at(d, fut).await.ok(),
    }
}
