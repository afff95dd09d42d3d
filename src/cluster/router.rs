//! Routing: slot -> the node that serves it, and commands that follow the cluster.
//!
//! Every command of a lock goes through [`Router::call`]: it is sent to the node that the
//! slot map names, and
//! - on `MOVED`, the map is corrected for that slot and the command sent again at once;
//! - on `ASK`, the command is sent once to the target, with `ASKING` right before it (the
//!   operation is told so, and puts it in its own pipeline: see [`Link`]);
//! - on a timeout, a connection error, `CLUSTERDOWN`, `TRYAGAIN` or `READONLY` (a master
//!   demoted under us), the node is suspected: the topology watch is asked to look again
//!   at once, and the command is sent again when the map changes or after a short pause;
//! - while the command is in flight, a change of the map that moves its slot to another
//!   node sends it again there without waiting for the old node's answer (a frozen
//!   master never answers); a command that hangs longer than [`SUSPECT_AFTER`] makes the
//!   watch look at the topology at once.
//!
//! Commands are idempotent (each carries the hold id the client chose), so sending one
//! again never takes or gives back a second hold.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fred::prelude::*;
use fred::types::{ClusterHash, CustomCommand};
use tokio::sync::{watch, Notify};
use tokio::time::Instant;

use crate::cluster::lane::Lane;
use crate::cluster::node::{Connector, Node};
use crate::cluster::topology::{self, Addr, SlotMap};
use crate::error::{Error, Result};
use crate::mutex::lock;

/// A command pending this long makes its node suspect.
pub(crate) const SUSPECT_AFTER: Duration = Duration::from_millis(300);
/// Pause before sending again after an error that the map does not explain.
const RETRY_PAUSE: Duration = Duration::from_millis(50);
/// A deadline seen this late means the client itself was paused or starved (a stopped
/// process, a blocked runtime) rather than the node silent: its reply may be here.
const STALLED: Duration = Duration::from_millis(250);
/// How long a command whose deadline passed while the client was stalled is given
/// to deliver the reply that most likely came meanwhile.
const STALL_GRACE: Duration = Duration::from_millis(250);

/// What came first for a command in flight.
enum Raced<R> {
    /// Its reply.
    Answered(R),
    /// Its slot moved to another node.
    Moved,
    /// Its deadline.
    Expired,
}

/// The connection a command is sent on, and what the router knew of its node then.
#[derive(Clone)]
pub(crate) struct Link {
    /// The connection to the node.
    pub client: Client,
    /// Its lane, which every function call takes.
    pub lane: Lane,
    /// The node is the target of an `ASK` redirect: `ASKING` must come right before the
    /// command (in the same pipeline: Redis clears the flag after the next command).
    pub asking: bool,
    /// The node's replicas that could be promoted, as the node itself last reported
    /// them, or as the slot map in force said before it had ([`topology::UNKNOWN`] for a
    /// node no view described): the `WAIT`'s first guess, checked against the node's own
    /// count in the same pipeline (see `lane`).
    pub replicas: u32,
    /// The node.
    pub node: Arc<Node>,
}

/// The slot map with the connections of the masters it names.
pub(crate) struct Routes {
    pub map: SlotMap,
    /// Parallel to `map.masters()`.
    nodes: Vec<Arc<Node>>,
}

impl Routes {
    /// The node that serves `slot` (any master when the map names none: it will answer
    /// with a redirection or `CLUSTERDOWN`).
    pub fn node(&self, slot: u16) -> Option<&Arc<Node>> {
        // `nodes` is parallel to `map.masters()`
        self.map
            .owner_index(slot)
            .and_then(|i| self.nodes.get(i))
            .or_else(|| self.nodes.first())
    }

    /// The masters' connections.
    pub fn nodes(&self) -> &[Arc<Node>] {
        &self.nodes
    }
}

pub(crate) struct Router {
    connector: Connector,
    clustered: bool,
    seeds: Vec<Addr>,
    /// Every node a view listed, masters and replicas, by address.
    nodes: Mutex<HashMap<Addr, Arc<Node>>>,
    routes: std::sync::RwLock<Arc<Routes>>,
    /// Bumped on every change of the map.
    version: watch::Sender<u64>,
    /// Wakes the topology watch before its tick.
    alarm: Notify,
    last_alarm: Mutex<Option<Instant>>,
    timeout: Duration,
    closed: std::sync::atomic::AtomicBool,
    /// What the other masters last vouched for, per master (see `vouch`).
    pub(crate) vouches: super::vouch::Vouches,
}

impl Router {
    /// A router for a single node (not a cluster).
    pub fn single(connector: Connector, addr: Addr, timeout: Duration) -> Result<Router> {
        Router::new(
            connector,
            false,
            vec![addr.clone()],
            SlotMap::single(addr),
            timeout,
        )
    }

    /// A router for a cluster whose map is `map`.
    pub fn cluster(
        connector: Connector,
        seeds: Vec<Addr>,
        map: SlotMap,
        timeout: Duration,
    ) -> Result<Router> {
        Router::new(connector, true, seeds, map, timeout)
    }

    fn new(
        connector: Connector,
        clustered: bool,
        seeds: Vec<Addr>,
        map: SlotMap,
        timeout: Duration,
    ) -> Result<Router> {
        let mut nodes = HashMap::new();
        let mut masters = Vec::new();
        for addr in map.masters() {
            let node = Arc::new(connector.node(addr)?);
            nodes.insert(addr.clone(), node.clone());
            masters.push(node);
        }
        Ok(Router {
            connector,
            clustered,
            seeds,
            nodes: Mutex::new(nodes),
            routes: std::sync::RwLock::new(Arc::new(Routes {
                map,
                nodes: masters,
            })),
            version: watch::channel(0).0,
            alarm: Notify::new(),
            last_alarm: Mutex::new(None),
            timeout,
            closed: std::sync::atomic::AtomicBool::new(false),
            vouches: Default::default(),
        })
    }

    pub fn clustered(&self) -> bool {
        self.clustered
    }

    pub fn connector(&self) -> &Connector {
        &self.connector
    }

    /// The routes in force.
    pub fn routes(&self) -> Arc<Routes> {
        self.routes
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The node that serves `slot` now.
    /// Told each time a new slot map is put in force.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.version.subscribe()
    }

    pub fn node_for(&self, slot: u16) -> Option<Arc<Node>> {
        self.routes().node(slot).cloned()
    }

    /// The connections of `addr`, made on first use.
    pub fn node(&self, addr: &str) -> Result<Arc<Node>> {
        let mut nodes = lock(&self.nodes);
        if let Some(n) = nodes.get(addr) {
            return Ok(n.clone());
        }
        let node = Arc::new(self.connector.node(addr)?);
        nodes.insert(addr.to_string(), node.clone());
        Ok(node)
    }

    /// Puts `map` in force when it differs from the one in force.
    pub fn install(&self, map: SlotMap) -> Result<()> {
        if self.routes().map != map {
            let routes = self.prepare(map)?;
            self.commit(routes);
        }
        Ok(())
    }

    /// The routes of `map`, with the connections of its masters (made when new).
    pub fn prepare(&self, map: SlotMap) -> Result<Arc<Routes>> {
        let nodes = map
            .masters()
            .iter()
            .map(|a| self.node(a))
            .collect::<Result<Vec<_>>>()?;
        Ok(Arc::new(Routes { map, nodes }))
    }

    /// Puts `routes` in force, wakes the commands whose slot moved, and closes the
    /// connections of nodes that no view lists any more.
    pub fn commit(&self, routes: Arc<Routes>) {
        *self.routes.write().unwrap_or_else(|e| e.into_inner()) = routes.clone();
        self.version.send_modify(|v| *v = v.wrapping_add(1));
        let known = &routes.map.known;
        let mut registry = lock(&self.nodes);
        registry.retain(|addr, node| {
            let keep = known.contains(addr) || self.seeds.contains(addr);
            if !keep {
                node.close(self.timeout);
            }
            keep
        });
    }

    /// Asks the topology watch to look again now.
    pub fn raise_alarm(&self) {
        *lock(&self.last_alarm) = Some(Instant::now());
        self.alarm.notify_one();
    }

    /// Resolves when someone raises the alarm.
    pub async fn alarmed(&self) {
        self.alarm.notified().await
    }

    /// Whether something went wrong within `window`.
    pub fn alarm_within(&self, window: Duration) -> bool {
        lock(&self.last_alarm).is_some_and(|t| t.elapsed() < window)
    }

    /// Every node to ask for the topology: the known ones and the seeds.
    pub fn known(&self) -> Vec<Addr> {
        let mut all = self.routes().map.known.clone();
        for s in &self.seeds {
            if !all.contains(s) {
                all.push(s.clone());
            }
        }
        all
    }

    /// `CLUSTER NODES` of the node `addr`, within `bound`.
    pub async fn view_of(&self, addr: &str, bound: Duration) -> Option<Vec<topology::NodeLine>> {
        let node = self.node(addr).ok()?;
        let cmd = CustomCommand::new_static("CLUSTER", ClusterHash::Random, false);
        let control = node.control().ok()?;
        let text: String = tokio::time::timeout(bound, control.custom(cmd, vec!["NODES"]))
            .await
            .ok()?
            .ok()?;
        topology::parse_nodes(&text, addr)
    }

    /// Sends a command to the node that serves `slot`, following the cluster for at most
    /// `budget` (see the module docs). `op` sends the command on the link given (each
    /// sending gets its own: the node, and so its replicas, may differ).
    pub async fn call<T, F, Fut>(&self, slot: u16, budget: Duration, mut op: F) -> Result<T>
    where
        F: FnMut(Link) -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        let deadline = Instant::now() + budget;
        let mut ask: Option<Arc<Node>> = None;
        let mut redirects = 0u32;
        loop {
            if self.closed.load(std::sync::atomic::Ordering::Relaxed) {
                return Err(Error::Closed);
            }
            let mut version = self.version.subscribe();
            let asking = ask.take();
            let node = match &asking {
                Some(n) => n.clone(),
                None => self
                    .node_for(slot)
                    .ok_or_else(|| Error::Protocol("no node in the slot map".into()))?,
            };
            let map = &self.routes().map;
            let link = Link {
                client: node.client(slot).clone(),
                lane: node.lane(slot).clone(),
                asking: asking.is_some(),
                // the master's own count when it gave one (every confirmed batch asks
                // it); the slot map's, or UNKNOWN, only until then: the batch's check
                // against the master's count corrects a guess that was too low
                replicas: node.attached_replicas().unwrap_or_else(|| match &asking {
                    Some(n) => map.replicas_of(&n.addr),
                    None => map.replicas_for(slot),
                }),
                node: node.clone(),
            };
            let send = op(link);
            tokio::pin!(send);
            let raced = tokio::select! {
                biased;
                r = &mut send => Raced::Answered(r),
                moved = self.rerouted(slot, &node, &mut version, deadline) => {
                    if moved { Raced::Moved } else { Raced::Expired }
                }
            };
            let outcome = match raced {
                Raced::Answered(r) => Some(r),
                Raced::Moved => None,
                Raced::Expired => {
                    // a deadline seen late: the client was paused, not (only) the node
                    let late = Instant::now().saturating_duration_since(deadline);
                    if late < STALLED {
                        return Err(Error::Unavailable(format!(
                            "{} did not answer in {budget:?}",
                            node.addr
                        )));
                    }
                    match tokio::time::timeout(STALL_GRACE, &mut send).await {
                        Ok(r) => Some(r),
                        Err(_) => {
                            return Err(Error::Unavailable(format!(
                                "{} did not answer in {budget:?}, but this client was itself paused or starved for about {} ms past that (its own clock jumped past the timeout): the node may have answered; the outcome is unknown",
                                node.addr,
                                late.as_millis()
                            )))
                        }
                    }
                }
            };
            let error = match outcome {
                Some(Ok(v)) => return Ok(v),
                Some(Err(e)) => e,
                // the slot moved while the command was in flight: send it again there
                None => continue,
            };
            // only what the server or the connection said is followed or retried here
            if !matches!(error, Error::Server(_) | Error::Connection(_)) {
                return Err(error);
            }
            let redirect = error.server().filter(|s| s.is_redirect());
            let (moved, asked) = match redirect {
                Some(s) => (s.code() == "MOVED", s.code() == "ASK"),
                None => (false, false),
            };
            let details = redirect.map_or("", |s| s.text());
            if !self.clustered && (moved || asked) {
                return Err(Error::InvalidConfig(format!(
                    "{} answered {details:?}: it is a cluster node, and this client was configured for a single node (LockConfig::single_node); use LockConfig::cluster, or LockConfig::from_url, which asks the node",
                    node.addr
                )));
            }
            if moved || asked {
                // nodes that disagree while a slot migrates: do not spin
                redirects += 1;
                if redirects > 3 {
                    tokio::time::sleep_until((Instant::now() + RETRY_PAUSE).min(deadline)).await;
                }
            }
            if moved {
                if let Some((s, addr)) = topology::redirect_target(details) {
                    let map = self.routes().map.redirected(s, &addr);
                    if self.install(map).is_err() {
                        return Err(error);
                    }
                }
                self.raise_alarm();
            } else if asked {
                match topology::redirect_target(details).map(|(_, a)| self.node(&a)) {
                    Some(Ok(n)) => ask = Some(n),
                    _ => return Err(error),
                }
            } else if error.is_retryable() {
                self.raise_alarm();
                let pause = Instant::now() + RETRY_PAUSE;
                let _ = self
                    .rerouted(slot, &node, &mut version, pause.min(deadline))
                    .await;
                if Instant::now() >= deadline {
                    return Err(error);
                }
            } else {
                return Err(error);
            }
        }
    }

    /// Resolves with `true` when `slot` is routed away from `node`, with `false` at
    /// `until`; raises the alarm when the node takes longer than [`SUSPECT_AFTER`]. One
    /// timer at a time: this runs beside every command.
    async fn rerouted(
        &self,
        slot: u16,
        node: &Arc<Node>,
        version: &mut watch::Receiver<u64>,
        until: Instant,
    ) -> bool {
        let moved = async {
            loop {
                if version.changed().await.is_err() {
                    std::future::pending::<()>().await;
                }
                let now = self.node_for(slot);
                if !now.is_some_and(|n| Arc::ptr_eq(&n, node)) {
                    return;
                }
            }
        };
        tokio::pin!(moved);
        let suspect_at = Instant::now() + SUSPECT_AFTER;
        if suspect_at < until {
            tokio::select! {
                _ = &mut moved => return true,
                _ = tokio::time::sleep_until(suspect_at) => self.raise_alarm(),
            }
        }
        tokio::select! {
            _ = &mut moved => true,
            _ = tokio::time::sleep_until(until) => {
                self.raise_alarm();
                false
            }
        }
    }

    /// Closes every connection (without waiting for nodes that do not answer).
    pub fn close(&self) {
        self.closed
            .store(true, std::sync::atomic::Ordering::Relaxed);
        for node in lock(&self.nodes).values() {
            node.close(self.timeout);
        }
    }
}
