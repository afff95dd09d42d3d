//! The Rust side of a lock shared with another language: the Python package's mixed
//! tests (`python/tests/test_mixed.py`) run it beside Python holders of the same locks.
//!
//! ```sh
//! cargo run --example interop -- testbed                       # a cluster, until stdin closes
//! cargo run --example interop -- hammer --url redis://127.0.0.1:7000 --name shared --mode write --seconds 5
//! cargo run --example interop -- hold --url redis://127.0.0.1:7000 --name shared --mode write --for-ms 1000
//! cargo run --example interop -- break --url redis://127.0.0.1:7000 --name shared --client worker-7
//! ```
//!
//! * `testbed`: starts the test bed's six-node cluster (`CLUSTER_SERVER=valkey` for
//!   Valkey, `CLUSTER_TLS=1` over TLS), prints `URL <seed>` lines, `CA <file>` for a TLS
//!   cluster (the CA that signed the nodes' certificates) and `READY`, and removes the cluster when its
//!   standard input closes (so a test process that dies takes the cluster with it).
//! * `hammer`: takes the lock `--name` in `--mode` again and again for `--seconds`,
//!   holding each grant `--hold-ms`; prints `HOLD <mode> <fence> <start_ns> <end_ns>` per
//!   grant (wall-clock nanoseconds: from after the grant to before the release) and
//!   `DONE <grants>`.
//! * `hold`: takes the lock once (waiting at most `--timeout-ms`), prints
//!   `GRANTED <fence> <ns>`, holds it `--for-ms`, prints `RELEASING <ns>`, releases,
//!   prints `RELEASED <ns>`.
//!
//!   With `--fenced-key KEY --value TEXT`, once granted it also stores TEXT at KEY in the
//!   fenced store under its fence (`LockClient::fenced_set`) and prints
//!   `FENCED <written> <fence>`. A hold lost meanwhile prints `LOST <ns>` and then
//!   `RELEASE LockLost`; a wait stopped by an operator's break of this client prints
//!   `BROKEN <client>`; both exit 0.
//! * `break`: breaks the client `--client` on the lock `--name`
//!   (`LockClient::break_client`) and prints `BROKE <holds_removed> <fence> <places_removed>`
//!   (`-` for no fence).
//!
//! * `cycles`: uncontended cycles (write + release of a free lock) for `--seconds`, one
//!   task (`--durability master` for no confirmation); prints `CYCLES <per second>`:
//!   the Rust figure beside the Python benchmark's (`python/benches/bench.py`).
//!
//! `hammer`, `hold`, `break` and `cycles` take `--ca FILE` to trust that CA for `rediss://`
//! URLs, and `--client-name NAME` for the client name in owner tokens (`rust-peer` by
//! default).
//!
//! Every line is flushed at once; a failure prints `ERROR <message>` and exits 1.

use std::io::{BufRead, Write};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use cluster_rwlock::{LockClient, LockConfig, Mode};
use cluster_rwlock_testkit::TestCluster;

type BoxError = Box<dyn std::error::Error>;

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn number(name: &str, default: u64) -> Result<u64, BoxError> {
    Ok(arg(name).map(|s| s.parse()).transpose()?.unwrap_or(default))
}

/// Wall-clock time in nanoseconds, as Python's `time.time_ns()`: the two sides of a
/// mixed test run on one machine, so their intervals compare on one clock.
fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

fn say(line: String) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

async fn client() -> Result<LockClient, BoxError> {
    let url = arg("--url").ok_or("--url is required")?;
    let name = arg("--client-name").unwrap_or_else(|| "rust-peer".into());
    let mut config = LockConfig::from_url(&url)?.client_name(name);
    if let Some(ca) = arg("--ca") {
        config = tls_ca(config, std::fs::read(ca)?)?;
    }
    if arg("--durability").as_deref() == Some("master") {
        config = config.durability(cluster_rwlock::Durability::MasterOnly);
    }
    if let Some(ms) = arg("--lease-ms") {
        config = config.lease(Duration::from_millis(ms.parse()?));
    }
    Ok(LockClient::connect(config).await?)
}

#[cfg(feature = "tls")]
fn tls_ca(config: LockConfig, pem: Vec<u8>) -> Result<LockConfig, BoxError> {
    Ok(config.tls_ca_pem(pem))
}

#[cfg(not(feature = "tls"))]
fn tls_ca(_: LockConfig, _: Vec<u8>) -> Result<LockConfig, BoxError> {
    Err("--ca needs the feature `tls` (cargo build --features tls --example interop)".into())
}

fn mode() -> Result<Mode, BoxError> {
    match arg("--mode").as_deref() {
        Some("read") => Ok(Mode::Read),
        Some("write") | None => Ok(Mode::Write),
        Some(other) => Err(format!("--mode is read or write, not {other}").into()),
    }
}

async fn hammer() -> Result<(), BoxError> {
    let client = client().await?;
    let lock = client.rwlock(&arg("--name").ok_or("--name is required")?)?;
    let (mode, hold) = (mode()?, Duration::from_millis(number("--hold-ms", 5)?));
    let until = std::time::Instant::now() + Duration::from_secs(number("--seconds", 5)?);
    let mut grants = 0u64;
    while std::time::Instant::now() < until {
        let guard = lock.acquire_timeout(mode, Duration::from_secs(10)).await?;
        let start = now_ns();
        tokio::time::sleep(hold).await;
        let end = now_ns();
        say(format!(
            "HOLD {} {} {start} {end}",
            mode.as_str(),
            guard.fence()
        ));
        guard.release().await?;
        grants += 1;
        tokio::time::sleep(hold).await; // let the others in
    }
    say(format!("DONE {grants}"));
    client.close().await;
    Ok(())
}

async fn hold() -> Result<(), BoxError> {
    let client = client().await?;
    let lock = client.rwlock(&arg("--name").ok_or("--name is required")?)?;
    let timeout = Duration::from_millis(number("--timeout-ms", 10_000)?);
    let guard = match lock.acquire_timeout(mode()?, timeout).await {
        Err(cluster_rwlock::Error::Broken { client: name }) => {
            say(format!("BROKEN {name}"));
            client.close().await;
            return Ok(());
        }
        other => other?,
    };
    say(format!("GRANTED {} {}", guard.fence(), now_ns()));
    if let Some(key) = arg("--fenced-key") {
        let value = arg("--value").unwrap_or_default();
        let w = client.fenced_set(&key, guard.fence(), value).await?;
        say(format!("FENCED {} {}", w.written, w.fence));
    }
    let held = tokio::time::sleep(Duration::from_millis(number("--for-ms", 1000)?));
    tokio::select! {
        _ = held => {}
        _ = guard.lost() => {
            say(format!("LOST {}", now_ns()));
            match guard.release().await {
                Err(cluster_rwlock::Error::LockLost) => say("RELEASE LockLost".into()),
                other => other?,
            }
            client.close().await;
            return Ok(());
        }
    }
    say(format!("RELEASING {}", now_ns()));
    guard.release().await?;
    say(format!("RELEASED {}", now_ns()));
    client.close().await;
    Ok(())
}

async fn break_client() -> Result<(), BoxError> {
    let client = client().await?;
    let name = arg("--name").ok_or("--name is required")?;
    let victim = arg("--client").ok_or("--client is required")?;
    let r = client.break_client(&name, &victim).await?;
    let fence = r.fence.map_or("-".into(), |f| f.to_string());
    say(format!(
        "BROKE {} {fence} {}",
        r.holds_removed, r.places_removed
    ));
    client.close().await;
    Ok(())
}

async fn cycles() -> Result<(), BoxError> {
    let client = client().await?;
    let lock = client.rwlock(&format!("cycles-{}", uuid::Uuid::new_v4().simple()))?;
    let seconds = Duration::from_secs(number("--seconds", 5)?);
    let (started, mut n) = (std::time::Instant::now(), 0u64);
    while started.elapsed() < seconds {
        lock.write().await?.release().await?;
        n += 1;
    }
    say(format!(
        "CYCLES {:.0}",
        n as f64 / started.elapsed().as_secs_f64()
    ));
    client.close().await;
    Ok(())
}

async fn testbed() -> Result<(), BoxError> {
    let cluster = TestCluster::start().await?;
    for url in cluster.seed_urls() {
        say(format!("URL {url}"));
    }
    if let Some(tls) = cluster.tls() {
        say(format!("CA {}", tls.ca_file().display()));
    }
    say(format!("SERVER {}", cluster.server_version()));
    say("READY".into());
    // until the test process closes our stdin (or dies)
    tokio::task::spawn_blocking(|| {
        let stdin = std::io::stdin();
        for line in stdin.lock().lines() {
            if line.is_err() {
                break;
            }
        }
    })
    .await?;
    drop(cluster);
    Ok(())
}

#[tokio::main]
async fn main() {
    let result = match std::env::args().nth(1).as_deref() {
        Some("testbed") => testbed().await,
        Some("hammer") => hammer().await,
        Some("hold") => hold().await,
        Some("break") => break_client().await,
        Some("cycles") => cycles().await,
        _ => Err(
            "usage: interop testbed | hammer ... | hold ... | break ... | cycles ... (see the file's docs)"
                .into(),
        ),
    };
    if let Err(e) = result {
        say(format!("ERROR {e}"));
        std::process::exit(1);
    }
}
