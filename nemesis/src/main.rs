//! `nemesis`: safety measured, not asserted.
//!
//! Starts the test bed's six-node cluster, runs worker processes (each its own
//! `LockClient`, several tasks doing random lock operations on names of every master and
//! two names that share a hashtag) against a fenced resource, injects random, seeded
//! faults, then checks the whole history (see [`checker`]) and prints what it found.
//!
//! ```sh
//! cargo run --release -p cluster-rwlock-nemesis -- run --seed 7 --duration 600
//! ```
//!
//! Exit status: 0 when no violation was found, 1 when some were, 2 when the run itself
//! failed (the cluster did not start or heal, a worker crashed; a worker killed on purpose
//! while a write of it waited is replaced, not a failure). With `--expect KIND` the
//! run is a test of the checker: 0 when it found violations of that kind, 1 when not.

mod after;
mod checker;
mod faults;
mod guard;
mod history;
mod observer;
mod report;
mod resource;
mod workers; // the worker processes: their kill plan, starting and replacing them
mod workload;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};
use cluster_rwlock::{LockClient, LockConfig};
use cluster_rwlock_testkit::{StartOptions, TestCluster};

use history::{now, Event};
use workers::{kill_plan, Workers};

#[derive(Parser)]
#[command(
    name = "nemesis",
    about = "Random faults, a fenced resource and a history checker for cluster-rwlock"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// One run: cluster, workers, faults, checker.
    Run(RunArgs),
    /// Checks a history written by an earlier run again.
    Check {
        /// The run's directory (with history.jsonl).
        dir: PathBuf,
    },
    /// A worker process (started by `run`).
    #[command(hide = true)]
    Worker,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Config {
    /// The library's defaults (grants and renewals confirmed by the replicas that could
    /// be promoted).
    Default,
    /// `Durability::AtLeast { replicas: 1, timeout: 500 ms }`: each grant and renewal waits for one replica.
    Acks,
    /// `Durability::MasterOnly`: the weaker mode, no confirmation.
    MasterOnly,
    /// The defaults, with every lock's lease set on its handle (`with_lease`, the run's
    /// lease) and the client's lease four times longer: the holds' leases are not the
    /// client's, and the renewal task renews at their pace.
    LockLease,
}

#[derive(clap::Args)]
struct RunArgs {
    /// Seed of the workload and of the faults.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Seconds of workload (faults stop 12 s before the end, so that all have healed).
    #[arg(long, default_value_t = 60)]
    duration: u64,
    /// The lock configuration under test.
    #[arg(long, value_enum, default_value_t = Config::Default)]
    config: Config,
    /// Worker processes.
    #[arg(long, default_value_t = 4)]
    workers: u32,
    /// Tasks per worker.
    #[arg(long, default_value_t = 4)]
    tasks: u32,
    /// Lease, ms (the library's default is 30 s; a shorter one makes holds longer than
    /// a lease frequent; keep it longer than a failover, about 4-6 s on the test bed).
    #[arg(long, default_value_t = 8_000)]
    lease_ms: u64,
    /// Holds in 100 that last longer than a lease (the others last 0-200 ms, 5 in 100
    /// up to 1.5 s).
    #[arg(long, default_value_t = 1)]
    long_holds: u32,
    /// The long holds last this many ms (to 1.25 x) instead of longer than a lease.
    #[arg(long)]
    long_hold_ms: Option<u64>,
    /// Fault kinds, comma-separated, `all` (every kind but `pause_client`) or `none`:
    /// kill, freeze_short, freeze_long, repl_lag, promote_thaw, partition, isolate,
    /// slot_move, migration_stall, failover, replica_move, skew, pause_client,
    /// waiter_kill.
    #[arg(long, default_value = "all")]
    faults: String,
    /// Worker processes killed (SIGKILL) while a write of theirs waits, over the run,
    /// each replaced by a new worker (default: one per 10 s of run with the `waiter_kill`
    /// fault, none without; none in the last lease and 10 s).
    #[arg(long)]
    queued_kills: Option<u32>,
    /// The resource accepts every access (no fence check): the checker must then report
    /// stale accesses.
    #[arg(long)]
    broken_fence: bool,
    /// Exit 0 only if violations of this kind were found (a test of the checker).
    #[arg(long)]
    expect: Option<String>,
    /// Where the history and verdict go (default `target/nemesis/<config>-<seed>`).
    #[arg(long)]
    out: Option<PathBuf>,
    /// The cluster speaks TLS (client links, bus, replication) and every client connects
    /// over it, verifying the test bed's CA (also `CLUSTER_TLS=1`).
    #[arg(long)]
    tls: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("nemesis: cannot start a runtime: {e}");
            return ExitCode::from(2);
        }
    };
    match cli.command {
        Command::Worker => rt.block_on(worker()),
        Command::Check { dir } => check_dir(&dir),
        Command::Run(args) => rt.block_on(run(args)),
    }
}

async fn worker() -> ExitCode {
    let spec = match std::env::var("NEMESIS_WORKER")
        .map_err(|e| e.to_string())
        .and_then(|s| serde_json::from_str(&s).map_err(|e| e.to_string()))
    {
        Ok(spec) => spec,
        Err(e) => {
            eprintln!("nemesis worker: no spec in NEMESIS_WORKER: {e}");
            return ExitCode::from(2);
        }
    };
    match workload::run(spec).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("nemesis worker: {e}");
            ExitCode::from(2)
        }
    }
}

fn check_dir(dir: &Path) -> ExitCode {
    let events = match history::read(&dir.join("history.jsonl")) {
        Ok(ev) => ev,
        Err(e) => {
            eprintln!("nemesis: {e}");
            return ExitCode::from(2);
        }
    };
    let t0 = std::fs::read_to_string(dir.join("t0"))
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0);
    let verdict = checker::check(&events, t0);
    print!("{}", report::table(&verdict, "re-checked history"));
    ExitCode::from(u8::from(verdict.violations() > 0))
}

/// Picks the run's names: one on each master (by the initial slot ranges) and two that
/// share a hashtag.
fn names(client: &LockClient) -> Result<Vec<String>, String> {
    let ranges = [(0u16, 5_460u16), (5_461, 10_922), (10_923, 16_383)];
    let mut out = Vec::new();
    for (lo, hi) in ranges {
        let name = (0..)
            .map(|i| format!("res-{i}"))
            .find(|n| {
                client
                    .rwlock(n)
                    .map(|l| (lo..=hi).contains(&l.slot()))
                    .unwrap_or(false)
            })
            .ok_or("no name found")?;
        out.push(name);
    }
    out.push("acct:{pair}:a".into());
    out.push("acct:{pair}:b".into());
    Ok(out)
}

fn fault_kinds(spec: &str) -> Result<Vec<String>, String> {
    match spec {
        "all" => Ok(faults::KINDS
            .iter()
            .filter(|k| **k != "pause_client")
            .map(|k| k.to_string())
            .collect()),
        "none" => Ok(Vec::new()),
        list => list
            .split(',')
            .map(|k| {
                let k = k.trim();
                if faults::KINDS.contains(&k) {
                    Ok(k.to_string())
                } else {
                    Err(format!(
                        "unknown fault kind {k:?}; known: {}",
                        faults::KINDS.join(", ")
                    ))
                }
            })
            .collect(),
    }
}

async fn run(args: RunArgs) -> ExitCode {
    match run_inner(&args).await {
        Ok(verdict) => match &args.expect {
            Some(kind) => {
                let found = verdict
                    .kinds()
                    .iter()
                    .find(|(k, _)| k == kind)
                    .map(|(_, f)| f.count)
                    .unwrap_or(0);
                println!("expected {kind}: found {found}");
                ExitCode::from(u8::from(found == 0))
            }
            None => ExitCode::from(u8::from(verdict.violations() > 0)),
        },
        Err(e) => {
            eprintln!("nemesis: the run failed: {e}");
            ExitCode::from(2)
        }
    }
}

async fn run_inner(args: &RunArgs) -> Result<checker::Verdict, String> {
    if let Some(k) = &args.expect {
        if !checker::Verdict::default()
            .kinds()
            .iter()
            .any(|(n, _)| n == k)
        {
            return Err(format!("--expect {k}: not a violation kind"));
        }
    }
    let kinds = fault_kinds(&args.faults)?;
    let config_name = match args.config {
        Config::Default => "default",
        Config::Acks => "acks",
        Config::MasterOnly => "master-only",
        Config::LockLease => "lock-lease",
    };
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("target/nemesis/{config_name}-{}", args.seed)));
    std::fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;

    let skew = kinds.iter().any(|k| k == "skew");
    let cluster =
        TestCluster::start_with(StartOptions::default().skewable_clocks(skew).tls(args.tls))
            .await
            .map_err(|e| format!("test cluster: {e}"))?;
    let cluster = Arc::new(cluster);
    let ca_pem = cluster.tls().map(|t| t.ca_pem().to_string());
    let prefix = format!("nemesis-{}", args.seed);
    let lease = Duration::from_millis(args.lease_ms);
    // the controller's clients: one for the checks, one for the hand-off observer
    let connect = || {
        LockClient::connect(workload::with_ca(
            LockConfig::cluster(cluster.seed_urls())
                .prefix(prefix.clone())
                .lease(lease),
            ca_pem.as_deref(),
        ))
    };
    let client = connect()
        .await
        .map_err(|e| format!("controller client: {e}"))?;
    let names = names(&client)?;
    let slots: Vec<u16> = names
        .iter()
        .filter_map(|n| client.rwlock(n).ok().map(|l| l.slot()))
        .collect();
    // every pending hand-off, seen while the run lasts (the checker's handed_to_dead)
    let keys: Vec<(String, String)> = names
        .iter()
        .filter_map(|n| {
            client
                .rwlock(n)
                .ok()
                .map(|l| (n.clone(), l.key().to_string()))
        })
        .collect();
    // a client of its own: its reads, given up after a while, leave nothing behind in
    // the client the checks after the run read with
    let observer_client = connect()
        .await
        .map_err(|e| format!("observer client: {e}"))?;
    let stop_observer = Arc::new(AtomicBool::new(false));
    let observer = tokio::spawn(observer::observe(
        observer_client,
        keys,
        stop_observer.clone(),
    ));
    let resource = resource::Resource::start(args.broken_fence)
        .await
        .map_err(|e| format!("resource: {e}"))?;

    let t0 = now();
    std::fs::write(out.join("t0"), t0.to_string()).map_err(|e| e.to_string())?;
    let until = t0 + args.duration * 1_000_000_000;
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let log = Arc::new(Mutex::new(Vec::new()));
    let workers = Arc::new(Workers {
        exe,
        template: workload::WorkerSpec {
            proc: 0,
            seeds: cluster.seed_urls(),
            ca_pem: ca_pem.clone(),
            prefix: prefix.clone(),
            names: names.clone(),
            shared_owners: vec!["job-a".into(), "job-b".into()],
            resource: resource.addr().to_string(),
            lease_ms: args.lease_ms,
            durability: config_name.to_string(),
            tasks: args.tasks,
            long_holds_pct: args.long_holds,
            long_hold_ms: args.long_hold_ms,
            seed: 0,
            until,
            kill_at: None,
            out: String::new(),
        },
        seed: args.seed,
        out: out.clone(),
        next: AtomicU32::new(args.workers),
        pids: Arc::new(Mutex::new(Vec::new())),
        procs: Mutex::new(Vec::new()),
        log: log.clone(),
        deadline: until + (args.lease_ms * 2 + 60_000) * 1_000_000,
    });
    let waiter_kills = kinds.iter().any(|k| k == "waiter_kill");
    let mut kills = kill_plan(args, waiter_kills, t0, until);
    let mut supervisors = Vec::new();
    for proc in 0..args.workers {
        let first = workers.spawn(proc, kills[proc as usize].front().copied())?;
        let plan = std::mem::take(&mut kills[proc as usize]);
        supervisors.push(tokio::spawn(workers.clone().supervise(proc, first, plan)));
    }
    let server = format!("{} {}", cluster.server(), cluster.server_version());
    eprintln!(
        "nemesis: seed {}, {} s, config {config_name}, lease {} ms, {server}, {} workers x {} tasks, faults {}, names {}",
        args.seed,
        args.duration,
        args.lease_ms,
        args.workers,
        args.tasks,
        if kinds.is_empty() { "none".into() } else { kinds.join(",") },
        names.join(" ")
    );

    let nemesis = Arc::new(faults::Nemesis {
        cluster: cluster.clone(),
        slots,
        kinds,
        workers: workers.pids.clone(),
        lease_ms: args.lease_ms,
        log: log.clone(),
    });
    nemesis.run(args.seed, until).await;

    let mut failures = Vec::new();
    for (proc, s) in supervisors.into_iter().enumerate() {
        match s.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => failures.push(e),
            Err(e) => failures.push(format!("worker {proc}'s supervisor: {e}")),
        }
    }
    stop_observer.store(true, Ordering::SeqCst);
    let mut events: Vec<Event> = match observer.await {
        Ok(seen) => seen,
        Err(e) => {
            failures.push(format!("the hand-off observer: {e}"));
            Vec::new()
        }
    };
    if let Err(e) = cluster.wait_ready(Duration::from_secs(60)).await {
        failures.push(format!("the cluster did not heal: {e}"));
    }
    events.extend(after::probes(&client, &names).await);
    match after::guarded_logs(&client, &names).await {
        Ok(logs) => events.extend(logs),
        Err(e) => failures.push(format!("the guarded logs: {e}")),
    }
    events.extend(after::leftovers(&cluster, &client, &prefix, lease).await);
    client.close().await;

    let procs = workers
        .procs
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    for proc in procs {
        let path = out.join(format!("worker-{proc}.jsonl"));
        match history::read(&path) {
            Ok(ev) => events.extend(ev),
            Err(e) => failures.push(e),
        }
    }
    events.extend(resource.log());
    events.extend(log.lock().unwrap_or_else(|e| e.into_inner()).drain(..));
    events.sort_by_key(time_of);

    let mut w = history::Writer::create(&out.join("history.jsonl")).map_err(|e| e.to_string())?;
    for e in &events {
        w.write(e).map_err(|e| e.to_string())?;
    }
    w.flush().map_err(|e| e.to_string())?;

    let verdict = checker::check(&events, t0);
    let title = format!(
        "seed {}, {} s, config {config_name}, lease {} ms, {server}{}{}",
        args.seed,
        args.duration,
        args.lease_ms,
        if ca_pem.is_some() { " over TLS" } else { "" },
        if args.broken_fence {
            ", broken fence"
        } else {
            ""
        }
    );
    print!("{}", report::table(&verdict, &title));
    // how often grants and renewals went on without a silent replica, on the other
    // masters' word (from the workers that lived to the end)
    let (asked, vouched) = events.iter().fold((0, 0), |(a, v), e| match e {
        history::Event::ClientEnd {
            vouches_asked,
            vouched,
            ..
        } => (a + vouches_asked, v + vouched),
        _ => (a, v),
    });
    println!("vouches (workers that ran to the end): {asked} asked, {vouched} vouched");
    let json = serde_json::json!({ "run": title, "verdict": verdict, "failures": failures });
    std::fs::write(out.join("verdict.json"), format!("{json}\n")).map_err(|e| e.to_string())?;
    println!("history and verdict: {}", out.display());
    if !failures.is_empty() {
        return Err(failures.join("; "));
    }
    Ok(verdict)
}

fn time_of(e: &Event) -> u64 {
    match e {
        Event::Op { start, .. } => *start,
        Event::Segment { from, .. } => *from,
        Event::Access { at, .. } => *at,
        Event::Handoff { at, .. } => *at,
        Event::Fault { start, .. } => *start,
        Event::Probe { start, .. } => *start,
        Event::Guarded { start, .. } => *start,
        Event::ClientEnd { .. } | Event::Leftover { .. } | Event::GuardedLog { .. } => u64::MAX,
    }
}
