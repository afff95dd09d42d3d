//! A lock's state as the commands show it (text or JSON), and reading it: what
//! `inspect`, `list`, `break`, `watch` and `top` share.

use cluster_rwlock::operator::LockState;
use cluster_rwlock::{LockClient, Mode, RwLock};
use serde_json::{json, Value as Json};

use crate::clock;
use crate::code::fail;
use crate::shown::escaped;

/// A lock's mode as a word (`free` when nobody holds it).
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
