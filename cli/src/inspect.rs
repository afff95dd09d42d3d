//! `inspect`: one lock's holders, waiters and fence; what `list`, `break` and `watch`
//! share of it (a lock's state, as text or JSON).

use cluster_rwlock::{LockClient, LockState, Mode, RwLock};
use serde_json::{json, Value as Json};

use crate::args::InspectArgs;
use crate::clock::{self, secs};
use crate::fail;
use crate::shown::escaped;

pub fn mode(m: Option<Mode>) -> &'static str {
    m.map_or("free", |m| m.as_str())
}

/// A lock's state as JSON.
pub fn state_json(client: &LockClient, lock: &RwLock, s: &LockState) -> Json {
    json!({
        "name": lock.name(),
        "key": lock.key(),
        "slot": lock.slot(),
        "master": client.node_for_slot(lock.slot()),
        "mode": mode(s.mode),
        "fence": s.fence,
        "fence_time": s.fence.and_then(clock::fence_time).map(clock::utc),
        "holders": s.holders.iter().map(|h| json!({
            "owner": h.owner,
            "client": h.client_name(),
            "mode": h.mode.as_str(),
            "read": h.read_holds,
            "write": h.write_holds,
            "upgradable": h.upgradable_holds,
            "lease_left_ms": u64::try_from(h.lease_left.as_millis()).unwrap_or(u64::MAX),
            "held_for_ms": u64::try_from(h.held_for.as_millis()).unwrap_or(u64::MAX),
            "renewed_ago_ms": u64::try_from(h.renewed_ago.as_millis()).unwrap_or(u64::MAX),
            "lease_ms": u64::try_from(h.lease.as_millis()).unwrap_or(u64::MAX),
            "overdue": h.overdue(),
        })).collect::<Vec<_>>(),
        "waiting_writers": s.waiting_writers,
        "waiting_readers": s.waiting_readers,
    })
}

/// ` (name, name)`: the client names of the holders, each once; empty when none has one.
pub fn clients(s: &LockState) -> String {
    let mut names: Vec<&str> = s.holders.iter().filter_map(|h| h.client_name()).collect();
    names.sort_unstable();
    names.dedup();
    if names.is_empty() {
        String::new()
    } else {
        format!(" ({})", escaped(&names.join(", ")))
    }
}

/// The lock `name` and its state, or the exit code of the error (said on stderr).
pub async fn lock_and_state(client: &LockClient, name: &str) -> Result<(RwLock, LockState), i32> {
    let lock = client.rwlock(name).map_err(|e| fail("bad lock name", &e))?;
    let s = lock
        .state()
        .await
        .map_err(|e| fail(&format!("cannot read {name}"), &e))?;
    Ok((lock, s))
}

pub async fn inspect(client: &LockClient, a: &InspectArgs) -> i32 {
    let (lock, s) = match lock_and_state(client, &a.name).await {
        Ok(found) => found,
        Err(code) => return code,
    };
    let master = client
        .node_for_slot(lock.slot())
        .unwrap_or_else(|| "?".into());
    let replicas = crate::replicas::of(client, &master).await;
    if a.json {
        let mut j = state_json(client, &lock, &s);
        // the master's replicas: a grant waits for every one (null: not readable)
        j["replicas"] = replicas.as_ref().map_or(Json::Null, |r| {
            Json::Array(r.iter().map(crate::replicas::json).collect())
        });
        say!("{j}");
        return 0;
    }
    say!("lock     {}", escaped(&a.name));
    say!("key      {}", escaped(lock.key()));
    say!("slot     {} on {master}", lock.slot());
    match &replicas {
        None => say!("replicas ? (the master's INFO replication could not be read)"),
        Some(r) => {
            let silent: Vec<_> = r.iter().filter(|r| crate::replicas::silent(r)).collect();
            if silent.is_empty() {
                say!("replicas {} (all acknowledging)", r.len());
            } else {
                say!("replicas {}, {} not acknowledging:", r.len(), silent.len());
                for one in silent {
                    say!("  {}", crate::replicas::warning(&master, one));
                }
            }
        }
    }
    match s.mode {
        Some(m) => say!("mode     {}", m.as_str()),
        None => say!("mode     free (nobody holds it now)"),
    }
    match s.fence {
        Some(f) => match clock::fence_time(f) {
            Some(t) => say!("fence    {f} (granted {})", clock::utc(t)),
            None => say!("fence    {f}"),
        },
        // the hash is kept a minute after the last release, as a tombstone with the fence
        None => say!("fence    - (no grant in the last minute: never taken, or free since)"),
    }
    say!("holders  {}", s.holders.len());
    for h in &s.holders {
        say!(
            "  {}  {}  {}  read {} write {} upgradable {}  held {}  lease left {}  renewed {} ago (lease {}){}",
            escaped(h.client_name().unwrap_or("-")),
            escaped(&h.owner),
            h.mode.as_str(),
            h.read_holds,
            h.write_holds,
            h.upgradable_holds,
            secs(h.held_for),
            secs(h.lease_left),
            secs(h.renewed_ago),
            secs(h.lease),
            if h.overdue() {
                "  OVERDUE: not renewed for over half its lease (frozen or cut off?)"
            } else {
                ""
            }
        );
    }
    say!("waiting writers {}", s.waiting_writers.len());
    for w in &s.waiting_writers {
        say!("  {}", escaped(w));
    }
    say!("waiting readers {}", s.waiting_readers.len());
    for r in &s.waiting_readers {
        say!("  {}", escaped(r));
    }
    0
}
