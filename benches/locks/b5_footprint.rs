//! B5: footprint: server memory per lock and per reader, client memory per idle waiter,
//! and the cost of renewals.

use std::time::Duration;

use cluster_rwlock::LockClient;
use cluster_rwlock_testkit::rss_kib;
use fred::prelude::*;
use fred::types::{ClusterHash, CustomCommand};

use super::common::{Bench, BoxError};

async fn memory_usage(client: &LockClient, key: &str, slot: u16) -> Result<Option<i64>, BoxError> {
    let cmd = CustomCommand::new_static("MEMORY", ClusterHash::Custom(slot), false);
    Ok(client
        .redis()
        .custom(cmd, vec!["USAGE", key, "SAMPLES", "0"])
        .await?)
}

pub(crate) async fn b5(b: &mut Bench) -> Result<(), BoxError> {
    let client = b.client("b5", |c| c).await?;
    let lock = client.rwlock("mem")?;
    let w = lock.write().await?;
    let one: Option<i64> = memory_usage(&client, lock.key(), lock.slot()).await?;
    w.release().await?;
    let mut readers = Vec::new();
    for _ in 0..100 {
        readers.push(client.rwlock("mem")?.read().await?);
    }
    let hundred: Option<i64> = memory_usage(&client, lock.key(), lock.slot()).await?;
    let other_keys: Vec<String> = {
        let cmd = CustomCommand::new_static("CLUSTER", ClusterHash::Custom(lock.slot()), false);
        client
            .redis()
            .custom(
                cmd,
                vec![
                    "GETKEYSINSLOT".to_string(),
                    lock.slot().to_string(),
                    "10".into(),
                ],
            )
            .await?
    };
    for r in readers {
        r.release().await?;
    }
    let (one, hundred) = (one.unwrap_or(0) as f64, hundred.unwrap_or(0) as f64);
    b.report("B5", "MEMORY USAGE, 1 writer", one, "bytes", "");
    b.report("B5", "MEMORY USAGE, 100 readers", hundred, "bytes", "");
    b.report(
        "B5",
        "bytes per reader hold",
        (hundred - one) / 99.0,
        "bytes",
        "< 200",
    );
    b.report(
        "B5",
        "keys in the lock's slot with 100 readers",
        other_keys.len() as f64,
        "",
        "1 (one hash per lock)",
    );

    // idle waiters: 10,000 on 100 held locks
    let holder = b.client("b5", |c| c).await?;
    let waiters_client = b.client("b5", |c| c).await?;
    let n_locks = 100;
    let n_waiters = b.count(10_000);
    let mut held = Vec::new();
    for i in 0..n_locks {
        held.push(holder.rwlock(&format!("w{i}"))?.write().await?);
    }
    // warm the client's paths once so that the measure is per waiter
    let _ = waiters_client.rwlock("w0")?.try_read().await?;
    let before = rss_kib();
    let mut tasks = Vec::new();
    for i in 0..n_waiters {
        let lock = waiters_client.rwlock(&format!("w{}", i % n_locks))?;
        tasks.push(tokio::spawn(async move { lock.read().await.map(|_| ()) }));
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = rss_kib();
    b.report(
        "B5",
        "client memory per idle waiter",
        (after.saturating_sub(before) * 1024) as f64 / n_waiters as f64,
        "bytes",
        "",
    );
    b.report(
        "B5",
        "subscriptions for those waiters",
        waiters_client.stats().subscriptions as f64,
        "",
        "= locks (100)",
    );
    for t in &tasks {
        t.abort();
    }
    drop(held);
    drop(tasks);

    // renewal cost with 1,000 held locks (lease 3 s: a round every second)
    let renewing = b.client("b5r", |c| c.lease(Duration::from_secs(3))).await?;
    let n_held = b.count(1000);
    let mut guards = Vec::new();
    for i in 0..n_held {
        guards.push(renewing.rwlock(&format!("h{i}"))?.write().await?);
    }
    let s0 = renewing.stats();
    tokio::time::sleep(Duration::from_millis(3500)).await;
    let s1 = renewing.stats();
    let rounds = (s1.renewal_rounds - s0.renewal_rounds).max(1) as f64;
    b.report(
        "B5",
        &format!("renewal round trips per interval ({n_held} locks)"),
        (s1.round_trips - s0.round_trips) as f64 / rounds,
        "",
        "batched",
    );
    b.report(
        "B5",
        &format!("lock renewals per interval ({n_held} locks)"),
        (s1.renewals - s0.renewals) as f64 / rounds,
        "",
        "",
    );
    for g in guards {
        g.release().await?;
    }
    renewing.close().await;
    client.close().await;
    holder.close().await;
    waiters_client.close().await;
    Ok(())
}
