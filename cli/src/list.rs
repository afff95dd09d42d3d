//! `list`: every lock under the prefix, on every master, with its state.

use cluster_rwlock::LockClient;
use serde_json::Value as Json;

use crate::args::{glob, Cli, ListArgs};
use crate::code;
use crate::scan::lock_keys;
use crate::shown::escaped;
use crate::state::{clients, mode, state_json};

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
        let Some(name) = cluster_rwlock::operator::lock_name(&cli.prefix, &key) else {
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
            Ok(s) => say!(
                "{}\t{}\t{} holder(s){}\t{} waiting ({} readers)\tfence {}\tslot {} on {}",
                escaped(&name),
                mode(s.mode),
                s.holders.len(),
                clients(&s),
                s.waiting_writers.len() + s.waiting_readers.len(),
                s.waiting_readers.len(),
                s.fence.map_or("-".into(), |f| f.to_string()),
                lock.slot(),
                client
                    .node_for_slot(lock.slot())
                    .unwrap_or_else(|| "?".into())
            ),
            // gone meanwhile, or not one of ours: say so, go on
            Err(e) => eprintln!(
                "cluster-rwlock: {}: {}",
                escaped(&name),
                escaped(&e.to_string())
            ),
        }
    }
    if a.json {
        say!("{}", Json::Array(out));
    }
    // on stderr, so that the listing itself stays one line per lock
    let prefix = &cli.prefix;
    if listed == 0 {
        eprintln!(
            "no locks matching '{}' under prefix '{prefix}' (a lock's key exists while it is held or waited for, and a minute after its last release)",
            escaped(&a.pattern)
        );
    } else {
        eprintln!(
            "{listed} lock(s) matching '{}' under prefix '{prefix}': {held} held, {} free",
            escaped(&a.pattern),
            listed - held
        );
    }
    0
}
