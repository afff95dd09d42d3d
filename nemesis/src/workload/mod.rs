//! A worker process: one `LockClient`, several tasks doing random operations on the
//! run's names, each hold writing to the fenced resource, every call and belief recorded.
//!
//! Now and then a task queues a write behind a hold of its own and drops it while it
//! waits; at the times the controller gives (`kill_at`, the `waiter_kill` fault), the
//! worker kills itself (SIGKILL) while a write of it waits (behind whoever holds the
//! name, or behind a hold of its own), after recording every belief it held as ended
//! then, and the controller starts another worker in its place.
//!
//! [`spec`] holds what the controller tells a worker; [`beliefs`] the worker's shared
//! state (its history and the beliefs held now); [`task`] a task and how it records its
//! calls and beliefs; [`acquire`], [`hold`] and [`convert`] the stages of a hold; and
//! [`rounds`] and [`multi`] the rounds a task plays, built from them.

mod acquire;
mod beliefs;
mod convert;
mod hold;
mod multi;
mod rounds;
mod spec;
mod task;

use std::sync::Arc;
use std::time::Duration;

use cluster_rwlock::{Durability, LockClient, LockConfig};

use crate::history::{now, Event, Writer};

use beliefs::Ctx;
pub use spec::WorkerSpec;
use task::Task;

/// How long the worker waits, at most, for its client to hold nothing and be
/// subscribed to nothing once its tasks ended (subscriptions linger 2 s after their last
/// waiter, and are swept every second).
const SETTLE: Duration = Duration::from_secs(8);
/// How long a worker tries to connect (one started in place of a killed one may start
/// while a fault is on).
const CONNECT_FOR: Duration = Duration::from_secs(30);

/// `config` verifying the nodes against `ca_pem`, when the cluster speaks TLS.
pub fn with_ca(config: LockConfig, ca_pem: Option<&str>) -> LockConfig {
    match ca_pem {
        Some(pem) => config.tls_ca_pem(pem),
        None => config,
    }
}

/// Runs a worker to its end.
pub async fn run(spec: WorkerSpec) -> Result<(), String> {
    let mut config = with_ca(
        LockConfig::cluster(spec.seeds.clone())
            .prefix(spec.prefix.clone())
            .lease(Duration::from_millis(spec.client_lease_ms())),
        spec.ca_pem.as_deref(),
    );
    match spec.durability.as_str() {
        "acks" => {
            config = config.durability(Durability::AtLeast {
                replicas: 1,
                timeout: Duration::from_millis(500),
            })
        }
        "master-only" => config = config.durability(cluster_rwlock::Durability::MasterOnly),
        _ => {}
    }
    let began = std::time::Instant::now();
    let client = loop {
        match LockClient::connect(config.clone()).await {
            Ok(c) => break c,
            Err(e) if began.elapsed() > CONNECT_FOR => {
                return Err(format!("worker {} cannot connect: {e}", spec.proc))
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    };
    let out = Writer::create(std::path::Path::new(&spec.out))
        .map_err(|e| format!("cannot create {}: {e}", spec.out))?;
    let ctx = Arc::new(Ctx::new(spec, out));
    let mut tasks = Vec::new();
    for task in 0..ctx.spec.tasks {
        let ctx = ctx.clone();
        let client = client.clone();
        tasks.push(tokio::spawn(async move {
            let mut t = Task::new(ctx, client, task).await?;
            while now() < t.ctx.spec.until {
                t.round().await;
            }
            Ok::<(), String>(())
        }));
    }
    for t in tasks {
        t.await.map_err(|e| e.to_string())??;
    }
    // background releases land and subscriptions linger a while: wait for both, a while
    let began = std::time::Instant::now();
    let mut stats = client.stats();
    while (stats.held > 0 || stats.subscriptions > 0) && began.elapsed() < SETTLE {
        tokio::time::sleep(Duration::from_millis(100)).await;
        stats = client.stats();
    }
    ctx.record(Event::ClientEnd {
        proc: ctx.spec.proc,
        held: stats.held,
        subscriptions: stats.subscriptions,
        vouches_asked: stats.vouches_asked,
        vouched: stats.vouched,
    });
    client.close().await;
    let flushed = ctx
        .out
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .flush()
        .map_err(|e| e.to_string());
    flushed
}
