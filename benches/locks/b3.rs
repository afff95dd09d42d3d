//! B3: how long a writer waits while readers keep the lock busy.

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
    Ok(())
}
