//! B1 side by side, in one run on one cluster: uncontended acquire+release cycles from
//! 32 tasks on 32 names, one client per library, for cluster-rwlock and the peers
//! `rslock` (a SET NX PX mutex; one `LockManager` per master, each name sent to the
//! master of its slot, since it does not follow a cluster) and `rds_lock` (a read/write
//! lock; on redis-rs's cluster connection), each with its defaults; and the server
//! ceiling: a trivial EVALSHA from the same 32 tasks. cluster-rwlock runs first and last,
//! so that drift of the machine shows.
//!
//! `cargo run --release -p cluster-rwlock-peers -- [--url redis://host:port]`
//! (without `--url` the test bed's cluster is started); `BENCH_SECONDS` (default 5).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cluster_rwlock::slot::key_slot;
use cluster_rwlock::testkit::TestCluster;
use cluster_rwlock::{LockClient, LockConfig};
use fred::prelude::*;
use fred::types::{ClusterHash, CustomCommand};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

const TASKS: usize = 32;

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    let i = args.iter().position(|a| a == name)?;
    args.get(i + 1).cloned()
}

/// Runs `cycle(task index)` from TASKS tasks for `secs`; cycles per second.
async fn drive<F, Fut>(secs: Duration, cycle: F) -> f64
where
    F: Fn(usize) -> Fut + Send + Sync + Clone + 'static,
    Fut: std::future::Future<Output = bool> + Send,
{
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for i in 0..TASKS {
        let (stop, done, cycle) = (stop.clone(), done.clone(), cycle.clone());
        tasks.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                if cycle(i).await {
                    done.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    let began = Instant::now();
    tokio::time::sleep(secs).await;
    stop.store(true, Ordering::Relaxed);
    let n = done.load(Ordering::Relaxed);
    let took = began.elapsed();
    for t in tasks {
        let _ = t.await;
    }
    n as f64 / took.as_secs_f64()
}

async fn ours(seeds: &[String], secs: Duration, tag: &str) -> Result<f64, BoxError> {
    let client = LockClient::connect(LockConfig::cluster(seeds.to_vec()).prefix(tag)).await?;
    let locks: Arc<Vec<_>> = Arc::new(
        (0..TASKS)
            .map(|i| client.rwlock(&format!("n{i}")))
            .collect::<Result<_, _>>()?,
    );
    let rate = drive(secs, move |i| {
        let locks = locks.clone();
        async move {
            match locks[i].write().await {
                Ok(g) => g.release().await.is_ok(),
                Err(_) => false,
            }
        }
    })
    .await;
    client.close().await;
    Ok(rate)
}

/// `(host:port)` of the master of every slot, from CLUSTER SLOTS.
async fn slot_masters(client: &Client) -> Result<Vec<(u16, u16, String)>, BoxError> {
    let cmd = CustomCommand::new_static("CLUSTER", ClusterHash::Random, false);
    let reply: Value = client.custom(cmd, vec!["SLOTS"]).await?;
    let mut out = Vec::new();
    if let Value::Array(ranges) = reply {
        for r in ranges {
            let Value::Array(p) = r else { continue };
            let (Some(a), Some(b), Some(Value::Array(m))) = (p.first(), p.get(1), p.get(2)) else {
                continue;
            };
            let host = m.first().and_then(|h| h.as_string()).unwrap_or_default();
            let port = m.get(1).and_then(|p| p.as_i64()).unwrap_or(0);
            out.push((
                u16::try_from(a.as_i64().unwrap_or(0))?,
                u16::try_from(b.as_i64().unwrap_or(0))?,
                format!("{host}:{port}"),
            ));
        }
    }
    Ok(out)
}

async fn rslock_rate(seeds: &[String], secs: Duration, tag: &str) -> Result<f64, BoxError> {
    let fred = Builder::from_config(Config::from_url(
        &seeds[0].replace("redis://", "redis-cluster://"),
    )?)
    .build()?;
    fred.init().await?;
    let ranges = slot_masters(&fred).await?;
    let _ = fred.quit().await;
    let mut managers = std::collections::HashMap::new();
    let mut per_task = Vec::new();
    for i in 0..TASKS {
        let name = format!("{tag}:n{i}");
        let slot = key_slot(name.as_bytes());
        let addr = ranges
            .iter()
            .find(|(a, b, _)| (*a..=*b).contains(&slot))
            .map(|r| r.2.clone())
            .ok_or("no master for a slot")?;
        let manager = managers
            .entry(addr.clone())
            .or_insert_with(|| Arc::new(rslock::LockManager::new(vec![format!("redis://{addr}/")])))
            .clone();
        per_task.push((manager, name));
    }
    let per_task = Arc::new(per_task);
    Ok(drive(secs, move |i| {
        let per_task = per_task.clone();
        async move {
            let (m, name) = &per_task[i];
            match m.lock(name.as_bytes(), Duration::from_secs(30)).await {
                Ok(l) => {
                    m.unlock(&l).await;
                    true
                }
                Err(_) => false,
            }
        }
    })
    .await)
}

async fn rds_lock_rate(seeds: &[String], secs: Duration, tag: &str) -> Result<f64, BoxError> {
    let client = redis::cluster::ClusterClient::new(seeds.to_vec())?;
    let con = client.get_async_connection().await?;
    let tag = tag.to_string();
    Ok(drive(secs, move |i| {
        let con = con.clone();
        let key = format!("{tag}:n{i}");
        async move {
            match rds_lock::Locker::new(con).lock(key).await {
                Ok(unlock) => unlock.await.is_ok(),
                Err(_) => false,
            }
        }
    })
    .await)
}

/// A trivial EVALSHA from the same tasks, one round trip each: what the server and this
/// machine allow a call that does nothing.
async fn ceiling(seeds: &[String], secs: Duration) -> Result<f64, BoxError> {
    let fred = Builder::from_config(Config::from_url(
        &seeds[0].replace("redis://", "redis-cluster://"),
    )?)
    .build()?;
    fred.init().await?;
    let script = fred::types::scripts::Script::from_lua("return 1");
    script.load(&fred).await?;
    let fred2 = fred.clone();
    let rate = drive(secs, move |i| {
        let (fred, sha) = (fred2.clone(), script.sha1().clone());
        async move {
            let r: Result<i64, _> = fred
                .evalsha(sha, vec![format!("c{i}")], Vec::<String>::new())
                .await;
            r.is_ok()
        }
    })
    .await;
    let _ = fred.quit().await;
    Ok(rate)
}

async fn run() -> Result<(), BoxError> {
    let secs = Duration::from_secs(
        std::env::var("BENCH_SECONDS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(5),
    );
    let (seeds, _cluster) = match arg("--url") {
        Some(url) => (vec![url], None),
        None => {
            let c = TestCluster::start().await?;
            (c.seed_urls(), Some(c))
        }
    };
    let tag = format!("peers-{}", std::process::id());
    let mut rows: Vec<(&str, f64)> = Vec::new();
    rows.push((
        "cluster-rwlock (first)",
        ours(&seeds, secs, &format!("{tag}a")).await?,
    ));
    rows.push(("rslock 0.7", rslock_rate(&seeds, secs, &tag).await?));
    rows.push((
        "rds_lock 1.0",
        rds_lock_rate(&seeds, secs, &format!("{tag}r")).await?,
    ));
    rows.push((
        "cluster-rwlock (last)",
        ours(&seeds, secs, &format!("{tag}b")).await?,
    ));
    rows.push(("ceiling: EVALSHA return 1", ceiling(&seeds, secs).await?));
    let mine = (rows[0].1 + rows[3].1) / 2.0;
    println!(
        "\n| B1, {TASKS} tasks, {} s each | cycles/s | cluster-rwlock / it |\n|---|---|---|",
        secs.as_secs()
    );
    for (name, rate) in &rows {
        println!("| {name} | {rate:.0} | {:.2} x |", mine / rate.max(1e-9));
        println!(r#"{{"bench":"B1-peers","who":"{name}","cycles_per_s":{rate:.1}}}"#);
    }
    Ok(())
}

fn main() -> Result<(), BoxError> {
    // as B1: one client on a 2-worker runtime
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(run())
}
