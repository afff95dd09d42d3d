//! A lock as the machinery sees it (`Site`: its key, channel and slot on a client's
//! connections), the raw calls on it, and `Hold`: one granted hold, renewed while it
//! lives, given back when dropped.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::error::{Error, Result};
use crate::keys;
use crate::lease::HoldState;
use crate::mode::Mode;
use crate::observe;
use crate::scripts::Target;
use crate::shared::Inner;
use crate::slot;

/// One lock on one client: what every call for it needs.
#[derive(Clone)]
pub(crate) struct Site {
    pub inner: Arc<Inner>,
    pub name: Arc<str>,
    pub key: Arc<str>,
    pub channel: Arc<str>,
    pub slot: u16,
}

impl Site {
    pub fn new(inner: Arc<Inner>, name: &str) -> Site {
        let key = keys::lock_key(&inner.config.prefix, name);
        let channel = keys::channel(&key);
        Site {
            slot: slot::key_slot(key.as_bytes()),
            inner,
            name: name.into(),
            key: key.into(),
            channel: channel.into(),
        }
    }

    /// Gives back hold `id` of `owner` if it exists and, for a writer, leaves the queue
    /// (or its pending upgrade), in one step. For an upgrade from the upgradable hold
    /// `from`, a write hold `id` granted meanwhile turns back into that hold instead.
    pub(crate) async fn abandon(
        &self,
        owner: &str,
        id: u64,
        write: bool,
        from: Option<u64>,
    ) -> Result<()> {
        let inner = &self.inner;
        let t = self.target();
        if write {
            self.call(|c| async move {
                inner
                    .scripts
                    .withdraw(&c, &inner.counters, &t, owner, id, from)
                    .await
            })
            .await
        } else {
            self.release_hold(owner, id, self.release_budget())
                .await
                .map(|_| ())
        }
    }

    /// How long a release is followed through timeouts and failovers: a lease (a hold not
    /// given back by then has expired), and at least the command timeout.
    pub(crate) fn release_budget(&self) -> Duration {
        let config = &self.inner.config;
        config.lease.max(config.command_timeout)
    }

    /// Gives back hold `id` of `owner`, following the cluster for at most `budget`. True
    /// when released, and also when a sending found nothing after an earlier one whose
    /// outcome is unknown (no reply, a timeout, a connection lost): that one may have
    /// released it, and the caller, which checked its belief deadline before sending,
    /// held it until then.
    pub(crate) async fn release_hold(
        &self,
        owner: &str,
        id: u64,
        budget: Duration,
    ) -> Result<bool> {
        use std::sync::atomic::{AtomicBool, Ordering};
        let inner = &self.inner;
        let t = self.target();
        // a sending is "in flight" until its reply says whether the script ran
        let (in_flight, unsure) = (AtomicBool::new(false), AtomicBool::new(false));
        let released = inner
            .call_within(self.slot, budget, |c| {
                if in_flight.swap(true, Ordering::AcqRel) {
                    unsure.store(true, Ordering::Release);
                }
                let (t, in_flight) = (&t, &in_flight);
                async move {
                    let reply = inner
                        .scripts
                        .release(&c, &inner.counters, t, owner, id)
                        .await;
                    // a redirect: the script did not run there
                    let redirected =
                        matches!(&reply, Err(Error::Redis(e)) if e.is_moved() || e.is_ask());
                    if reply.is_ok() || redirected {
                        in_flight.store(false, Ordering::Release);
                    }
                    reply
                }
            })
            .await?;
        Ok(released || unsure.load(Ordering::Acquire))
    }

    /// Turns hold `from` of `owner` into hold `to` of mode `mode`; its fence, or `None`
    /// when `from` was gone.
    pub(crate) async fn convert_hold(
        &self,
        owner: &str,
        from: u64,
        to: u64,
        mode: Mode,
    ) -> Result<Option<u64>> {
        let inner = &self.inner;
        let t = self.target();
        self.call(|c| async move {
            inner
                .scripts
                .downgrade(
                    &c,
                    &inner.counters,
                    &t,
                    owner,
                    from,
                    to,
                    mode,
                    inner.lease_ms(),
                )
                .await
        })
        .await
    }

    /// Sends a command for this lock to the node that serves its slot (see
    /// [`Router::call`](crate::cluster::router::Router::call)).
    pub(crate) async fn call<T, F, Fut>(&self, op: F) -> Result<T>
    where
        F: FnMut(fred::prelude::Client) -> Fut,
        Fut: std::future::Future<Output = Result<T>>,
    {
        self.inner.call(self.slot, op).await
    }

    /// The lock, for a call whose writes need no confirmation (releases, withdrawals,
    /// downgrades: a replica that misses them keeps more than the master, never less).
    pub(crate) fn target(&self) -> Target<'_> {
        Target {
            key: &self.key,
            confirm: None,
        }
    }

    /// The lock, for a grant or renewal: confirmed by the replicas that could be promoted
    /// (see [`Durability`](crate::Durability)), never past `deadline`.
    pub(crate) fn confirmed_target(&self, deadline: Option<Instant>) -> Target<'_> {
        Target {
            key: &self.key,
            confirm: self.inner.confirm(self.slot, deadline),
        }
    }
}

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
    pub site: Site,
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
    /// A hold granted by a call sent at `sent`; renewed from now on.
    pub fn new(
        site: Site,
        owner: Arc<str>,
        id: u64,
        fence: u64,
        mode: Mode,
        sent: Instant,
    ) -> Hold {
        let state = HoldState::new();
        let inner = &site.inner;
        if inner.keeper.add(&site.key, &owner, id, state.clone(), sent) {
            crate::renewal::start(inner);
        }
        observe::held(inner.keeper.held());
        Hold {
            site,
            owner,
            id,
            fence,
            mode,
            state,
            done: false,
            granted: sent,
        }
    }

    fn observe_release(&self, ok: bool) {
        let label_name = self.site.inner.config.metrics_lock_names;
        observe::released(
            &self.site.name,
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
        self.site
            .inner
            .keeper
            .remove(&self.site.key, &self.owner, self.id);
        observe::held(self.site.inner.keeper.held());
    }

    pub async fn release(mut self) -> Result<()> {
        // not done until the release is: a release cancelled half way is finished by
        // `drop` (releasing twice is harmless: the second finds nothing)
        self.stop_renewing();
        let lost = self.state.is_lost();
        // followed through failovers for up to a lease: after that the hold is gone anyway
        let released = self
            .site
            .release_hold(&self.owner, self.id, self.site.release_budget())
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
    pub(crate) async fn convert(mut self, mode: Mode) -> Result<Hold> {
        let site = self.site.clone();
        let owner = self.owner.clone();
        let to = site.inner.next_hold_id();
        let sent = Instant::now();
        // sent again through timeouts and failovers: a retry finds the hold the first
        // call made
        self.state.set_converting(true);
        let fence = site.convert_hold(&owner, self.id, to, mode).await?;
        self.forget();
        match fence {
            Some(fence) if !self.state.is_lost() => {
                Ok(Hold::new(site, owner, to, fence, mode, sent))
            }
            Some(_) => {
                // the lease had been lost: do not hand out a hold nobody protected
                let _ = site.release_hold(&owner, to, site.release_budget()).await;
                Err(Error::LockLost)
            }
            None => {
                self.state.mark_lost();
                Err(Error::LockLost)
            }
        }
    }

    /// This upgradable hold made a write hold (`write` came from it): stop renewing it,
    /// unless its lease had been lost, in which case the write hold goes too.
    pub(crate) async fn upgraded(mut self, write: Hold) -> Result<Hold> {
        self.forget();
        if self.state.is_lost() {
            let _ = write.release().await;
            return Err(Error::LockLost);
        }
        Ok(write)
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        self.forget();
        self.observe_release(true);
        let (site, owner, id) = (self.site.clone(), self.owner.clone(), self.id);
        site.inner.clone().runtime.spawn(async move {
            let _ = site.release_hold(&owner, id, site.release_budget()).await;
        });
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
