//! `Hold`: one granted hold, renewed while it lives, given back when dropped. The only
//! way the guards reach the lock: each guard method is one call here and a wrap; a hold
//! reaches Redis only through [`RawLock`], and waits through the policy in `acquire`.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::acquire::{self, Acquired, Ask};
use crate::book::HoldState;
use crate::error::{Error, Result};
use crate::mode::Mode;
use crate::observe;
use crate::raw::{GiveBack, RawLock};
use crate::scripts::Others;

/// How long an upgrade waits for the plain readers to leave.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Patience {
    /// One attempt.
    Once,
    /// As long as it takes (`None`), or at most this long.
    Wait(Option<Duration>),
}

/// One hold in Redis; gives itself back when dropped.
pub(crate) struct Hold {
    /// The lock it holds.
    raw: RawLock,
    /// The owner token it was taken as.
    owner: Arc<str>,
    id: u64,
    fence: u64,
    mode: Mode,
    state: Arc<HoldState>,
    /// Released (or handed over): nothing left to give back.
    done: bool,
    /// When the grant was sent (for the hold-time metric).
    granted: Instant,
    /// The grant said that others held or waited (the release skips the fast path).
    others: Others,
}

impl Hold {
    /// Waits for a new hold of `mode` for `owner`, at most `timeout` (`None`: as long as
    /// it takes).
    pub async fn acquire(
        raw: &RawLock,
        owner: Arc<str>,
        mode: Mode,
        timeout: Option<Duration>,
    ) -> Result<Hold> {
        let granted = acquire::wait(raw, owner.clone(), Ask::Hold(mode), timeout).await?;
        Ok(Hold::new(raw.clone(), owner, granted))
    }

    /// One attempt at a new hold of `mode` for `owner`: `None` when the lock is busy.
    /// With `gather`, the attempt goes in the batch it builds (see
    /// [`Gather`](crate::cluster::lane::Gather)).
    pub async fn try_acquire(
        raw: &RawLock,
        owner: Arc<str>,
        mode: Mode,
        gather: Option<Arc<crate::cluster::lane::Gather>>,
    ) -> Result<Option<Hold>> {
        let gathered = gather.map(|gather| raw.gathered(gather));
        let lock = gathered.as_ref().unwrap_or(raw);
        let granted = acquire::try_once(lock, owner.clone(), Ask::Hold(mode)).await?;
        Ok(granted.map(|g| Hold::new(raw.clone(), owner, g)))
    }

    /// Another hold of `mode` as this hold's owner: granted at once while this one
    /// lives (reentrancy).
    pub async fn again(&self, mode: Mode) -> Result<Hold> {
        if self.state.is_lost() {
            return Err(Error::LockLost);
        }
        match self
            .heard(acquire::try_once(&self.raw, self.owner.clone(), Ask::Again(mode)).await)?
        {
            Some(g) => Ok(Hold::new(self.raw.clone(), self.owner.clone(), g)),
            // the owner holds nothing any more: this hold is gone
            None => {
                self.gone();
                Err(Error::LockLost)
            }
        }
    }

    /// This upgradable hold made a write hold: `Ok(write)`, or `Err(self)` back,
    /// unchanged, when the plain readers did not leave within `patience`. On an error the
    /// upgradable hold is given up (released in the background).
    pub async fn upgrade(self, patience: Patience) -> Result<std::result::Result<Hold, Hold>> {
        let ask = Ask::Upgrade { from: self.id };
        // a renewal that misses the upgradable hold while it turns into the write hold
        // does not count it lost
        self.state.set_converting(true);
        let outcome = match patience {
            Patience::Once => acquire::try_once(&self.raw, self.owner.clone(), ask).await,
            Patience::Wait(timeout) => {
                match acquire::wait(&self.raw, self.owner.clone(), ask, timeout).await {
                    Ok(g) => Ok(Some(g)),
                    // the pending upgrade was withdrawn before the timeout came back:
                    // the upgradable hold is intact
                    Err(Error::Timeout(_)) => Ok(None),
                    Err(e) => Err(e),
                }
            }
        };
        match self.heard(outcome)? {
            Some(g) => {
                let write = Hold::new(self.raw.clone(), self.owner.clone(), g);
                self.upgraded(write).map(Ok)
            }
            None => {
                self.state.set_converting(false);
                Ok(Err(self))
            }
        }
    }

    /// A hold granted by `granted` (and confirmed as the configuration says): believed
    /// for a lease, or the lease left that the grant said (a hold handed over while
    /// queued), less the clock margin, from the moment its call was sent; renewed from
    /// now on.
    fn new(raw: RawLock, owner: Arc<str>, granted: Acquired) -> Hold {
        let lease = match granted.left {
            Some(ms) => Duration::from_millis(u64::from(ms.get())).min(raw.lease()),
            None => raw.lease(),
        };
        let book = raw.book();
        let until = match granted.replaceable_after {
            None => book.belief(granted.sent, lease),
            // (the margin of the handle's whole lease, as the attempt that kept it)
            Some(at) => {
                let until = book
                    .vouched_belief(granted.sent, raw.lease(), at)
                    .min(book.belief(granted.sent, lease));
                book.hurry(until);
                until
            }
        };
        Hold::believed_until(raw, owner, granted, until)
    }

    /// A hold that may be believed until `until` and no longer, unless a renewal is
    /// confirmed.
    fn believed_until(raw: RawLock, owner: Arc<str>, granted: Acquired, until: Instant) -> Hold {
        let state = HoldState::new(until);
        renew_from_now_on(&raw, &owner, granted.id, state.clone());
        observe::held(|| raw.book().held());
        Hold {
            raw,
            owner,
            id: granted.id,
            fence: granted.fence,
            mode: granted.mode,
            state,
            done: false,
            granted: granted.sent,
            others: granted.others,
        }
    }

    /// The fencing token of the grant.
    pub fn fence(&self) -> u64 {
        self.fence
    }

    /// The mode of the hold.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The owner token it was taken as.
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// Whether its lease was lost (or may have been).
    pub fn is_lost(&self) -> bool {
        self.state.is_lost()
    }

    /// Its lease state, for a signal that outlives the hold.
    pub fn state(&self) -> Arc<HoldState> {
        self.state.clone()
    }

    /// Runs guarded commands (see `lua/guarded.lua`) under this hold.
    pub async fn guarded(
        &self,
        call: &crate::scripts::GuardedCall<'_>,
    ) -> Result<crate::scripts::GuardedReply> {
        let reply = self.raw.guarded(&self.owner, self.id, call).await;
        self.heard(reply)
    }

    /// `reply`, of a call made under this hold: when it is the server's word that the
    /// hold is gone ([`Error::LockLost`]), the hold is lost at once (see
    /// [`gone`](Self::gone)).
    fn heard<T>(&self, reply: Result<T>) -> Result<T> {
        if matches!(reply, Err(Error::LockLost)) {
            self.gone();
        }
        reply
    }

    /// The server said this hold is gone: lost now (its signal fires), not at the next
    /// renewal, which would only find the same, up to a third of a lease later; and not
    /// renewed any more.
    fn gone(&self) {
        self.stop_renewing();
        if self.state.mark_lost() {
            observe::lost(
                self.raw.key(),
                &self.owner,
                "a call made under the hold found it gone",
            );
        }
    }

    fn observe_release(&self, ok: bool) {
        let label_name = self.raw.config().metrics_lock_names;
        observe::released(
            self.raw.name(),
            label_name,
            self.mode,
            self.granted.elapsed(),
            ok,
        );
    }

    /// Stops renewing and hands responsibility to the caller.
    fn forget(&mut self) {
        self.done = true;
        self.stop_renewing();
    }

    fn stop_renewing(&self) {
        self.raw.book().remove(self.raw.key(), &self.owner, self.id);
        observe::held(|| self.raw.book().held());
    }

    pub async fn release(mut self) -> Result<()> {
        // not done until the release is: a release cancelled half way is finished by
        // `drop` (releasing twice is harmless: the second finds nothing)
        self.stop_renewing();
        let lost = self.state.is_lost();
        // followed through failovers for up to a lease: after that the hold is gone anyway
        let released = self
            .raw
            .give_back(
                &self.owner,
                GiveBack::Held {
                    id: self.id,
                    fence: self.fence,
                    believed_until: self.state.until(),
                    others: self.others,
                },
            )
            .await;
        self.done = true;
        let released = released?;
        // a reply that came after the hold's believed end proves nothing: the server's
        // lease may have run out before the release ran (its fast path gives back a lone
        // hold without reading the clock: docs/PROTOCOL.md, rule 4)
        let lost = lost || self.state.is_lost() || Instant::now() >= self.state.until();
        self.observe_release(released && !lost);
        if released && !lost {
            Ok(())
        } else {
            self.state.mark_lost();
            Err(Error::LockLost)
        }
    }

    /// Turns this hold into a hold of the weaker `mode` in one step (see
    /// `lua/downgrade.lua`).
    ///
    /// The new hold is believed no longer than this one was: the downgrade is not
    /// confirmed by the replicas (a replica that misses it keeps the stronger hold, with
    /// the deadline of its last confirmed grant or renewal), so only the next confirmed
    /// renewal of the new hold moves its belief on.
    ///
    /// Never leaves a hold on the server that nobody renews or gives back: from the
    /// sending until its reply is made a `Hold`, the new hold is the call's
    /// [`Unclaimed`] hold, given back when the call ends otherwise (an error that does
    /// not say whether the function ran, a cancelled future, a lease lost meanwhile).
    pub async fn downgrade(mut self, mode: Mode) -> Result<Hold> {
        let raw = self.raw.clone();
        let owner = self.owner.clone();
        let to = raw.next_hold_id();
        let mut unclaimed = Unclaimed {
            raw: raw.clone(),
            owner: owner.clone(),
            id: to,
            armed: true,
        };
        let sent = Instant::now();
        // sent again through timeouts and failovers: a retry finds the hold the first
        // call made
        self.state.set_converting(true);
        let fence = self.heard(raw.downgrade(&owner, self.id, to, mode).await)?;
        // read after the reply: a renewal confirmed meanwhile moved it on
        let until = self.state.until();
        self.forget();
        match fence {
            Some(fence) if !self.state.is_lost() => {
                unclaimed.armed = false;
                let granted = Acquired {
                    id: to,
                    fence,
                    mode,
                    sent,
                    others: self.others,
                    left: None,
                    replaceable_after: None,
                };
                Ok(Hold::believed_until(raw, owner, granted, until))
            }
            Some(_) => {
                // the lease had been lost: do not hand out a hold nobody protected (given
                // back in the background by `unclaimed`: the caller learns it was lost
                // at once)
                Err(Error::LockLost)
            }
            None => {
                unclaimed.armed = false;
                self.gone();
                Err(Error::LockLost)
            }
        }
    }

    /// This upgradable hold made a write hold (`write` came from it): stop renewing it,
    /// unless its lease had been lost, in which case the write hold goes too (in the
    /// background: the caller learns it was lost at once).
    fn upgraded(mut self, write: Hold) -> Result<Hold> {
        self.forget();
        if self.state.is_lost() {
            drop(write);
            return Err(Error::LockLost);
        }
        Ok(write)
    }
}

/// Gives hold `id` of `owner` back in the background, following the cluster for a
/// lease at most (`others`: as the grant said).
fn give_back(raw: RawLock, owner: Arc<str>, id: u64, others: Others) {
    raw.give_back_later(
        owner,
        GiveBack::Held {
            id,
            fence: 0,
            believed_until: Instant::now(),
            others,
        },
    );
}

/// The hold a downgrade makes, from the sending of its call until its reply is made a
/// [`Hold`]: when the call ends otherwise (an error after the function may have run, its
/// reply lost; a cancelled future; a lease lost meanwhile), it is given back in the
/// background as an acquire's leftovers are (withdrawn through the lock's lane, after
/// the downgrade, so that it never overtakes it), followed for up to a lease. Never a
/// hold on the server that nobody renews or gives back.
struct Unclaimed {
    raw: RawLock,
    owner: Arc<str>,
    id: u64,
    armed: bool,
}

impl Drop for Unclaimed {
    fn drop(&mut self) {
        if self.armed {
            self.raw.give_back_later(
                self.owner.clone(),
                GiveBack::Attempt {
                    id: self.id,
                    from: None,
                },
            );
        }
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        self.forget();
        self.observe_release(true);
        give_back(self.raw.clone(), self.owner.clone(), self.id, self.others);
    }
}
/// Starts renewing hold `id` of `owner` on `raw`'s lock, believed as `state` says (and
/// the client's renewal task, for its first hold).
fn renew_from_now_on(raw: &RawLock, owner: &Arc<str>, id: u64, state: Arc<HoldState>) {
    if raw.book().add(raw.key(), owner, id, state, raw.lease()) {
        crate::renewal::start(raw.shared());
    }
}
