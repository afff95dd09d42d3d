//! Lease renewal: one task per client renews every held lock every lease/3, in one
//! pipeline (one round trip per master, whatever the number of locks), and tells a
//! holder when its lease is lost.
//!
//! A hold is lost when a renewal finds it gone (its lease ran out, or someone deleted
//! it), or when no renewal has succeeded for a whole lease by the local monotonic clock
//! (counted from when the last successful renewal, or the grant, was SENT): from then on
//! another owner may hold the lock, whatever Redis says later.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use crate::client::Inner;
use crate::lock::RwLock;
use crate::scripts::RenewItem;

/// The shared state of one hold: whether it was lost.
#[derive(Debug)]
pub(crate) struct HoldState {
    lost: watch::Sender<bool>,
}

impl HoldState {
    pub fn new() -> Arc<HoldState> {
        Arc::new(HoldState {
            lost: watch::channel(false).0,
        })
    }

    pub fn mark_lost(&self) {
        self.lost.send_replace(true);
    }

    pub fn is_lost(&self) -> bool {
        *self.lost.borrow()
    }

    pub async fn lost(&self) {
        let mut rx = self.lost.subscribe();
        // the sender lives as long as `self`, so this only ends when lost
        let _ = rx.wait_for(|lost| *lost).await;
    }
}

/// Each owner of a lock with the ids of its holds.
type OwnerHolds = Vec<(String, Vec<u64>)>;

struct Owned {
    channel: String,
    /// hold id -> its state
    holds: HashMap<u64, Arc<HoldState>>,
    /// when the lease runs out unless renewed (local monotonic clock)
    valid_until: Instant,
}

/// The holds of one client, by (key, owner).
pub(crate) struct Keeper {
    entries: Mutex<HashMap<(String, String), Owned>>,
    lease: Duration,
    started: std::sync::atomic::AtomicBool,
    /// Renewal rounds and lock renewals sent, for diagnostics.
    pub rounds: AtomicU64,
    pub renewals: AtomicU64,
}

impl Keeper {
    pub fn new(lease: Duration) -> Keeper {
        Keeper {
            entries: Mutex::new(HashMap::new()),
            lease,
            started: std::sync::atomic::AtomicBool::new(false),
            rounds: AtomicU64::new(0),
            renewals: AtomicU64::new(0),
        }
    }

    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), Owned>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts renewing hold `id` of `owner`, granted by a call sent at `sent`.
    pub fn add(&self, lock: &RwLock, owner: &str, id: u64, state: Arc<HoldState>, sent: Instant) {
        {
            let mut map = self.map();
            let entry = map
                .entry((lock.key().to_string(), owner.to_string()))
                .or_insert_with(|| Owned {
                    channel: lock.channel().to_string(),
                    holds: HashMap::new(),
                    valid_until: sent + self.lease,
                });
            // the owner's lease deadline covers all its holds
            entry.valid_until = entry.valid_until.max(sent + self.lease);
            entry.holds.insert(id, state);
        }
        self.ensure_task(&lock.inner);
    }

    /// Stops renewing a hold (released, or lost).
    pub fn remove(&self, key: &str, owner: &str, id: u64) {
        let mut map = self.map();
        let k = (key.to_string(), owner.to_string());
        if let Some(entry) = map.get_mut(&k) {
            entry.holds.remove(&id);
            if entry.holds.is_empty() {
                map.remove(&k);
            }
        }
    }

    /// Number of holds being renewed.
    pub fn held(&self) -> usize {
        self.map().values().map(|e| e.holds.len()).sum()
    }

    fn ensure_task(&self, inner: &Arc<Inner>) {
        // one renewal task per client, started by the first hold
        if self.started.swap(true, Ordering::AcqRel) {
            return;
        }
        let weak = Arc::downgrade(inner);
        let period = self.lease / 3;
        inner.runtime.spawn(async move {
            let mut tick = tokio::time::interval_at(Instant::now() + period, period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let Some(inner) = Weak::upgrade(&weak) else {
                    return;
                };
                if inner.closed() {
                    return;
                }
                renew_round(&inner, period).await;
            }
        });
    }
}

/// Renews `items` within `budget`: one pipeline per node, all nodes at once, so that a
/// node that does not answer delays only its own locks; an item whose pipeline failed
/// (NOSCRIPT, a node that hung or lost its slots) is renewed again on its own, routed
/// afresh, with the time left.
async fn renew_all(
    inner: &Arc<Inner>,
    items: Vec<RenewItem>,
    budget: Duration,
) -> Vec<crate::error::Result<Vec<Vec<u64>>>> {
    let deadline = Instant::now() + budget;
    let lease_ms = inner.lease_ms();
    let router = &inner.cluster.router;
    let slots: Vec<u16> = items
        .iter()
        .map(|i| crate::slot::key_slot(i.key.as_bytes()))
        .collect();
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
    let mut out: Vec<Option<crate::error::Result<Vec<Vec<u64>>>>> =
        (0..items.len()).map(|_| None).collect();
    let batches = groups.into_values().map(|(node, idx)| {
        let batch: Vec<RenewItem> = idx.iter().map(|&i| items[i].clone()).collect();
        async move {
            let pipeline = inner.scripts.renew_pipeline(
                node.client(0),
                &inner.counters,
                inner.publish,
                lease_ms,
                &batch,
            );
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
    let again = out.iter().enumerate().filter_map(|(i, r)| match r {
        Some(Ok(_)) => None,
        _ => Some(i),
    });
    let slots = &slots;
    let retries = again.map(|i| {
        let item = &items[i];
        let owners: Vec<&str> = item.owners.iter().map(String::as_str).collect();
        let left = deadline.saturating_duration_since(Instant::now());
        async move {
            let t = crate::scripts::Target {
                key: &item.key,
                channel: &item.channel,
                publish: inner.publish,
            };
            let reply = inner
                .call_within(slots[i], left, |c| {
                    let (t, owners) = (&t, &owners);
                    async move {
                        inner
                            .scripts
                            .renew(&c, &inner.counters, t, lease_ms, owners)
                            .await
                    }
                })
                .await;
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

/// Owners of one lock renewed by one script call, at most.
const RENEW_CHUNK: usize = 500;

/// One renewal round over every held lock.
async fn renew_round(inner: &Arc<Inner>, budget: Duration) {
    let keeper = &inner.keeper;
    let snapshot: Vec<(String, String, OwnerHolds)> = {
        let map = keeper.map();
        let mut by_key: HashMap<&str, (String, OwnerHolds)> = HashMap::new();
        for ((key, owner), e) in map.iter() {
            by_key
                .entry(key.as_str())
                .or_insert_with(|| (e.channel.clone(), Vec::new()))
                .1
                .push((owner.clone(), e.holds.keys().copied().collect()));
        }
        // at most RENEW_CHUNK owners per script call: none holds the server for long
        let mut out = Vec::new();
        for (k, (c, owners)) in by_key {
            for chunk in owners.chunks(RENEW_CHUNK) {
                out.push((k.to_string(), c.clone(), chunk.to_vec()));
            }
        }
        out
    };
    if !snapshot.is_empty() {
        keeper.rounds.fetch_add(1, Ordering::Relaxed);
        let locks: std::collections::HashSet<&str> =
            snapshot.iter().map(|(k, _, _)| k.as_str()).collect();
        keeper
            .renewals
            .fetch_add(locks.len() as u64, Ordering::Relaxed);
        let items: Vec<RenewItem> = snapshot
            .iter()
            .map(|(key, channel, owners)| RenewItem {
                key: key.clone(),
                channel: channel.clone(),
                owners: owners.iter().map(|(o, _)| o.clone()).collect(),
            })
            .collect();
        let sent = Instant::now();
        let replies = renew_all(inner, items, budget).await;
        let mut map = keeper.map();
        for ((key, _, owners), reply) in snapshot.iter().zip(replies) {
            let Ok(present) = reply else { continue };
            for ((owner, ids), still) in owners.iter().zip(present) {
                let k = (key.clone(), owner.clone());
                let Some(entry) = map.get_mut(&k) else {
                    continue;
                };
                entry.valid_until = entry.valid_until.max(sent + keeper.lease);
                for id in ids {
                    if !still.contains(id) {
                        if let Some(state) = entry.holds.remove(id) {
                            state.mark_lost();
                        }
                    }
                }
                if entry.holds.is_empty() {
                    map.remove(&k);
                }
            }
        }
    }
    // whatever Redis said: a lease not renewed in time is lost
    let now = Instant::now();
    let mut map = keeper.map();
    map.retain(|_, e| {
        if e.valid_until <= now {
            e.holds.values().for_each(|s| s.mark_lost());
            false
        } else {
            true
        }
    });
}
