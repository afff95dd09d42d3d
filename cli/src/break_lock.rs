//! `break`: an operator removes a stuck lock's holds, or a stuck client's holds and places
//! in the queue (what would go, without `--yes`).

use cluster_rwlock::operator::{client_name_of, LockState};
use cluster_rwlock::LockClient;

use crate::args::BreakArgs;
use crate::clock::secs;
use crate::code::fail;
use crate::shown::escaped;
use crate::state::lock_and_state;

/// `break`: what would go (without `--yes`), or the break itself.
pub async fn break_lock(client: &LockClient, cli_prefix: &str, a: &BreakArgs) -> i32 {
    match (&a.client, &a.name) {
        (Some(who), _) if a.all => break_client_everywhere(client, cli_prefix, who, a.yes).await,
        (Some(who), Some(name)) => break_client(client, name, who, a.yes).await,
        (None, Some(name)) => break_holds(client, name, a).await,
        // clap requires a name unless --all, and --all requires --client
        _ => crate::code::USAGE,
    }
}

/// One owner's holds, or everyone's, on one lock.
async fn break_holds(client: &LockClient, name: &str, a: &BreakArgs) -> i32 {
    let (_, s) = match lock_and_state(client, name).await {
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
        .map_or(String::new(), |o| format!(" of owner {}", escaped(o)));
    if going.is_empty() {
        say!("nothing to break: {} has no hold{whose}", escaped(name));
        return crate::code::NOTHING_HELD;
    }
    if !a.yes {
        say!(
            "would remove {} hold(s) of {} owner(s) of {} (run again with --yes):",
            going.iter().map(|h| h.count).sum::<u32>(),
            going.len(),
            escaped(name)
        );
        for h in going {
            say!(
                "  {}  {}  {}  held {}  lease left {}",
                escaped(h.client_name().unwrap_or("-")),
                escaped(&h.owner),
                h.mode.as_str(),
                secs(h.held_for),
                secs(h.lease_left)
            );
        }
        return 0;
    }
    match client.force_release(name, a.owner.as_deref()).await {
        // (its holds ran out or were released since the look above)
        Ok(r) if r.holds_removed == 0 => {
            say!(
                "nothing to break: {} had no hold{whose}{}",
                escaped(name),
                r.fence
                    .map_or(String::new(), |f| format!(" (its fence is now {f})"))
            );
            crate::code::NOTHING_HELD
        }
        Ok(r) => {
            say!(
                "broke {}: {} hold(s) removed, fence raised to {}; the holders learn it at their next renewal",
                escaped(name),
                r.holds_removed,
                r.fence.map_or("-".into(), |f| f.to_string())
            );
            0
        }
        Err(e) => fail(&format!("cannot break {name}"), &e),
    }
}

/// What breaking client `who` would remove from a lock in state `s`: its holds (count,
/// owners), its places in the queue, and who waits after it (writers first in line,
/// readers).
struct ClientShare<'a> {
    holds: u32,
    owners: Vec<&'a str>,
    places: Vec<&'a str>,
    next_writer: Option<&'a str>,
    other_readers: usize,
    others_hold: bool,
}

fn share<'a>(s: &'a LockState, who: &str) -> ClientShare<'a> {
    let mine = |o: &str| client_name_of(o) == Some(who);
    let held: Vec<_> = s.holders.iter().filter(|h| mine(&h.owner)).collect();
    ClientShare {
        holds: held.iter().map(|h| h.count).sum(),
        owners: held.iter().map(|h| h.owner.as_str()).collect(),
        places: s
            .waiting_writers
            .iter()
            .chain(&s.waiting_readers)
            .map(String::as_str)
            .filter(|o| mine(o))
            .collect(),
        next_writer: s
            .waiting_writers
            .iter()
            .map(String::as_str)
            .find(|o| !mine(o)),
        other_readers: s.waiting_readers.iter().filter(|o| !mine(o)).count(),
        others_hold: s.holders.iter().any(|h| !mine(&h.owner)),
    }
}

/// The dry run's lines for one lock.
fn say_would(name: &str, c: &ClientShare<'_>) {
    say!(
        "{}: would remove {} hold(s) of {} owner(s) and {} place(s) in the queue",
        escaped(name),
        c.holds,
        c.owners.len(),
        c.places.len()
    );
    for o in &c.owners {
        say!("  holds   {}", escaped(o));
    }
    for o in &c.places {
        say!("  waits   {}", escaped(o));
    }
    let next = if c.others_hold {
        "other owners still hold it".to_string()
    } else {
        match (c.next_writer, c.other_readers) {
            (None, 0) => "nobody waits for it".to_string(),
            (Some(w), 0) => format!("next: the writer {}", escaped(w)),
            (None, r) => format!("next: {r} waiting reader(s)"),
            (Some(w), r) => format!(
                "next: the writer {} or {r} waiting reader(s), whichever came first",
                escaped(w)
            ),
        }
    };
    say!("  then    {next}");
}

/// Client `who`'s holds and places on one lock.
async fn break_client(client: &LockClient, name: &str, who: &str, yes: bool) -> i32 {
    let (_, s) = match lock_and_state(client, name).await {
        Ok(found) => found,
        Err(code) => return code,
    };
    let c = share(&s, who);
    if c.holds == 0 && c.places.is_empty() {
        say!(
            "nothing to break: client {} has no hold or place on {}",
            escaped(who),
            escaped(name)
        );
        return crate::code::NOTHING_HELD;
    }
    if !yes {
        say_would(name, &c);
        say!("(run again with --yes)");
        return 0;
    }
    match client.break_client(name, who).await {
        Ok(r) => {
            say!(
                "broke client {} on {}: {} hold(s) and {} place(s) removed, fence {}",
                escaped(who),
                escaped(name),
                r.holds_removed,
                r.places_removed,
                r.fence.map_or("-".into(), |f| f.to_string())
            );
            if r.holds_removed + r.places_removed == 0 {
                crate::code::NOTHING_HELD
            } else {
                0
            }
        }
        Err(e) => fail(&format!("cannot break {name}"), &e),
    }
}

/// Client `who`'s holds and places on every lock under the prefix.
async fn break_client_everywhere(client: &LockClient, prefix: &str, who: &str, yes: bool) -> i32 {
    let keys = match crate::scan::lock_keys(client, prefix).await {
        Ok(k) => k,
        Err(e) => {
            eprintln!("cluster-rwlock: SCAN failed: {}", escaped(&e.to_string()));
            return crate::code::UNAVAILABLE;
        }
    };
    let (mut locks, mut holds, mut places) = (0usize, 0u64, 0u64);
    for key in keys {
        let Some(name) = cluster_rwlock::operator::lock_name(prefix, &key) else {
            continue;
        };
        let Ok(lock) = client.rwlock(&name) else {
            continue;
        };
        let Ok(s) = lock.state().await else {
            say!("{}: cannot be read; skipped", escaped(&name));
            continue;
        };
        let c = share(&s, who);
        if c.holds == 0 && c.places.is_empty() {
            continue;
        }
        locks += 1;
        if !yes {
            say_would(&name, &c);
            holds += u64::from(c.holds);
            places += c.places.len() as u64;
            continue;
        }
        match client.break_client(&name, who).await {
            Ok(r) => {
                say!(
                    "{}: {} hold(s) and {} place(s) removed, fence {}",
                    escaped(&name),
                    r.holds_removed,
                    r.places_removed,
                    r.fence.map_or("-".into(), |f| f.to_string())
                );
                holds += r.holds_removed;
                places += r.places_removed;
            }
            Err(e) => {
                say!(
                    "{}: cannot break: {}",
                    escaped(&name),
                    escaped(&e.to_string())
                );
            }
        }
    }
    if locks == 0 {
        say!(
            "nothing to break: client {} has no hold or place under {}",
            escaped(who),
            escaped(prefix)
        );
        return crate::code::NOTHING_HELD;
    }
    let verb = if yes { "removed" } else { "would remove" };
    say!(
        "client {}: {verb} {holds} hold(s) and {places} place(s) on {locks} lock(s){}",
        escaped(who),
        if yes { "" } else { " (run again with --yes)" }
    );
    0
}
