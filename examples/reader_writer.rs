//! Reader and writer services coordinating on one shared resource through the lock.
//!
//! ```sh
//! cargo run --example reader_writer       # starts its own six-node cluster
//! cargo run --example reader_writer -- --url redis://127.0.0.1:7000 --seconds 20
//! ```
//!
//! Each service has its own client (as separate processes would). Readers read the
//! resource under a read hold; writers update it under the write hold and hand their fence
//! to the resource, which refuses fences lower than one it has accepted. A live summary
//! prints every second; the final check fails the program if a write overlapped anything.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cluster_rwlock::{LockClient, LockConfig};
use cluster_rwlock_testkit::TestCluster;

const READERS: usize = 5;
const WRITERS: usize = 3;

/// The shared resource, with the checks a real one would make.
#[derive(Default)]
struct Resource {
    readers: AtomicI64,
    writers: AtomicI64,
    highest_fence: AtomicU64,
    overlaps: AtomicU64,
    stale_fences: AtomicU64,
    value: AtomicU64,
}

impl Resource {
    fn enter_read(&self) {
        self.readers.fetch_add(1, Ordering::SeqCst);
        if self.writers.load(Ordering::SeqCst) != 0 {
            self.overlaps.fetch_add(1, Ordering::Relaxed);
        }
    }
    fn leave_read(&self) {
        self.readers.fetch_sub(1, Ordering::SeqCst);
    }
    fn write(&self, fence: u64) {
        if self.writers.fetch_add(1, Ordering::SeqCst) != 0
            || self.readers.load(Ordering::SeqCst) != 0
        {
            self.overlaps.fetch_add(1, Ordering::Relaxed);
        }
        if self.highest_fence.fetch_max(fence, Ordering::SeqCst) >= fence {
            self.stale_fences.fetch_add(1, Ordering::Relaxed);
        }
        self.value.fetch_add(1, Ordering::Relaxed);
    }
    fn leave_write(&self) {
        self.writers.fetch_sub(1, Ordering::SeqCst);
    }
}

#[derive(Default)]
struct Stats {
    reads: AtomicU64,
    writes: AtomicU64,
    wait_us_total: AtomicU64,
    wait_us_max: AtomicU64,
}

impl Stats {
    fn waited(&self, d: Duration) {
        let us = d.as_micros() as u64;
        self.wait_us_total.fetch_add(us, Ordering::Relaxed);
        self.wait_us_max.fetch_max(us, Ordering::Relaxed);
    }
}

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let seconds: u64 = arg("--seconds")
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(10);
    // keep the embedded cluster alive until the end
    let (seeds, _cluster) = match arg("--url") {
        Some(url) => (vec![url], None),
        None => {
            println!("starting a six-node Redis Cluster in Docker (use --url to use your own)...");
            let cluster = TestCluster::start().await?;
            (cluster.seed_urls(), Some(cluster))
        }
    };
    let prefix = format!("demo-{}", std::process::id());
    let resource = Arc::new(Resource::default());
    let stats = Arc::new(Stats::default());
    let until = Instant::now() + Duration::from_secs(seconds);

    let mut services = Vec::new();
    for i in 0..READERS + WRITERS {
        let config = LockConfig::cluster(seeds.clone())
            .prefix(&prefix)
            .lease(Duration::from_secs(5));
        let client = LockClient::connect(config).await?;
        let lock = client.rwlock("inventory")?;
        let (resource, stats) = (resource.clone(), stats.clone());
        let writer = i >= READERS;
        services.push(tokio::spawn(async move {
            while Instant::now() < until {
                let asked = Instant::now();
                if writer {
                    let guard = lock.write_timeout(Duration::from_secs(5)).await?;
                    stats.waited(asked.elapsed());
                    resource.write(guard.fence());
                    tokio::time::sleep(Duration::from_millis(8)).await;
                    resource.leave_write();
                    guard.release().await?;
                    stats.writes.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(30)).await;
                } else {
                    let guard = lock.read_timeout(Duration::from_secs(5)).await?;
                    stats.waited(asked.elapsed());
                    resource.enter_read();
                    tokio::time::sleep(Duration::from_millis(15)).await;
                    resource.leave_read();
                    guard.release().await?;
                    stats.reads.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
            client.close().await;
            Ok::<_, cluster_rwlock::Error>(())
        }));
    }

    println!("{READERS} readers and {WRITERS} writers on lock \"inventory\" for {seconds} s");
    println!(
        "{:>4}  {:>7}  {:>7}  {:>10}  {:>9}  {:>18}",
        "s", "reads", "writes", "avg wait", "max wait", "highest fence"
    );
    let started = Instant::now();
    while Instant::now() < until {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let (r, w) = (
            stats.reads.load(Ordering::Relaxed),
            stats.writes.load(Ordering::Relaxed),
        );
        let avg =
            stats.wait_us_total.load(Ordering::Relaxed) as f64 / (r + w).max(1) as f64 / 1000.0;
        println!(
            "{:>4}  {:>7}  {:>7}  {:>8.2}ms  {:>7.1}ms  {:>18}",
            started.elapsed().as_secs(),
            r,
            w,
            avg,
            stats.wait_us_max.load(Ordering::Relaxed) as f64 / 1000.0,
            resource.highest_fence.load(Ordering::Relaxed)
        );
    }
    let mut failed = 0;
    for s in services {
        if let Err(e) = s.await? {
            eprintln!("a service failed: {e}");
            failed += 1;
        }
    }
    let overlaps = resource.overlaps.load(Ordering::Relaxed);
    let stale = resource.stale_fences.load(Ordering::Relaxed);
    println!(
        "final check: {} reads, {} writes, {overlaps} overlapping writes, {stale} stale fences, {failed} failed services",
        stats.reads.load(Ordering::Relaxed),
        stats.writes.load(Ordering::Relaxed)
    );
    if overlaps + stale + failed > 0 {
        return Err("the lock let a write overlap (see above)".into());
    }
    println!("OK: no write overlapped anything");
    Ok(())
}
