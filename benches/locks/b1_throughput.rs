//! B1: throughput of write cycles on independent locks (32 and 512 tasks), against the
//! server's own ceiling measured in the same run. The ratio to other lock libraries is
//! measured by `benches/peers`, which drives them on the same cluster in one run: no
//! figure from another run is compared here.

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use fred::prelude::*;

use super::common::{masters, node_client, Bench, BoxError};

pub(crate) async fn b1(b: &mut Bench) -> Result<(), BoxError> {
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
                "peers: benches/peers, same run"
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
