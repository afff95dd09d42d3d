//! Waiting until the cluster is healthy, or has failed over.

use std::time::{Duration, Instant};

use super::node::node_logs;
use super::{admin, TestCluster, TestkitError, SLOTS};

impl TestCluster {
    pub(super) async fn not_ready(&self, after: Duration, what: String) -> TestkitError {
        let mut logs = String::new();
        for node in &self.nodes {
            logs.push_str(&format!(
                "--- node {} (port {})\n{}\n",
                node.info.index,
                node.info.port,
                node_logs(node).await
            ));
        }
        TestkitError::NotReady { after, what, logs }
    }

    /// What is still missing before the whole cluster is healthy, or `None`.
    async fn missing(&self) -> Option<String> {
        for node in &self.nodes {
            if !admin::cluster_state_ok(node.info.port).await {
                return Some(format!("node {} is not cluster_state:ok", node.info.port));
            }
        }
        for node in &self.nodes {
            let Ok(lines) = admin::cluster_nodes(node.info.port).await else {
                return Some(format!(
                    "node {} does not answer CLUSTER NODES",
                    node.info.port
                ));
            };
            let masters = admin::masters_and_replicas(&lines);
            if masters.len() != 3 || masters.iter().any(|(_, r)| r.is_empty()) {
                return Some(format!(
                    "node {} does not see 3 masters each with a replica",
                    node.info.port
                ));
            }
            if !lines
                .iter()
                .any(|l| l.flags.contains("myself") && l.is_master())
                && !admin::replica_synced(node.info.port).await
            {
                return Some(format!("replica {} has not synced", node.info.port));
            }
        }
        None
    }

    pub(super) async fn wait_ready_here(&self, timeout: Duration) -> Result<(), TestkitError> {
        let began = Instant::now();
        loop {
            match self.missing().await {
                None => return Ok(()),
                Some(what) if began.elapsed() > timeout => {
                    return Err(self.not_ready(timeout, what).await)
                }
                Some(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    }

    /// Waits until all six nodes are up, `cluster_state:ok`, and every master has a
    /// synced replica (for instance after [`restart`](Self::restart)).
    ///
    /// ```no_run
    /// # async fn demo(cluster: &cluster_rwlock_testkit::TestCluster) -> Result<(), cluster_rwlock_testkit::TestkitError> {
    /// cluster.restart(0).await?;
    /// cluster.wait_ready(std::time::Duration::from_secs(30)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn wait_ready(&self, timeout: Duration) -> Result<(), TestkitError> {
        self.wait_ready_here(timeout).await
    }

    /// Waits until the cluster serves every slot again after a node was killed or paused:
    /// every node that is up reports `cluster_state:ok`, and every slot's master is a node
    /// that is up (a replica was promoted).
    ///
    /// ```no_run
    /// # async fn demo(cluster: &cluster_rwlock_testkit::TestCluster) -> Result<(), cluster_rwlock_testkit::TestkitError> {
    /// let took = cluster.wait_for_failover(std::time::Duration::from_secs(30)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn wait_for_failover(&self, timeout: Duration) -> Result<Duration, TestkitError> {
        let began = Instant::now();
        loop {
            let what = self.failover_missing().await;
            match what {
                None => return Ok(began.elapsed()),
                Some(what) if began.elapsed() > timeout => {
                    return Err(self.not_ready(timeout, what).await)
                }
                Some(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    }

    async fn failover_missing(&self) -> Option<String> {
        let up: Vec<u16> = self
            .nodes
            .iter()
            .filter(|n| !*n.down.lock().unwrap_or_else(|e| e.into_inner()))
            .map(|n| n.info.port)
            .collect();
        for &port in &up {
            if !admin::cluster_state_ok(port).await {
                return Some(format!("node {port} is not cluster_state:ok"));
            }
            let Ok(ranges) = admin::slot_ranges(port).await else {
                return Some(format!("node {port} does not answer CLUSTER SLOTS"));
            };
            let covered: u32 = ranges.iter().map(|(a, b, _)| u32::from(b - a) + 1).sum();
            if covered != u32::from(SLOTS) {
                return Some(format!("node {port} sees {covered} slots served"));
            }
            if let Some((_, _, m)) = ranges.iter().find(|(_, _, m)| !up.contains(m)) {
                return Some(format!(
                    "node {port} still routes slots to node {m}, which is down"
                ));
            }
        }
        None
    }
}
