//! Lease renewal: one task per client renews every held lock every third of its lease
//! (a lock handle may have a lease of its own), and every lock at once when the slot map
//! changes, in one pipeline per node (one round trip per master,
//! whatever the number of locks). What it finds goes to the renewal book (`book`),
//! which says when a hold is lost.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::time::Instant;

use crate::cluster::node::Node;
use crate::cluster::vouch::Vouch;
use crate::error::Result;
use crate::scripts::{RenewItem, Renewed};
use crate::shared::{CallKind, Shared};

/// Starts the client's renewal task (once). It wakes every third of the shortest lease
/// of its holds and renews those due (a third of their own lease after their last
/// renewal was sent, before its next wake-up), and renews every hold at once when the
/// slot map changes (a failover, a slot move): a hold the new owner of its slot does not
/// have is then reported lost within a round trip, not a renewal period later.
pub(crate) fn start(inner: &Arc<Shared>) {
    let weak = Arc::downgrade(inner);
    let mut routes = inner.cluster.router.subscribe();
    let book = inner.book.clone();
    let mut period = book.period();
    inner.runtime.spawn(async move {
        let mut next = Instant::now() + period;
        // a round of every hold asked for by then (see `Book::hurry`)
        let mut hurry: Option<Instant> = None;
        loop {
            let every_hold = tokio::select! {
                _ = tokio::time::sleep_until(next) => false,
                changed = routes.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    true
                }
                // a hold of a shorter lease: wake at its pace from now on
                _ = book.shortened.notified() => {
                    period = book.period();
                    next = next.min(Instant::now() + period);
                    continue;
                }
                // a hold believed on the other masters' word: wake before it runs out
                _ = book.hurried.notified() => {
                    if let Some(by) = book.take_hurry() {
                        hurry = Some(hurry.map_or(by, |h: Instant| h.min(by)));
                    }
                    continue;
                }
                _ = sleep_until_some(hurry) => {
                    hurry = None;
                    true
                }
            };
            let Some(inner) = Weak::upgrade(&weak) else {
                return;
            };
            if inner.closed() {
                return;
            }
            // (a hold of a shorter lease than any before shortens the period from now on)
            period = inner.book.period();
            let now = Instant::now();
            if !every_hold {
                next = now + period;
            }
            let due = (!every_hold).then_some(now + period);
            renew_round(&inner, period, due).await;
        }
    });
}

/// Sleeps until `at`, or for ever.
async fn sleep_until_some(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Renews `items` within `budget`: one pipeline per node, all nodes at once, so that a
/// node that does not answer delays only its own locks; an item whose pipeline failed
/// (a library missing, a node that hung or lost its slots) is renewed again on its own, routed
/// afresh, with the time left.
async fn renew_all(
    inner: &Arc<Shared>,
    items: Vec<RenewItem>,
    budget: Duration,
) -> Vec<crate::error::Result<Renewed>> {
    let deadline = Instant::now() + budget;
    let router = &inner.cluster.router;
    let slots: &Vec<u16> = &items
        .iter()
        .map(|i| crate::slot::key_slot(i.key.as_bytes()))
        .collect::<Vec<u16>>();
    // group by node
    let mut groups: HashMap<String, (Arc<crate::cluster::node::Node>, Vec<usize>)> = HashMap::new();
    for (i, slot) in slots.iter().enumerate() {
        if let Some(node) = router.node_for(*slot) {
            groups
                .entry(node.addr.clone())
                .or_insert_with(|| (node.clone(), Vec::new()))
                .1
                .push(i);
        }
    }
    let mut out: Vec<Option<crate::error::Result<Renewed>>> =
        (0..items.len()).map(|_| None).collect();
    let batches = groups.into_values().map(|(node, idx)| {
        let batch: Vec<RenewItem> = idx.iter().map(|&i| items[i].clone()).collect();
        async move {
            // the slot's connection: WAIT counts the writes of the connection it is sent on
            let pipeline = renew_batch(inner, &node, slots[idx[0]], &batch, deadline);
            let replies = tokio::time::timeout_at(deadline, pipeline).await;
            if replies.is_err() {
                router.raise_alarm();
            }
            (idx, replies.unwrap_or_default())
        }
    });
    for (idx, replies) in futures_util::future::join_all(batches).await {
        for (i, reply) in idx.into_iter().zip(replies) {
            out[i] = Some(reply);
        }
    }
    // what failed or was not sent: once more each, routed afresh
    // (not those the replicas did not confirm: once more would only wait again)
    let again = out.iter().enumerate().filter_map(|(i, r)| match r {
        Some(Ok(_)) | Some(Err(crate::error::Error::NotReplicated { .. })) => None,
        _ => Some(i),
    });
    let retries = again.map(|i| {
        let item = &items[i];
        let owners: Vec<(&str, &[u64])> = item
            .owners
            .iter()
            .map(|(o, ids)| (o.as_str(), ids.as_slice()))
            .collect();
        let left = deadline.saturating_duration_since(Instant::now());
        async move {
            let reply = renew(inner, &item.key, left, item.lease_ms, &owners, deadline).await;
            (i, reply)
        }
    });
    for (i, reply) in futures_util::future::join_all(retries).await {
        out[i] = Some(reply);
    }
    out.into_iter()
        .map(|r| r.unwrap_or(Err(crate::error::Error::Closed)))
        .collect()
}

/// Owners of one lock renewed by one function call, at most.
const RENEW_CHUNK: usize = 500;

/// One renewal round over every held lock, or with `due`, over the holds due for
/// renewal by then.
async fn renew_round(inner: &Arc<Shared>, budget: Duration, due: Option<Instant>) {
    let book = &inner.book;
    // at most RENEW_CHUNK owners per function call: none holds the server for long
    let snapshot = book.snapshot(RENEW_CHUNK, due);
    if !snapshot.is_empty() {
        book.rounds.fetch_add(1, Ordering::Relaxed);
        let locks: std::collections::HashSet<&Arc<str>> = snapshot.iter().map(|r| &r.key).collect();
        book.renewals
            .fetch_add(locks.len() as u64, Ordering::Relaxed);
        let items: Vec<RenewItem> = snapshot
            .iter()
            .map(|r| RenewItem {
                key: r.key.to_string(),
                lease_ms: u64::try_from(r.lease.as_millis()).unwrap_or(u64::MAX),
                owners: r
                    .owners
                    .iter()
                    .map(|(o, ids)| (o.to_string(), ids.clone()))
                    .collect(),
            })
            .collect();
        let sent = Instant::now();
        let replies = renew_all(inner, items, budget).await;
        let mut failed = 0;
        for (of, reply) in snapshot.iter().zip(replies) {
            match reply {
                Ok(r) => book.renewed(of, r.present, sent, r.replaceable_after),
                Err(_) => failed += 1,
            }
        }
        crate::observe::renewal_round(snapshot.len(), failed, sent.elapsed());
    }
    book.expire(Instant::now());
}

/// Renews the holds `owners` name on lock `key` (`lua/renew.lua`), confirmed, never
/// past `deadline`, following the cluster for at most `budget`: for each owner, the
/// ids renewed.
async fn renew(
    inner: &Shared,
    key: &str,
    budget: Duration,
    lease_ms: u64,
    owners: &[(&str, &[u64])],
    deadline: Instant,
) -> Result<Renewed> {
    let slot = crate::slot::key_slot(key.as_bytes());
    inner
        .call_within(slot, budget, |c| async move {
            let on = inner.on(&c, key, CallKind::Renew, Some(deadline));
            inner.scripts.renew(on, lease_ms, owners).await
        })
        .await
}

/// Renews `items`, locks of `node`, in one pipeline on the connection of `slot`
/// (`WAIT` counts the writes of the connection it is sent on), confirmed, never past
/// `deadline`: a result per item.
async fn renew_batch(
    inner: &Shared,
    node: &Node,
    slot: u16,
    items: &[RenewItem],
    deadline: Instant,
) -> Vec<Result<Renewed>> {
    let confirm = inner.confirm(CallKind::Renew, slot, Some(deadline));
    // a renewal whose WAIT falls short asks the other masters (see `cluster::vouch`)
    let vouch = confirm.map(|_| Vouch {
        router: &inner.cluster.router,
        master: &node.addr,
    });
    inner
        .scripts
        .renew_pipeline(node.lane(slot), &inner.counters, items, confirm, vouch)
        .await
}
