//! Soak: 64 tasks doing random read/write/try/timeout/drop/cancel operations on 50 names
//! while a master is paused and unpaused midway. No overlap, no hang, flat client memory,
//! and nothing left in Redis afterwards.
//!
//! 20 s by default; `SOAK_SECONDS=300 cargo test --features cluster-tests --test soak -- --nocapture` for the long run.

mod common;

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cluster_rwlock::{LockClient, LockConfig};
use cluster_rwlock_testkit::{rss_kib, TestCluster};
use common::{assert_no_keys, prefix};

const TASKS: usize = 64;
const NAMES: usize = 50;

#[derive(Default)]
struct Name {
    readers: AtomicI64,
    writers: AtomicI64,
}

#[derive(Default)]
struct Counts {
    ops: AtomicU64,
    grants: AtomicU64,
    overlaps: AtomicU64,
    hangs: AtomicU64,
    errors: AtomicU64,
    timeouts: AtomicU64,
}

/// xorshift: enough randomness for picking operations
fn next(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn soak_random_operations_with_a_pause() {
    let seconds: u64 = std::env::var("SOAK_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    let cluster = TestCluster::start().await.expect("cluster");
    let p = prefix("soak");
    let mut clients = Vec::new();
    for _ in 0..4 {
        let config = LockConfig::cluster(cluster.seed_urls())
            .prefix(&p)
            .lease(Duration::from_secs(3))
            .command_timeout(Duration::from_secs(1));
        clients.push(LockClient::connect(config).await.expect("client"));
    }
    let names: Arc<Vec<Name>> = Arc::new((0..NAMES).map(|_| Name::default()).collect());
    let counts = Arc::new(Counts::default());
    let until = Instant::now() + Duration::from_secs(seconds);
    let mut tasks = Vec::new();
    for t in 0..TASKS {
        let client = clients[t % clients.len()].clone();
        let (names, counts) = (names.clone(), counts.clone());
        tasks.push(tokio::spawn(async move {
            let mut rng = 0x9E37_79B9_7F4A_7C15u64 ^ (t as u64 + 1).wrapping_mul(0x1000_0000_01B3);
            while Instant::now() < until {
                let n = (next(&mut rng) % NAMES as u64) as usize;
                let lock = client.rwlock(&format!("n{n}")).unwrap();
                let op = next(&mut rng) % 7;
                let hold = Duration::from_millis(next(&mut rng) % 4);
                let name = &names[n];
                let work = async {
                    match op {
                        0 | 1 => {
                            let write = op == 1;
                            let r = if write {
                                lock.write_timeout(Duration::from_secs(3))
                                    .await
                                    .map(|g| (Some(g), None))
                            } else {
                                lock.read_timeout(Duration::from_secs(3))
                                    .await
                                    .map(|g| (None, Some(g)))
                            };
                            match r {
                                Ok((w, r)) => {
                                    counts.grants.fetch_add(1, Ordering::Relaxed);
                                    enter(name, write, &counts);
                                    tokio::time::sleep(hold).await;
                                    leave(name, write);
                                    if let Some(w) = w {
                                        let _ = w.release().await;
                                    }
                                    if let Some(r) = r {
                                        let _ = r.release().await;
                                    }
                                }
                                Err(cluster_rwlock::Error::Timeout(_)) => {
                                    counts.timeouts.fetch_add(1, Ordering::Relaxed);
                                }
                                Err(_) => {
                                    counts.errors.fetch_add(1, Ordering::Relaxed);
                                }
                            }
                        }
                        2 => match lock.try_write().await {
                            Ok(Some(g)) => {
                                counts.grants.fetch_add(1, Ordering::Relaxed);
                                enter(name, true, &counts);
                                tokio::time::sleep(hold).await;
                                leave(name, true);
                                drop(g); // released in the background
                            }
                            Ok(None) => {}
                            Err(_) => {
                                counts.errors.fetch_add(1, Ordering::Relaxed);
                            }
                        },
                        3 => match lock.try_read().await {
                            Ok(Some(g)) => {
                                counts.grants.fetch_add(1, Ordering::Relaxed);
                                enter(name, false, &counts);
                                tokio::time::sleep(hold).await;
                                leave(name, false);
                                let _ = g.release().await;
                            }
                            Ok(None) => {}
                            Err(_) => {
                                counts.errors.fetch_add(1, Ordering::Relaxed);
                            }
                        },
                        4 => {
                            // a short timeout that often expires
                            if let Ok(g) = lock
                                .write_timeout(Duration::from_millis(1 + next(&mut rng) % 20))
                                .await
                            {
                                counts.grants.fetch_add(1, Ordering::Relaxed);
                                enter(name, true, &counts);
                                leave(name, true);
                                drop(g);
                            }
                        }
                        _ => {
                            // cancelled at a random point
                            let cancel = Duration::from_micros(next(&mut rng) % 5000);
                            let write = op == 5;
                            let _ = tokio::time::timeout(cancel, async {
                                if write {
                                    let g = lock.write().await;
                                    if g.is_ok() {
                                        enter(name, true, &counts);
                                        leave(name, true);
                                    }
                                } else {
                                    let g = lock.read().await;
                                    if g.is_ok() {
                                        enter(name, false, &counts);
                                        leave(name, false);
                                    }
                                }
                            })
                            .await;
                        }
                    }
                };
                if tokio::time::timeout(Duration::from_secs(10), work)
                    .await
                    .is_err()
                {
                    counts.hangs.fetch_add(1, Ordering::Relaxed);
                }
                counts.ops.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    tokio::time::sleep(Duration::from_secs(seconds.min(4) / 2)).await;
    let rss_start = rss_kib();
    // midway: freeze a master for less than the node timeout (no failover), then thaw it
    tokio::time::sleep(Duration::from_secs(seconds / 2).saturating_sub(Duration::from_secs(2)))
        .await;
    cluster.pause(1).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    cluster.unpause(1).await.unwrap();
    for t in tasks {
        // every task stops at `until`; 30 s more is a hang
        tokio::time::timeout_at((until + Duration::from_secs(30)).into(), t)
            .await
            .expect("task ends")
            .unwrap();
    }
    let rss_end = rss_kib();
    let c = &counts;
    eprintln!(
        "soak {seconds} s: {} ops, {} grants, {} timeouts, {} errors, {} overlaps, {} hangs; RSS {} KiB -> {} KiB",
        c.ops.load(Ordering::Relaxed),
        c.grants.load(Ordering::Relaxed),
        c.timeouts.load(Ordering::Relaxed),
        c.errors.load(Ordering::Relaxed),
        c.overlaps.load(Ordering::Relaxed),
        c.hangs.load(Ordering::Relaxed),
        rss_start,
        rss_end
    );
    assert_eq!(c.overlaps.load(Ordering::Relaxed), 0);
    assert_eq!(c.hangs.load(Ordering::Relaxed), 0);
    assert!(c.grants.load(Ordering::Relaxed) > 1000);
    assert!(
        rss_end < rss_start + 32 * 1024,
        "client memory grew: {rss_start} KiB -> {rss_end} KiB"
    );
    // everything was released (or abandoned and expired): nothing left
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_no_keys(&cluster, &p).await;
}

fn enter(name: &Name, write: bool, counts: &Counts) {
    if write {
        if name.writers.fetch_add(1, Ordering::SeqCst) != 0
            || name.readers.load(Ordering::SeqCst) != 0
        {
            counts.overlaps.fetch_add(1, Ordering::Relaxed);
        }
    } else {
        name.readers.fetch_add(1, Ordering::SeqCst);
        if name.writers.load(Ordering::SeqCst) != 0 {
            counts.overlaps.fetch_add(1, Ordering::Relaxed);
        }
    }
}

fn leave(name: &Name, write: bool) {
    if write {
        name.writers.fetch_sub(1, Ordering::SeqCst);
    } else {
        name.readers.fetch_sub(1, Ordering::SeqCst);
    }
}
