//! B1 side by side, in one run on one cluster: uncontended acquire+release cycles from
//! 32 tasks on 32 names (B1-wide: 512 on 512), one client per library, for
//! cluster-rwlock (its default, grants confirmed by WAIT, and `Durability::MasterOnly`)
//! and the peers
//! `rslock` (a SET NX PX mutex; one `LockManager` per master, each name sent to the
//! master of its slot, since it does not follow a cluster) and `rds_lock` (a read/write
//! lock; on redis-rs's cluster connection), each with its defaults; the floor of the
//! hash layout: a cycle of two scripts that make the same Redis calls as an uncontended
//! cycle of ours with no logic around them, through fred, without `WAIT`; and the server
//! ceiling: a trivial EVALSHA from the same 32 tasks, one call at a time and pipelined
//! (batches of 16). cluster-rwlock runs first and last, so that drift of the machine
//! shows. For every row: Redis time per cycle (the sum of `INFO commandstats` usec of
//! the commands clients send, EVALSHA, EVAL and SET, on the masters: time in commands), Redis CPU per cycle (`INFO cpu` user+sys of the six
//! server processes: commands, I/O and replication) and client CPU per cycle
//! (`/proc/self/stat` utime+stime of this process, at 100 ticks/s).
//!
//!
//! Then, in the same run: B2, the hand-off latency between two clients (p50 / p99), for
//! cluster-rwlock in both durabilities and for python-redis-lock (`handoff_peer.py`, when
//! Python has the package); and B4, the commands the masters run per
//! contended acquisition (16 contenders on one name, each holding 2 ms; the calls a
//! script makes count), for cluster-rwlock in both durabilities and for rslock.
//!
//! `cargo run --release -p cluster-rwlock-peers -- [--url redis://host:port] [--only ours|rslock|rds_lock|floor|contended]
//! [--connections N]`
//! (without `--url` the test bed's cluster is started); `BENCH_SECONDS` (default 5).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cluster_rwlock::slot::key_slot;
use cluster_rwlock::{Durability, LockClient, LockConfig, DEFAULT_DURABILITY};
use cluster_rwlock_testkit::TestCluster;
use fred::prelude::*;
use fred::types::{ClusterHash, CustomCommand};

mod contended;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

const TASKS: usize = 32;
const WIDE: usize = 512;

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    let i = args.iter().position(|a| a == name)?;
    args.get(i + 1).cloned()
}

/// Runs `cycle(task index)` from TASKS tasks for `secs`; cycles per second.
async fn drive<F, Fut>(secs: Duration, cycle: F) -> f64
where
    F: Fn(usize) -> Fut + Send + Sync + Clone + 'static,
    Fut: std::future::Future<Output = bool> + Send,
{
    drive_n(TASKS, secs, cycle).await
}

/// As [`drive`], from `tasks` tasks.
async fn drive_n<F, Fut>(tasks_n: usize, secs: Duration, cycle: F) -> f64
where
    F: Fn(usize) -> Fut + Send + Sync + Clone + 'static,
    Fut: std::future::Future<Output = bool> + Send,
{
    let run = run_for(tasks_n, secs, cycle).await;
    run.at_stop as f64 / run.took.as_secs_f64()
}

/// What [`run_for`] counted.
pub(crate) struct Run {
    /// Cycles done when the tasks were told to stop, `took` after the start.
    pub at_stop: u64,
    pub took: Duration,
    /// Cycles done once every task finished the cycle it was in.
    pub total: u64,
}

/// Runs `cycle(task index)` from `tasks_n` tasks, each until `secs` have passed and its
/// cycle ended; a cycle counts when it returns true.
pub(crate) async fn run_for<F, Fut>(tasks_n: usize, secs: Duration, cycle: F) -> Run
where
    F: Fn(usize) -> Fut + Send + Sync + Clone + 'static,
    Fut: std::future::Future<Output = bool> + Send,
{
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for i in 0..tasks_n {
        let (stop, done, cycle) = (stop.clone(), done.clone(), cycle.clone());
        tasks.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                if cycle(i).await {
                    done.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    let began = Instant::now();
    tokio::time::sleep(secs).await;
    stop.store(true, Ordering::Relaxed);
    let at_stop = done.load(Ordering::Relaxed);
    let took = began.elapsed();
    for t in tasks {
        let _ = t.await;
    }
    Run {
        at_stop,
        took,
        total: done.load(Ordering::Relaxed),
    }
}

/// The `cmdstat_` lines of an `INFO` reply: each command's name and one of its fields
/// (`calls`, `usec`, ...) as a number.
pub(crate) fn cmdstats<'a>(
    info: &'a str,
    field: &'a str,
) -> impl Iterator<Item = (&'a str, f64)> + 'a {
    info.lines().filter_map(move |line| {
        let (name, fields) = line.strip_prefix("cmdstat_")?.split_once(':')?;
        let value = fields
            .split(',')
            .find_map(|kv| kv.strip_prefix(field)?.strip_prefix('='))?
            .parse()
            .ok()?;
        Some((name, value))
    })
}

async fn ours(
    seeds: &[String],
    secs: Duration,
    tag: &str,
    tasks: usize,
    durability: Durability,
) -> Result<f64, BoxError> {
    let mut config = LockConfig::cluster(seeds.to_vec())
        .prefix(tag)
        .durability(durability);
    if let Some(n) = arg("--connections").and_then(|n| n.parse().ok()) {
        config = config.connections(n);
    }
    let client = LockClient::connect(config).await?;
    let locks: Arc<Vec<_>> = Arc::new(
        (0..tasks)
            .map(|i| client.rwlock(&format!("n{i}")))
            .collect::<Result<_, _>>()?,
    );
    let rate = drive_n(tasks, secs, move |i| {
        let locks = locks.clone();
        async move {
            match locks[i].write().await {
                Ok(g) => g.release().await.is_ok(),
                Err(_) => false,
            }
        }
    })
    .await;
    // how well batches gather: WAITs and round trips per acquire attempt
    let stats = client.stats();
    let attempts = stats.attempts.max(1) as f64;
    println!(
        r#"{{"bench":"B1-batching","durability":"{durability:?}","tasks":{tasks},"waits_per_attempt":{:.3},"round_trips_per_attempt":{:.3}}}"#,
        stats.confirmations as f64 / attempts,
        stats.round_trips as f64 / attempts
    );
    client.close().await;
    Ok(rate)
}

/// `(host:port)` of the master of every slot, from CLUSTER SLOTS.
async fn slot_masters(client: &Client) -> Result<Vec<(u16, u16, String)>, BoxError> {
    let cmd = CustomCommand::new_static("CLUSTER", ClusterHash::Random, false);
    let reply: Value = client.custom(cmd, vec!["SLOTS"]).await?;
    let mut out = Vec::new();
    if let Value::Array(ranges) = reply {
        for r in ranges {
            let Value::Array(p) = r else { continue };
            let (Some(a), Some(b), Some(Value::Array(m))) = (p.first(), p.get(1), p.get(2)) else {
                continue;
            };
            let host = m.first().and_then(|h| h.as_string()).unwrap_or_default();
            let port = m.get(1).and_then(|p| p.as_i64()).unwrap_or(0);
            out.push((
                u16::try_from(a.as_i64().unwrap_or(0))?,
                u16::try_from(b.as_i64().unwrap_or(0))?,
                format!("{host}:{port}"),
            ));
        }
    }
    Ok(out)
}

/// The rslock manager of the master of `name`'s slot (one per master, in `managers`).
fn rslock_manager(
    ranges: &[(u16, u16, String)],
    managers: &mut std::collections::HashMap<String, Arc<rslock::LockManager>>,
    name: &str,
) -> Result<Arc<rslock::LockManager>, BoxError> {
    let slot = key_slot(name.as_bytes());
    let addr = ranges
        .iter()
        .find(|(a, b, _)| (*a..=*b).contains(&slot))
        .map(|r| r.2.clone())
        .ok_or("no master for a slot")?;
    Ok(managers
        .entry(addr.clone())
        .or_insert_with(|| Arc::new(rslock::LockManager::new(vec![format!("redis://{addr}/")])))
        .clone())
}

/// A cluster client of fred's, connected, from a seed node's `redis://` URL.
async fn cluster_client(seed: &str) -> Result<Client, BoxError> {
    let fred = Builder::from_config(Config::from_url(
        &seed.replace("redis://", "redis-cluster://"),
    )?)
    .build()?;
    fred.init().await?;
    Ok(fred)
}

/// The slot ranges of the masters, from a seed.
async fn ranges_of(seeds: &[String]) -> Result<Vec<(u16, u16, String)>, BoxError> {
    let fred = cluster_client(&seeds[0]).await?;
    let ranges = slot_masters(&fred).await?;
    let _ = fred.quit().await;
    Ok(ranges)
}

async fn rslock_rate(seeds: &[String], secs: Duration, tag: &str) -> Result<f64, BoxError> {
    let ranges = ranges_of(seeds).await?;
    let mut managers = std::collections::HashMap::new();
    let mut per_task = Vec::new();
    for i in 0..TASKS {
        let name = format!("{tag}:n{i}");
        per_task.push((rslock_manager(&ranges, &mut managers, &name)?, name));
    }
    let per_task = Arc::new(per_task);
    Ok(drive(secs, move |i| {
        let per_task = per_task.clone();
        async move {
            let (m, name) = &per_task[i];
            match m.lock(name.as_bytes(), Duration::from_secs(30)).await {
                Ok(l) => {
                    m.unlock(&l).await;
                    true
                }
                Err(_) => false,
            }
        }
    })
    .await)
}

async fn rds_lock_rate(seeds: &[String], secs: Duration, tag: &str) -> Result<f64, BoxError> {
    let client = redis::cluster::ClusterClient::new(seeds.to_vec())?;
    let con = client.get_async_connection().await?;
    let tag = tag.to_string();
    Ok(drive(secs, move |i| {
        let con = con.clone();
        let key = format!("{tag}:n{i}");
        async move {
            match rds_lock::Locker::new(con).lock(key).await {
                Ok(unlock) => unlock.await.is_ok(),
                Err(_) => false,
            }
        }
    })
    .await)
}

/// The Redis calls of an uncontended B1 cycle on a lock's tombstone, as the fast paths
/// make them (`HGET`, `TIME`, `HSET`, `PEXPIRE`; `HMGET`, `TIME`, `HDEL`, `HSET`), with
/// no logic around them: the floor of this hash layout on this server.
const FLOOR_ACQUIRE: &str = r"
redis.call('HGET', KEYS[1], 's')
local t = redis.call('TIME')
local d = t[1] .. '000'
redis.call('HSET', KEYS[1], 's', '3 ' .. d .. ' 1 ' .. d .. ' ' .. d .. ' 0 0 -',
  'o:' .. ARGV[1], 'w' .. ARGV[2] .. ':' .. d .. ':' .. d, 'w', ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return {1, d}
";
const FLOOR_RELEASE: &str = r"
redis.call('HMGET', KEYS[1], 's', 'o:' .. ARGV[1])
local t = redis.call('TIME')
redis.call('HDEL', KEYS[1], 'o:' .. ARGV[1], 'w', 'u')
redis.call('HSET', KEYS[1], 's', '3 ' .. t[1] .. ' 0 - 0 0 0 -')
return {1}
";

/// B1's cycle as [`FLOOR_ACQUIRE`] and [`FLOOR_RELEASE`] from the same tasks, each one
/// round trip through the cluster client, no `WAIT`: what any lock of this layout could
/// do through this client on this server (the ceiling of `MasterOnly`). Cycles/s.
async fn layout_floor(seeds: &[String], secs: Duration, tag: &str) -> Result<f64, BoxError> {
    let fred = cluster_client(&seeds[0]).await?;
    let acquire = fred::types::scripts::Script::from_lua(FLOOR_ACQUIRE);
    let release = fred::types::scripts::Script::from_lua(FLOOR_RELEASE);
    acquire.load(&fred).await?;
    release.load(&fred).await?;
    let (client, tag) = (fred.clone(), tag.to_string());
    let rate = drive(secs, move |i| {
        let (fred, acquire, release) = (
            client.clone(),
            acquire.sha1().clone(),
            release.sha1().clone(),
        );
        let key = format!("{tag}:{{n{i}}}");
        async move {
            let owner = format!("owner-{i}");
            let a: Result<Value, _> = fred
                .evalsha(
                    acquire,
                    vec![key.clone()],
                    vec![owner.clone(), "1".into(), "90000".into()],
                )
                .await;
            let r: Result<Value, _> = fred.evalsha(release, vec![key], vec![owner]).await;
            a.is_ok() && r.is_ok()
        }
    })
    .await;
    let _ = fred.quit().await;
    Ok(rate)
}

/// A trivial EVALSHA from the same tasks, one round trip each (or `batch` calls per
/// pipeline): what the server and this machine allow a call that does nothing. Calls/s.
async fn ceiling(seeds: &[String], secs: Duration, batch: usize) -> Result<f64, BoxError> {
    let fred = cluster_client(&seeds[0]).await?;
    let script = fred::types::scripts::Script::from_lua("return 1");
    script.load(&fred).await?;
    let fred2 = fred.clone();
    let rate = drive(secs, move |i| {
        let (fred, sha) = (fred2.clone(), script.sha1().clone());
        async move {
            if batch <= 1 {
                let r: Result<i64, _> = fred
                    .evalsha(sha, vec![format!("c{i}")], Vec::<String>::new())
                    .await;
                return r.is_ok();
            }
            let pipeline = fred.pipeline();
            for _ in 0..batch {
                // the key's slot, so that the cluster client sends it to its master
                let key = format!("c{i}");
                let hash = ClusterHash::Custom(key_slot(key.as_bytes()));
                let cmd = CustomCommand::new_static("EVALSHA", hash, false);
                let args = vec![sha.to_string(), "1".to_string(), key];
                let _: Result<(), _> = pipeline.custom(cmd, args).await;
            }
            let r: Result<Vec<i64>, _> = pipeline.all().await;
            r.is_ok()
        }
    })
    .await;
    let _ = fred.quit().await;
    Ok(rate * batch.max(1) as f64)
}

/// Counters of the servers and of this process at one moment.
#[derive(Clone, Copy, Default)]
struct Sample {
    /// Sum over the masters of `INFO commandstats` usec of the commands clients send
    /// (EVALSHA, EVAL, SET: the calls a script makes are inside its time).
    command_us: f64,
    /// Sum over the nodes of `INFO cpu` used_cpu_user + used_cpu_sys, in µs.
    server_cpu_us: f64,
    /// utime + stime of this process, in µs.
    client_cpu_us: f64,
}

/// One plain connection per node of the cluster, to read `INFO`.
struct Probe {
    /// (connection, is a master)
    nodes: Vec<(Client, bool)>,
}

impl Probe {
    /// The connections to the masters.
    fn masters(&self) -> Vec<Client> {
        self.nodes
            .iter()
            .filter(|(_, m)| *m)
            .map(|(c, _)| c.clone())
            .collect()
    }

    async fn new(seed: &str) -> Result<Probe, BoxError> {
        let fred = cluster_client(seed).await?;
        let cmd = CustomCommand::new_static("CLUSTER", ClusterHash::Random, false);
        let text: String = fred.custom(cmd, vec!["NODES"]).await?;
        let _ = fred.quit().await;
        let mut nodes = Vec::new();
        for line in text.lines() {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (Some(addr), Some(flags)) = (fields.get(1), fields.get(2)) else {
                continue;
            };
            let master = flags.contains("master");
            let addr = addr.split('@').next().unwrap_or(addr);
            let node =
                Builder::from_config(Config::from_url(&format!("redis://{addr}"))?).build()?;
            node.init().await?;
            nodes.push((node, master));
        }
        Ok(Probe { nodes })
    }

    async fn sample(&self) -> Sample {
        let mut s = Sample {
            client_cpu_us: client_cpu_us(),
            ..Sample::default()
        };
        for (node, master) in &self.nodes {
            let cmd = CustomCommand::new_static("INFO", ClusterHash::FirstKey, false);
            let info: String = node
                .custom(cmd, vec!["everything"])
                .await
                .unwrap_or_default();
            if *master {
                s.command_us += cmdstats(&info, "usec")
                    .filter(|(name, _)| ["evalsha", "evalsha_ro", "eval", "set"].contains(name))
                    .map(|(_, usec)| usec)
                    .sum::<f64>();
            }
            for line in info.lines() {
                if let Some(v) = line
                    .strip_prefix("used_cpu_user:")
                    .or_else(|| line.strip_prefix("used_cpu_sys:"))
                {
                    s.server_cpu_us += v.trim().parse::<f64>().unwrap_or(0.0) * 1e6;
                }
            }
        }
        s
    }
}

/// utime + stime of this process from /proc/self/stat, in µs (100 ticks per second).
fn client_cpu_us() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // the fields after the command name, which is in parentheses
    let after = stat.rsplit(')').next().unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line: 12 and 13 after ')'
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) * 10_000.0
}

struct Row {
    name: String,
    rate: f64,
    /// per cycle: Redis command time, Redis CPU, client CPU (µs)
    per_cycle: (f64, f64, f64),
}

async fn measured<Fut>(probe: &Probe, name: &str, secs: Duration, run: Fut) -> Result<Row, BoxError>
where
    Fut: std::future::Future<Output = Result<f64, BoxError>>,
{
    let before = probe.sample().await;
    let rate = run.await?;
    let after = probe.sample().await;
    let cycles = (rate * secs.as_secs_f64()).max(1.0);
    Ok(Row {
        name: name.to_string(),
        rate,
        per_cycle: (
            (after.command_us - before.command_us) / cycles,
            (after.server_cpu_us - before.server_cpu_us) / cycles,
            (after.client_cpu_us - before.client_cpu_us) / cycles,
        ),
    })
}

async fn run() -> Result<(), BoxError> {
    let secs = Duration::from_secs(
        std::env::var("BENCH_SECONDS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(5),
    );
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
    if let Some(only) = arg("--only") {
        // one row alone (for profiling): ours, rslock, rds_lock or floor
        let row = match only.as_str() {
            "ours" => {
                measured(
                    &probe,
                    "cluster-rwlock",
                    secs,
                    ours(&seeds, secs, &tag, TASKS, DEFAULT_DURABILITY),
                )
                .await?
            }
            "rslock" => {
                measured(&probe, "rslock 0.7", secs, rslock_rate(&seeds, secs, &tag)).await?
            }
            "rds_lock" => {
                measured(
                    &probe,
                    "rds_lock 1.0",
                    secs,
                    rds_lock_rate(&seeds, secs, &tag),
                )
                .await?
            }
            "floor" => {
                measured(
                    &probe,
                    "floor",
                    secs,
                    layout_floor(&seeds, secs, &format!("{tag}f")),
                )
                .await?
            }
            other => return Err(format!("--only {other}: ours, rslock, rds_lock or floor").into()),
        };
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
        measured(&probe, "rslock 0.7", secs, rslock_rate(&seeds, secs, &tag)).await?,
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
            layout_floor(&seeds, secs, &format!("{tag}f")),
        )
        .await?,
        measured(
            &probe,
            "ceiling: EVALSHA return 1 (calls)",
            secs,
            ceiling(&seeds, secs, 1),
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
    handoff_and_contention(&seeds, &probe, &tag, secs).await
}

/// B2 for python-redis-lock (`handoff_peer.py`, on the master of its names' slot), when
/// Python has it; a line saying why not otherwise.
async fn python_redis_lock_b2(ranges: &[(u16, u16, String)], count: usize) {
    let who = "python-redis-lock 4";
    let slot = key_slot(b"{b2peer}");
    let Some((host, port)) = ranges
        .iter()
        .find(|(a, b, _)| (*a..=*b).contains(&slot))
        .and_then(|r| r.2.rsplit_once(':'))
    else {
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

/// B2 and B4 (see the crate's docs), printed as tables and JSON lines.
async fn handoff_and_contention(
    seeds: &[String],
    probe: &Probe,
    tag: &str,
    secs: Duration,
) -> Result<(), BoxError> {
    let count = (secs.as_secs() as usize * 40).clamp(20, 200);
    println!("\n| B2 hand-off, {count} each | p50 ms | p99 ms |\n|---|---|---|");
    for (who, durability, prefix) in [
        ("cluster-rwlock", DEFAULT_DURABILITY, "h"),
        ("cluster-rwlock, MasterOnly", Durability::MasterOnly, "hm"),
        ("cluster-rwlock (again)", DEFAULT_DURABILITY, "h2"),
    ] {
        let l = contended::b2_ours(seeds, &format!("{tag}{prefix}"), durability, count).await?;
        let (p50, p99) = (contended::pct(&l, 50.0), contended::pct(&l, 99.0));
        println!("| {who} | {p50:.2} | {p99:.2} |");
        println!(r#"{{"bench":"B2-peers","who":"{who}","p50_ms":{p50:.3},"p99_ms":{p99:.3}}}"#);
    }
    let ranges = ranges_of(seeds).await?;
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
            .map(|(k, v)| format!("{} {v:.1}", k.to_uppercase()))
            .collect();
        println!(
            "| {who} | {} | {:.1} | {} |",
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
