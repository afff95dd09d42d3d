//! The function calls that are not about one lock of the caller's, at the raw lock's
//! level and through the same door ([`Shared::on`] and [`Shared::confirm`], whose
//! confirmation [`Op`] decides): the fenced store's write, and the renewals of the
//! client's renewal task (one lock's, or a node's batch in one pipeline).

use std::time::Duration;

use tokio::time::Instant;

use crate::cluster::node::Node;
use crate::error::Result;
use crate::scripts::RenewItem;
use crate::shared::{Op, Shared};

/// Stores `value` at `key` with `fence` unless a higher fence wrote there
/// (`lua/fenced_set.lua`), confirmed: whether it was written, and the fence that wrote
/// last.
pub async fn fenced_set(
    inner: &Shared,
    key: &str,
    fence: u64,
    value: &[u8],
) -> Result<(bool, u64)> {
    let slot = crate::slot::key_slot(key.as_bytes());
    inner
        .call(slot, |c| async move {
            let on = inner.on(&c, key, Op::FencedSet, None);
            inner.scripts.fenced_set(on, fence, value).await
        })
        .await
}

/// Renews the holds `owners` name on lock `key` (`lua/renew.lua`), confirmed, never
/// past `deadline`, following the cluster for at most `budget`: for each owner, the
/// ids renewed.
pub async fn renew(
    inner: &Shared,
    key: &str,
    budget: Duration,
    lease_ms: u64,
    owners: &[(&str, &[u64])],
    deadline: Instant,
) -> Result<Vec<Vec<u64>>> {
    let slot = crate::slot::key_slot(key.as_bytes());
    inner
        .call_within(slot, budget, |c| async move {
            let on = inner.on(&c, key, Op::Renew, Some(deadline));
            inner.scripts.renew(on, lease_ms, owners).await
        })
        .await
}

/// Renews `items`, locks of `node`, in one pipeline on the connection of `slot`
/// (`WAIT` counts the writes of the connection it is sent on), confirmed, never past
/// `deadline`: a result per item.
pub async fn renew_batch(
    inner: &Shared,
    node: &Node,
    slot: u16,
    items: &[RenewItem],
    deadline: Instant,
) -> Vec<Result<Vec<Vec<u64>>>> {
    let confirm = inner.confirm(Op::Renew, slot, Some(deadline));
    inner
        .scripts
        .renew_pipeline(node.lane(slot), &inner.counters, items, confirm)
        .await
}
