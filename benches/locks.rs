//! Lock benchmarks: throughput, hand-off latency, writer wait, attempts per grant and
//! fairness, footprint. Run with `cargo bench` (starts the test bed's cluster) or
//! `cargo bench --bench locks -- --url redis://host:port`.
//!
//! B6 (scale: cost as the number of readers of one lock grows) is in `locks/scale.rs`.
//!
//! Options: `--only B1,B3` runs a subset; `BENCH_SECONDS=n` shortens every timed run to
//! n seconds and scales the counts down (a smoke run). Prints one JSON line per result,
//! then a Markdown table, and writes `target/bench/handoff.png`.

use std::collections::HashMap;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cluster_rwlock::testkit::{rss_kib, TestCluster};
use cluster_rwlock::{LockClient, LockConfig};
use fred::prelude::*;
use fred::types::{ClusterHash, CustomCommand};

#[path = "locks/scale.rs"]
mod scale;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

struct Bench {
    seeds: Vec<String>,
    smoke: Option<u64>,
    rows: Vec<(String, String, String, String)>,
}

impl Bench {
    fn secs(&self, full: u64) -> Duration {
        Duration::from_secs(self.smoke.unwrap_or(full).min(full))
    }
    fn count(&self, full: usize) -> usize {
        if self.smoke.is_some() {
            (full / 10).max(5)
        } else {
            full
        }
    }
    fn report(&mut self, bench: &str, metric: &str, value: f64, unit: &str, target: &str) {
        println!(
            r#"{{"bench":"{bench}","metric":"{metric}","value":{value:.4},"unit":"{unit}","target":"{target}"}}"#
        );
        self.rows.push((
            bench.into(),
            metric.into(),
            format!("{} {unit}", pretty(value)),
            target.into(),
        ));
    }
    async fn client(
        &self,
        prefix: &str,
        tune: impl FnOnce(LockConfig) -> LockConfig,
    ) -> Result<LockClient, BoxError> {
        Ok(
            LockClient::connect(tune(LockConfig::cluster(self.seeds.clone()).prefix(prefix)))
                .await?,
        )
    }
}

fn pretty(v: f64) -> String {
    if v.abs() >= 1000.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

/// Nearest-rank percentile of sorted values.
fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil().max(1.0) as usize;
    sorted[rank.min(sorted.len()) - 1]
}

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

/// `(host, port)` of every master, from CLUSTER NODES.
async fn masters(client: &Client) -> Result<Vec<(String, u16)>, BoxError> {
    let cmd = CustomCommand::new_static("CLUSTER", ClusterHash::Random, false);
    let nodes: String = client.custom(cmd, vec!["NODES"]).await?;
    Ok(nodes
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() > 8 && f[2].contains("master") && !f[2].contains("fail") {
                let addr = f[1].split('@').next()?;
                let (h, p) = addr.rsplit_once(':')?;
                Some((h.to_string(), p.parse().ok()?))
            } else {
                None
            }
        })
        .collect())
}

async fn node_client(host: &str, port: u16) -> Result<Client, BoxError> {
    let c = Builder::from_config(Config::from_url(&format!("redis://{host}:{port}"))?).build()?;
    c.init().await?;
    Ok(c)
}

/// EVALSHA calls recorded by every master.
async fn evalsha_calls(client: &Client) -> Result<u64, BoxError> {
    let mut total = 0;
    for (h, p) in masters(client).await? {
        let c = node_client(&h, p).await?;
        let info: String = c.info(Some(fred::types::InfoKind::CommandStats)).await?;
        total += info
            .lines()
            .find(|l| l.starts_with("cmdstat_evalsha:"))
            .and_then(|l| {
                l.split("calls=")
                    .nth(1)?
                    .split(',')
                    .next()?
                    .parse::<u64>()
                    .ok()
            })
            .unwrap_or(0);
        c.quit().await?;
    }
    Ok(total)
}

// ---------------------------------------------------------------- B1

async fn b1(b: &mut Bench) -> Result<(), BoxError> {
    for (label, tasks) in [("B1", 32usize), ("B1-wide", 512)] {
        let client = b.client(&format!("b1-{tasks}"), |c| c).await?;
        let locks: Vec<_> = (0..tasks)
            .map(|i| client.rwlock(&format!("t{i}")))
            .collect::<Result<_, _>>()?;
        for l in &locks {
            l.write().await?.release().await?; // warm-up grant
        }
        let run = b.secs(8);
        let stop = Arc::new(AtomicBool::new(false));
        let cycles = Arc::new(AtomicU64::new(0));
        let began = Instant::now();
        let handles: Vec<_> = locks
            .into_iter()
            .map(|lock| {
                let (stop, cycles) = (stop.clone(), cycles.clone());
                tokio::spawn(async move {
                    while !stop.load(Ordering::Relaxed) {
                        lock.write().await?.release().await?;
                        cycles.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok::<_, cluster_rwlock::Error>(())
                })
            })
            .collect();
        tokio::time::sleep(run).await;
        stop.store(true, Ordering::Relaxed);
        for h in handles {
            h.await??;
        }
        let rate = cycles.load(Ordering::Relaxed) as f64 / began.elapsed().as_secs_f64();
        b.report(
            label,
            &format!("cycles/s ({tasks} tasks)"),
            rate,
            "1/s",
            if tasks == 32 {
                ">= 51000"
            } else {
                ">= 0.5 x ceiling"
            },
        );
        b.rows.last_mut().unwrap().2 = format!("{rate:.0} /s");
        client.close().await;
        if tasks == 512 {
            if let Some(ceiling) = ceiling(b).await? {
                b.report(
                    "B1",
                    "server ceiling (evalsha hincrby / 2)",
                    ceiling,
                    "1/s",
                    "",
                );
                b.report("B1-wide", "ratio to ceiling", rate / ceiling, "x", ">= 0.5");
            }
        } else {
            b.report(
                "B1",
                "ratio to best peer (51000)",
                rate / 51000.0,
                "x",
                ">= 1",
            );
        }
    }
    Ok(())
}

/// The server's ceiling: redis-benchmark on a one-command EVALSHA, requests/s / 2.
async fn ceiling(b: &mut Bench) -> Result<Option<f64>, BoxError> {
    if Command::new("redis-benchmark")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("redis-benchmark not found (Debian's redis-tools): no ceiling");
        return Ok(None);
    }
    let probe = b.client("b1-ceiling", |c| c).await?;
    let script = "return redis.call('hincrby', KEYS[1], ARGV[1], 1)";
    let mut sha = String::new();
    for (h, p) in masters(probe.redis()).await? {
        let c = node_client(&h, p).await?;
        sha = c.script_load(script).await?;
        c.quit().await?;
    }
    let (host, port) = masters(probe.redis())
        .await?
        .into_iter()
        .next()
        .ok_or("no master")?;
    let n = if b.smoke.is_some() { 60_000 } else { 600_000 };
    let out = tokio::task::spawn_blocking(move || {
        Command::new("redis-benchmark")
            .args([
                "-h",
                &host,
                "-p",
                &port.to_string(),
                "--cluster",
                "-c",
                "32",
                "-P",
                "32",
                "-n",
                &n.to_string(),
                "-q",
            ])
            .args(["evalsha", &sha, "1", "b1:{tag}:__rand_int__", "tok"])
            .stderr(Stdio::null())
            .output()
    })
    .await??;
    let text = String::from_utf8_lossy(&out.stdout);
    // "...: 123456.78 requests per second, p50=..."; progress lines end in \r
    let rps = text
        .split(['\r', '\n'])
        .filter_map(|l| {
            l.split(" requests per second")
                .next()
                .filter(|_| l.contains("requests per second"))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .next_back();
    let _: i64 = probe
        .redis()
        .del("b1:{tag}:__rand_int__")
        .await
        .unwrap_or(0);
    probe.close().await;
    Ok(rps.map(|r| r / 2.0))
}

// ---------------------------------------------------------------- B2

async fn b2(b: &mut Bench) -> Result<HashMap<bool, Vec<f64>>, BoxError> {
    let mut all = HashMap::new();
    for notifications in [true, false] {
        let prefix = format!("b2-{notifications}");
        let a = b
            .client(&prefix, |c| c.notifications(notifications))
            .await?;
        let bb = b
            .client(&prefix, |c| c.notifications(notifications))
            .await?;
        let locks = [a.rwlock("handoff")?, bb.rwlock("handoff")?];
        locks[0].write().await?.release().await?; // warm-up grant
        let mut holder = locks[0].write().await?;
        let mut latencies = Vec::new();
        for i in 0..b.count(200) {
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
        latencies.sort_by(f64::total_cmp);
        let tag = if notifications { "on" } else { "off" };
        let target = |t: &str| {
            if notifications {
                t.to_string()
            } else {
                String::new()
            }
        };
        b.report(
            "B2",
            &format!("hand-off p50, notifications {tag}"),
            pct(&latencies, 50.0),
            "ms",
            &target("<= 0.5"),
        );
        b.report(
            "B2",
            &format!("hand-off p90, notifications {tag}"),
            pct(&latencies, 90.0),
            "ms",
            "",
        );
        b.report(
            "B2",
            &format!("hand-off p99, notifications {tag}"),
            pct(&latencies, 99.0),
            "ms",
            &target("<= 2"),
        );
        b.report(
            "B2",
            &format!("hand-off max, notifications {tag}"),
            pct(&latencies, 100.0),
            "ms",
            "",
        );
        all.insert(notifications, latencies);
        a.close().await;
        bb.close().await;
    }
    Ok(all)
}

fn plot(latencies: &HashMap<bool, Vec<f64>>, path: &std::path::Path) -> Result<(), BoxError> {
    use plotters::prelude::*;
    let font = std::fs::read("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")
        .map_err(|e| format!("the plot needs DejaVuSans (Debian's fonts-dejavu-core): {e}"))?;
    let font: &'static [u8] = Box::leak(font.into_boxed_slice());
    plotters::style::register_font("sans-serif", FontStyle::Normal, font).map_err(|_| "font")?;
    std::fs::create_dir_all(path.parent().unwrap())?;
    let root = BitMapBackend::new(path, (900, 520)).into_drawing_area();
    root.fill(&WHITE)?;
    let max = latencies.values().flatten().copied().fold(0.1, f64::max) * 1.5;
    let mut chart = ChartBuilder::on(&root)
        .caption("B2 hand-off latency (CDF, log scale)", ("sans-serif", 22))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(55)
        .build_cartesian_2d((0.05f64..max).log_scale(), 0f64..100f64)?;
    chart
        .configure_mesh()
        .x_desc("latency (ms)")
        .y_desc("% of hand-offs")
        .label_style(("sans-serif", 14))
        .draw()?;
    for (on, color) in [(true, &BLUE), (false, &RED)] {
        let Some(v) = latencies.get(&on) else {
            continue;
        };
        let n = v.len() as f64;
        let points: Vec<(f64, f64)> = v
            .iter()
            .enumerate()
            .map(|(i, x)| (x.max(0.05), (i + 1) as f64 * 100.0 / n))
            .collect();
        let label = if on {
            "notifications on (sharded pub/sub)"
        } else {
            "notifications off (retry every 50 ms)"
        };
        chart
            .draw_series(LineSeries::new(points, color.stroke_width(2)))?
            .label(label)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .draw()?;
    root.present()?;
    Ok(())
}

// ---------------------------------------------------------------- B3

async fn b3(b: &mut Bench) -> Result<(), BoxError> {
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

// ---------------------------------------------------------------- B4

/// `owners` owners on one client, one lock: write, hold 2 ms, release. Returns the grants
/// per owner and the client's stats.
async fn b4_run(
    client: &LockClient,
    owners: usize,
    run: Duration,
) -> Result<(Vec<u64>, cluster_rwlock::ClientStats), BoxError> {
    let lock = client.rwlock("res")?;
    let stop = Arc::new(AtomicBool::new(false));
    let handles: Vec<_> = (0..owners)
        .map(|i| {
            let lock = lock.with_owner(format!("{}-{i}", lock.owner()));
            let stop = stop.clone();
            tokio::spawn(async move {
                let mut grants = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let g = lock.write().await?;
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    g.release().await?;
                    grants += 1;
                }
                Ok::<_, cluster_rwlock::Error>(grants)
            })
        })
        .collect();
    tokio::time::sleep(run).await;
    stop.store(true, Ordering::Relaxed);
    let mut grants = Vec::new();
    for h in handles {
        grants.push(h.await??); // drains: each finishes its current wait
    }
    Ok((grants, client.stats()))
}

fn jain(x: &[u64]) -> f64 {
    let sum: f64 = x.iter().map(|&v| v as f64).sum();
    let sq: f64 = x.iter().map(|&v| (v as f64).powi(2)).sum();
    sum * sum / (x.len() as f64 * sq)
}

async fn b4(b: &mut Bench) -> Result<(), BoxError> {
    let client = b.client("b4", |c| c).await?;
    client.rwlock("res")?.write().await?.release().await?; // warm-up grant
    let before = client.stats();
    let server_before = evalsha_calls(client.redis()).await?;
    let began = Instant::now();
    let (grants, after) = b4_run(&client, 16, b.secs(6)).await?;
    let elapsed = began.elapsed().as_secs_f64();
    let server = evalsha_calls(client.redis()).await? - server_before;
    let total: u64 = grants.iter().sum();
    let attempts = (after.attempts - before.attempts) as f64 / total as f64;
    b.report(
        "B4",
        "acquire attempts per grant (1 process)",
        attempts,
        "",
        "<= 1.5",
    );
    b.report(
        "B4",
        "server EVALSHA per grant (acquire + release + renew)",
        server as f64 / total as f64,
        "",
        "",
    );
    b.report(
        "B4",
        "round trips per grant (1 process)",
        (after.round_trips - before.round_trips) as f64 / total as f64,
        "",
        "<= 2.5",
    );
    b.report(
        "B4",
        "grants/s (1 process)",
        total as f64 / elapsed,
        "1/s",
        "",
    );
    b.report(
        "B4",
        "Jain fairness (1 process)",
        jain(&grants),
        "",
        ">= 0.95",
    );
    client.close().await;

    // 16 owners over 4 processes
    let exe = std::env::current_exe()?;
    let secs = b.secs(6).as_secs().to_string();
    let children: Vec<_> = (0..4)
        .map(|_| {
            Command::new(&exe)
                .args([
                    "--child-b4",
                    "--seeds",
                    &b.seeds.join(","),
                    "--seconds",
                    &secs,
                ])
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
        })
        .collect::<Result<_, _>>()?;
    let (mut grants, mut attempts) = (Vec::new(), 0u64);
    for c in children {
        let out = c.wait_with_output()?;
        let text = String::from_utf8_lossy(&out.stdout);
        let line = text
            .lines()
            .find(|l| l.starts_with("CHILD "))
            .ok_or("child result")?;
        let mut parts = line["CHILD ".len()..].split(' ');
        attempts += parts.next().ok_or("attempts")?.parse::<u64>()?;
        grants.extend(
            parts
                .map(|g| g.parse::<u64>())
                .collect::<Result<Vec<_>, _>>()?,
        );
    }
    let total: u64 = grants.iter().sum();
    b.report(
        "B4",
        "acquire attempts per grant (4 processes)",
        attempts as f64 / total.max(1) as f64,
        "",
        "<= 3",
    );
    b.report("B4", "Jain fairness (4 processes)", jain(&grants), "", "");
    Ok(())
}

async fn b4_child() -> Result<(), BoxError> {
    let seeds: Vec<String> = arg("--seeds")
        .ok_or("--seeds")?
        .split(',')
        .map(String::from)
        .collect();
    let secs: u64 = arg("--seconds").ok_or("--seconds")?.parse()?;
    let client = LockClient::connect(LockConfig::cluster(seeds).prefix("b4x")).await?;
    client.rwlock("res")?.write().await?.release().await?; // warm-up grant
    let before = client.stats().attempts;
    let (grants, after) = b4_run(&client, 4, Duration::from_secs(secs)).await?;
    let g: Vec<String> = grants.iter().map(u64::to_string).collect();
    println!("CHILD {} {}", after.attempts - before, g.join(" "));
    Ok(())
}

// ---------------------------------------------------------------- B5

async fn memory_usage(client: &LockClient, key: &str, slot: u16) -> Result<Option<i64>, BoxError> {
    let cmd = CustomCommand::new_static("MEMORY", ClusterHash::Custom(slot), false);
    Ok(client
        .redis()
        .custom(cmd, vec!["USAGE", key, "SAMPLES", "0"])
        .await?)
}

async fn b5(b: &mut Bench) -> Result<(), BoxError> {
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

async fn run() -> Result<(), BoxError> {
    let only: Option<Vec<String>> =
        arg("--only").map(|s| s.split(',').map(|x| x.trim().to_uppercase()).collect());
    let wants = |name: &str| only.as_ref().is_none_or(|o| o.iter().any(|x| x == name));
    let smoke = std::env::var("BENCH_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok());
    let (seeds, _cluster) = match arg("--url") {
        Some(url) => (vec![url], None),
        None => {
            let c = TestCluster::start().await?;
            (c.seed_urls(), Some(c))
        }
    };
    let mut b = Bench {
        seeds,
        smoke,
        rows: Vec::new(),
    };
    if wants("B1") {
        b1(&mut b).await?;
    }
    if wants("B2") {
        let latencies = b2(&mut b).await?;
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench/handoff.png");
        match plot(&latencies, &path) {
            Ok(()) => eprintln!("plot: {}", path.display()),
            Err(e) => eprintln!("no plot: {e}"),
        }
    }
    if wants("B3") {
        b3(&mut b).await?;
    }
    if wants("B4") {
        b4(&mut b).await?;
    }
    if wants("B5") {
        b5(&mut b).await?;
    }
    if wants("B6") {
        scale::b6(&mut b).await?;
    }
    println!("\n| bench | metric | value | target |\n|---|---|---|---|");
    for (bench, metric, value, target) in &b.rows {
        println!("| {bench} | {metric} | {value} | {target} |");
    }
    Ok(())
}

fn main() -> Result<(), BoxError> {
    // the definitions say: one client on a 2-worker runtime
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    if std::env::args().any(|a| a == "--child-b4") {
        return rt.block_on(b4_child());
    }
    rt.block_on(run())
}
