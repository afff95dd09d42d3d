//! B8: a write that must not land once the lock is lost. A guarded write (the hold check
//! and the `SET` in one script, confirmed by the replicas) beside what users do without
//! it: a plain `SET` after a `state()` look (two round trips, and a window between them
//! in which the lock can be lost) and a plain `SET` alone (no check at all), one after
//! another under one write hold, latency p50 / p99.

use std::time::Instant;

use fred::prelude::*;

use super::common::{pct, Bench, BoxError};

pub(crate) async fn b8(b: &mut Bench) -> Result<(), BoxError> {
    let client = b.client("b8", |c| c).await?;
    let lock = client.rwlock("order:{b8}")?;
    let key = "order:{b8}:status";
    let redis = client.redis().clone();
    let guard = lock.write().await?;
    let n = b.count(2_000);
    let (mut guarded, mut looked, mut plain) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..n {
        let value = i.to_string();
        let t = Instant::now();
        guard.guarded().set(key, &value).run().await?;
        guarded.push(t.elapsed().as_secs_f64() * 1e3);

        let t = Instant::now();
        let state = lock.state().await?;
        if state.holders.iter().any(|h| h.owner == guard.owner()) {
            let _: () = redis.set(key, &value, None, None, false).await?;
        }
        looked.push(t.elapsed().as_secs_f64() * 1e3);

        let t = Instant::now();
        let _: () = redis.set(key, &value, None, None, false).await?;
        plain.push(t.elapsed().as_secs_f64() * 1e3);
    }
    guard.release().await?;
    for (what, mut ms) in [
        (
            "guarded SET (hold checked in the script, confirmed)",
            guarded,
        ),
        ("state() then plain SET (unsafe: a window between)", looked),
        ("plain SET (no check)", plain),
    ] {
        ms.sort_by(f64::total_cmp);
        b.report("B8", &format!("{what} p50"), pct(&ms, 50.0), "ms", "");
        b.report("B8", &format!("{what} p99"), pct(&ms, 99.0), "ms", "");
    }
    client.close().await;
    Ok(())
}
