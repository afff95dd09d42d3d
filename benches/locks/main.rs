//! Lock benchmarks: throughput, hand-off latency, writer wait, attempts per grant and
//! fairness, footprint. Run with `cargo bench` (starts the test bed's cluster) or
//! `cargo bench --bench locks -- --url redis://host:port`.
//!
//! Each benchmark is a module under `locks/`, named after it: `b1.rs` to `b8.rs` (B6:
//! cost as the number of readers of one lock grows; B7: multi-locks; B8: guarded
//! writes); the report and the helpers they share are in `common.rs`.
//!
//! Options: `--only B1,B3` runs a subset; `BENCH_SECONDS=n` shortens every timed run to
//! n seconds and scales the counts down (a smoke run). Prints one JSON line per result,
//! then a Markdown table, and writes `target/bench/handoff.png`.

use cluster_rwlock_testkit::TestCluster;

mod b1;
mod b2;
mod b3;
mod b4;
mod b5;
mod b6;
mod b7;
mod b8;
mod common;

use common::{arg, Bench, BoxError};

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
        b1::b1(&mut b).await?;
    }
    if wants("B2") {
        let latencies = b2::b2(&mut b).await?;
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench/handoff.png");
        match b2::plot(&latencies, &path) {
            Ok(()) => eprintln!("plot: {}", path.display()),
            Err(e) => eprintln!("no plot: {e}"),
        }
    }
    if wants("B3") {
        b3::b3(&mut b).await?;
    }
    if wants("B4") {
        b4::b4(&mut b).await?;
    }
    if wants("B5") {
        b5::b5(&mut b).await?;
    }
    if wants("B7") {
        b7::b7(&mut b).await?;
    }
    if wants("B8") {
        b8::b8(&mut b).await?;
    }
    if wants("B6") {
        b6::b6(&mut b).await?;
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
        return rt.block_on(b4::b4_child());
    }
    rt.block_on(run())
}
