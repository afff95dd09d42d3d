//! Several OS processes on one lock: mutual exclusion checked on a shared record, and a
//! holder killed with SIGKILL.
//!
//! The children are this test binary run again on one of its `#[ignore]`d `child_*`
//! tests, with their orders in environment variables.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cluster_rwlock::{LockClient, LockConfig};
use common::{assert_no_keys, client_with, cluster, prefix};
use fred::prelude::*;

const TASKS: usize = 8;
const ROUNDS: usize = 25;

fn child(test: &str, seeds: &[String], prefix: &str, extra: &[(&str, String)]) -> Command {
    let mut cmd = Command::new(std::env::current_exe().expect("test binary"));
    cmd.args([
        "--exact",
        test,
        "--ignored",
        "--nocapture",
        "--test-threads",
        "1",
    ])
    .env("CHILD_SEEDS", seeds.join(","))
    .env("CHILD_PREFIX", prefix)
    .stdout(Stdio::piped())
    .stderr(Stdio::inherit());
    for (k, v) in extra {
        cmd.env(k, v);
    }
    cmd
}

async fn child_client(lease: Duration) -> LockClient {
    let seeds: Vec<String> = std::env::var("CHILD_SEEDS")
        .expect("CHILD_SEEDS")
        .split(',')
        .map(String::from)
        .collect();
    let prefix = std::env::var("CHILD_PREFIX").expect("CHILD_PREFIX");
    LockClient::connect(LockConfig::cluster(seeds).prefix(prefix).lease(lease))
        .await
        .expect("child connects")
}

fn record_keys(prefix: &str) -> (String, String, String) {
    let tag = format!("{prefix}-record:{{mx}}");
    (
        format!("{tag}:writers"),
        format!("{tag}:readers"),
        format!("{tag}:fence"),
    )
}

/// Child: 8 tasks, each 25 rounds of read or write, checking the shared record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run by mutual_exclusion_across_three_processes"]
async fn child_mutex() {
    let client = child_client(Duration::from_secs(10)).await;
    let prefix = std::env::var("CHILD_PREFIX").unwrap();
    let (writers, readers, fence_key) = record_keys(&prefix);
    let mut tasks = Vec::new();
    for t in 0..TASKS {
        let lock = client.rwlock("shared").unwrap();
        let redis = client.redis().clone();
        let (writers, readers, fence_key) = (writers.clone(), readers.clone(), fence_key.clone());
        tasks.push(tokio::spawn(async move {
            let (mut violations, mut grants) = (0u64, 0u64);
            for round in 0..ROUNDS {
                if (t + round) % 3 == 0 {
                    let g = lock
                        .read_timeout(Duration::from_secs(30))
                        .await
                        .expect("read");
                    let _: i64 = redis.incr(&readers).await.unwrap();
                    let w: Option<i64> = redis.get(&writers).await.unwrap();
                    if w.unwrap_or(0) != 0 {
                        violations += 1;
                    }
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    let _: i64 = redis.decr(&readers).await.unwrap();
                    g.release().await.expect("release read");
                } else {
                    let g = lock
                        .write_timeout(Duration::from_secs(30))
                        .await
                        .expect("write");
                    let n: i64 = redis.incr(&writers).await.unwrap();
                    let r: Option<i64> = redis.get(&readers).await.unwrap();
                    if n != 1 || r.unwrap_or(0) != 0 {
                        violations += 1;
                    }
                    // fences seen by the resource only grow
                    let prev: Option<String> = redis
                        .getset(&fence_key, g.fence().to_string())
                        .await
                        .unwrap();
                    if prev
                        .and_then(|p| p.parse::<u64>().ok())
                        .is_some_and(|p| p >= g.fence())
                    {
                        violations += 1;
                    }
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    let _: i64 = redis.decr(&writers).await.unwrap();
                    g.release().await.expect("release write");
                }
                grants += 1;
            }
            (violations, grants)
        }));
    }
    let (mut violations, mut grants) = (0, 0);
    for t in tasks {
        let (v, g) = t.await.unwrap();
        violations += v;
        grants += g;
    }
    println!("RESULT violations={violations} grants={grants}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_exclusion_across_three_processes() {
    let cluster = cluster().await;
    let p = prefix("procs");
    let seeds = cluster.seed_urls();
    let began = Instant::now();
    let children: Vec<_> = (0..3)
        .map(|_| {
            child("child_mutex", &seeds, &p, &[])
                .spawn()
                .expect("spawn child")
        })
        .collect();
    let (mut violations, mut grants) = (0u64, 0u64);
    for c in children {
        let out = c.wait_with_output().expect("child output");
        assert!(
            out.status.success(),
            "child failed: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        let text = String::from_utf8_lossy(&out.stdout);
        // the harness may print "test child_mutex ... " on the same line
        let line = text
            .lines()
            .find_map(|l| l.split_once("RESULT "))
            .unwrap_or_else(|| panic!("no result line in {text}"))
            .1;
        for part in line.split_whitespace() {
            let (k, v) = part.split_once('=').unwrap();
            let v: u64 = v.parse().unwrap();
            match k {
                "violations" => violations += v,
                "grants" => grants += v,
                _ => {}
            }
        }
    }
    eprintln!(
        "3 processes x {TASKS} tasks: {grants} grants, {violations} violations in {:?}",
        began.elapsed()
    );
    assert_eq!(grants, (3 * TASKS * ROUNDS) as u64);
    assert_eq!(violations, 0, "overlapping holds or fences out of order");
    // the record is ours to clean; the lock's keys must be gone by themselves
    let client = client_with(cluster, |c| c.prefix(&p)).await;
    let (w, r, f) = record_keys(&p);
    let _: i64 = client.redis().del(vec![w, r, f]).await.unwrap();
    assert_no_keys(cluster, &p).await;
}

/// Child: takes the write lock, says so, and waits to be killed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run by a_killed_holder_frees_the_lock_within_its_lease"]
async fn child_holder() {
    let lease = Duration::from_millis(std::env::var("CHILD_LEASE_MS").unwrap().parse().unwrap());
    let client = child_client(lease).await;
    let g = client
        .rwlock("victim")
        .unwrap()
        .write()
        .await
        .expect("write");
    println!("HELD {}", g.fence());
    tokio::time::sleep(Duration::from_secs(120)).await;
    drop(g);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_holder_frees_the_lock_within_its_lease() {
    let cluster = cluster().await;
    let p = prefix("sigkill");
    let lease = Duration::from_secs(2);
    let mut holder = child(
        "child_holder",
        &cluster.seed_urls(),
        &p,
        &[("CHILD_LEASE_MS", lease.as_millis().to_string())],
    )
    .spawn()
    .expect("spawn child");
    let mut lines = BufReader::new(holder.stdout.take().unwrap()).lines();
    let held_fence: u64 = loop {
        let line = lines.next().expect("child output").unwrap();
        if let Some((_, f)) = line.split_once("HELD ") {
            break f.trim().parse().unwrap();
        }
    };
    let client = client_with(cluster, |c| c.prefix(&p)).await;
    let lock = client.rwlock("victim").unwrap();
    // a waiter is already blocked when the holder dies
    let waiter = tokio::spawn(async move {
        let g = lock
            .write_timeout(Duration::from_secs(10))
            .await
            .expect("granted after the holder died");
        (Instant::now(), g.fence())
    });
    tokio::time::sleep(Duration::from_millis(700)).await;
    holder.kill().expect("SIGKILL");
    let killed = Instant::now();
    holder.wait().unwrap();
    let (granted, fence) = waiter.await.unwrap();
    let after = granted - killed;
    eprintln!("holder SIGKILLed; another owner granted {after:?} later (lease {lease:?})");
    assert!(after <= lease + Duration::from_secs(1), "took {after:?}");
    assert!(fence > held_fence);
    assert_no_keys(cluster, &p).await;
}

/// Child: waits for the lock `CHILD_LOCK` in `CHILD_MODE` (`w`, `r` or `u`) under a lease
/// of `CHILD_LEASE_MS`, and says so; it is killed while it waits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run by the dead waiter tests"]
async fn child_waiter() {
    let lease = Duration::from_millis(std::env::var("CHILD_LEASE_MS").unwrap().parse().unwrap());
    let seeds: Vec<String> = std::env::var("CHILD_SEEDS")
        .unwrap()
        .split(',')
        .map(String::from)
        .collect();
    // named, so that the test finds its place in the queue (owner tokens begin with it)
    let name = format!("doomed-{}", std::process::id());
    let config = LockConfig::cluster(seeds)
        .prefix(std::env::var("CHILD_PREFIX").unwrap())
        .lease(lease)
        .client_name(&name);
    let client = LockClient::connect(config).await.expect("child connects");
    let lock = client
        .rwlock(std::env::var("CHILD_LOCK").unwrap().as_str())
        .unwrap();
    println!("WAITING {name}/");
    let wait = Duration::from_secs(120);
    match std::env::var("CHILD_MODE").unwrap().as_str() {
        "w" => drop(lock.write_timeout(wait).await),
        "r" => drop(lock.read_timeout(wait).await),
        _ => drop(lock.upgradable_read_timeout(wait).await),
    }
    println!("GRANTED");
    tokio::time::sleep(Duration::from_secs(120)).await;
}

/// Starts a child waiter on `name` in `mode`, waits until the lock's state lists it
/// (queued as a writer, or as a reader), and SIGKILLs it: a waiter that died while
/// queued, as the OOM killer or a killed container leaves one.
async fn kill_a_queued_waiter(
    cluster: &cluster_rwlock_testkit::TestCluster,
    p: &str,
    lock: &cluster_rwlock::RwLock,
    name: &str,
    mode: &str,
) {
    let mut waiter = child(
        "child_waiter",
        &cluster.seed_urls(),
        p,
        &[
            ("CHILD_LEASE_MS", "10000".to_string()),
            ("CHILD_LOCK", name.to_string()),
            ("CHILD_MODE", mode.to_string()),
        ],
    )
    .spawn()
    .expect("spawn child");
    let mut lines = BufReader::new(waiter.stdout.take().unwrap()).lines();
    let owner = loop {
        let line = lines.next().expect("child output").unwrap();
        if let Some((_, o)) = line.split_once("WAITING ") {
            break o.trim().to_string();
        }
    };
    let since = Instant::now();
    loop {
        let s = lock.state().await.expect("state");
        let queued = |q: &Vec<String>| q.iter().any(|o| o.starts_with(&owner));
        if queued(&s.waiting_writers) || queued(&s.waiting_readers) {
            break;
        }
        assert!(
            since.elapsed() < Duration::from_secs(10),
            "the child never queued"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    waiter.kill().expect("SIGKILL");
    waiter.wait().unwrap();
}

/// The bound a dead waiter may hold up those behind it: the claim window (1 s) and the
/// waiters' next look, well under the dead one's lease (10 s).
const AFTER_A_DEAD_WAITER: Duration = Duration::from_secs(2);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_writer_waiter_takes_nothing() {
    let cluster = cluster().await;
    let p = prefix("deadwaiter");
    let client = client_with(cluster, |c| c.prefix(&p)).await;
    let lock = client.rwlock("dw:{1}").unwrap();
    // 1. the next writer comes after the release (a CLI run started later)
    let holder = lock.write().await.unwrap();
    kill_a_queued_waiter(cluster, &p, &lock, "dw:{1}", "w").await;
    holder.release().await.unwrap();
    let released = Instant::now();
    let g = lock
        .write_timeout(Duration::from_secs(20))
        .await
        .expect("granted");
    let after = released.elapsed();
    eprintln!("a writer that came after the release: granted {after:?} after it");
    assert!(after <= AFTER_A_DEAD_WAITER, "took {after:?}");
    g.release().await.unwrap();
    // 2. the next writer waits already when the lock is released: it hears the lock
    // handed to the dead waiter
    let holder = lock.write().await.unwrap();
    kill_a_queued_waiter(cluster, &p, &lock, "dw:{1}", "w").await;
    let next = lock.clone();
    let waiter = tokio::spawn(async move {
        let g = next
            .write_timeout(Duration::from_secs(20))
            .await
            .expect("granted");
        (Instant::now(), g)
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    holder.release().await.unwrap();
    let released = Instant::now();
    let (granted, g) = waiter.await.unwrap();
    let after = granted - released;
    eprintln!("a writer that waited behind it: granted {after:?} after the release");
    assert!(after <= AFTER_A_DEAD_WAITER, "took {after:?}");
    g.release().await.unwrap();
    assert_no_keys(cluster, &p).await;
}

/// A dead reader (or upgradable reader) in the group that comes first in line: the live
/// readers of the group go in, and the writer behind the group is not held up for the
/// dead one's lease.
async fn a_dead_reader_in_a_group(mode: &str) {
    let cluster = cluster().await;
    let p = prefix(&format!("deadreader{mode}"));
    let client = client_with(cluster, |c| c.prefix(&p)).await;
    let lock = client.rwlock("dr:{1}").unwrap();
    let holder = lock.write().await.unwrap();
    kill_a_queued_waiter(cluster, &p, &lock, "dr:{1}", mode).await;
    // a live reader of the same group, and a writer behind the group
    let reader = {
        let lock = lock.clone();
        tokio::spawn(async move {
            let r = lock
                .read_timeout(Duration::from_secs(20))
                .await
                .expect("read");
            r.release().await.unwrap();
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let writer = {
        let lock = lock.clone();
        tokio::spawn(async move {
            let g = lock
                .write_timeout(Duration::from_secs(20))
                .await
                .expect("granted");
            (Instant::now(), g)
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    holder.release().await.unwrap();
    let released = Instant::now();
    reader.await.unwrap();
    let (granted, g) = writer.await.unwrap();
    let after = granted - released;
    eprintln!("a dead '{mode}' waiter in the first group: the writer behind it granted {after:?} after the release");
    assert!(after <= AFTER_A_DEAD_WAITER, "took {after:?}");
    g.release().await.unwrap();
    // the dead reader's place, passed by with its group, went with the next call
    assert_no_keys(cluster, &p).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_reader_in_a_handed_group_takes_nothing() {
    a_dead_reader_in_a_group("r").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_upgradable_waiter_takes_nothing() {
    a_dead_reader_in_a_group("u").await;
}
