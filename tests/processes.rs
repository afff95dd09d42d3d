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
