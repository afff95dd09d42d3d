//! `inspect` and `list`.

use cluster_rwlock::{LockClient, LockState, Mode, RwLock};
use fred::prelude::*;
use fred::types::scan::{ScanType, Scanner};
use futures_util::StreamExt;
use serde_json::{json, Value as Json};

use crate::args::{glob, BreakArgs, Cli, InspectArgs, ListArgs};
use crate::clock::{self, secs};
use crate::{code, fail};

fn mode(m: Option<Mode>) -> &'static str {
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
        })).collect::<Vec<_>>(),
        "waiting_writers": s.waiting_writers,
    })
}

/// ` (name, name)`: the client names of the holders, each once; empty when none has one.
fn clients(s: &LockState) -> String {
    let mut names: Vec<&str> = s.holders.iter().filter_map(|h| h.client_name()).collect();
    names.sort_unstable();
    names.dedup();
    if names.is_empty() {
        String::new()
    } else {
        format!(" ({})", names.join(", "))
    }
}

/// The lock `name` and its state, or the exit code of the error (said on stderr).
async fn lock_and_state(client: &LockClient, name: &str) -> Result<(RwLock, LockState), i32> {
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
    if a.json {
        println!("{}", state_json(client, &lock, &s));
        return 0;
    }
    let master = client
        .node_for_slot(lock.slot())
        .unwrap_or_else(|| "?".into());
    println!("lock     {}", a.name);
    println!("key      {}", lock.key());
    println!("slot     {} on {master}", lock.slot());
    match s.mode {
        Some(m) => println!("mode     {}", m.as_str()),
        None => println!("mode     free (nobody holds it now)"),
    }
    match s.fence {
        Some(f) => match clock::fence_time(f) {
            Some(t) => println!("fence    {f} (granted {})", clock::utc(t)),
            None => println!("fence    {f}"),
        },
        // the hash is kept a minute after the last release, as a tombstone with the fence
        None => println!("fence    - (no grant in the last minute: never taken, or free since)"),
    }
    println!("holders  {}", s.holders.len());
    for h in &s.holders {
        println!(
            "  {}  {}  {}  read {} write {} upgradable {}  held {}  lease left {}",
            h.client_name().unwrap_or("-"),
            h.owner,
            h.mode.as_str(),
            h.read_holds,
            h.write_holds,
            h.upgradable_holds,
            secs(h.held_for),
            secs(h.lease_left)
        );
    }
    if !s.holders.is_empty() {
        // the server keeps each hold's deadline, not the holder's lease: a stuck holder
        // shows as a lease left that falls from one look to the next
        println!(
            "         (a holder renews every third of its lease: a lease left that keeps falling between looks is a holder that stopped renewing, and loses the lock when it runs out)"
        );
    }
    println!("waiting writers {}", s.waiting_writers.len());
    for w in &s.waiting_writers {
        println!("  {w}");
    }
    0
}

/// Every lock key under the prefix, on every master.
async fn lock_keys(client: &LockClient, prefix: &str) -> Result<Vec<String>, Error> {
    let redis = client.redis();
    redis.wait_for_connect().await?;
    let pattern = format!("{prefix}:*");
    let mut pages = if redis.is_clustered() {
        redis
            .scan_cluster(pattern, Some(1000), Some(ScanType::Hash))
            .boxed()
    } else {
        redis
            .scan(pattern, Some(1000), Some(ScanType::Hash))
            .boxed()
    };
    let mut keys = Vec::new();
    while let Some(page) = pages.next().await {
        let mut page = page?;
        for k in page.take_results().unwrap_or_default() {
            if let Some(k) = k.as_str() {
                keys.push(k.to_string());
            }
        }
        page.next();
    }
    keys.sort();
    keys.dedup();
    Ok(keys)
}

pub async fn list(client: &LockClient, cli: &Cli, a: &ListArgs) -> i32 {
    let keys = match lock_keys(client, &cli.prefix).await {
        Ok(k) => k,
        Err(e) => {
            eprintln!("cluster-rwlock: SCAN failed: {e}");
            return code::UNAVAILABLE;
        }
    };
    let mut out = Vec::new();
    let (mut listed, mut held) = (0usize, 0usize);
    for key in keys {
        let Some(name) = cluster_rwlock::keys::lock_name(&cli.prefix, &key) else {
            continue;
        };
        if !glob(&a.pattern, &name) {
            continue;
        }
        let Ok(lock) = client.rwlock(&name) else {
            continue;
        };
        let state = lock.state().await;
        if let Ok(s) = &state {
            listed += 1;
            held += usize::from(s.mode.is_some());
        }
        match state {
            Ok(s) if a.json => out.push(state_json(client, &lock, &s)),
            Ok(s) => println!(
                "{name}\t{}\t{} holder(s){}\t{} waiting\tfence {}\tslot {} on {}",
                mode(s.mode),
                s.holders.len(),
                clients(&s),
                s.waiting_writers.len(),
                s.fence.map_or("-".into(), |f| f.to_string()),
                lock.slot(),
                client
                    .node_for_slot(lock.slot())
                    .unwrap_or_else(|| "?".into())
            ),
            // gone meanwhile, or not one of ours: say so, go on
            Err(e) => eprintln!("cluster-rwlock: {name}: {e}"),
        }
    }
    if a.json {
        println!("{}", Json::Array(out));
    }
    // on stderr, so that the listing itself stays one line per lock
    let prefix = &cli.prefix;
    if listed == 0 {
        eprintln!(
            "no locks matching '{}' under prefix '{prefix}' (a lock's key exists while it is held or waited for, and a minute after its last release)",
            a.pattern
        );
    } else {
        eprintln!(
            "{listed} lock(s) matching '{}' under prefix '{prefix}': {held} held, {} free",
            a.pattern,
            listed - held
        );
    }
    0
}

/// `break`: what would go (without `--yes`), or the break itself.
pub async fn break_lock(client: &LockClient, a: &BreakArgs) -> i32 {
    let (_, s) = match lock_and_state(client, &a.name).await {
        Ok(found) => found,
        Err(code) => return code,
    };
    let going: Vec<_> = s
        .holders
        .iter()
        .filter(|h| a.owner.as_deref().is_none_or(|o| o == h.owner))
        .collect();
    let whose = a
        .owner
        .as_deref()
        .map_or(String::new(), |o| format!(" of owner {o}"));
    if going.is_empty() {
        println!("nothing to break: {} has no hold{whose}", a.name);
        return crate::code::NOTHING_HELD;
    }
    if !a.yes {
        println!(
            "would remove {} hold(s) of {} owner(s) of {} (run again with --yes):",
            going.iter().map(|h| h.count).sum::<u32>(),
            going.len(),
            a.name
        );
        for h in going {
            println!(
                "  {}  {}  {}  held {}  lease left {}",
                h.client_name().unwrap_or("-"),
                h.owner,
                h.mode.as_str(),
                secs(h.held_for),
                secs(h.lease_left)
            );
        }
        return 0;
    }
    match client.force_release(&a.name, a.owner.as_deref()).await {
        // (its holds ran out or were released since the look above)
        Ok(r) if r.holds_removed == 0 => {
            println!(
                "nothing to break: {} had no hold{whose}{}",
                a.name,
                r.fence
                    .map_or(String::new(), |f| format!(" (its fence is now {f})"))
            );
            crate::code::NOTHING_HELD
        }
        Ok(r) => {
            println!(
                "broke {}: {} hold(s) removed, fence raised to {}; the holders learn it at their next renewal",
                a.name,
                r.holds_removed,
                r.fence.map_or("-".into(), |f| f.to_string())
            );
            0
        }
        Err(e) => fail(&format!("cannot break {}", a.name), &e),
    }
}
