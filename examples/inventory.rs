//! An inventory: order tasks sell stock under each product's write lock ("decrement if
//! above 0" and the order's record in ONE guarded call with a condition); an auditor checks
//! under read locks that stock + orders = what was there at the start.
//!
//! ```sh
//! cargo run --release --example inventory       # starts its own six-node cluster
//! cargo run --release --example inventory -- --url redis://127.0.0.1:7000 --seconds 30
//! cargo run --release --example inventory -- --two-calls   # a guarded read, then a write
//! cargo run --release --example inventory -- --stock 100000 # nothing sells out
//! ```
//!
//! Each product `product:{pN}` is a lock whose slot holds its data: `stock:{pN}` (a hash,
//! field `n`) and `orders:{pN}` (a list of order ids). Two clients (as two processes
//! would be) run four order tasks each; a third client audits. An order takes the
//! product's write lock and runs, as one guarded call: if `n > 0`, `HINCRBY n -1` and
//! `RPUSH` the order id; else nothing (sold out). With `--two-calls` it does what had to
//! be done without conditions: a guarded `HGET`, then a guarded `HINCRBY` + `RPUSH`: two
//! confirmed round trips. It prints orders/s (sold or sold out), an order's latency
//! (p50, p99: lock, call(s), release) and the audits, and fails if stock + orders ever differ from the
//! start.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cluster_rwlock::fred::prelude::*;
use cluster_rwlock::guarded::Condition;
use cluster_rwlock::{LockClient, LockConfig};
use cluster_rwlock_testkit::TestCluster;

const PRODUCTS: u64 = 8;
/// Units of each product at the start (`--stock`): by default few enough that products
/// sell out in a run of some seconds, so that both branches run.
const STOCK: i64 = 1_000;

/// The units of each product at the start.
fn stock_at_start() -> i64 {
    arg("--stock").and_then(|s| s.parse().ok()).unwrap_or(STOCK)
}
const CLIENTS: usize = 2;
const TASKS_PER_CLIENT: usize = 4;

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn product(n: u64) -> String {
    format!("product:{{p{n}}}")
}

fn stock(n: u64) -> String {
    format!("stock:{{p{n}}}")
}

fn orders(n: u64) -> String {
    format!("orders:{{p{n}}}")
}

#[derive(Default)]
struct Tally {
    orders: AtomicU64,
    sold_out: AtomicU64,
    audits: AtomicU64,
    violations: AtomicU64,
    latencies: Mutex<Vec<Duration>>,
}

/// One order of product `n`, as one guarded call: whether it sold.
async fn order_one_call(client: &LockClient, n: u64, id: &str) -> cluster_rwlock::Result<bool> {
    let guard = client.rwlock(&product(n))?.write().await?;
    let (stock, orders) = (stock(n), orders(n));
    let out = guard
        .guarded()
        .when(Condition::field(&stock, "n").gt(0))
        .command("HINCRBY", [stock.as_str(), "n", "-1"])
        .command("RPUSH", [orders.as_str(), id])
        .commit()
        .await;
    guard.release().await?;
    Ok(out?.succeeded)
}

/// One order of product `n`, as two guarded calls: a read, then the write.
async fn order_two_calls(client: &LockClient, n: u64, id: &str) -> cluster_rwlock::Result<bool> {
    let guard = client.rwlock(&product(n))?.write().await?;
    let (stock, orders) = (stock(n), orders(n));
    let left = guard
        .guarded()
        .command("HGET", [stock.as_str(), "n"])
        .run()
        .await?;
    let sold = left[0].as_i64().unwrap_or(0) > 0;
    if sold {
        guard
            .guarded()
            .command("HINCRBY", [stock.as_str(), "n", "-1"])
            .command("RPUSH", [orders.as_str(), id])
            .run_checked()
            .await?;
    }
    guard.release().await?;
    Ok(sold)
}

async fn order_task(
    client: LockClient,
    task: u64,
    two_calls: bool,
    until: Instant,
    tally: Arc<Tally>,
) {
    let mut i = 0u64;
    while Instant::now() < until {
        let n = (task * 7 + i) % PRODUCTS;
        let id = format!("t{task}-{i}");
        i += 1;
        let began = Instant::now();
        let sold = if two_calls {
            order_two_calls(&client, n, &id).await
        } else {
            order_one_call(&client, n, &id).await
        };
        match sold {
            Ok(true) => {
                tally.orders.fetch_add(1, Ordering::Relaxed);
            }
            Ok(false) => {
                tally.sold_out.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                eprintln!("order {id}: {e}");
                continue;
            }
        }
        tally.latencies.lock().expect("tally").push(began.elapsed());
    }
}

async fn auditor(client: LockClient, until: Instant, tally: Arc<Tally>) {
    let mut n = 0;
    while Instant::now() < until {
        let guard = match client
            .rwlock(&product(n))
            .expect("a valid name")
            .read()
            .await
        {
            Ok(g) => g,
            Err(e) => {
                eprintln!("audit: {e}");
                continue;
            }
        };
        let replies = guard
            .guarded()
            .command("HGET", [stock(n).as_str(), "n"])
            .command("LLEN", [orders(n).as_str()])
            .run()
            .await;
        let _ = guard.release().await;
        match replies {
            Ok(r) => {
                let (left, sold) = (r[0].as_i64().unwrap_or(-1), r[1].as_i64().unwrap_or(-1));
                if left + sold != stock_at_start() || left < 0 {
                    eprintln!(
                        "product {n}: {left} left + {sold} orders != {}",
                        stock_at_start()
                    );
                    tally.violations.fetch_add(1, Ordering::Relaxed);
                }
                tally.audits.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => eprintln!("audit: {e}"),
        }
        n = (n + 1) % PRODUCTS;
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
        .unwrap_or(10);
    let two_calls = std::env::args().any(|a| a == "--two-calls");
    let (seeds, _cluster) = match arg("--url") {
        Some(url) => (vec![url], None),
        None => {
            println!("starting a six-node Redis Cluster in Docker (use --url to use your own)...");
            let cluster = TestCluster::start().await?;
            (cluster.seed_urls(), Some(cluster))
        }
    };
    let connect =
        || LockClient::connect(LockConfig::cluster(seeds.clone()).lease(Duration::from_secs(3)));
    let setup = connect().await?;
    for n in 0..PRODUCTS {
        let _: () = setup.redis().del(vec![stock(n), orders(n)]).await?;
        let _: () = setup
            .redis()
            .hset(stock(n), ("n", stock_at_start()))
            .await?;
    }
    let tally = Arc::new(Tally::default());
    let until = Instant::now() + Duration::from_secs(seconds);
    let how = if two_calls {
        "a guarded read, then a guarded write"
    } else {
        "one guarded call with a condition"
    };
    println!(
        "{} order tasks on {CLIENTS} clients and one auditor, {PRODUCTS} products, {seconds} s; an order is {how}",
        CLIENTS * TASKS_PER_CLIENT
    );
    let mut tasks = Vec::new();
    for c in 0..CLIENTS {
        let client = connect().await?;
        for t in 0..TASKS_PER_CLIENT {
            let task = (c * TASKS_PER_CLIENT + t) as u64;
            tasks.push(tokio::spawn(order_task(
                client.clone(),
                task,
                two_calls,
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
    let mut lat = tally.latencies.lock().expect("tally").clone();
    lat.sort();
    let (sold, sold_out) = (
        tally.orders.load(Ordering::Relaxed),
        tally.sold_out.load(Ordering::Relaxed),
    );
    println!(
        "orders {} ({:.0}/s): {sold} sold, {sold_out} sold out; an order p50 {:.1} ms p99 {:.1} ms; audits {}, violations {}",
        sold + sold_out,
        (sold + sold_out) as f64 / seconds as f64,
        quantile(&lat, 0.5).as_secs_f64() * 1e3,
        quantile(&lat, 0.99).as_secs_f64() * 1e3,
        tally.audits.load(Ordering::Relaxed),
        tally.violations.load(Ordering::Relaxed),
    );
    // the last word: every unit is in stock or in an order
    let mut total = 0;
    for n in 0..PRODUCTS {
        let left: i64 = setup.redis().hget(stock(n), "n").await?;
        let sold: i64 = setup.redis().llen(orders(n)).await?;
        total += left + sold;
    }
    let expected = stock_at_start() * PRODUCTS as i64;
    if total != expected || tally.violations.load(Ordering::Relaxed) > 0 {
        return Err(format!("stock + orders = {total}, not {expected}").into());
    }
    println!("stock + orders = {total}: every unit accounted for");
    Ok(())
}
