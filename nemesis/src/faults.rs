//! The nemesis: random, seeded faults on the test bed, each of which heals by itself.
//!
//! Two lanes run at once, so faults overlap: the main lane takes one fault at a time
//! (kill and restart, freezes shorter and longer than a failover, replication lag then a
//! hung master, replication lag then a master frozen until its replica is promoted and
//! thawed right after, partitions with the clients on either side, a slot move and back,
//! a slot migration stalled half done, a manual failover, a replica moved to another
//! master and that master frozen until one of its two replicas is elected) and waits
//! until the cluster is whole again; the clock lane skews one node's clock now and then, whatever the main
//! lane is doing.
//!
//! One kind acts on the clients, not the nodes: `waiter_kill`, a worker process killed
//! (SIGKILL) while a write of it waits for a lock. The workers kill themselves, at times
//! the controller draws (see `kill_plan` in `main.rs`): a task of the worker due to die
//! waits for write on a random name, behind whoever holds it, or queues a write behind a
//! hold of its own, and the process dies while that write waits; the controller records
//! a `client_kill` and starts another worker in its place. A writer that dies while
//! queued may then be handed the lock: the claim window bounds how long those behind
//! it wait (the checker's `handed_to_dead`).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use cluster_rwlock_testkit::{NodeInfo, TestCluster, TestkitError};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::history::{now, Event};

/// Every fault kind, by the name `--faults` takes.
pub const KINDS: [&str; 14] = [
    "kill",
    "freeze_short",
    "freeze_long",
    "repl_lag",
    "promote_thaw",
    "partition",
    "isolate",
    "slot_move",
    "migration_stall",
    "failover",
    "replica_move",
    "skew",
    "pause_client",
    "waiter_kill",
];

/// The kinds the main lane does not take: the clock lane's, and the workers' own deaths.
const NOT_MAIN_LANE: [&str; 2] = ["skew", "waiter_kill"];

/// How long `promote_thaw` waits, at most, for the frozen master's replica to take over.
const PROMOTION_LIMIT: Duration = Duration::from_secs(15);

/// Where the nemesis acts, and how.
pub struct Nemesis {
    /// The cluster.
    pub cluster: Arc<TestCluster>,
    /// Slots of the run's names (faults target the masters serving them).
    pub slots: Vec<u16>,
    /// Enabled kinds.
    pub kinds: Vec<String>,
    /// The pids of the workers that run now, for `pause_client` (a worker killed while
    /// queued leaves it, the one started in its place joins it).
    pub workers: Arc<Mutex<Vec<u32>>>,
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
                pid: None,
            });
    }

    /// Another master than node `i`: one that serves a slot of the three initial ranges.
    async fn other_master(&self, i: usize) -> Option<NodeInfo> {
        for s in [0u16, 5_461, 10_923] {
            if let Ok(m) = self.cluster.master_for_slot(s).await {
                if m.index != i {
                    return Some(m);
                }
            }
        }
        None
    }

    /// A slot of the three initial ranges that node `i` serves.
    async fn slot_of(&self, i: usize) -> Option<u16> {
        for s in [0u16, 5_461, 10_923] {
            if self
                .cluster
                .master_for_slot(s)
                .await
                .is_ok_and(|m| m.index == i)
            {
                return Some(s);
            }
        }
        None
    }

    /// Waits until the cluster has failed over from the frozen master `old` (every node
    /// that is up `cluster_state:ok` and serving every slot, `slot`'s master another
    /// node), at most [`PROMOTION_LIMIT`]; the new master and when it was seen.
    async fn promoted(&self, slot: u16, old: usize) -> Result<(NodeInfo, u64), String> {
        let began = std::time::Instant::now();
        match self.cluster.wait_for_failover(PROMOTION_LIMIT).await {
            Ok(_) => {}
            // the nodes' logs are left out of the fault's record
            Err(TestkitError::NotReady { after, what, .. }) => {
                return Err(format!("not promoted after {after:?}: {what}"))
            }
            Err(e) => return Err(e.to_string()),
        }
        loop {
            match self.cluster.master_for_slot(slot).await {
                Ok(m) if m.index != old => return Ok((m, now())),
                _ if began.elapsed() > PROMOTION_LIMIT => {
                    return Err(format!(
                        "slot {slot} still served by node {old} after {PROMOTION_LIMIT:?}"
                    ))
                }
                _ => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
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
            .filter(|k| !NOT_MAIN_LANE.contains(k) && self.enabled(k))
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
            "promote_thaw" => {
                // as repl_lag, but the old master is thawed as soon as its replica has
                // taken over: it comes back believing it is master, with grants the new
                // one never had, while clients may still route the slot to it
                let mut err = text(c.cut_replication(i).await);
                tokio::time::sleep(ms(rng, 500, 2_000)).await;
                err = err.or(text(c.pause(i).await));
                let frozen = now();
                let promoted = self.promoted(slot, i).await;
                let thaw = ms(rng, 0, 1_000);
                tokio::time::sleep(thaw).await;
                err = err.or(text(c.restore_replication(i).await));
                err = err.or(text(c.unpause(i).await));
                let target = match &promoted {
                    Ok((m, at)) => format!(
                        "node {port}, node {} promoted {:.2} s after the freeze, thawed {} ms later",
                        m.port,
                        at.saturating_sub(frozen) as f64 / 1e9,
                        thaw.as_millis()
                    ),
                    Err(_) => format!("node {port}, no promotion seen, thawed"),
                };
                self.record(kind, target, start, err.or(promoted.err()));
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
                let Some(NodeInfo {
                    index: to,
                    port: to_port,
                    ..
                }) = self.other_master(i).await
                else {
                    return;
                };
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
            "migration_stall" => {
                // a resharding that stalls half way: MIGRATING on the master, IMPORTING on
                // another, some of the slot's keys moved, for 2-6 s of workload; then
                // finished (and the slot moved back), or rolled back when nothing of the
                // slot is on the target
                let Some(NodeInfo {
                    index: to,
                    port: to_port,
                    ..
                }) = self.other_master(i).await
                else {
                    return;
                };
                let m = match c.start_migration(slot, to).await {
                    Ok(m) => m,
                    Err(e) => {
                        let target = format!("slot {slot} {port}->{to_port}, not started");
                        return self.record(kind, target, start, Some(e.to_string()));
                    }
                };
                // half moved: some keys, not all; a slot of one key: moved (clients are
                // then sent to the target with ASK) two times in three
                let count = match m.keys {
                    0 => 0,
                    1 => usize::from(rng.random_range(0..3) > 0),
                    n => rng.random_range(1..n),
                };
                let (moved, mut err) = match c.migrate_keys(&m, count).await {
                    Ok(n) => (n, None),
                    Err(e) => (0, Some(e.to_string())),
                };
                let stall = ms(rng, 2_000, 6_000);
                tokio::time::sleep(stall).await;
                // rolled back only while nothing of the slot is on the target (else the
                // source would serve the slot without those keys for a while)
                let mut how = "finished, then moved back";
                if rng.random_bool(0.5) {
                    match c.roll_back_migration(&m).await {
                        Ok(true) => how = "rolled back",
                        Ok(false) => how = "keys on the target: finished, then moved back",
                        Err(e) => err = err.or(Some(e.to_string())),
                    }
                }
                if how != "rolled back" {
                    err = err.or(text(c.finish_migration(&m).await));
                    tokio::time::sleep(ms(rng, 1_000, 3_000)).await;
                    err = err.or(text(c.move_slot(slot, i).await));
                }
                let target = format!(
                    "slot {slot} {port}->{to_port}, {moved} of {} key(s) moved, stalled {:.1} s, {how}",
                    m.keys,
                    stall.as_secs_f64()
                );
                self.record(kind, target, start, err);
            }
            "failover" => {
                let err = match c.replica_of(i).await {
                    Ok(r) => text(c.failover(r.index).await),
                    Err(e) => Some(e.to_string()),
                };
                self.record(kind, target, start, err);
            }
            "replica_move" => {
                // the master's replica made another master's second replica while locks
                // are granted: the master confirms alone (it has none), the other must
                // wait for two; half the time that other master is then frozen until one
                // of its two replicas (the moved one among them) is elected, and thawed;
                // then every master is given a replica again
                let Some(other) = self.other_master(i).await else {
                    return;
                };
                let replica = match c.replica_of(i).await {
                    Ok(r) => r,
                    Err(e) => return self.record(kind, target, start, Some(e.to_string())),
                };
                let mut err = text(c.replicate(replica.index, other.index).await);
                tokio::time::sleep(ms(rng, 1_500, 4_000)).await;
                let mut how = String::from("moved back");
                if err.is_none() && rng.random_bool(0.5) {
                    err = text(c.pause(other.index).await);
                    let frozen = now();
                    let promoted = match self.slot_of(other.index).await {
                        Some(s) => self.promoted(s, other.index).await.map(|(m, _)| m.port),
                        None => c
                            .wait_for_failover(PROMOTION_LIMIT)
                            .await
                            .map(|_| 0)
                            .map_err(|e| e.to_string()),
                    };
                    err = err.or(text(c.unpause(other.index).await));
                    how = match promoted {
                        Ok(p) => format!(
                            "node {} frozen, node {p} promoted {:.2} s later, thawed",
                            other.port,
                            now().saturating_sub(frozen) as f64 / 1e9
                        ),
                        Err(e) => {
                            err = err.or(Some(e));
                            format!("node {} frozen, no promotion seen, thawed", other.port)
                        }
                    };
                }
                let spread = c.spread_replicas().await;
                let target = format!(
                    "node {port}'s replica {} made node {}'s, {how}; {} replica(s) moved to give every master one",
                    replica.port,
                    other.port,
                    spread.as_ref().map_or(0, |n| *n)
                );
                self.record(
                    kind,
                    target,
                    start,
                    err.or(spread.err().map(|e| e.to_string())),
                );
            }
            "pause_client" => {
                // a holder's process frozen longer than its lease (GC, swap, a frozen VM)
                let pid = {
                    let workers = self.workers.lock().unwrap_or_else(|e| e.into_inner());
                    if workers.is_empty() {
                        return;
                    }
                    workers[rng.random_range(0..workers.len())]
                };
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
