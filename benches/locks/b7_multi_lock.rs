//! B7: multi-locks of 2, 3 and 4 names spread over the three masters (4: two on one
//! master): cycles/s uncontended (8 tasks, each on names of its own) with the confirmed
//! rounds (`WAIT`s the masters ran) and script calls per cycle; and, for 3 names,
//! contended (8 tasks on the same names) and the hand-off of all three from one holder
//! to a waiting multi-lock.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cluster_rwlock::{LockClient, Mode};

use super::common::{command_calls, pct, Bench, BoxError};

/// `size` names per set, member `j` on master `j % 3` (by the client's slot map), for
/// `sets` sets.
fn name_sets(client: &LockClient, sets: usize, size: usize) -> Vec<Vec<String>> {
    let per_master = sets * size.div_ceil(3);
    let mut by_master: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for i in 0.. {
        let name = format!("n{i}");
        let slot = client.rwlock(&name).unwrap().slot();
        let master = client.node_for_slot(slot).unwrap_or_default();
        let names = by_master.entry(master).or_default();
        if names.len() < per_master {
            names.push(name);
        }
        if by_master.len() >= 3 && by_master.values().all(|n| n.len() >= per_master) {
            break;
        }
    }
    let mut masters: Vec<std::vec::IntoIter<String>> = by_master
        .into_values()
        .take(3)
        .map(Vec::into_iter)
        .collect();
    (0..sets)
        .map(|_| {
            (0..size)
                .map(|j| masters[j % 3].next().unwrap_or_default())
                .collect()
        })
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

/// One multi-lock of free members at a time (lock, then release), `rounds` times: the
/// `WAIT`s and `EVALSHA`s the masters ran per lock (the release's calls included, which
/// are not confirmed).
async fn rounds_per_lock(
    client: &LockClient,
    names: &[String],
    rounds: usize,
) -> Result<(f64, f64), BoxError> {
    let multi = client.multi(names.iter().map(|n| (n.as_str(), Mode::Write)))?;
    multi.lock().await?.release().await?; // warm-up
    let (waits, evals) = (
        command_calls(client.redis(), "wait").await?,
        command_calls(client.redis(), "evalsha").await?,
    );
    for _ in 0..rounds {
        multi.lock().await?.release().await?;
    }
    let per = |after: u64, before: u64| (after - before) as f64 / rounds as f64;
    Ok((
        per(command_calls(client.redis(), "wait").await?, waits),
        per(command_calls(client.redis(), "evalsha").await?, evals),
    ))
}

pub(crate) async fn b7(b: &mut Bench) -> Result<(), BoxError> {
    let client = b.client("b7", |c| c).await?;
    for size in [2, 4] {
        let sets = name_sets(&client, 8, size);
        let (rate, trips) = cycles(b, &client, sets.clone()).await?;
        b.report(
            "B7",
            &format!("multi-lock of {size} cycles/s, uncontended (8 tasks)"),
            rate,
            "1/s",
            "",
        );
        b.report(
            "B7",
            &format!("round trips per cycle, multi-lock of {size}, uncontended"),
            trips,
            "",
            "",
        );
        let (waits, evals) = rounds_per_lock(&client, &sets[0], b.count(50)).await?;
        b.report(
            "B7",
            &format!("WAIT per lock of {size} free members, alone"),
            waits,
            "",
            "one per master",
        );
        b.report(
            "B7",
            &format!("EVALSHA per lock + release of {size}, alone"),
            evals,
            "",
            "",
        );
    }
    let sets = name_sets(&client, 8, 3);
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
