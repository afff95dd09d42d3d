//! B2 (hand-off latency between two clients) and B4 (server commands per contended
//! acquisition, 16 contenders on one name), for cluster-rwlock in both durabilities and
//! for rslock, on the same cluster in the same run.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cluster_rwlock::{Durability, LockClient, LockConfig};
use fred::prelude::*;
use fred::types::{ClusterHash, CustomCommand};

use crate::BoxError;

/// The `p`th percentile of `sorted`.
pub(crate) fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil().max(1.0) as usize;
    sorted[rank.min(sorted.len()) - 1]
}

async fn client(
    seeds: &[String],
    prefix: &str,
    durability: Durability,
) -> Result<LockClient, BoxError> {
    let config = LockConfig::cluster(seeds.to_vec())
        .prefix(prefix)
        .durability(durability);
    Ok(LockClient::connect(config).await?)
}

/// B2: a writer holds, a writer of another client waits; the time from the holder's
/// release call to the waiter's grant, `count` times (ms, sorted).
pub(crate) async fn b2_ours(
    seeds: &[String],
    prefix: &str,
    durability: Durability,
    count: usize,
) -> Result<Vec<f64>, BoxError> {
    let (a, b) = (
        client(seeds, prefix, durability).await?,
        client(seeds, prefix, durability).await?,
    );
    let locks = [a.rwlock("handoff")?, b.rwlock("handoff")?];
    locks[0].write().await?.release().await?; // warm-up: subscriptions, scripts
    locks[1].write().await?.release().await?;
    let mut holder = locks[0].write().await?;
    let mut latencies = Vec::with_capacity(count);
    for i in 0..count {
        let waiter = locks[(i + 1) % 2].clone();
        let task = tokio::spawn(async move {
            let g = waiter.write().await;
            (Instant::now(), g)
        });
        tokio::time::sleep(Duration::from_millis(5)).await;
        let t0 = Instant::now();
        holder.release().await?;
        let (t1, g) = task.await?;
        holder = g?;
        latencies.push((t1 - t0).as_secs_f64() * 1000.0);
    }
    holder.release().await?;
    a.close().await;
    b.close().await;
    latencies.sort_by(f64::total_cmp);
    Ok(latencies)
}

/// Every command the masters ran, by name (`INFO commandstats` calls; the calls a script
/// makes count, as they are the server's work), less the probe's own `INFO`.
pub(crate) async fn commands(masters: &[Client]) -> BTreeMap<String, u64> {
    let mut all = BTreeMap::new();
    for node in masters {
        let cmd = CustomCommand::new_static("INFO", ClusterHash::FirstKey, false);
        let info: String = node
            .custom(cmd, vec!["commandstats"])
            .await
            .unwrap_or_default();
        for (name, calls) in crate::probe::cmdstats(&info, "calls") {
            if name != "info" {
                *all.entry(name.to_string()).or_default() += calls as u64;
            }
        }
    }
    all
}

/// What B4 found for one library: grants, and the masters' commands per grant.
pub(crate) struct Contended {
    pub grants: u64,
    pub per_grant: f64,
    /// The commands that make up `per_grant`, each per grant, largest first.
    pub breakdown: Vec<(String, f64)>,
}

fn contended(
    grants: u64,
    before: &BTreeMap<String, u64>,
    after: &BTreeMap<String, u64>,
) -> Contended {
    let g = grants.max(1) as f64;
    let mut breakdown: Vec<(String, f64)> = after
        .iter()
        .map(|(k, v)| {
            (
                k.clone(),
                v.saturating_sub(*before.get(k).unwrap_or(&0)) as f64 / g,
            )
        })
        .filter(|(_, v)| *v >= 0.05)
        .collect();
    breakdown.sort_by(|a, b| b.1.total_cmp(&a.1));
    Contended {
        grants,
        per_grant: breakdown.iter().map(|(_, v)| v).sum(),
        breakdown,
    }
}

/// `tasks` contenders run `cycle` for `secs`; the grants, once every contender ended
/// its last cycle (the commands are read after that too).
async fn contend<F, Fut>(tasks: usize, secs: Duration, cycle: F) -> u64
where
    F: Fn(usize) -> Fut + Send + Sync + Clone + 'static,
    Fut: std::future::Future<Output = bool> + Send,
{
    crate::drive::run_for(tasks, secs, cycle).await.total
}

/// Contenders on one name, each: write, hold 2 ms, release.
pub(crate) const CONTENDERS: usize = 16;
const HOLD: Duration = Duration::from_millis(2);

/// B4 for cluster-rwlock: 16 owners of one client on one name.
pub(crate) async fn b4_ours(
    seeds: &[String],
    masters: &[Client],
    prefix: &str,
    durability: Durability,
    secs: Duration,
) -> Result<Contended, BoxError> {
    let c = client(seeds, prefix, durability).await?;
    let lock = c.rwlock("res")?;
    lock.write().await?.release().await?; // warm-up
    let owners: Arc<Vec<_>> = Arc::new(
        (0..CONTENDERS)
            .map(|i| lock.with_owner(format!("{}-{i}", lock.owner())).unwrap())
            .collect(),
    );
    let before = commands(masters).await;
    let grants = contend(CONTENDERS, secs, move |i| {
        let owners = owners.clone();
        async move {
            match owners[i].write().await {
                Ok(g) => {
                    tokio::time::sleep(HOLD).await;
                    g.release().await.is_ok()
                }
                Err(_) => false,
            }
        }
    })
    .await;
    let after = commands(masters).await;
    c.close().await;
    Ok(contended(grants, &before, &after))
}

/// B4 for rslock: 16 contenders on one name with `acquire` (which tries until it wins),
/// each on the `LockManager` of the name's master.
pub(crate) async fn b4_rslock(
    manager: Arc<rslock::LockManager>,
    name: String,
    masters: &[Client],
    secs: Duration,
) -> Contended {
    let before = commands(masters).await;
    let grants = contend(CONTENDERS, secs, move |_| {
        let (m, name) = (manager.clone(), name.clone());
        async move {
            let l = m
                .acquire_no_guard(name.as_bytes(), Duration::from_secs(30))
                .await;
            match l {
                Ok(l) => {
                    tokio::time::sleep(HOLD).await;
                    m.unlock(&l).await;
                    true
                }
                Err(_) => false,
            }
        }
    })
    .await;
    let after = commands(masters).await;
    contended(grants, &before, &after)
}
