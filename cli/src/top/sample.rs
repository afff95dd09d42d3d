//! What `top` reads on each refresh, and what it costs: the lock keys under the prefix
//! (a full SCAN only every few refreshes, not on each), each lock's summary (one `HGET`,
//! sent together), and the state of the locks whose summary says someone holds or
//! waits (one `rwlock4_state` call each). A lock nobody holds or waits for costs one
//! `HGET` per refresh, whatever its history.

use std::collections::BTreeSet;
use std::time::{Duration, Instant, SystemTime};

use cluster_rwlock::error::ReplicaStatus;
use cluster_rwlock::operator::LockState;
use cluster_rwlock::{LockClient, RwLock};
use fred::prelude::*;
use futures_util::{stream, StreamExt};

/// Summaries and states asked at once.
const IN_FLIGHT: usize = 256;

/// One lock, as `top` shows it.
#[derive(Debug, Clone)]
pub struct Row {
    pub lock: RwLock,
    pub state: LockState,
    /// The master serving its slot.
    pub master: String,
}

impl Row {
    /// The lock's name.
    pub fn name(&self) -> &str {
        self.lock.name()
    }
}

/// What one refresh cost.
#[derive(Debug, Clone, Copy, Default)]
pub struct Cost {
    /// Whether this refresh scanned for lock keys (every few refreshes).
    pub scanned: bool,
    /// Summaries read (`HGET`), and states read (`rwlock4_state`).
    pub summaries: usize,
    pub states: usize,
    pub took: Duration,
}

/// One refresh: the locks someone holds or waits for, the number of locks seen, and what
/// it cost.
#[derive(Debug, Clone, Default)]
pub struct Sample {
    pub rows: Vec<Row>,
    pub locks: usize,
    pub cost: Cost,
    /// When it was read.
    pub at: Option<SystemTime>,
    /// Locks whose state could not be read this time.
    pub unreadable: usize,
    /// The replicas not acknowledging, each with its master (`INFO replication` of
    /// every master, one each per refresh).
    pub silent: Vec<(String, ReplicaStatus)>,
}

/// Whether a lock's summary (`docs/PROTOCOL.md`, the field `s`) says that someone holds
/// it or waits for it: `4 <fence> <held> <dl> <du> <qh> <qt> ...`, held above 0 or the
/// queue's head before its tail. A summary of another shape is looked at (its state
/// call will say what it is).
pub fn busy(summary: &str) -> bool {
    let words: Vec<&str> = summary.split(' ').collect();
    let number = |i: usize| words.get(i).and_then(|w| w.parse::<u64>().ok());
    match (number(2), number(5), number(6)) {
        (Some(held), Some(head), Some(tail)) => held > 0 || head < tail,
        _ => true,
    }
}

/// Reads the locks under a prefix, refresh after refresh.
pub struct Sampler {
    prefix: String,
    keys: BTreeSet<String>,
    refreshes: u64,
    /// A full SCAN every this many refreshes (and on the first).
    rescan_every: u64,
}

impl Sampler {
    pub fn new(prefix: &str) -> Sampler {
        Sampler {
            prefix: prefix.to_string(),
            keys: BTreeSet::new(),
            refreshes: 0,
            rescan_every: 10,
        }
    }

    /// One refresh.
    pub async fn sample(&mut self, client: &LockClient) -> Result<Sample, Error> {
        let began = Instant::now();
        let mut cost = Cost::default();
        if self.refreshes.is_multiple_of(self.rescan_every) {
            self.keys = crate::scan::lock_keys(client, &self.prefix)
                .await?
                .into_iter()
                .collect();
            cost.scanned = true;
        }
        self.refreshes += 1;
        let redis = client.redis();
        let summaries: Vec<(String, Option<String>)> = stream::iter(self.keys.iter().cloned())
            .map(|key| async move {
                let s: Option<String> = redis.hget(&key, "s").await.unwrap_or(None);
                (key, s)
            })
            .buffer_unordered(IN_FLIGHT)
            .collect()
            .await;
        cost.summaries = summaries.len();
        let mut gone = Vec::new();
        let mut names = Vec::new();
        for (key, s) in summaries {
            match s {
                None => gone.push(key),
                Some(s) if busy(&s) => {
                    if let Some(name) = cluster_rwlock::operator::lock_name(&self.prefix, &key) {
                        names.push(name);
                    }
                }
                Some(_) => {}
            }
        }
        // a key that went (its last lease ended a minute ago) is not read again
        for key in gone {
            self.keys.remove(&key);
        }
        let locks = self.keys.len();
        cost.states = names.len();
        let read: Vec<Option<Row>> = stream::iter(names)
            .map(|name| async move {
                let lock = client.rwlock(&name).ok()?;
                let state = lock.state().await.ok()?;
                let master = client
                    .node_for_slot(lock.slot())
                    .unwrap_or_else(|| "?".into());
                Some(Row {
                    lock,
                    state,
                    master,
                })
            })
            .buffer_unordered(IN_FLIGHT)
            .collect()
            .await;
        let unreadable = read.iter().filter(|r| r.is_none()).count();
        let rows: Vec<Row> = read.into_iter().flatten().collect();
        // every master the client knows (and those of the rows)
        let mut masters: BTreeSet<String> = redis
            .cached_cluster_state()
            .map(|s| {
                s.unique_primary_nodes()
                    .iter()
                    .map(ToString::to_string)
                    .collect()
            })
            .unwrap_or_default();
        masters.extend(rows.iter().map(|r| r.master.clone()));
        masters.remove("?");
        let listed: Vec<(String, Option<Vec<ReplicaStatus>>)> = stream::iter(masters)
            .map(|m| async move {
                let r = crate::replicas::of(client, &m).await;
                (m, r)
            })
            .buffer_unordered(IN_FLIGHT)
            .collect()
            .await;
        let mut silent: Vec<(String, ReplicaStatus)> = listed
            .into_iter()
            .flat_map(|(m, r)| {
                r.unwrap_or_default()
                    .into_iter()
                    .filter(crate::replicas::silent)
                    .map(move |r| (m.clone(), r))
            })
            .collect();
        silent.sort_by(|a, b| (&a.0, &a.1.addr).cmp(&(&b.0, &b.1.addr)));
        cost.took = began.elapsed();
        Ok(Sample {
            rows,
            locks,
            cost,
            at: Some(SystemTime::now()),
            unreadable,
            silent,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::busy;

    #[test]
    fn a_summary_says_whether_anyone_holds_or_waits() {
        // a tombstone: nobody holds, the queue is empty
        assert!(!busy("4 1795627472110192 0 - 0 12 12 - 1795627532110"));
        // one lone hold
        assert!(busy(
            "4 1795627472110192 1 1795627502110 1795627502110 12 12 - 1795627562110 w3:1795627472110192:1795627502110:30000 host/0f:1"
        ));
        // nobody holds, someone queued
        assert!(busy("4 5 0 - 0 12 13 12 1795627532110"));
        // another shape: looked at
        assert!(busy("3 5 0"));
    }
}
