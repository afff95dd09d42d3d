//! Lock benchmarks: throughput, hand-off latency, writer wait, attempts per grant and
//! fairness, footprint. Run with `cargo bench` (starts the test bed's cluster) or
//! `cargo bench --bench locks -- --url redis://host:port`.
//!
//! Each benchmark is a module under `locks/`, named after its label and what it measures
//! (`b1_throughput.rs` to `b8_guarded_writes.rs`, listed below); the report and the
//! helpers they share are in `common.rs`.
//!
//! Options: `--only B1,B3` runs a subset; `BENCH_SECONDS=n` shortens every timed run to
//! n seconds and scales the counts down (a smoke run). Prints one JSON line per result,
//! then a Markdown table, and writes `target/bench/handoff.png`.

use cluster_rwlock_testkit::TestCluster;

// B1: write cycles per second on independent locks, against the server's ceiling
mod b1_throughput;
// B2: hand-off latency between two clients, notifications on and off, and its plot
mod b2_handoff;
// B3: a writer's wait under busy readers, and a reader's under back-to-back writers
mod b3_starvation;
// B4: acquire attempts and round trips per contended grant, and fairness
mod b4_contention;
// B5: server memory per lock and per reader, client memory per waiter, renewal cost
mod b5_footprint;
// B6: what one call and a renewal round cost as the readers of one lock grow
mod b6_reader_scale;
// B7: multi-locks of 2 to 4 names: cycles, confirmed rounds, hand-off
mod b7_multi_lock;
// B8: a guarded write beside a plain SET with and without a state() check
mod b8_guarded_writes;
// the run's settings and report, percentiles, connections to the masters
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
        b1_throughput::b1(&mut b).await?;
    }
    if wants("B2") {
        let latencies = b2_handoff::b2(&mut b).await?;
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench/handoff.png");
        match b2_handoff::plot(&latencies, &path) {
            Ok(()) => eprintln!("plot: {}", path.display()),
            Err(e) => eprintln!("no plot: {e}"),
        }
    }
    if wants("B3") {
        b3_starvation::b3(&mut b).await?;
    }
    if wants("B4") {
        b4_contention::b4(&mut b).await?;
    }
    if wants("B5") {
        b5_footprint::b5(&mut b).await?;
    }
    if wants("B7") {
        b7_multi_lock::b7(&mut b).await?;
    }
    if wants("B8") {
        b8_guarded_writes::b8(&mut b).await?;
    }
    if wants("B6") {
        b6_reader_scale::b6(&mut b).await?;
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
        return rt.block_on(b4_contention::b4_child());
    }
    rt.block_on(run())
}
