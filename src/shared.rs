//! What every lock of a client shares: the cluster's connections and subscriptions, the
//! function library, the renewal book, the counters and the configuration.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use fred::prelude::*;

use crate::book::Book;
use crate::cluster::notify::Notifier;
use crate::cluster::router::Link;
use crate::cluster::topology::UNKNOWN;
use crate::cluster::vouch::Vouch;
use crate::cluster::Cluster;
use crate::config::{Durability, LockConfig};
use crate::error::Result;
use crate::scripts::{Confirm, Counters, On, Scripts, Target};
use tokio::time::Instant;

/// Every function call, by what it does. Which of them count only once the replicas have
/// their writes is decided here, once ([`CallKind::confirmed`]), for every caller: the raw
/// lock, the renewals and the fenced store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CallKind {
    Acquire,
    /// An attempt expected to find the lock busy (a waiter's, after an attempt that
    /// did, with no release message since; a writer's first, on a slot found busy or
    /// shared lately): not confirmed, so that a refusal costs no `WAIT`. A grant it wins
    /// is not believed: the waiting policy sends the same attempt again, confirmed (see
    /// `acquire`).
    Probe,
    Upgrade,
    Downgrade,
    Release,
    Withdraw,
    Renew,
    Guarded,
    FencedSet,
    ForceRelease,
    State,
}

impl CallKind {
    /// The op of an acquire attempt of `intent`: a probe's, or an acquire's.
    pub fn of_attempt(intent: crate::scripts::Intent) -> CallKind {
        match intent {
            crate::scripts::Intent::Probe => CallKind::Probe,
            _ => CallKind::Acquire,
        }
    }

    /// Whether the call's writes are confirmed by the replicas (see
    /// [`Shared::confirm_with`]): what a holder or a writer believes on its answer (a
    /// grant, a renewal, a guarded or fenced write). Gives-back are not: a replica that
    /// misses one keeps more holds, never fewer; a downgrade keeps the stronger hold; a
    /// state only reads.
    pub fn confirmed(self) -> bool {
        match self {
            CallKind::Acquire
            | CallKind::Upgrade
            | CallKind::Renew
            | CallKind::Guarded
            | CallKind::FencedSet => true,
            CallKind::Probe
            | CallKind::Downgrade
            | CallKind::Release
            | CallKind::Withdraw
            | CallKind::ForceRelease
            | CallKind::State => false,
        }
    }

    /// Whether a call that its replicas did not confirm may be believed for a while on
    /// the other masters' word (see `cluster::vouch`): a grant or a renewal, which a
    /// holder believes for a bounded time. Not a guarded or fenced write: what it wrote
    /// is lost for good if the replica is promoted, however late.
    pub fn vouched(self) -> bool {
        matches!(
            self,
            CallKind::Acquire | CallKind::Upgrade | CallKind::Renew
        )
    }
}

/// The state a [`LockClient`](crate::LockClient) and all its locks share.
pub(crate) struct Shared {
    /// Connections per node, the slot map and the release subscriptions.
    pub cluster: Arc<Cluster>,
    pub scripts: Scripts,
    pub counters: Counters,
    pub book: Arc<Book>,
    pub config: LockConfig,
    pub runtime: tokio::runtime::Handle,
    /// A cluster-aware fred client for diagnostics ([`LockClient::redis`](crate::LockClient::redis)), connected on
    /// first use; the lock never uses it.
    pub diagnostics: Client,
    pub diagnostics_started: std::sync::Once,
    pub next_hold: AtomicU64,
    /// Slots where a lock was lately found busy or shared.
    pub contention: crate::contention::Contention,
    /// Give-backs running in the background, which `close` sends before it closes.
    pub pending: Arc<crate::pending::Pending>,
}

impl Shared {
    /// Script call `op` about lock `key` on `link` (a connection to the node that serves
    /// its slot, or the target of an `ASK`), confirmed as `op` says, by the replicas of
    /// THAT node, never past `deadline` (see [`confirm_with`](Self::confirm_with)).
    pub fn on<'a>(
        &'a self,
        link: &'a Link,
        key: &'a str,
        op: CallKind,
        deadline: Option<Instant>,
    ) -> On<'a> {
        let mut confirm = if op.confirmed() {
            self.confirm_with(link.replicas, deadline)
        } else {
            None
        };
        // a grant or a renewal whose WAIT falls short asks the other masters how soon
        // its master could be replaced (see `cluster::vouch`)
        let vouch = (confirm.is_some() && op.vouched()).then_some(Vouch {
            router: &self.cluster.router,
            master: &link.node.addr,
        });
        if let Some(v) = vouch {
            v.shorten(&mut confirm);
        }
        On {
            client: &link.client,
            lane: &link.lane,
            direct: self.config.durability == Durability::MasterOnly,
            asking: link.asking,
            counters: &self.counters,
            target: Target { key, confirm },
            gather: None,
            vouch,
        }
    }

    /// A hold id no other hold of this process has; the random start keeps ids apart
    /// from other processes that use the same explicit owner token.
    pub fn next_hold_id(&self) -> u64 {
        self.next_hold.fetch_add(1, Ordering::Relaxed)
    }

    /// The release subscriptions, unless notifications are off.
    pub fn notifier(&self) -> Option<&Arc<Notifier>> {
        self.cluster.notifier.as_ref()
    }

    /// Sends a command for a lock in `slot` to the node that serves it, following the
    /// cluster for at most the command timeout.
    pub async fn call<T, F, Fut>(&self, slot: u16, op: F) -> Result<T>
    where
        F: FnMut(Link) -> Fut,
        Fut: std::future::Future<Output = Result<T>>,
    {
        self.call_within(slot, self.config.command_timeout, op)
            .await
    }

    /// As [`call`](Self::call), within `budget`.
    pub async fn call_within<T, F, Fut>(&self, slot: u16, budget: Duration, op: F) -> Result<T>
    where
        F: FnMut(Link) -> Fut,
        Fut: std::future::Future<Output = Result<T>>,
    {
        // boxed: the routing loop holds the client's futures; behind a box the futures of
        // the acquires above it hold one pointer instead of their layout
        Box::pin(self.cluster.router.call(slot, budget, op)).await
    }

    pub fn closed(&self) -> bool {
        self.cluster.closed()
    }

    /// How function call `op` on a lock in `slot` is confirmed (see [`Durability`]): the
    /// WAIT to send after it, never past `deadline`; `None` for no WAIT (a call that is
    /// not confirmed, the weaker mode, or a master that has no replica that could be
    /// promoted).
    pub fn confirm(&self, op: CallKind, slot: u16, deadline: Option<Instant>) -> Option<Confirm> {
        if !op.confirmed() {
            return None;
        }
        let router = &self.cluster.router;
        let node = router.node_for(slot);
        let replicas = node
            .as_ref()
            .and_then(|n| n.attached_replicas())
            .unwrap_or_else(|| router.routes().map.replicas_for(slot));
        let mut confirm = self.confirm_with(replicas, deadline);
        if let Some(node) = node.filter(|_| op.vouched()) {
            Vouch {
                router,
                master: &node.addr,
            }
            .shorten(&mut confirm);
        }
        confirm
    }

    /// How a write to a master that has `replicas` replicas that could be promoted (as
    /// the slot map says; [`UNKNOWN`] for a node no view described) is confirmed: as
    /// [`confirm`](Self::confirm).
    pub fn confirm_with(&self, replicas: u32, deadline: Option<Instant>) -> Option<Confirm> {
        let (wanted, timeout, every_attached) = match self.config.durability {
            Durability::MasterOnly => return None,
            Durability::AtLeast {
                replicas: count,
                timeout,
            } => (count, timeout, false),
            // a first guess (a master only a redirect told of: one): the batch reads the
            // master's own count after its WAIT and is confirmed only when every replica
            // it reports attached acknowledged; with none, no WAIT, and the master's word
            // that it has none
            Durability::AllReplicas { timeout } => {
                let n = if replicas == UNKNOWN { 1 } else { replicas };
                (n, timeout, true)
            }
        };
        let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        let timeout = wait_timeout(timeout, left, self.config.command_timeout);
        Some(Confirm {
            wanted,
            timeout_ms: u64::try_from(timeout.as_millis())
                .unwrap_or(u64::MAX)
                .max(1),
            every_attached,
        })
    }
}

/// How long a `WAIT` may block: the durability's timeout, not past the caller's deadline
/// (`left`), and at most three quarters of the command timeout: a `WAIT` that blocks as
/// long as the command timeout would make its batch time out and its connection count as
/// unresponsive and close (failing every other call on it), and the calls it was to
/// confirm would end with an unknown outcome instead of a confirmed or unconfirmed one.
/// The last quarter is for the round trip and the batch's wait in its lane.
fn wait_timeout(timeout: Duration, left: Option<Duration>, command_timeout: Duration) -> Duration {
    let timeout = left.map_or(timeout, |l| timeout.min(l));
    timeout.min(command_timeout - command_timeout / 4)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_never_blocks_past_the_deadline_or_most_of_the_command_timeout() {
        let ms = Duration::from_millis;
        assert_eq!(wait_timeout(ms(500), None, ms(5000)), ms(500));
        assert_eq!(wait_timeout(ms(500), Some(ms(120)), ms(5000)), ms(120));
        assert_eq!(wait_timeout(ms(500), None, ms(300)), ms(225));
        assert_eq!(wait_timeout(ms(6000), Some(ms(9000)), ms(5000)), ms(3750));
    }

    #[test]
    fn what_a_caller_believes_is_confirmed_and_what_gives_back_is_not() {
        for op in [
            CallKind::Acquire,
            CallKind::Upgrade,
            CallKind::Renew,
            CallKind::Guarded,
            CallKind::FencedSet,
        ] {
            assert!(op.confirmed(), "{op:?}");
        }
        for op in [
            CallKind::Probe,
            CallKind::Downgrade,
            CallKind::Release,
            CallKind::Withdraw,
            CallKind::ForceRelease,
            CallKind::State,
        ] {
            assert!(!op.confirmed(), "{op:?}");
        }
    }
}
