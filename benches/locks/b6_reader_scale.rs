//! B6 scale: what one operation costs the server, and the caller, as the number of
//! readers that hold one lock grows; and what a renewal round costs for n owners.
//!
//! For each n (`B6_N`, default 1,10,100,1000,10000; smoke 1,10,100): one client takes n
//! read holds on one name (owners h0..hn, lease 6 s, so it renews every 2 s); right after
//! one of its renewal rounds, the stats of the lock's master are reset and another client
//! runs try_read + release cycles for 1.5 s (no renewal falls in that window): server µs
//! per function call (`INFO commandstats`, FCALL usec/calls) and the cycle's p50. Before
//! that, the server time of a renewal round of the n owners (the mean of three).

use std::time::{Duration, Instant};

use cluster_rwlock::{LockClient, LockConfig};
use fred::prelude::*;
use fred::types::{ClusterHash, CustomCommand};

use super::common::{node_client, pct, Bench, BoxError};

/// The master that serves `slot`, from CLUSTER SLOTS.
async fn master_of(client: &Client, slot: u16) -> Result<Client, BoxError> {
    let cmd = CustomCommand::new_static("CLUSTER", ClusterHash::Random, false);
    let reply: Value = client.custom(cmd, vec!["SLOTS"]).await?;
    let Value::Array(ranges) = reply else {
        return Err("CLUSTER SLOTS: not a list".into());
    };
    for r in ranges {
        let Value::Array(parts) = r else { continue };
        let (Some(a), Some(b), Some(Value::Array(m))) = (parts.first(), parts.get(1), parts.get(2))
        else {
            continue;
        };
        let (a, b) = (a.as_i64().unwrap_or(-1), b.as_i64().unwrap_or(-1));
        if (a..=b).contains(&i64::from(slot)) {
            let host = m.first().and_then(|h| h.as_string()).ok_or("no host")?;
            let port = m.get(1).and_then(|p| p.as_i64()).ok_or("no port")?;
            return node_client(&host, u16::try_from(port)?).await;
        }
    }
    Err(format!("no master for slot {slot}").into())
}

/// FCALL (calls, usec) on one node since its last CONFIG RESETSTAT.
async fn fcall_stats(node: &Client) -> Result<(u64, u64), BoxError> {
    let info: String = node.info(Some(fred::types::InfoKind::CommandStats)).await?;
    let line = info
        .lines()
        .find(|l| l.starts_with("cmdstat_fcall:"))
        .unwrap_or("");
    let field = |name: &str| -> u64 {
        line.split(name)
            .nth(1)
            .and_then(|s| s.split(',').next())
            .and_then(|s| s.parse().ok())
            .unwrap_or(0)
    };
    Ok((field("calls="), field("usec=")))
}

async fn reset_stats(node: &Client) -> Result<(), BoxError> {
    let cmd = CustomCommand::new_static("CONFIG", ClusterHash::Random, false);
    let _: Value = node.custom(cmd, vec!["RESETSTAT"]).await?;
    Ok(())
}

/// Waits until `client` has finished one more renewal round.
async fn next_round(client: &LockClient) -> Result<(), BoxError> {
    let start = client.stats().renewal_rounds;
    let deadline = Instant::now() + Duration::from_secs(10);
    while client.stats().renewal_rounds == start {
        if Instant::now() > deadline {
            return Err("no renewal round in 10 s".into());
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    // the round's reply has arrived; let its bookkeeping finish
    tokio::time::sleep(Duration::from_millis(20)).await;
    Ok(())
}

pub async fn b6(b: &mut Bench) -> Result<(), BoxError> {
    let list = std::env::var("B6_N").unwrap_or_else(|_| {
        if b.smoke.is_some() {
            "1,10,100"
        } else {
            "1,10,100,1000,10000"
        }
        .to_string()
    });
    let ns: Vec<usize> = list
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let prefix = format!("b6-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    let lease = Duration::from_secs(6);
    for n in ns {
        let holders = LockClient::connect(
            LockConfig::cluster(b.seeds.clone())
                .prefix(&prefix)
                .lease(lease),
        )
        .await?;
        let prober = b.client(&prefix, |c| c).await?;
        let lock = holders.rwlock(&format!("scale-{n}"))?;
        let took = Instant::now();
        let mut guards = Vec::with_capacity(n);
        let mut next = 0;
        while next < n {
            let batch: Vec<_> = (next..(next + 64).min(n))
                .map(|i| {
                    let l = lock.with_owner(format!("h{i}")).unwrap();
                    tokio::spawn(async move { l.read().await })
                })
                .collect();
            next += batch.len();
            for t in batch {
                guards.push(t.await??);
            }
        }
        let acquire_all = took.elapsed();
        let node = master_of(holders.redis(), lock.slot()).await?;

        // renewal rounds of the n owners, alone on the server (three, for the noise)
        tokio::time::sleep(Duration::from_millis(500)).await;
        next_round(&holders).await?;
        reset_stats(&node).await?;
        for _ in 0..3 {
            next_round(&holders).await?;
        }
        let (renew_calls, renew_usec) = fcall_stats(&node).await?;
        let renew_usec = renew_usec as f64 / 3.0;

        // the probe, right after a round: the next one is 2 s away
        next_round(&holders).await?;
        reset_stats(&node).await?;
        let probe = prober.rwlock(&format!("scale-{n}"))?;
        let mut lat = Vec::new();
        let end = Instant::now() + Duration::from_millis(1500);
        while Instant::now() < end {
            let t0 = Instant::now();
            if let Some(g) = probe.try_read().await? {
                g.release().await?;
            }
            lat.push(t0.elapsed().as_secs_f64() * 1000.0);
        }
        let (calls, usec) = fcall_stats(&node).await?;
        lat.sort_by(f64::total_cmp);
        let per_call = usec as f64 / calls.max(1) as f64;
        b.report(
            "B6",
            &format!("server µs per script call, {n} readers held"),
            per_call,
            "µs",
            "",
        );
        b.report(
            "B6",
            &format!("try_read+release p50, {n} readers held"),
            pct(&lat, 50.0),
            "ms",
            "",
        );
        b.report(
            "B6",
            &format!(
                "server µs per renewal round, {n} owners ({} calls)",
                renew_calls / 3
            ),
            renew_usec,
            "µs",
            "linear in n",
        );
        b.report(
            "B6",
            &format!("server µs per owner renewed, {n} owners"),
            renew_usec / n as f64,
            "µs",
            "flat",
        );
        eprintln!("B6: n={n}: {n} holds taken in {acquire_all:?}");
        // give the holds back before the next n, so that their releases are not measured
        let mut left = guards.into_iter();
        loop {
            let batch: Vec<_> = left
                .by_ref()
                .take(64)
                .map(|g| tokio::spawn(g.release()))
                .collect();
            if batch.is_empty() {
                break;
            }
            for t in batch {
                let _ = t.await?;
            }
        }
        holders.close().await;
        prober.close().await;
        node.quit().await?;
    }
    Ok(())
}
