//! The nemesis: random, seeded faults on the test bed, each of which heals by itself.
//!
//! Two lanes run at once, so faults overlap: the main lane takes one fault at a time
//! (kill and restart, freezes shorter and longer than a failover, replication lag then a
//! hung master, partitions with the clients on either side, a slot move and back, a
//! manual failover) and waits until the cluster is whole again; the clock lane skews one
//! node's clock now and then, whatever the main lane is doing.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use cluster_rwlock_testkit::TestCluster;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::history::{now, Event};

/// Every fault kind, by the name `--faults` takes.
pub const KINDS: [&str; 10] = [
    "kill",
    "freeze_short",
    "freeze_long",
    "repl_lag",
    "partition",
    "isolate",
    "slot_move",
    "failover",
    "skew",
    "pause_client",
];

/// Where the nemesis acts, and how.
pub struct Nemesis {
    /// The cluster.
    pub cluster: Arc<TestCluster>,
    /// Slots of the run's names (faults target the masters serving them).
    pub slots: Vec<u16>,
    /// Enabled kinds.
    pub kinds: Vec<String>,
    /// Worker pids, for `pause_client`.
    pub workers: Vec<u32>,
    /// Lease of the workload, ms (client pauses are longer than it).
    pub lease_ms: u64,
    /// Events recorded.
    pub log: Arc<Mutex<Vec<Event>>>,
}

fn ms(rng: &mut ChaCha8Rng, lo: u64, hi: u64) -> Duration {
    Duration::from_millis(rng.random_range(lo..hi))
}

fn text<E: std::fmt::Display>(r: Result<(), E>) -> Option<String> {
    r.err().map(|e| e.to_string())
}

impl Nemesis {
    fn record(&self, kind: &str, target: String, start: u64, error: Option<String>) {
        self.log
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Event::Fault {
                kind: kind.to_string(),
                target,
                start,
                end: now(),
                error,
            });
    }

    fn enabled(&self, kind: &str) -> bool {
        self.kinds.iter().any(|k| k == kind)
    }

    /// Runs both lanes until `until` (`CLOCK_MONOTONIC` ns), then heals everything.
    pub async fn run(self: Arc<Self>, seed: u64, until: u64) {
        let clock = {
            let me = self.clone();
            tokio::spawn(async move { me.clock_lane(seed ^ 0x5eed, until).await })
        };
        self.main_lane(seed, until).await;
        let _ = clock.await;
    }

    async fn main_lane(&self, seed: u64, until: u64) {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let kinds: Vec<&str> = KINDS
            .iter()
            .copied()
            .filter(|k| *k != "skew" && self.enabled(k))
            .collect();
        if kinds.is_empty() {
            return;
        }
        loop {
            // a quiet spell between faults, in which the workload runs undisturbed
            tokio::time::sleep(ms(&mut rng, 500, 3_000)).await;
            if now() + 12_000_000_000 > until {
                return;
            }
            let kind = kinds[rng.random_range(0..kinds.len())];
            let slot = self.slots[rng.random_range(0..self.slots.len())];
            self.fault(kind, slot, &mut rng).await;
            // whole again before the next fault: every node up, every master with a replica
            if let Err(e) = self.cluster.wait_ready(Duration::from_secs(40)).await {
                self.record(
                    "not_healed",
                    format!("after {kind}"),
                    now(),
                    Some(e.to_string()),
                );
            }
        }
    }

    async fn fault(&self, kind: &str, slot: u16, rng: &mut ChaCha8Rng) {
        let c = &self.cluster;
        let Ok(master) = c.master_for_slot(slot).await else {
            return;
        };
        let (i, port) = (master.index, master.port);
        let start = now();
        let target = format!("node {port}");
        match kind {
            "kill" => {
                let mut err = text(c.kill(i).await);
                tokio::time::sleep(ms(rng, 1_000, 7_000)).await;
                err = err.or(text(c.restart(i).await));
                self.record(kind, target, start, err);
            }
            "freeze_short" | "freeze_long" => {
                let err = text(c.pause(i).await);
                let d = if kind == "freeze_short" {
                    ms(rng, 300, 1_500)
                } else {
                    ms(rng, 5_000, 9_000)
                };
                tokio::time::sleep(d).await;
                let err = err.or(text(c.unpause(i).await));
                self.record(kind, target, start, err);
            }
            "repl_lag" => {
                // grants made while the stream is cut never reach the replica, which is
                // then promoted while the master hangs
                let mut err = text(c.cut_replication(i).await);
                tokio::time::sleep(ms(rng, 500, 2_500)).await;
                err = err.or(text(c.pause(i).await));
                tokio::time::sleep(ms(rng, 5_000, 8_000)).await;
                err = err.or(text(c.restore_replication(i).await));
                err = err.or(text(c.unpause(i).await));
                self.record(kind, target, start, err);
            }
            "partition" | "isolate" => {
                let err = if kind == "partition" {
                    text(c.partition(i).await)
                } else {
                    text(c.isolate(i).await)
                };
                tokio::time::sleep(ms(rng, 4_000, 9_000)).await;
                let err = err.or(text(c.heal(i).await));
                self.record(kind, target, start, err);
            }
            "slot_move" => {
                // another master: one that serves a slot of the three initial ranges
                let mut to = None;
                for s in [0u16, 5_461, 10_923] {
                    if let Ok(m) = c.master_for_slot(s).await {
                        if m.index != i {
                            to = Some(m.index);
                            break;
                        }
                    }
                }
                let Some(to) = to else { return };
                let to_port = c.nodes()[to].port;
                let mut err = text(c.move_slot(slot, to).await);
                tokio::time::sleep(ms(rng, 1_000, 5_000)).await;
                err = err.or(text(c.move_slot(slot, i).await));
                self.record(
                    kind,
                    format!("slot {slot} {port}->{to_port}->{port}"),
                    start,
                    err,
                );
            }
            "failover" => {
                let err = match c.replica_of(i).await {
                    Ok(r) => text(c.failover(r.index).await),
                    Err(e) => Some(e.to_string()),
                };
                self.record(kind, target, start, err);
            }
            "pause_client" => {
                // a holder's process frozen longer than its lease (GC, swap, a frozen VM)
                if self.workers.is_empty() {
                    return;
                }
                let pid = self.workers[rng.random_range(0..self.workers.len())];
                let err = signal(pid, libc::SIGSTOP);
                tokio::time::sleep(ms(rng, self.lease_ms, self.lease_ms * 2)).await;
                let err = err.or(signal(pid, libc::SIGCONT));
                self.record(kind, format!("worker pid {pid}"), start, err);
            }
            _ => {}
        }
    }

    async fn clock_lane(&self, seed: u64, until: u64) {
        if !self.enabled("skew") {
            return;
        }
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let n = self.cluster.nodes().len();
        loop {
            tokio::time::sleep(ms(&mut rng, 2_000, 10_000)).await;
            if now() + 20_000_000_000 > until {
                return;
            }
            let node = rng.random_range(0..n);
            let port = self.cluster.nodes()[node].port;
            let size = rng.random_range(200..2_000) as i64;
            let offset = if rng.random_bool(0.5) { size } else { -size };
            let start = now();
            let err = text(self.cluster.skew_clock(node, offset).await);
            tokio::time::sleep(ms(&mut rng, 5_000, 15_000)).await;
            let err = err.or(text(self.cluster.skew_clock(node, 0).await));
            self.record("skew", format!("node {port} {offset:+} ms"), start, err);
        }
    }
}

fn signal(pid: u32, sig: i32) -> Option<String> {
    // SAFETY: kill(2) with a pid of our own child and a valid signal number.
    let rc = unsafe { libc::kill(pid as i32, sig) };
    (rc != 0).then(|| format!("kill({pid}, {sig}) failed"))
}
