//! `watch`: a live view of one lock: its release messages and its state when it changes.

use std::time::Duration;

use cluster_rwlock::{LockClient, ReleaseMessage};
use fred::prelude::*;

use crate::args::{Cli, WatchArgs};
use crate::inspect::state_json;
use crate::{code, fail};

fn now() -> String {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    format!("{}.{:03}", d.as_secs(), d.subsec_millis())
}

pub async fn watch(client: &LockClient, cli: &Cli, a: &WatchArgs) -> i32 {
    let lock = match client.rwlock(&a.name) {
        Ok(l) => l,
        Err(e) => return fail("bad lock name", &e),
    };
    // the release channel, on the node that serves the slot (sharded pub/sub)
    let subscriber = async {
        let mut config = Config::from_url(&cli.url)?;
        if client.redis().is_clustered() {
            let seed = Config::from_url(&cli.url.replace("redis://", "redis-cluster://"))?;
            config.server = seed.server;
        }
        let s = Builder::from_config(config).build_subscriber_client()?;
        s.init().await?;
        // as the library publishes: SPUBLISH on servers of version 7 or later, clustered
        // or not
        if client.sharded_pubsub() {
            s.ssubscribe(lock.channel()).await?;
        } else {
            s.subscribe(lock.channel()).await?;
        }
        Ok::<_, Error>(s)
    };
    let subscriber = match subscriber.await {
        Ok(s) => Some(s),
        Err(e) => {
            eprintln!("cluster-rwlock: no release messages ({e}); polling the state only");
            None
        }
    };
    let mut messages = subscriber.as_ref().map(|s| s.message_rx());
    let mut last = None;
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    println!(
        "{} watching {} ({}), Ctrl-C to stop",
        now(),
        a.name,
        lock.key()
    );
    loop {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => break,
            _ = tick.tick() => {}
            m = async {
                match messages.as_mut() {
                    Some(rx) => rx.recv().await.ok(),
                    None => std::future::pending().await,
                }
            } => {
                if let Some(m) = m {
                    let text = m.value.as_string().unwrap_or_default();
                    println!("{} {}", now(), ReleaseMessage::parse(&text));
                }
            }
        }
        match lock.state().await {
            Ok(s) => {
                let j = state_json(client, &lock, &s);
                let shown = (s.mode, s.fence, s.holders.len(), s.waiting_writers.clone());
                if last.as_ref() != Some(&shown) {
                    println!("{} {j}", now());
                    last = Some(shown);
                }
            }
            Err(e) => {
                eprintln!("cluster-rwlock: {e}");
                if subscriber.is_none() {
                    return code::UNAVAILABLE;
                }
            }
        }
    }
    if let Some(s) = subscriber {
        let _ = s.quit().await;
    }
    0
}
