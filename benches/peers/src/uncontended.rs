//! B1's rows: uncontended cycles of cluster-rwlock and of each peer, the floor of the
//! hash layout and the server's ceiling.

use std::sync::Arc;
use std::time::Duration;

use cluster_rwlock::slot::key_slot;
use cluster_rwlock::{Durability, LockClient, LockConfig, RwLock};
use fred::prelude::*;
use fred::types::{ClusterHash, CustomCommand};

use crate::drive::{drive, drive_n};
use crate::{arg, BoxError};

pub(crate) async fn ours(
    seeds: &[String],
    secs: Duration,
    tag: &str,
    tasks: usize,
    durability: Durability,
) -> Result<f64, BoxError> {
    let (client, locks) = ours_locks(seeds, tag, tasks, durability).await?;
    let rate = drive_n(tasks, secs, move |i| {
        let locks = locks.clone();
        async move { ours_once(&locks[i]).await }
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

/// A client of this lock (`durability`, `--connections` when given) and `tasks` locks
/// named `n0`, `n1`, ... under `tag`.
pub(crate) async fn ours_locks(
    seeds: &[String],
    tag: &str,
    tasks: usize,
    durability: Durability,
) -> Result<(LockClient, Arc<Vec<RwLock>>), BoxError> {
    let mut config = LockConfig::cluster(seeds.to_vec())
        .prefix(tag)
        .durability(durability);
    if let Some(n) = arg("--connections").and_then(|n| n.parse().ok()) {
        config = config.connections(n);
    }
    let client = LockClient::connect(config).await?;
    let locks = (0..tasks)
        .map(|i| client.rwlock(&format!("n{i}")))
        .collect::<Result<_, _>>()?;
    Ok((client, Arc::new(locks)))
}

/// One cycle of B1 on `lock`: write, release.
pub(crate) async fn ours_once(lock: &RwLock) -> bool {
    match lock.write().await {
        Ok(g) => g.release().await.is_ok(),
        Err(_) => false,
    }
}

/// `(host:port)` of the master of every slot, from CLUSTER SLOTS.
pub(crate) async fn slot_masters(client: &Client) -> Result<Vec<(u16, u16, String)>, BoxError> {
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
pub(crate) fn rslock_manager(
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

/// A cluster client of fred's, connected, from a seed node's `redis://` URL, with
/// fred's default socket (Nagle's algorithm on).
pub(crate) async fn cluster_client(seed: &str) -> Result<Client, BoxError> {
    cluster_client_with(seed, Socket::Nagle).await
}

/// The TCP setting of a floor's connections.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Socket {
    /// `TCP_NODELAY`, as this lock's own connections have it (`cluster::node`): every
    /// call goes out at once, in a packet of its own, as the lock's calls go. The floor
    /// of the lock's calls.
    LockLike,
    /// fred's default: Nagle's algorithm on. Under load the kernel holds a small write
    /// while an earlier one is unacknowledged and sends the calls of several tasks in
    /// one packet: fewer packets on both sides, and a round trip's wait for a call that
    /// finds one in flight (this lock keeps `TCP_NODELAY` for the
    /// latency of a lone task: docs/BENCHMARKS.md, round 8).
    Nagle,
}

/// [`cluster_client`] with the socket setting `socket`.
pub(crate) async fn cluster_client_with(seed: &str, socket: Socket) -> Result<Client, BoxError> {
    let fred = Builder::from_config(Config::from_url(
        &seed.replace("redis://", "redis-cluster://"),
    )?)
    .with_connection_config(|c| {
        if socket == Socket::LockLike {
            c.tcp.nodelay = Some(true);
        }
    })
    .build()?;
    fred.init().await?;
    Ok(fred)
}

/// The slot ranges of the masters, from a seed.
pub(crate) async fn ranges_of(seeds: &[String]) -> Result<Vec<(u16, u16, String)>, BoxError> {
    let fred = cluster_client(&seeds[0]).await?;
    let ranges = slot_masters(&fred).await?;
    let _ = fred.quit().await;
    Ok(ranges)
}

pub(crate) async fn rslock_rate(
    seeds: &[String],
    secs: Duration,
    tag: &str,
    tasks: usize,
) -> Result<f64, BoxError> {
    let per_task = Arc::new(rslock_names(seeds, tag, tasks).await?);
    Ok(drive_n(tasks, secs, move |i| {
        let per_task = per_task.clone();
        async move { rslock_once(&per_task[i]).await }
    })
    .await)
}

/// rslock's managers and names for `tasks` tasks, each name sent to its slot's master.
pub(crate) async fn rslock_names(
    seeds: &[String],
    tag: &str,
    tasks: usize,
) -> Result<Vec<RslockName>, BoxError> {
    let ranges = ranges_of(seeds).await?;
    let mut managers = std::collections::HashMap::new();
    (0..tasks)
        .map(|i| {
            let name = format!("{tag}:n{i}");
            Ok((rslock_manager(&ranges, &mut managers, &name)?, name))
        })
        .collect()
}

/// A name of rslock's and the manager of its slot's master.
pub(crate) type RslockName = (Arc<rslock::LockManager>, String);

/// One cycle of rslock's: lock (30 s), unlock.
pub(crate) async fn rslock_once((m, name): &RslockName) -> bool {
    match m.lock(name.as_bytes(), Duration::from_secs(30)).await {
        Ok(l) => {
            m.unlock(&l).await;
            true
        }
        Err(_) => false,
    }
}

pub(crate) async fn rds_lock_rate(
    seeds: &[String],
    secs: Duration,
    tag: &str,
) -> Result<f64, BoxError> {
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

/// The Redis calls of an uncontended B1 cycle on a lock's tombstone, as layout 4's fast
/// paths make them (`HGET`, `TIME`, `HSET`; `HGET`, `HSET`), as two functions of a
/// library of their own, with no logic around them: the floor of this hash layout on
/// this server.
pub(crate) const FLOOR_LIBRARY: &str = include_str!("../../floor.lua");

/// B1's cycle as the two functions of [`FLOOR_LIBRARY`] from the same tasks, each one
/// round trip through the cluster client, no `WAIT`, on connections of `socket`'s
/// setting (with [`Socket::LockLike`], the lock's: what any lock of this layout could
/// do through this client on this server, the ceiling of `MasterOnly`). Cycles/s. The
/// keys get no TTL and stay (one per task, under the run's prefix: without `--url` the
/// cluster is the run's own and goes with it).
pub(crate) async fn layout_floor(
    seeds: &[String],
    secs: Duration,
    tag: &str,
    tasks: usize,
    socket: Socket,
) -> Result<f64, BoxError> {
    floor_cycles(seeds, secs, tag, tasks, false, socket).await
}

/// [`layout_floor`] with the acquire confirmed as a lock's must be: `WAIT 1 500` right
/// after it, in the same pipeline, on the same connection (one `WAIT` per acquire, as a
/// lone task's grant has; the lock's lanes share one among the acquires that meet on a
/// connection), on connections set as the lock's are. What confirmation costs any lock
/// of this layout here.
pub(crate) async fn layout_floor_confirmed(
    seeds: &[String],
    secs: Duration,
    tag: &str,
    tasks: usize,
) -> Result<f64, BoxError> {
    floor_cycles(seeds, secs, tag, tasks, true, Socket::LockLike).await
}

/// Loads [`FLOOR_LIBRARY`] on every master (again: it replaces itself).
pub(crate) async fn load_floor(fred: &Client) -> Result<(), BoxError> {
    for node in fred
        .cached_cluster_state()
        .map(|s| s.unique_primary_nodes())
        .unwrap_or_default()
    {
        let _: Value = fred
            .with_cluster_node(node)
            .function_load(true, FLOOR_LIBRARY)
            .await?;
    }
    Ok(())
}

async fn floor_cycles(
    seeds: &[String],
    secs: Duration,
    tag: &str,
    tasks: usize,
    confirmed: bool,
    socket: Socket,
) -> Result<f64, BoxError> {
    let fred = cluster_client_with(&seeds[0], socket).await?;
    load_floor(&fred).await?;
    let (client, tag) = (fred.clone(), tag.to_string());
    let rate = drive_n(tasks, secs, move |i| {
        let (fred, key) = (client.clone(), format!("{tag}:{{n{i}}}"));
        async move { floor_once(&fred, key, i, confirmed).await }
    })
    .await;
    let _ = fred.quit().await;
    Ok(rate)
}

/// One cycle of the floor's on `key` (task `i`): [`FLOOR_LIBRARY`]'s acquire, with
/// `WAIT 1 500` in its pipeline when `confirmed`, and its release.
pub(crate) async fn floor_once(fred: &Client, key: String, i: usize, confirmed: bool) -> bool {
    let owner = format!("owner-{i}");
    let args = vec![
        "w".into(),
        owner.clone(),
        "1".into(),
        "30000".into(),
        "1".into(),
    ];
    let a: Result<Value, _> = if confirmed {
        let pipeline = fred.pipeline();
        let _: Result<(), _> = pipeline
            .fcall("floor_acquire", vec![key.clone()], args)
            .await;
        let wait =
            CustomCommand::new_static("WAIT", ClusterHash::Custom(key_slot(key.as_bytes())), false);
        let _: Result<(), _> = pipeline.custom(wait, vec![1, 500]).await;
        let replies: Result<Vec<Value>, _> = pipeline.all().await;
        match replies {
            Ok(r) if r.get(1) == Some(&Value::Integer(1)) => Ok(r[0].clone()),
            Ok(r) => Err(fred::error::Error::new(
                fred::error::ErrorKind::Unknown,
                format!("not confirmed: {r:?}"),
            )),
            Err(e) => Err(e),
        }
    } else {
        fred.fcall("floor_acquire", vec![key.clone()], args).await
    };
    let r: Result<Value, _> = fred
        .fcall("floor_release", vec![key], vec![owner, "1".to_string()])
        .await;
    if let Some(e) = a.as_ref().err().or(r.as_ref().err()) {
        // a row of zeros says why
        if i == 0 {
            eprintln!("floor: {e}");
        }
    }
    a.is_ok() && r.is_ok()
}

/// A trivial EVALSHA from the same tasks, one round trip each (or `batch` calls per
/// pipeline): what the server and this machine allow a call that does nothing. Calls/s.
pub(crate) async fn ceiling(
    seeds: &[String],
    secs: Duration,
    batch: usize,
) -> Result<f64, BoxError> {
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
