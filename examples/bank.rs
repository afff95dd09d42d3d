//! A bank of six accounts: transfers under a write multi-lock of both accounts with
//! fence-checked commits, and an auditor that reads every account under a read
//! multi-lock of all six and checks that the money adds up.
//!
//! ```sh
//! cargo run --release --example bank       # starts its own six-node cluster
//! cargo run --release --example bank -- --url redis://127.0.0.1:7000 --seconds 60
//! ```
//!
//! Each account `acct:{N}` is a lock whose slot holds the account's data,
//! `acct:{N}:balance` (a hash: the balance and the highest fence that wrote it). Two
//! clients (as two processes would be) run four transfer tasks each; a third client
//! audits. A commit writes a balance only with a fence at least as high as the one that
//! wrote it last (a script on the account's own node): a holder that lost its lease
//! cannot overwrite a newer holder's balance. At the end it prints the transfers, the
//! audits with their wait for the read multi-lock (p50, p99, max), and fails if a sum was
//! ever wrong.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cluster_rwlock::fred::prelude::*;
use cluster_rwlock::{LockClient, LockConfig, Mode};
use cluster_rwlock_testkit::TestCluster;

const ACCOUNTS: u64 = 6;
const OPENING: i64 = 1_000;
const CLIENTS: usize = 2;
const TASKS_PER_CLIENT: usize = 4;

/// Writes `ARGV[2]` as the balance if `ARGV[1]` is at least the fence that wrote last.
/// KEYS[1] the account's hash; returns 1 written, 0 refused (a lower fence).
const FENCED_COMMIT: &str = r"
local last = tonumber(redis.call('HGET', KEYS[1], 'fence') or '0')
if tonumber(ARGV[1]) < last then return 0 end
redis.call('HSET', KEYS[1], 'fence', ARGV[1], 'balance', ARGV[2])
return 1";

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn account(n: u64) -> String {
    format!("acct:{{{n}}}")
}

fn balance_key(n: u64) -> String {
    format!("acct:{{{n}}}:balance")
}

#[derive(Default)]
struct Tally {
    transfers: AtomicU64,
    refused_commits: AtomicU64,
    timeouts: AtomicU64,
    audits: AtomicU64,
    wrong_sums: AtomicU64,
    audit_waits: Mutex<Vec<Duration>>,
}

/// A small xorshift: which accounts, how much.
struct Dice(u64);

impl Dice {
    fn roll(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

async fn balance(redis: &Client, n: u64) -> Result<i64, Error> {
    let b: Option<i64> = redis.hget(balance_key(n), "balance").await?;
    Ok(b.unwrap_or(0))
}

async fn commit(redis: &Client, n: u64, fence: u64, value: i64) -> Result<bool, Error> {
    let written: i64 = redis
        .eval(
            FENCED_COMMIT,
            vec![balance_key(n)],
            vec![fence.to_string(), value.to_string()],
        )
        .await?;
    Ok(written == 1)
}

async fn transfers(client: LockClient, seed: u64, until: Instant, tally: Arc<Tally>) {
    let redis = client.redis().clone();
    let mut dice = Dice(seed | 1);
    while Instant::now() < until {
        let from = dice.roll(ACCOUNTS);
        let to = (from + 1 + dice.roll(ACCOUNTS - 1)) % ACCOUNTS;
        let amount = 1 + dice.roll(50) as i64;
        let both = client
            .multi([(account(from), Mode::Write), (account(to), Mode::Write)])
            .expect("valid names");
        let guard = match both.lock_timeout(Duration::from_secs(5)).await {
            Ok(g) => g,
            Err(cluster_rwlock::Error::Timeout(_)) => {
                tally.timeouts.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            Err(e) => panic!("transfer: {e}"),
        };
        let fences: Vec<(String, u64)> = guard
            .fences()
            .into_iter()
            .map(|(name, fence)| (name.to_string(), fence))
            .collect();
        let fence_of = |n: u64| {
            fences
                .iter()
                .find(|(name, _)| *name == account(n))
                .map(|(_, f)| *f)
                .expect("a member")
        };
        let (a, b) = (
            balance(&redis, from).await.expect("read"),
            balance(&redis, to).await.expect("read"),
        );
        let ok_from = commit(&redis, from, fence_of(from), a - amount)
            .await
            .expect("commit");
        let ok_to = commit(&redis, to, fence_of(to), b + amount)
            .await
            .expect("commit");
        if !(ok_from && ok_to) {
            tally.refused_commits.fetch_add(1, Ordering::Relaxed);
        }
        tally.transfers.fetch_add(1, Ordering::Relaxed);
        let _ = guard.release().await;
    }
}

async fn auditor(client: LockClient, until: Instant, tally: Arc<Tally>) {
    let redis = client.redis().clone();
    let all = client
        .multi((0..ACCOUNTS).map(|n| (account(n), Mode::Read)))
        .expect("valid names");
    while Instant::now() < until {
        let asked = Instant::now();
        let guard = match all.lock_timeout(Duration::from_secs(10)).await {
            Ok(g) => g,
            Err(cluster_rwlock::Error::Timeout(_)) => {
                tally.timeouts.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            Err(e) => panic!("audit: {e}"),
        };
        let waited = asked.elapsed();
        let mut sum = 0;
        for n in 0..ACCOUNTS {
            sum += balance(&redis, n).await.expect("read");
        }
        if sum != OPENING * ACCOUNTS as i64 {
            tally.wrong_sums.fetch_add(1, Ordering::Relaxed);
        }
        tally.audits.fetch_add(1, Ordering::Relaxed);
        tally.audit_waits.lock().expect("tally").push(waited);
        let _ = guard.release().await;
    }
}

fn quantile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let seconds: u64 = arg("--seconds")
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(20);
    // keep the embedded cluster alive until the end
    let (seeds, _cluster) = match arg("--url") {
        Some(url) => (vec![url], None),
        None => {
            println!("starting a six-node Redis Cluster in Docker (use --url to use your own)...");
            let cluster = TestCluster::start().await?;
            (cluster.seed_urls(), Some(cluster))
        }
    };
    let connect =
        || LockClient::connect(LockConfig::cluster(seeds.clone()).lease(Duration::from_secs(5)));
    // the opening balances, written with fence 0
    let setup = connect().await?;
    for n in 0..ACCOUNTS {
        let _: () = setup.redis().del(balance_key(n)).await?;
        commit(setup.redis(), n, 0, OPENING).await?;
    }
    let tally = Arc::new(Tally::default());
    let until = Instant::now() + Duration::from_secs(seconds);
    println!(
        "{} transfer tasks on {CLIENTS} clients and one auditor, {ACCOUNTS} accounts, {seconds} s",
        CLIENTS * TASKS_PER_CLIENT
    );
    let mut tasks = Vec::new();
    for c in 0..CLIENTS {
        let client = connect().await?;
        for t in 0..TASKS_PER_CLIENT {
            let seed = 0x9E37_79B9_7F4A_7C15 ^ ((c * TASKS_PER_CLIENT + t) as u64 + 1);
            tasks.push(tokio::spawn(transfers(
                client.clone(),
                seed,
                until,
                tally.clone(),
            )));
        }
    }
    tasks.push(tokio::spawn(auditor(
        connect().await?,
        until,
        tally.clone(),
    )));
    for t in tasks {
        t.await?;
    }
    let mut sum = 0;
    for n in 0..ACCOUNTS {
        sum += balance(setup.redis(), n).await?;
    }
    let mut waits = tally.audit_waits.lock().expect("tally").clone();
    waits.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "transfers {}  refused commits {}  timeouts {}",
        tally.transfers.load(Ordering::Relaxed),
        tally.refused_commits.load(Ordering::Relaxed),
        tally.timeouts.load(Ordering::Relaxed)
    );
    println!(
        "audits {}  wrong sums {}  audit wait p50 {:.1} ms  p99 {:.1} ms  max {:.1} ms",
        tally.audits.load(Ordering::Relaxed),
        tally.wrong_sums.load(Ordering::Relaxed),
        ms(quantile(&waits, 0.5)),
        ms(quantile(&waits, 0.99)),
        ms(waits.last().copied().unwrap_or_default())
    );
    println!("final sum {sum} (expected {})", OPENING * ACCOUNTS as i64);
    if sum != OPENING * ACCOUNTS as i64 || tally.wrong_sums.load(Ordering::Relaxed) > 0 {
        return Err("the money did not add up".into());
    }
    Ok(())
}
