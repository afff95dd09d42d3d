//! B7: multi-locks of 3 names, one on each master: cycles/s uncontended (8 tasks, each
//! on names of its own) and contended (8 tasks on the same 3 names), round trips per
//! cycle, and the hand-off of all three from one holder to a waiting multi-lock.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cluster_rwlock::{LockClient, Mode};

use super::common::{pct, Bench, BoxError};

/// 3 names per set, one on each master (by the client's slot map), for `sets` sets.
fn name_sets(client: &LockClient, sets: usize) -> Vec<Vec<String>> {
    let mut by_master: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for i in 0.. {
        let name = format!("n{i}");
        let slot = client.rwlock(&name).unwrap().slot();
        let master = client.node_for_slot(slot).unwrap_or_default();
        let names = by_master.entry(master).or_default();
        if names.len() < sets {
            names.push(name);
        }
        if by_master.len() >= 3 && by_master.values().all(|n| n.len() >= sets) {
            break;
        }
    }
    let masters: Vec<&Vec<String>> = by_master.values().take(3).collect();
    (0..sets)
        .map(|s| masters.iter().map(|m| m[s].clone()).collect())
        .collect()
}

async fn cycles(
    b: &Bench,
    client: &LockClient,
    sets: Vec<Vec<String>>,
) -> Result<(f64, f64), BoxError> {
    let run = b.secs(5);
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let trips_before = client.stats().round_trips;
    let began = Instant::now();
    let mut tasks = Vec::new();
    for names in sets {
        let multi = client.multi(names.iter().map(|n| (n.as_str(), Mode::Write)))?;
        let (stop, done) = (stop.clone(), done.clone());
        tasks.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                multi.lock().await?.release().await?;
                done.fetch_add(1, Ordering::Relaxed);
            }
            Ok::<_, cluster_rwlock::Error>(())
        }));
    }
    tokio::time::sleep(run).await;
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await??;
    }
    let n = done.load(Ordering::Relaxed) as f64;
    let trips = (client.stats().round_trips - trips_before) as f64;
    Ok((n / began.elapsed().as_secs_f64(), trips / n.max(1.0)))
}

pub(crate) async fn b7(b: &mut Bench) -> Result<(), BoxError> {
    let client = b.client("b7", |c| c).await?;
    let sets = name_sets(&client, 8);
    let (rate, trips) = cycles(b, &client, sets.clone()).await?;
    b.report(
        "B7",
        "multi-lock of 3 cycles/s, uncontended (8 tasks)",
        rate,
        "1/s",
        "",
    );
    b.report("B7", "round trips per cycle, uncontended", trips, "", "");
    let same = vec![sets[0].clone(); 8];
    let (rate, trips) = cycles(b, &client, same).await?;
    b.report(
        "B7",
        "multi-lock of 3 cycles/s, contended (8 tasks, same names)",
        rate,
        "1/s",
        "",
    );
    b.report("B7", "round trips per cycle, contended", trips, "", "");

    // hand-off: a waiting multi-lock (another client) gets all three after a release
    let other = b.client("b7", |c| c).await?;
    let names = &sets[1];
    let mine = client.multi(names.iter().map(|n| (n.as_str(), Mode::Write)))?;
    let theirs = other.multi(names.iter().map(|n| (n.as_str(), Mode::Write)))?;
    let mut latencies = Vec::new();
    for _ in 0..b.count(200) {
        let held = mine.lock().await?;
        let theirs = theirs.clone();
        let waiter = tokio::spawn(async move {
            let g = theirs.lock().await?;
            let at = Instant::now();
            g.release().await?;
            Ok::<_, cluster_rwlock::Error>(at)
        });
        tokio::time::sleep(Duration::from_millis(5)).await;
        let t0 = Instant::now();
        held.release().await?;
        let t1 = waiter.await??;
        latencies.push((t1 - t0).as_secs_f64() * 1000.0);
    }
    latencies.sort_by(f64::total_cmp);
    b.report("B7", "hand-off of 3 p50", pct(&latencies, 50.0), "ms", "");
    b.report("B7", "hand-off of 3 p99", pct(&latencies, 99.0), "ms", "");
    other.close().await;
    client.close().await;
    Ok(())
}
