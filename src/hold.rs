//! `Hold`: one granted hold, renewed while it lives, given back when dropped; and the
//! check of owner tokens.

use std::sync::Arc;

use tokio::time::Instant;

use crate::error::{Error, Result};
use crate::lease::HoldState;
use crate::mode::Mode;
use crate::observe;
use crate::raw::RawLock;

/// An owner token is 1 to 256 bytes without whitespace (the scripts split on spaces).
pub(crate) fn check_owner(owner: &str) -> Result<()> {
    if owner.is_empty() || owner.len() > 256 || owner.contains(char::is_whitespace) {
        return Err(Error::InvalidOwner(format!(
            "{owner:?}: 1 to 256 bytes without whitespace"
        )));
    }
    Ok(())
}

/// One hold in Redis; gives itself back when dropped.
pub(crate) struct Hold {
    /// The lock it holds.
    pub raw: RawLock,
    /// The owner token it was taken as.
    pub owner: Arc<str>,
    pub id: u64,
    pub fence: u64,
    pub mode: Mode,
    pub state: Arc<HoldState>,
    /// Released (or handed over): nothing left to give back.
    pub done: bool,
    /// When the grant was sent (for the hold-time metric).
    pub granted: Instant,
}

impl Hold {
    /// A hold granted by a call sent at `sent` (and confirmed as the configuration
    /// says): believed for a lease (less the clock margin) from `sent`; renewed from now
    /// on.
    pub fn new(
        raw: RawLock,
        owner: Arc<str>,
        id: u64,
        fence: u64,
        mode: Mode,
        sent: Instant,
    ) -> Hold {
        let until = raw.keeper().belief(sent);
        Hold::believed_until(raw, owner, id, fence, mode, sent, until)
    }

    /// A hold that may be believed until `until` and no longer, unless a renewal is
    /// confirmed; `granted`: when it was asked for (for the hold-time metric).
    fn believed_until(
        raw: RawLock,
        owner: Arc<str>,
        id: u64,
        fence: u64,
        mode: Mode,
        granted: Instant,
        until: Instant,
    ) -> Hold {
        let state = HoldState::new(until);
        raw.renew_from_now_on(&owner, id, state.clone());
        observe::held(raw.keeper().held());
        Hold {
            raw,
            owner,
            id,
            fence,
            mode,
            state,
            done: false,
            granted,
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
    pub fn forget(&mut self) {
        self.done = true;
        self.stop_renewing();
    }

    fn stop_renewing(&self) {
        self.raw
            .keeper()
            .remove(self.raw.key(), &self.owner, self.id);
        observe::held(self.raw.keeper().held());
    }

    pub async fn release(mut self) -> Result<()> {
        // not done until the release is: a release cancelled half way is finished by
        // `drop` (releasing twice is harmless: the second finds nothing)
        self.stop_renewing();
        let lost = self.state.is_lost();
        // followed through failovers for up to a lease: after that the hold is gone anyway
        let released = self
            .raw
            .release(&self.owner, self.id, self.fence, self.raw.release_budget())
            .await;
        self.done = true;
        let released = released?;
        self.observe_release(released && !lost);
        if released && !lost {
            Ok(())
        } else {
            self.state.mark_lost();
            Err(Error::LockLost)
        }
    }

    /// Turns this hold into a hold of `mode` in one step (see `lua/downgrade.lua`).
    ///
    /// The new hold is believed no longer than this one was: the conversion is not
    /// confirmed by the replicas (a replica that misses it keeps the stronger hold, with
    /// the deadline of its last confirmed grant or renewal), so only the next confirmed
    /// renewal of the new hold moves its belief on.
    pub(crate) async fn convert(mut self, mode: Mode) -> Result<Hold> {
        let raw = self.raw.clone();
        let owner = self.owner.clone();
        let to = raw.next_hold_id();
        let sent = Instant::now();
        // sent again through timeouts and failovers: a retry finds the hold the first
        // call made
        self.state.set_converting(true);
        let fence = raw.convert(&owner, self.id, to, mode).await?;
        // read after the reply: a renewal confirmed meanwhile moved it on
        let until = self.state.until();
        self.forget();
        match fence {
            Some(fence) if !self.state.is_lost() => Ok(Hold::believed_until(
                raw, owner, to, fence, mode, sent, until,
            )),
            Some(_) => {
                // the lease had been lost: do not hand out a hold nobody protected (given
                // back in the background: the caller learns it was lost at once)
                give_back(raw, owner, to);
                Err(Error::LockLost)
            }
            None => {
                self.state.mark_lost();
                Err(Error::LockLost)
            }
        }
    }

    /// This upgradable hold made a write hold (`write` came from it): stop renewing it,
    /// unless its lease had been lost, in which case the write hold goes too (in the
    /// background: the caller learns it was lost at once).
    pub(crate) fn upgraded(mut self, write: Hold) -> Result<Hold> {
        self.forget();
        if self.state.is_lost() {
            drop(write);
            return Err(Error::LockLost);
        }
        Ok(write)
    }
}

/// Gives hold `id` of `owner` back in the background, following the cluster for a
/// lease at most.
fn give_back(raw: RawLock, owner: Arc<str>, id: u64) {
    raw.clone().spawn(async move {
        // (what it found does not matter: nobody is told)
        let _ = raw.release(&owner, id, 0, raw.release_budget()).await;
    });
}

impl Drop for Hold {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        self.forget();
        self.observe_release(true);
        give_back(self.raw.clone(), self.owner.clone(), self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_tokens_are_checked() {
        assert!(check_owner("job-17").is_ok());
        assert!(check_owner(&"x".repeat(256)).is_ok());
        assert!(matches!(check_owner(""), Err(Error::InvalidOwner(_))));
        assert!(check_owner(&"x".repeat(257)).is_err());
        assert!(check_owner("a b").is_err());
        assert!(check_owner("a\tb").is_err());
    }
}
