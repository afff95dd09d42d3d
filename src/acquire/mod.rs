//! Acquiring: one attempt, the waiting loop (subscribe, attempt, sleep until a release
//! message or a deadline), hand-offs, and the clean-up of attempts that end without a
//! grant.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::error::{Error, Result};
use crate::keys::check_owner;
use crate::mode::Mode;
use crate::observe;
use crate::raw::GiveBack;
use crate::scripts::{AttemptReply, Counted, Intent, Others};

mod seam; // the seam under the policy: the raw lock, or the unit tests' fake
#[cfg(test)]
mod tests; // the policy's decisions on a fake seam, on a paused clock
mod waiter; // the waiting loop: a `Waiter` and its steps

pub(crate) use seam::{Seam, Wakes};
use waiter::wait_loop;

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
    /// Who else was at the lock right after the grant, as it said: when anyone was, the
    /// release skips the function's path for a lone holder and reads the queue's head it
    /// named first (see `AttemptReply::Granted`).
    pub others: Others,
    /// Not confirmed by the replicas, and believed on the other masters' word that none
    /// can replace the master before this (see `AttemptReply::Granted`).
    pub replaceable_after: Option<Instant>,
}

/// The shortest belief a grant the other masters vouched for must leave (see
/// `cluster::vouch`): a shorter one is undone as a grant the replicas did not confirm,
/// rather than handed out to be lost at once.
const MIN_VOUCHED_BELIEF: Duration = Duration::from_millis(100);

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
            undo(lock, owner, ask, id).await?;
            return Err(e);
        }
        other => other?,
    };
    if let AttemptReply::Granted {
        replaceable_after: Some(at),
        ..
    } = reply
    {
        // believed on the other masters' word: only if that leaves time to believe it
        let margin = crate::config::margin_for(lock.config().clock_margin, lock.lease());
        let left = at
            .checked_sub(margin)
            .map(|cap| cap.saturating_duration_since(Instant::now()));
        if left.is_none_or(|left| left < MIN_VOUCHED_BELIEF) && intent != Intent::Probe {
            undo(lock, owner, ask, id).await?;
            return Err(lock.short_since(sent).unwrap_or(Error::NotReplicated {
                wanted: 1,
                acked: 0,
                silent: Vec::new(),
            }));
        }
    }
    match reply {
        AttemptReply::Granted { .. } if intent == Intent::Probe => Ok(Verdict::Unconfirmed),
        AttemptReply::Granted {
            fence,
            others,
            lease,
            replaceable_after,
        } => {
            if others.any() {
                lock.mark_contended();
            }
            let granted = Acquired {
                id,
                fence,
                mode: ask.mode(),
                sent,
                others,
                left: None,
                replaceable_after,
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

/// Undoes a grant that does not count (see `attempt`). An upgrade's undo turns the write
/// hold back into the upgradable hold it came from, which the next attempt needs: it
/// runs before that attempt (in the background, the next attempt could find the
/// upgradable hold gone and the undo a write hold it does not know); other undos run in
/// the background, and the next attempt takes a new id.
async fn undo<L: Seam>(lock: &L, owner: &Arc<str>, ask: Ask, id: u64) -> Result<()> {
    let from = ask.upgrade_from();
    let undone = GiveBack::Attempt { id, from };
    if from.is_some() {
        lock.give_back(owner, undone).await?;
    } else {
        lock.give_back_later(owner.clone(), undone);
    }
    Ok(())
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
