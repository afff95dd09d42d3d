//! B3: how long a writer waits while readers keep the lock busy, and the other way round:
//! how long a reader waits while writers take the lock back to back (the queue is
//! phase-fair: neither side waits for those that came after it).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::common::{pct, Bench, BoxError};

pub(crate) async fn b3(b: &mut Bench) -> Result<(), BoxError> {
    let readers_client = b.client("b3", |c| c).await?;
    let writer_client = b.client("b3", |c| c).await?;
    let writer = writer_client.rwlock("res")?;
    writer.write().await?.release().await?; // warm-up grant
    let stop = Arc::new(AtomicBool::new(false));
    let mut readers = Vec::new();
    for i in 0..6u32 {
        let lock = readers_client.rwlock("res")?;
        let stop = stop.clone();
        readers.push(tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(20) * i / 6).await;
            while !stop.load(Ordering::Relaxed) {
                let g = lock.read().await?;
                tokio::time::sleep(Duration::from_millis(20)).await;
                g.release().await?;
            }
            Ok::<_, cluster_rwlock::Error>(())
        }));
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let (mut waits, mut timeouts) = (Vec::new(), 0);
    let end = Instant::now() + b.secs(8);
    let mut next = Instant::now();
    while next < end {
        tokio::time::sleep_until(next.into()).await;
        next += Duration::from_millis(100);
        let asked = Instant::now();
        match writer.write_timeout(Duration::from_secs(3)).await {
            Ok(g) => {
                waits.push(asked.elapsed().as_secs_f64() * 1000.0);
                g.release().await?;
            }
            Err(cluster_rwlock::Error::Timeout(_)) => timeouts += 1,
            Err(e) => return Err(e.into()),
        }
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        r.await??;
    }
    waits.sort_by(f64::total_cmp);
    b.report("B3", "writer wait p50", pct(&waits, 50.0), "ms", "");
    b.report("B3", "writer wait max", pct(&waits, 100.0), "ms", "<= 60");
    b.report("B3", "writer timeouts", timeouts as f64, "", "0");
    readers_client.close().await;
    writer_client.close().await;
    reader_progress(b).await
}

/// 4 writers take the lock back to back (5 ms holds) while one reader loops
/// `read_timeout(5 s)`: the reader's waits, and the writers' count beside them.
async fn reader_progress(b: &mut Bench) -> Result<(), BoxError> {
    let writers_client = b.client("b3r", |c| c).await?;
    let reader_client = b.client("b3r", |c| c).await?;
    let reader = reader_client.rwlock("res")?;
    reader.read().await?.release().await?; // warm-up grant
    let end = Instant::now() + b.secs(10);
    let mut writers = Vec::new();
    for _ in 0..4 {
        let lock = writers_client.rwlock("res")?;
        writers.push(tokio::spawn(async move {
            let mut writes = 0u64;
            while Instant::now() < end {
                let g = lock.write().await?;
                tokio::time::sleep(Duration::from_millis(5)).await;
                g.release().await?;
                writes += 1;
            }
            Ok::<_, cluster_rwlock::Error>(writes)
        }));
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let (mut waits, mut timeouts) = (Vec::new(), 0);
    while Instant::now() < end {
        let asked = Instant::now();
        match reader.read_timeout(Duration::from_secs(5)).await {
            Ok(g) => {
                waits.push(asked.elapsed().as_secs_f64() * 1000.0);
                g.release().await?;
            }
            Err(cluster_rwlock::Error::Timeout(_)) => timeouts += 1,
            Err(e) => return Err(e.into()),
        }
    }
    let mut writes = 0;
    for w in writers {
        writes += w.await??;
    }
    waits.sort_by(f64::total_cmp);
    b.report(
        "B3",
        "reader under writers: reads",
        waits.len() as f64,
        "",
        "",
    );
    b.report(
        "B3",
        "reader under writers: wait p50",
        pct(&waits, 50.0),
        "ms",
        "",
    );
    b.report(
        "B3",
        "reader under writers: wait max",
        pct(&waits, 100.0),
        "ms",
        "a few writer holds",
    );
    b.report(
        "B3",
        "reader under writers: timeouts",
        timeouts as f64,
        "",
        "0",
    );
    b.report("B3", "reader under writers: writes", writes as f64, "", "");
    writers_client.close().await;
    reader_client.close().await;
    Ok(())
}
