//! A small service that coordinates several tasks through one lock and shows what the
//! `tracing` and `metrics` features give: traces to stdout, and the metrics printed
//! every second (counters and histograms of that second; a real service would install a Prometheus or StatsD exporter instead of
//! the debugging recorder used here). Starts its own six-node cluster.
//!
//! `cargo run --example observed --features metrics,tracing`

use std::time::Duration;

use cluster_rwlock::{LockClient, LockConfig};
use cluster_rwlock_testkit::TestCluster;
use metrics_util::debugging::{DebugValue, DebuggingRecorder};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    tracing_subscriber::fmt()
        .with_max_level(tracing::Level::DEBUG)
        .with_target(false)
        .init();
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder.install()?;

    let cluster = TestCluster::start().await?;
    let client = LockClient::connect(
        LockConfig::cluster(cluster.seed_urls()).lease(Duration::from_millis(1500)),
    )
    .await?;
    let lock = client.rwlock("inventory")?;

    let mut tasks = Vec::new();
    for t in 0..4 {
        let lock = lock.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..5 {
                if (t + i) % 3 == 0 {
                    let w = lock.write().await?;
                    tokio::time::sleep(Duration::from_millis(40)).await;
                    w.release().await?;
                } else {
                    let r = lock.read().await?;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    r.release().await?;
                }
            }
            Ok::<_, cluster_rwlock::Error>(())
        }));
    }
    let printer = tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_secs(1)).await;
            println!("--- metrics: counters and histograms over the last second, gauges now");
            let mut lines: Vec<String> = snapshotter
                .snapshot()
                .into_vec()
                .into_iter()
                .map(|(key, _, _, value)| {
                    let (_, key) = key.into_parts();
                    let labels: Vec<String> = key
                        .labels()
                        .map(|l| format!("{}={}", l.key(), l.value()))
                        .collect();
                    let value = match value {
                        DebugValue::Counter(c) => c.to_string(),
                        DebugValue::Gauge(g) => g.into_inner().to_string(),
                        DebugValue::Histogram(h) => {
                            let n = h.len().max(1) as f64;
                            let mean = h.iter().map(|v| v.into_inner()).sum::<f64>() / n;
                            format!("{} samples, mean {:.2} ms", h.len(), mean * 1e3)
                        }
                    };
                    format!("{}{{{}}} {value}", key.name(), labels.join(","))
                })
                .collect();
            lines.sort();
            for l in lines {
                println!("{l}");
            }
        }
    });
    for t in tasks {
        t.await??;
    }
    // one more renewal round to see, then the final metrics
    let held = lock.write().await?;
    tokio::time::sleep(Duration::from_millis(1200)).await;
    held.release().await?;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    printer.abort();
    client.close().await;
    Ok(())
}
