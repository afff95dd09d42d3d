//! B1 side by side, in one run on one cluster: uncontended acquire+release cycles from
//! 32 tasks on 32 names (B1-wide: 512 on 512), one client per library, for
//! cluster-rwlock (its default, grants confirmed by WAIT, and `Durability::MasterOnly`)
//! and the peers
//! `rslock` (a SET NX PX mutex; one `LockManager` per master, each name sent to the
//! master of its slot, since it does not follow a cluster) and `rds_lock` (a read/write
//! lock; on redis-rs's cluster connection), each with its defaults; the floor of the
//! hash layout: a cycle of two scripts that make the same Redis calls as an uncontended
//! cycle of ours with no logic around them, through fred, without `WAIT`, on connections
//! set as the lock's are (`TCP_NODELAY`), and once more with fred's default socket
//! (Nagle's algorithm on, which under load sends several tasks' calls in one packet:
//! what the lock's choice of `TCP_NODELAY` costs at 32 tasks); and the server ceiling:
//! a trivial EVALSHA from the same 32 tasks, one call at a time and pipelined (batches
//! of 16). cluster-rwlock runs first and last, so that drift of the machine
//! shows. For every row: Redis time per cycle (the sum of `INFO commandstats` usec of
//! the commands clients send, EVALSHA, EVAL and SET, on the masters: time in commands), Redis CPU per cycle (`INFO cpu` user+sys of the six
//! server processes: commands, I/O and replication) and client CPU per cycle
//! (`/proc/self/stat` utime+stime of this process, at 100 ticks/s).
//!
//! Then B1 in turns (`turns`): this lock in both durabilities, rslock and the floors,
//! each connected once, run in slices of a quarter of `BENCH_SECONDS` taken in turns for
//! `BENCH_ROUNDS` rounds (8), so that the ratios to the floor compare the same minutes.
//!
//! Then, in the same run: B1-single, one task's acquire + release (p50 / p99), for
//! cluster-rwlock in both durabilities, rslock and the floor; B2, the hand-off latency between two clients (p50 / p99), for
//! cluster-rwlock in both durabilities, for its floor (the same hand-off with no logic:
//! a call that publishes on the key's channel, a waiter that reads fred's messages
//! itself and makes one call) and for python-redis-lock (`handoff_peer.py`, when
//! Python has the package; `B2_SPY=1` adds, on standard error, the time from the release
//! call to its message at a subscriber of its own); and B4, the commands the masters run per
//! contended acquisition (16 contenders on one name, each holding 2 ms; the calls a
//! script makes count), for cluster-rwlock in both durabilities and for rslock.
//!
//! `cargo run --release -p cluster-rwlock-peers -- [--url redis://host:port] [--only ours|master_only|rslock|rds_lock|floor|floor_nagle|floor_confirmed|turns|single|contended]
//! [--connections N]`
//! (without `--url` the test bed's cluster is started); `BENCH_SECONDS` (default 5).

use std::time::Duration;

use cluster_rwlock::config::DEFAULT_DURABILITY;
use cluster_rwlock::slot::key_slot;
use cluster_rwlock::Durability;
use cluster_rwlock_testkit::TestCluster;

mod contended;
mod drive;
mod probe;
mod turns;
mod uncontended;

use probe::{measured, Probe};
use uncontended::{
    ceiling, layout_floor, layout_floor_confirmed, ours, ranges_of, rds_lock_rate, rslock_manager,
    rslock_rate, Socket,
};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A row's run: its cycles per second (`--only`, where each choice is a future of its own
/// type).
type RateRun<'a> = std::pin::Pin<Box<dyn std::future::Future<Output = Result<f64, BoxError>> + 'a>>;

const TASKS: usize = 32;
const WIDE: usize = 512;

/// The number in environment variable `name`, or `default` when it is unset or not one.
fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// Rounds of B1 in turns: `BENCH_ROUNDS`, 8 by default.
fn turn_rounds() -> usize {
    usize::try_from(env_number("BENCH_ROUNDS", 8))
        .unwrap_or(usize::MAX)
        .max(1)
}

/// A row's slice in B1 in turns: a quarter of `BENCH_SECONDS`, at least 200 ms.
fn turn_slice(secs: Duration) -> Duration {
    (secs / 4).max(Duration::from_millis(200))
}

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    let i = args.iter().position(|a| a == name)?;
    args.get(i + 1).cloned()
}

async fn run() -> Result<(), BoxError> {
    let secs = Duration::from_secs(env_number("BENCH_SECONDS", 5));
    let (seeds, _cluster) = match arg("--url") {
        Some(url) => (vec![url], None),
        None => {
            let c = TestCluster::start().await?;
            (c.seed_urls(), Some(c))
        }
    };
    let probe = Probe::new(&seeds[0]).await?;
    let tag = format!("peers-{}", std::process::id());
    if arg("--only").as_deref() == Some("contended") {
        // B2 and B4 alone
        return handoff_and_contention(&seeds, &probe, &tag, secs).await;
    }
    if arg("--only").as_deref() == Some("turns") {
        // B1 in turns alone
        return turns::b1_in_turns(&seeds, &probe, &tag, turn_rounds(), turn_slice(secs)).await;
    }
    if arg("--only").as_deref() == Some("single") {
        // B1-single alone
        return single_task(&seeds, &tag, secs).await;
    }
    if let Some(only) = arg("--only") {
        // one row alone (for profiling): ours, rslock, rds_lock or a floor
        let (name, run): (&str, RateRun<'_>) = match only.as_str() {
            "ours" => (
                "cluster-rwlock",
                Box::pin(ours(&seeds, secs, &tag, TASKS, DEFAULT_DURABILITY)),
            ),
            "master_only" => (
                "cluster-rwlock, MasterOnly",
                Box::pin(ours(&seeds, secs, &tag, TASKS, Durability::MasterOnly)),
            ),
            "rslock" => ("rslock 0.7", Box::pin(rslock_rate(&seeds, secs, &tag, TASKS))),
            "rds_lock" => ("rds_lock 1.0", Box::pin(rds_lock_rate(&seeds, secs, &tag))),
            "floor" => (
                "floor",
                Box::pin(async {
                    layout_floor(&seeds, secs, &format!("{tag}f"), TASKS, Socket::LockLike).await
                }),
            ),
            "floor_nagle" => (
                "floor, Nagle",
                Box::pin(async {
                    layout_floor(&seeds, secs, &format!("{tag}fn"), TASKS, Socket::Nagle).await
                }),
            ),
            "floor_confirmed" => (
                "floor, confirmed",
                Box::pin(async {
                    layout_floor_confirmed(&seeds, secs, &format!("{tag}fc"), TASKS).await
                }),
            ),
            other => {
                return Err(format!(
                    "--only {other}: ours, master_only, rslock, rds_lock, floor, floor_nagle or floor_confirmed"
                )
                .into())
            }
        };
        let row = measured(&probe, name, secs, run).await?;
        let (cmd, cpu, client) = row.per_cycle;
        println!(
            "| {} | {:.0} | - | {cmd:.1} | {cpu:.1} | {client:.1} |",
            row.name, row.rate
        );
        return Ok(());
    }
    let mut rows = vec![
        measured(
            &probe,
            "cluster-rwlock (first)",
            secs,
            ours(&seeds, secs, &format!("{tag}a"), TASKS, DEFAULT_DURABILITY),
        )
        .await?,
        measured(
            &probe,
            "rslock 0.7",
            secs,
            rslock_rate(&seeds, secs, &tag, TASKS),
        )
        .await?,
        measured(
            &probe,
            "rds_lock 1.0",
            secs,
            rds_lock_rate(&seeds, secs, &format!("{tag}r")),
        )
        .await?,
        measured(
            &probe,
            "cluster-rwlock, Durability::MasterOnly (no WAIT)",
            secs,
            ours(
                &seeds,
                secs,
                &format!("{tag}m"),
                TASKS,
                Durability::MasterOnly,
            ),
        )
        .await?,
        measured(
            &probe,
            "cluster-rwlock (last)",
            secs,
            ours(&seeds, secs, &format!("{tag}b"), TASKS, DEFAULT_DURABILITY),
        )
        .await?,
        measured(
            &probe,
            "floor: the same Redis calls as a cycle, no logic, no WAIT",
            secs,
            layout_floor(&seeds, secs, &format!("{tag}f"), TASKS, Socket::LockLike),
        )
        .await?,
        measured(
            &probe,
            "ceiling: EVALSHA return 1 (calls)",
            secs,
            ceiling(&seeds, secs, 1),
        )
        .await?,
        measured(
            &probe,
            "floor, confirmed: the same, a WAIT after each acquire",
            secs,
            layout_floor_confirmed(&seeds, secs, &format!("{tag}fc"), TASKS),
        )
        .await?,
        measured(
            &probe,
            "floor, Nagle on (fred's default socket; the lock's have TCP_NODELAY)",
            secs,
            layout_floor(&seeds, secs, &format!("{tag}fn"), TASKS, Socket::Nagle),
        )
        .await?,
    ];
    let mine = (rows[0].rate + rows[4].rate) / 2.0;
    let wide = [
        measured(
            &probe,
            "cluster-rwlock, 512 tasks",
            secs,
            ours(&seeds, secs, &format!("{tag}w"), WIDE, DEFAULT_DURABILITY),
        )
        .await?,
        measured(
            &probe,
            "ceiling: EVALSHA return 1, pipelined x16 (calls)",
            secs,
            ceiling(&seeds, secs, 16),
        )
        .await?,
    ];
    println!(
        "\n| B1, {TASKS} tasks, {} s each | cycles/s | cluster-rwlock / it | Redis command µs/cycle | Redis CPU µs/cycle | client CPU µs/cycle |\n|---|---|---|---|---|---|",
        secs.as_secs()
    );
    let wide_rate = wide[0].rate;
    for (row, base) in rows
        .iter()
        .map(|r| (r, mine))
        .chain(wide.iter().map(|r| (r, wide_rate)))
    {
        let (cmd, cpu, client) = row.per_cycle;
        println!(
            "| {} | {:.0} | {:.2} x | {cmd:.1} | {cpu:.1} | {client:.1} |",
            row.name,
            row.rate,
            base / row.rate.max(1e-9)
        );
        println!(
            r#"{{"bench":"B1-peers","who":"{}","cycles_per_s":{:.1},"redis_cmd_us":{cmd:.2},"redis_cpu_us":{cpu:.2},"client_cpu_us":{client:.2}}}"#,
            row.name, row.rate
        );
    }
    rows.clear();
    turns::b1_in_turns(&seeds, &probe, &tag, turn_rounds(), turn_slice(secs)).await?;
    single_task(&seeds, &tag, secs).await?;
    handoff_and_contention(&seeds, &probe, &tag, secs).await
}

/// B1-single: one task, acquire + release on one name, the case of most services: each
/// cycle's time, p50 and p99, for this lock in both durabilities, rslock and the floor.
async fn single_task(seeds: &[String], tag: &str, secs: Duration) -> Result<(), BoxError> {
    println!(
        "\n| B1-single, 1 task, {} s each | cycles/s | p50 ms | p99 ms |\n|---|---|---|---|",
        secs.as_secs()
    );
    for who in [
        "cluster-rwlock",
        "cluster-rwlock, MasterOnly",
        "rslock 0.7",
        "floor",
        "floor, confirmed",
    ] {
        let rate = match who {
            "cluster-rwlock" => {
                ours(seeds, secs, &format!("{tag}s"), 1, DEFAULT_DURABILITY).await?
            }
            "cluster-rwlock, MasterOnly" => {
                ours(seeds, secs, &format!("{tag}sm"), 1, Durability::MasterOnly).await?
            }
            "rslock 0.7" => rslock_rate(seeds, secs, &format!("{tag}sr"), 1).await?,
            "floor" => layout_floor(seeds, secs, &format!("{tag}sf"), 1, Socket::LockLike).await?,
            _ => layout_floor_confirmed(seeds, secs, &format!("{tag}sfc"), 1).await?,
        };
        let (p50, p99) = (drive::last_cycle_pct(50.0), drive::last_cycle_pct(99.0));
        println!("| {who} | {rate:.0} | {p50:.3} | {p99:.3} |");
        println!(
            r#"{{"bench":"B1-single","who":"{who}","cycles_per_s":{rate:.1},"p50_ms":{p50:.4},"p99_ms":{p99:.4}}}"#
        );
    }
    Ok(())
}

/// B2 for python-redis-lock (`handoff_peer.py`, on the master of its names' slot), when
/// Python has it; a line saying why not otherwise.
async fn python_redis_lock_b2(ranges: &[(u16, u16, String)], count: usize) {
    let who = "python-redis-lock 4";
    let Some((host, port)) = master_of(ranges, b"{b2peer}").and_then(|m| m.rsplit_once(':')) else {
        println!("| {who} | no master for its slot | |");
        return;
    };
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/handoff_peer.py");
    let out = tokio::process::Command::new("python3")
        .args([script, host, port, &count.to_string()])
        .output()
        .await;
    let parsed = out
        .as_ref()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| {
            let text = String::from_utf8_lossy(&o.stdout);
            let mut it = text.split_whitespace().map(|v| v.parse::<f64>().ok());
            Some((it.next()??, it.next()??))
        });
    match parsed {
        Some((p50, p99)) => {
            println!("| {who} | {p50:.2} | {p99:.2} |");
            println!(r#"{{"bench":"B2-peers","who":"{who}","p50_ms":{p50:.3},"p99_ms":{p99:.3}}}"#);
        }
        None => {
            println!("| {who} | not measured (`pip install python-redis-lock` for this row) | |")
        }
    }
}

/// The address of the master that serves `key`'s slot.
fn master_of<'a>(ranges: &'a [(u16, u16, String)], key: &[u8]) -> Option<&'a str> {
    let slot = key_slot(key);
    ranges
        .iter()
        .find(|(a, b, _)| (*a..=*b).contains(&slot))
        .map(|r| r.2.as_str())
}

/// B2 and B4 (see the crate's docs), printed as tables and JSON lines.
async fn handoff_and_contention(
    seeds: &[String],
    probe: &Probe,
    tag: &str,
    secs: Duration,
) -> Result<(), BoxError> {
    let count = (secs.as_secs() as usize * 40).clamp(20, 200);
    let ranges = ranges_of(seeds).await?;
    println!("\n| B2 hand-off, {count} each | p50 ms | p99 ms |\n|---|---|---|");
    for (who, durability, prefix) in [
        ("cluster-rwlock", DEFAULT_DURABILITY, "h"),
        ("cluster-rwlock, MasterOnly", Durability::MasterOnly, "hm"),
        ("cluster-rwlock (again)", DEFAULT_DURABILITY, "h2"),
    ] {
        let l = contended::b2_ours(
            seeds,
            &format!("{tag}{prefix}"),
            durability,
            count,
            master_of(&ranges, b"{handoff}"),
        )
        .await?;
        let (p50, p99) = (contended::pct(&l, 50.0), contended::pct(&l, 99.0));
        println!("| {who} | {p50:.2} | {p99:.2} |");
        println!(r#"{{"bench":"B2-peers","who":"{who}","p50_ms":{p50:.3},"p99_ms":{p99:.3}}}"#);
    }
    if let Some(master) = master_of(&ranges, b"{handoff-floor}") {
        let who = "the floor (the same calls, no logic)";
        let l = contended::b2_floor(seeds, master, tag, count).await?;
        let (p50, p99) = (contended::pct(&l, 50.0), contended::pct(&l, 99.0));
        println!("| {who} | {p50:.2} | {p99:.2} |");
        println!(r#"{{"bench":"B2-peers","who":"floor","p50_ms":{p50:.3},"p99_ms":{p99:.3}}}"#);
    }
    python_redis_lock_b2(&ranges, count).await;
    let masters = probe.masters();
    let name = format!("{tag}:contended");
    let manager = rslock_manager(&ranges, &mut std::collections::HashMap::new(), &name)?;
    let rows = [
        (
            "cluster-rwlock",
            contended::b4_ours(
                seeds,
                &masters,
                &format!("{tag}c"),
                DEFAULT_DURABILITY,
                secs,
            )
            .await?,
        ),
        (
            "cluster-rwlock, MasterOnly",
            contended::b4_ours(
                seeds,
                &masters,
                &format!("{tag}cm"),
                Durability::MasterOnly,
                secs,
            )
            .await?,
        ),
        (
            "rslock 0.7",
            contended::b4_rslock(manager, name, &masters, secs).await,
        ),
    ];
    println!(
        "\n| B4, {} contenders, hold 2 ms | grants | server commands per grant | of which |\n|---|---|---|---|",
        contended::CONTENDERS
    );
    for (who, c) in &rows {
        let of: Vec<String> = c
            .breakdown
            .iter()
            .map(|(k, v)| format!("{} {v:.2}", k.to_uppercase()))
            .collect();
        println!(
            "| {who} | {} | {:.2} | {} |",
            c.grants,
            c.per_grant,
            of.join(", ")
        );
        println!(
            r#"{{"bench":"B4-peers","who":"{who}","grants":{},"commands_per_grant":{:.2}}}"#,
            c.grants, c.per_grant
        );
    }
    Ok(())
}

fn main() -> Result<(), BoxError> {
    // as B1: one client on a 2-worker runtime
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(run())
}
