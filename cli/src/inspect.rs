//! `inspect`: one lock's holders, waiters and fence.

use cluster_rwlock::LockClient;
use serde_json::Value as Json;

use crate::args::InspectArgs;
use crate::clock::{self, secs};
use crate::shown::escaped;
use crate::state::{lock_and_state, state_json};

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
