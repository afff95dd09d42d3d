//! The waiting loop as a [`Waiter`]: its fields are what the loop remembers between
//! attempts, its steps what one round does (join the lock's messages, choose the next
//! attempt's intent, take in its verdict, sleep until a message or a deadline). The loop
//! itself ([`wait_loop`]) is the order of those steps.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::{
    attempt, within, Acquired, Ask, Leftovers, Seam, Verdict, Wakes, CLAIM_SLACK, ERROR_BACKOFF,
    FIRST_ATTEMPT, SHORT_BEFORE, TAKE_WITHIN,
};
use crate::cluster::notify::Wake;
use crate::error::{Error, Result};
use crate::keys::check_owner;
use crate::mode::Mode;
use crate::observe;
use crate::scripts::{Intent, CLAIM_WINDOW};

/// The waiting loop: subscribe, attempt, sleep until a release message that concerns
/// this waiter or the deadline the attempt returned, again. `attempts` counts the
/// attempts made (for the metrics), whatever the result.
pub(super) async fn wait_loop<L: Seam>(
    lock: &L,
    owner: Arc<str>,
    ask: Ask,
    timeout: Option<Duration>,
    attempts: &mut u32,
) -> Result<Acquired> {
    let mut waiter = Waiter::new(lock, owner, ask, timeout)?;
    loop {
        if !waiter.joined(*attempts == 0).await {
            return Err(waiter.give_up().await);
        }
        waiter.leftovers.armed = true;
        *attempts += 1;
        let intent = waiter.next_intent();
        let attempt = attempt(
            lock,
            &waiter.owner,
            ask,
            waiter.id,
            intent,
            waiter.attempt_deadline,
        );
        let Some(reply) = within(waiter.attempt_deadline, attempt).await else {
            return Err(waiter.give_up().await);
        };
        let wait = match waiter.absorb(reply) {
            Next::Granted(hold) => return Ok(hold),
            Next::Failed(e) => return Err(e),
            Next::AttemptAgain => continue,
            Next::Wait(wait) => wait,
        };
        let Some(until) = waiter.until(wait) else {
            return Err(waiter.give_up().await);
        };
        waiter.sleep_until(until).await?;
        if waiter.past_deadline() {
            return Err(waiter.give_up().await);
        }
    }
}

/// What a waiter does after an attempt's verdict.
enum Next {
    /// Return this hold.
    Granted(Acquired),
    /// Return this error (the leftovers go back in the background, if armed).
    Failed(Error),
    /// Attempt again at once (a probe's grant, sent again confirmed).
    AttemptAgain,
    /// Wait this long at most (for a release message, or a retry), then attempt again.
    Wait(Duration),
}

/// One waiter, between its attempts.
struct Waiter<'a, L: Seam> {
    lock: &'a L,
    owner: Arc<str>,
    ask: Ask,
    timeout: Option<Duration>,
    began: Instant,
    /// The caller's deadline; `None` waits without one (a timeout too long to add to the
    /// clock, `Duration::MAX`, too).
    deadline: Option<Instant>,
    /// The next attempt's: the first attempt is made in full, however short the timeout
    /// (see FIRST_ATTEMPT); later ones stop at the deadline.
    attempt_deadline: Option<Instant>,
    /// The last grant the replicas did not confirm, if any: a wait that runs out after
    /// one says so (and which replicas), not that the lock was busy. (A busy answer after
    /// it does not clear it: the lock may be busy with that very grant, not given back
    /// yet.) Without one, a wait whose time ran out while confirmations on the lock's
    /// master fell short (the last one did, since shortly before the wait began
    /// (`short_from`), and none was confirmed since) says so too: its own attempt may
    /// have been cut in its WAIT, or found busy the grant a wait before it had to give
    /// back.
    refused: Option<Error>,
    short_from: Instant,
    /// The hold id the attempts are made under.
    id: u64,
    /// When the first attempt under `id` was sent, at the latest: a hold handed over and
    /// taken by an `Intent::Take` counts its lease from then.
    id_since: Instant,
    /// The subscription to the lock's release messages, once joined (dropped before
    /// the leftovers, as the loop's locals were).
    sub: Option<L::Wakes>,
    /// What goes back if the wait ends without a grant (an upgrade that runs out of time
    /// withdraws before it returns: see `settle`).
    leftovers: Leftovers<L>,
    /// A release message said the lock was handed to this waiter's current hold id.
    handed_to_me: bool,
    /// The last attempt found the lock busy, or this client lately found its slot busy
    /// or shared: the next attempt skips the function's fast path (for a free lock),
    /// which would most likely fall through.
    busy: bool,
    /// The next attempt is expected to find the lock busy again: no release message
    /// came that concerns this waiter since an attempt did (or, for a writer's first
    /// attempt, this client lately found the slot busy or shared; not for a reader's,
    /// which a lock shared by readers grants at once). It goes as a probe, not
    /// confirmed: a waiter's refusals, most of a busy lock's calls, cost no `WAIT`; a
    /// grant it wins is sent again, confirmed, before it is believed (one call more, and
    /// the hold kept on the server a round trip longer than its holder uses it: so only
    /// where a refusal is likely).
    expect_busy: bool,
}

impl<'a, L: Seam> Waiter<'a, L> {
    /// A waiter for `ask` as `owner`, its time starting now.
    fn new(lock: &'a L, owner: Arc<str>, ask: Ask, timeout: Option<Duration>) -> Result<Self> {
        check_owner(&owner)?;
        let began = Instant::now();
        let deadline = timeout.and_then(|t| began.checked_add(t));
        let id = lock.next_hold_id();
        let busy = lock.contended_lately();
        Ok(Waiter {
            lock,
            leftovers: Leftovers {
                raw: lock.clone(),
                owner: owner.clone(),
                id,
                from: ask.upgrade_from(),
                armed: false,
            },
            owner,
            ask,
            timeout,
            began,
            deadline,
            attempt_deadline: deadline.map(|d| d.max(began + FIRST_ATTEMPT)),
            refused: None,
            short_from: began.checked_sub(SHORT_BEFORE).unwrap_or(began),
            id,
            id_since: began,
            sub: None,
            handed_to_me: false,
            busy,
            expect_busy: busy && ask == Ask::Hold(Mode::Write),
        })
    }

    /// Joins the lock's release messages, unless joined already; `false` when the wait
    /// must give up (its time ran out while joining, after the first attempt).
    ///
    /// A join that outlasts the first attempt's time does not stop it: the attempt goes
    /// without a subscription. The first join leaves the first attempt FIRST_ATTEMPT of
    /// the caller's time, so that the two together end by the caller's deadline (or
    /// FIRST_ATTEMPT after the start, for a shorter timeout). A refusal then either ends
    /// the wait (its time ran out) or is followed by a join and another attempt after
    /// it, which finds any release the join might have missed.
    async fn joined(&mut self, first: bool) -> bool {
        if self.sub.is_some() {
            return true;
        }
        let Some(join) = self.lock.join() else {
            return true;
        };
        let join_deadline = match self.attempt_deadline {
            Some(d) if first => Some(
                d.checked_sub(FIRST_ATTEMPT)
                    .unwrap_or(self.began)
                    .max(self.began),
            ),
            other => other,
        };
        match within(join_deadline, join).await {
            Some(joined) => self.sub = Some(joined),
            None if first => {}
            None => return false,
        }
        if first {
            // the first attempt's call is made in full whatever the join took
            self.attempt_deadline = self.deadline.map(|d| d.max(Instant::now() + FIRST_ATTEMPT));
        }
        true
    }

    /// How the next attempt goes. (An upgrade, rare, is always confirmed.)
    fn next_intent(&self) -> Intent {
        if self.expect_busy && matches!(self.ask, Ask::Hold(_)) && self.lock.confirms() {
            Intent::Probe
        } else if self.handed_to_me
            && self.ask == Ask::Hold(Mode::Write)
            && self.id_since.elapsed() < self.lock.lease() / TAKE_WITHIN
        {
            Intent::Take
        } else if self.busy {
            Intent::WaitBusy
        } else {
            Intent::Wait
        }
    }

    /// Takes in an attempt's verdict: what to do next.
    fn absorb(&mut self, verdict: Result<Verdict>) -> Next {
        self.attempt_deadline = self.deadline;
        self.expect_busy = true;
        match verdict {
            Ok(Verdict::Granted(hold)) => {
                self.leftovers.armed = false;
                if self.handed_to_me {
                    observe::handed_over(self.lock.name(), hold.fence);
                }
                Next::Granted(hold)
            }
            Ok(Verdict::Taken(hold)) => {
                // (a take follows a message that handed the lock to this waiter) its
                // lease counts from the first attempt under its id
                self.leftovers.armed = false;
                observe::handed_over(self.lock.name(), hold.fence);
                Next::Granted(Acquired {
                    sent: self.id_since,
                    ..hold
                })
            }
            Ok(Verdict::Unconfirmed) => {
                // the same attempt (the same hold id: the function finds the hold and
                // writes it again) at once, confirmed; its lease counts from then. Its
                // confirmation is part of the attempt that won the grant, made in full
                // as a first attempt is (see FIRST_ATTEMPT): a grant won in time is not
                // thrown away because the deadline passed meanwhile
                self.expect_busy = false;
                self.attempt_deadline =
                    self.deadline.map(|d| d.max(Instant::now() + FIRST_ATTEMPT));
                Next::AttemptAgain
            }
            Ok(Verdict::Busy(wait_ms)) => {
                self.busy = true;
                // a place in the queue is kept (and a writer may be handed the lock)
                // until it withdraws
                self.leftovers.armed = true;
                // a queue entry lives one lease: come back before it lapses
                Next::Wait(Duration::from_millis(wait_ms).min(self.lock.lease() / 3))
            }
            // a failover or reconnect in progress, or a replica that is not in sync
            // yet (restarted, catching up): try again while time is left (the grant
            // the replicas did not confirm was undone)
            Err(
                e @ (Error::Server(_)
                | Error::Connection(_)
                | Error::Unavailable(_)
                | Error::NotReplicated { .. }),
            ) if self.deadline.is_some() => {
                self.expect_busy = false;
                if matches!(e, Error::NotReplicated { .. }) {
                    // the undo of that grant runs in the background: a retry under
                    // the same id could be granted and then undone by it
                    self.id = self.lock.next_hold_id();
                    self.id_since = Instant::now();
                    self.leftovers.id = self.id;
                    self.handed_to_me = false;
                    self.refused = Some(e);
                }
                Next::Wait(ERROR_BACKOFF)
            }
            Err(e) => Next::Failed(e),
        }
    }

    /// Until when to wait `wait`, never past the deadline; `None` when the deadline has
    /// passed (the wait gives up).
    fn until(&self, wait: Duration) -> Option<Instant> {
        let now = Instant::now();
        match self.deadline {
            Some(d) if now >= d => None,
            Some(d) => Some((now + wait).min(d)),
            None => Some(now + wait),
        }
    }

    /// Sleeps until `until`, or until a release message that concerns this waiter; a
    /// message that broke this waiter's client ends the wait with [`Error::Broken`].
    async fn sleep_until(&mut self, until: Instant) -> Result<()> {
        let write = self.ask.writes();
        let Some(s) = self.sub.as_mut().filter(|s| s.is_live()) else {
            let retry = Instant::now() + self.lock.config().retry_interval;
            tokio::time::sleep_until(until.min(retry)).await;
            return Ok(());
        };
        let mut until = until;
        let woken = loop {
            tokio::select! {
                w = s.next() => {
                    if w.concerns(write, &self.owner) {
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
        if let Some(client) = woken.as_ref().and_then(|w| w.broke(&self.owner)) {
            return Err(Error::Broken {
                client: client.to_string(),
            });
        }
        // a message that concerns this waiter: its next attempt may well be a grant
        self.expect_busy &= woken.is_none();
        if let Some(Wake::Granted { id: handed, .. }) = woken {
            // the releaser handed the lock to this waiter: the message only
            // wakes it. The next attempt, under the same id, finds the hold on
            // the node that serves the slot now and is a grant like any other:
            // its fence from the server, its lease counted from its own send
            // time, confirmed by the replicas. A message alone proves nothing
            // (a master that lost the slot, thawed, may still publish).
            self.handed_to_me |= handed == self.id;
        }
        Ok(())
    }

    /// Whether the caller's deadline has passed.
    fn past_deadline(&self) -> bool {
        self.deadline.is_some_and(|d| Instant::now() >= d)
    }

    /// Ends the wait: what is left goes back (an upgrade's at once, see `settle`), and
    /// the error says why the wait ended: the replicas' refusal, or confirmations that
    /// fell short on the lock's master, or the timeout.
    async fn give_up(&mut self) -> Error {
        match self.leftovers.settle().await {
            Ok(()) => self
                .refused
                .take()
                .or_else(|| self.lock.short_since(self.short_from))
                .unwrap_or_else(|| Error::Timeout(self.timeout.unwrap_or_default())),
            Err(e) => e,
        }
    }
}
