//! The cost of TLS: B1 (uncontended cycles/s, 32 tasks on 32 names, one client) and B2
//! (hand-off latency: a release to the waiting writer's grant) on two six-node clusters of
//! local `redis-server` processes that differ only in TLS, measured in the same run, in
//! the order plaintext, TLS, TLS, plaintext. `cargo bench --bench tls_cost --features
//! tls`; `BENCH_SECONDS=n` sets each B1 run (default 5).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cluster_rwlock::{LockClient, LockConfig};
use cluster_rwlock_testkit::native_cluster::{NativeCluster, PASSWORD};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

async fn client(cluster: &NativeCluster, tls: bool, prefix: &str) -> Result<LockClient, BoxError> {
    let config = if tls {
        LockConfig::from_url(&cluster.url("rediss", PASSWORD))?.tls_ca_pem(cluster.ca())
    } else {
        LockConfig::from_url(&cluster.url("redis", PASSWORD))?
    };
    Ok(LockClient::connect(config.prefix(prefix)).await?)
}

/// Uncontended write/release cycles per second, 32 tasks on 32 names.
async fn b1(client: &LockClient, seconds: u64) -> Result<f64, BoxError> {
    let cycles = Arc::new(AtomicU64::new(0));
    let until = Instant::now() + Duration::from_secs(seconds);
    let mut tasks = Vec::new();
    for i in 0..32 {
        let lock = client.rwlock(&format!("b1-{i}"))?;
        let cycles = cycles.clone();
        tasks.push(tokio::spawn(async move {
            while Instant::now() < until {
                lock.write().await?.release().await?;
                cycles.fetch_add(1, Ordering::Relaxed);
            }
            Ok::<_, cluster_rwlock::Error>(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    Ok(cycles.load(Ordering::Relaxed) as f64 / seconds as f64)
}

/// Hand-off latencies (ms, sorted): a holder releases, a writer blocked in `write()` on
/// another client gets the lock.
async fn b2(a: &LockClient, b: &LockClient, rounds: usize) -> Result<Vec<f64>, BoxError> {
    let mine = a.rwlock("b2")?;
    let theirs = b.rwlock("b2")?;
    let mut latencies = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let held = mine.write().await?;
        let waiter = {
            let theirs = theirs.clone();
            tokio::spawn(async move {
                let g = theirs.write().await?;
                let at = Instant::now();
                g.release().await?;
                Ok::<_, cluster_rwlock::Error>(at)
            })
        };
        // the waiter is queued before the release
        tokio::time::sleep(Duration::from_millis(20)).await;
        let released = Instant::now();
        held.release().await?;
        let granted = waiter.await??;
        latencies.push(granted.duration_since(released).as_secs_f64() * 1000.0);
    }
    latencies.sort_by(f64::total_cmp);
    Ok(latencies)
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil().max(1.0) as usize;
    sorted[rank.min(sorted.len()) - 1]
}

async fn run() -> Result<(), BoxError> {
    let seconds = std::env::var("BENCH_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5u64);
    let plain = NativeCluster::start(false).await;
    let tls = NativeCluster::start(true).await;
    let mut rows = Vec::new();
    for (round, on_tls) in [false, true, true, false].into_iter().enumerate() {
        let cluster = if on_tls { &tls } else { &plain };
        let prefix = format!("tls-cost-{round}");
        let a = client(cluster, on_tls, &prefix).await?;
        let b = client(cluster, on_tls, &prefix).await?;
        let cycles = b1(&a, seconds).await?;
        let hand = b2(&a, &b, 200).await?;
        let (p50, p99) = (pct(&hand, 50.0), pct(&hand, 99.0));
        let link = if on_tls { "tls" } else { "plaintext" };
        println!(
            "{{\"bench\":\"tls_cost\",\"link\":\"{link}\",\"round\":{round},\"b1_cycles_per_s\":{cycles:.0},\"b2_p50_ms\":{p50:.3},\"b2_p99_ms\":{p99:.3}}}"
        );
        rows.push((link, cycles, p50, p99));
        a.close().await;
        b.close().await;
    }
    let mean = |link: &str, f: fn(&(&str, f64, f64, f64)) -> f64| {
        let v: Vec<f64> = rows.iter().filter(|r| r.0 == link).map(f).collect();
        v.iter().sum::<f64>() / v.len() as f64
    };
    println!("\n| link | B1 cycles/s | B2 p50 | B2 p99 |\n|---|---|---|---|");
    for link in ["plaintext", "tls"] {
        println!(
            "| {link} (mean of 2) | {:.0} | {:.3} ms | {:.3} ms |",
            mean(link, |r| r.1),
            mean(link, |r| r.2),
            mean(link, |r| r.3)
        );
    }
    println!(
        "| tls / plaintext | {:.2} x | {:.2} x | {:.2} x |",
        mean("tls", |r| r.1) / mean("plaintext", |r| r.1),
        mean("tls", |r| r.2) / mean("plaintext", |r| r.2),
        mean("tls", |r| r.3) / mean("plaintext", |r| r.3)
    );
    Ok(())
}

fn main() -> Result<(), BoxError> {
    // as the other benchmarks: one client on a 2-worker runtime
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(run())
}
