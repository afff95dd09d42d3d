//! The cluster layer: connections per node, the slot map, routing and shard
//! subscriptions.
//!
//! The client owns its routing rather than leaving it to one cluster-wide connection
//! manager: each node has connections of its own, so a node that hangs (a frozen VM, a
//! process stopped in the kernel, a path that drops packets) stalls only the commands of
//! its own slots. The slot map is read from `CLUSTER NODES` of the nodes that answer
//! and merged by config epoch ([`topology`]); it is looked at again
//! - every second, by asking one node (in turn), which costs one small command per second;
//! - at once when a command hangs for [`router::SUSPECT_AFTER`], times out, fails to
//!   connect or is redirected; then every known node is asked, every 200 ms, until the
//!   cluster has been quiet for [`ALERT_WINDOW`].
//!
//! A master that stops answering is failed over by the cluster after its node timeout;
//! the promoted replica's higher epoch wins the merge as soon as one healthy node's view
//! shows it, and the slot is routed there (after its release channels were subscribed
//! there). A node that was frozen and comes back, as a replica, is never routed to as a
//! master again, whatever its own stale view says.

pub(crate) mod lane;
pub(crate) mod node;
pub(crate) mod notify;
pub(crate) mod router;
pub(crate) mod topology;
pub(crate) mod vouch;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use fred::prelude::*;
use fred::types::{ClusterHash, CustomCommand};

use crate::config::{LockConfig, Topology};
use crate::error::{ClientResult, Error, Result};
use node::Connector;
use notify::Notifier;
use router::Router;
use topology::Addr;

/// How often the slot map is read while all is quiet.
const CALM_TICK: Duration = Duration::from_secs(1);
/// How often, after something went wrong.
const ALERT_TICK: Duration = Duration::from_millis(200);
/// How long after the last trouble the watch stays on alert.
pub(crate) const ALERT_WINDOW: Duration = Duration::from_secs(10);
/// How long a node may take to send its view.
const VIEW_BOUND: Duration = Duration::from_millis(500);
/// How long the views of the last nodes are awaited once most have answered.
const VIEW_GRACE: Duration = Duration::from_millis(30);
/// How long a new map waits for its channels to be subscribed before it is put in force.
const FOLLOW_WAIT: Duration = Duration::from_millis(500);

/// What a client knows of the servers.
pub(crate) struct Cluster {
    pub router: Arc<Router>,
    pub notifier: Option<Arc<Notifier>>,
    closed: AtomicBool,
}

/// `host:port` of every server a fred config names.
fn seed_addrs(config: &Config) -> Vec<Addr> {
    match &config.server {
        ServerConfig::Centralized { server } => vec![format!("{}:{}", server.host, server.port)],
        ServerConfig::Clustered { hosts, .. } => hosts
            .iter()
            .map(|s| format!("{}:{}", s.host, s.port))
            .collect(),
        _ => Vec::new(),
    }
}

/// The views of the nodes at `addrs`: all of them, or, once more than half have answered,
/// those that answer within [`VIEW_GRACE`] more (a node that hangs must not hold up the
/// others' news); at most [`VIEW_BOUND`] in all.
async fn node_views(router: &Router, addrs: &[Addr]) -> Vec<Vec<topology::NodeLine>> {
    use futures_util::stream::{FuturesUnordered, StreamExt};
    let mut pending: FuturesUnordered<_> = addrs
        .iter()
        .map(|a| router.view_of(a, VIEW_BOUND))
        .collect();
    let mut views = Vec::new();
    let mut answered = 0usize;
    let mut grace: Option<tokio::time::Instant> = None;
    loop {
        let next = match grace {
            Some(g) => match tokio::time::timeout_at(g, pending.next()).await {
                Ok(n) => n,
                Err(_) => break,
            },
            None => pending.next().await,
        };
        let Some(view) = next else { break };
        answered += 1;
        views.extend(view);
        if grace.is_none() && answered * 2 > addrs.len() {
            grace = Some(tokio::time::Instant::now() + VIEW_GRACE);
        }
    }
    views
}

impl Cluster {
    /// Connects to the first seed that answers, reads the topology from every node and
    /// opens connections to the masters.
    pub async fn connect(config: &LockConfig) -> Result<Arc<Cluster>> {
        let fred_config = config.to_fred()?;
        let seeds = seed_addrs(&fred_config);
        let timeout = config.command_timeout;
        let connector = Connector::new(fred_config, timeout, config.connections);
        let mut first_error = None;
        let mut probe = None;
        for seed in &seeds {
            match connector.probe(seed).await {
                Ok(c) => {
                    probe = Some((seed.clone(), c));
                    break;
                }
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        let Some((seed, probe)) = probe else {
            return Err(
                first_error.unwrap_or_else(|| Error::InvalidConfig("no Redis URL given".into()))
            );
        };
        let result = Cluster::discover(config, connector, seeds, &seed, &probe).await;
        let _ = tokio::time::timeout(timeout, probe.quit()).await;
        let cluster = Arc::new(result?);
        if cluster.router.clustered() {
            watch_topology(Arc::downgrade(&cluster));
        }
        Ok(cluster)
    }

    async fn discover(
        config: &LockConfig,
        connector: Connector,
        seeds: Vec<Addr>,
        seed: &str,
        probe: &Client,
    ) -> Result<Cluster> {
        let timeout = config.command_timeout;
        let info: String = probe
            .info(Some(fred::types::InfoKind::Server))
            .await
            .lock_err()?;
        let major = info
            .lines()
            .find_map(|l| l.strip_prefix("redis_version:"))
            .and_then(|v| v.trim().split('.').next()?.parse::<u32>().ok())
            .unwrap_or(0);
        if major > 0 && major < 7 {
            return Err(Error::Unsupported(format!(
                "{seed} runs Redis {major}: the lock is a Redis Functions library and wakes waiters by sharded pub/sub, which need Redis 7.0 or later"
            )));
        }
        let clustered = match config.topology {
            Topology::Cluster => true,
            Topology::Single => false,
            Topology::Detect => {
                let cmd = CustomCommand::new_static("INFO", ClusterHash::Random, false);
                let info: String = probe.custom(cmd, vec!["cluster"]).await.map_err(|e| {
                    Error::InvalidConfig(format!(
                        "{seed} did not say whether it is a cluster node ({e})"
                    ))
                })?;
                info.lines().any(|l| l.trim() == "cluster_enabled:1")
            }
        };
        let router = if clustered {
            let cmd = CustomCommand::new_static("CLUSTER", ClusterHash::Random, false);
            let text: String = probe.custom(cmd, vec!["NODES"]).await.map_err(|e| {
                Error::InvalidConfig(format!(
                    "{seed} did not give its cluster view ({e}); for a single node, use LockConfig::from_url or LockConfig::single_node"
                ))
            })?;
            let view = topology::parse_nodes(&text, seed)
                .ok_or_else(|| Error::Protocol(format!("CLUSTER NODES of {seed}: {text:?}")))?;
            let map = topology::merge(std::slice::from_ref(&view)).ok_or_else(|| {
                Error::InvalidConfig(format!("{seed}: the cluster serves no slot yet"))
            })?;
            let router = Router::cluster(connector, seeds, map, timeout)?;
            // every node's view, so that one stale node cannot mislead us
            let views = node_views(&router, &router.known()).await;
            if let Some(map) = topology::merge(&views) {
                router.install(map)?;
            }
            router
        } else {
            Router::single(connector, seed.to_string(), timeout)?
        };
        let router = Arc::new(router);
        let notifier = config
            .notifications
            .then(|| Notifier::start(router.clone(), major >= 7, timeout));
        if let Some(n) = &notifier {
            n.warm(&router.routes());
        }
        Ok(Cluster {
            router,
            notifier,
            closed: AtomicBool::new(false),
        })
    }

    pub fn closed(&self) -> bool {
        self.closed.load(Ordering::Relaxed)
    }

    /// Closes every connection, without waiting for nodes that do not answer.
    pub fn close(&self) {
        self.closed.store(true, Ordering::Relaxed);
        if let Some(n) = &self.notifier {
            n.close();
        }
        self.router.close();
    }

    /// Reads the topology and puts a changed map in force (after subscribing the release
    /// channels of moved slots on their new node). `all`: ask every known node, not one.
    async fn refresh(&self, all: bool, turn: &mut usize) {
        let known = self.router.known();
        if known.is_empty() {
            return;
        }
        let current = self.router.routes();
        if !all {
            // one master in turn (a replica or a dead node that views still list would
            // keep the watch on alert for nothing)
            let masters = current.map.masters();
            if !masters.is_empty() {
                *turn = turn.wrapping_add(1);
                let one = &masters[*turn % masters.len()];
                let views = node_views(&self.router, std::slice::from_ref(one)).await;
                let same = topology::merge(&views).is_some_and(|m| m.same_routes(&current.map));
                if same {
                    if let Some(n) = &self.notifier {
                        n.follow(&current);
                    }
                    return;
                }
            }
            // a master saw a change, or did not answer: hear them all before acting
            self.router.raise_alarm();
        }
        let views = node_views(&self.router, &known).await;
        let Some(map) = topology::merge(&views) else {
            self.router.raise_alarm();
            return;
        };
        if map == current.map {
            if let Some(n) = &self.notifier {
                n.follow(&current);
            }
            return;
        }
        let moved = !map.same_owners(&current.map);
        let Ok(routes) = self.router.prepare(map) else {
            return;
        };
        if let Some(n) = &self.notifier {
            n.warm(&routes);
            let tasks = n.follow(&routes);
            let _ = tokio::time::timeout(FOLLOW_WAIT, futures_util::future::join_all(tasks)).await;
        }
        self.router.commit(routes);
        if moved {
            crate::observe::owners_changed();
            // more may follow (the other masters' failovers, a migration's next slots)
            self.router.raise_alarm();
        }
    }
}

/// The topology watch: one task per client (see the module docs).
fn watch_topology(weak: std::sync::Weak<Cluster>) {
    tokio::spawn(async move {
        let mut turn = 0usize;
        loop {
            let Some(cluster) = weak.upgrade() else {
                return;
            };
            let alert = cluster.router.alarm_within(ALERT_WINDOW);
            let tick = if alert { ALERT_TICK } else { CALM_TICK };
            {
                let router = cluster.router.clone();
                drop(cluster);
                tokio::select! {
                    _ = tokio::time::sleep(tick) => {}
                    _ = router.alarmed() => {}
                }
            }
            let Some(cluster) = weak.upgrade() else {
                return;
            };
            if cluster.closed() {
                return;
            }
            let all = cluster.router.alarm_within(ALERT_WINDOW);
            cluster.refresh(all, &mut turn).await;
        }
    });
}
