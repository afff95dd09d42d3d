//! B2 (hand-off latency between two clients) and B4 (server commands per contended
//! acquisition, 16 contenders on one name), for cluster-rwlock in both durabilities and
//! for rslock, on the same cluster in the same run.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cluster_rwlock::{Durability, LockClient, LockConfig};
use fred::clients::SubscriberClient;
use fred::prelude::*;
use fred::types::{ClusterHash, CustomCommand};

use crate::uncontended::{cluster_client_with, Socket};
use crate::BoxError;

/// `B2_SPY=1`: a subscriber of its own to `channel` on `master`, which times each
/// release message's arrival (the time from the release call to its message, beside
/// B2's).
async fn spy(master: Option<&str>, channel: &str) -> Result<Option<SubscriberClient>, BoxError> {
    let (Some(master), Ok(_)) = (master, std::env::var("B2_SPY")) else {
        return Ok(None);
    };
    Ok(Some(subscribed(master, channel).await?))
}

/// A subscriber connection to `master`, subscribed to the sharded `channel`.
async fn subscribed(master: &str, channel: &str) -> Result<SubscriberClient, BoxError> {
    let sub = Builder::from_config(Config::from_url(&format!("redis://{master}"))?)
        .build_subscriber_client()?;
    sub.init().await?;
    sub.ssubscribe(channel.to_string()).await?;
    Ok(sub)
}

/// The arrival of the next message `spy` gets, timed in a task of its own.
fn spy_next(spy: &Option<SubscriberClient>) -> Option<tokio::task::JoinHandle<Option<Instant>>> {
    let mut rx = spy.as_ref()?.message_rx();
    Some(tokio::spawn(async move {
        rx.recv().await.ok().map(|_| Instant::now())
    }))
}

/// When the message `spied` waited for came, in ms after `t0` (`None` without a spy).
async fn heard(
    spied: Option<tokio::task::JoinHandle<Option<Instant>>>,
    t0: Instant,
) -> Option<f64> {
    let at = spied?.await.ok()??;
    Some((at - t0).as_secs_f64() * 1000.0)
}

/// Prints the spy's p50 (ms from the release call to its message).
fn spy_report(who: &str, mut at: Vec<f64>) {
    if at.is_empty() {
        return;
    }
    at.sort_by(f64::total_cmp);
    eprintln!(
        "B2 spy {who}: release call to message p50 {:.3} ms",
        pct(&at, 50.0)
    );
}

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
    master: Option<&str>,
) -> Result<Vec<f64>, BoxError> {
    let (a, b) = (
        client(seeds, prefix, durability).await?,
        client(seeds, prefix, durability).await?,
    );
    let locks = [a.rwlock("handoff")?, b.rwlock("handoff")?];
    let spy = spy(master, locks[0].channel()).await?;
    let mut heard_at = Vec::new();
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
        let spied = spy_next(&spy);
        tokio::time::sleep(Duration::from_millis(5)).await;
        let t0 = Instant::now();
        holder.release().await?;
        let (t1, g) = task.await?;
        holder = g?;
        latencies.push((t1 - t0).as_secs_f64() * 1000.0);
        heard_at.extend(heard(spied, t0).await);
    }
    spy_report(&format!("{durability:?}"), heard_at);
    holder.release().await?;
    a.close().await;
    b.close().await;
    latencies.sort_by(f64::total_cmp);
    Ok(latencies)
}

/// B2's floor: the same hand-off with no logic around it, through fred, as B2 times
/// ours (a holder's call that hands the lock over and publishes on the key's channel,
/// `floor_hand_over`; the waiter, subscribed to that channel on the slot's master,
/// reading fred's messages itself and then making one call, `floor_take`; the two
/// clients taking turns): what any lock that wakes its waiter by a message and takes the
/// lock with one call could do through this client. Ms, sorted.
pub(crate) async fn b2_floor(
    seeds: &[String],
    master: &str,
    tag: &str,
    count: usize,
) -> Result<Vec<f64>, BoxError> {
    let key = format!("{tag}:{{handoff-floor}}");
    let channel = format!("{key}:released");
    // (on connections set as the lock's are)
    let calls = [
        cluster_client_with(&seeds[0], Socket::LockLike).await?,
        cluster_client_with(&seeds[0], Socket::LockLike).await?,
    ];
    crate::uncontended::load_floor(&calls[0]).await?;
    let subs = [
        subscribed(master, &channel).await?,
        subscribed(master, &channel).await?,
    ];
    let spy = spy(Some(master), &channel).await?;
    let mut heard_at = Vec::new();
    let mut latencies = Vec::with_capacity(count);
    for i in 0..count {
        let (holder, waiter) = (i % 2, (i + 1) % 2);
        let spied = spy_next(&spy);
        let name = format!("w{waiter}");
        let mut messages = subs[waiter].message_rx();
        let take = calls[waiter].clone();
        let (k, ch, who) = (key.clone(), channel.clone(), name.clone());
        let task = tokio::spawn(async move {
            loop {
                match messages.recv().await {
                    Ok(m) if &*m.channel == ch.as_str() => break,
                    Ok(_) => continue,
                    Err(e) => return Err(format!("the floor's waiter: {e}")),
                }
            }
            let r: Result<Value, _> = take.fcall("floor_take", vec![k], vec![who]).await;
            r.map(|_| Instant::now()).map_err(|e| e.to_string())
        });
        tokio::time::sleep(Duration::from_millis(5)).await;
        let t0 = Instant::now();
        let _: Value = calls[holder]
            .fcall(
                "floor_hand_over",
                vec![key.clone()],
                vec![name, i.to_string()],
            )
            .await?;
        let t1 = task.await??;
        latencies.push((t1 - t0).as_secs_f64() * 1000.0);
        heard_at.extend(heard(spied, t0).await);
    }
    spy_report("floor", heard_at);
    let _: Result<i64, _> = calls[0].del(&key).await;
    for sub in &subs {
        let _ = sub.quit().await;
    }
    for c in &calls {
        let _ = c.quit().await;
    }
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
