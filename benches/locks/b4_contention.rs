//! B4: acquire attempts and round trips per grant, and fairness, with 16 owners in one
//! process and over four (child processes of this benchmark).

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cluster_rwlock::{LockClient, LockConfig};

use super::common::{arg, function_calls, Bench, BoxError};

/// `owners` owners on one client, one lock: write, hold 2 ms, release. Returns the grants
/// per owner and the client's stats.
async fn b4_run(
    client: &LockClient,
    owners: usize,
    run: Duration,
) -> Result<(Vec<u64>, cluster_rwlock::operator::ClientStats), BoxError> {
    let lock = client.rwlock("res")?;
    let stop = Arc::new(AtomicBool::new(false));
    let handles: Vec<_> = (0..owners)
        .map(|i| {
            let lock = lock.with_owner(format!("{}-{i}", lock.owner())).unwrap();
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

pub(crate) async fn b4(b: &mut Bench) -> Result<(), BoxError> {
    let client = b.client("b4", |c| c).await?;
    client.rwlock("res")?.write().await?.release().await?; // warm-up grant
    let before = client.stats();
    let server_before = function_calls(client.redis()).await?;
    let began = Instant::now();
    let (grants, after) = b4_run(&client, 16, b.secs(6)).await?;
    let elapsed = began.elapsed().as_secs_f64();
    let server = function_calls(client.redis()).await? - server_before;
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
        "server FCALL per grant (acquire + release + renew)",
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

pub(crate) async fn b4_child() -> Result<(), BoxError> {
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
