//! Replicas moved between masters (`CLUSTER REPLICATE`): a master left with none, another
//! with two, and every master given one again.

use std::time::{Duration, Instant};

use super::{admin, TestCluster, TestkitError};

/// How long a moved replica may take to attach and sync with its new master.
const ATTACH_TIMEOUT: Duration = Duration::from_secs(20);

impl TestCluster {
    /// Makes node `replica` follow node `master` (`CLUSTER REPLICATE`), and waits until
    /// `master` reports it attached and in sync (`state=online` in its `INFO
    /// replication`). The master it followed before is left with one replica less.
    ///
    /// ```no_run
    /// # async fn demo(cluster: &cluster_rwlock_testkit::TestCluster) -> Result<(), cluster_rwlock_testkit::TestkitError> {
    /// let replica = cluster.replica_of(0).await?;
    /// cluster.replicate(replica.index, 1).await?; // node 0 has no replica now
    /// cluster.spread_replicas().await?; // every master has one again
    /// # Ok(()) }
    /// ```
    pub async fn replicate(&self, replica: usize, master: usize) -> Result<(), TestkitError> {
        let (replica_port, master_port) =
            (self.node(replica)?.info.port, self.node(master)?.info.port);
        let lines = admin::cluster_nodes(master_port).await?;
        let id = lines
            .iter()
            .find(|l| l.flags.contains("myself"))
            .map(|l| l.id.clone())
            .ok_or_else(|| {
                TestkitError::Command(format!("node {master_port} does not list itself"))
            })?;
        admin::text(replica_port, "CLUSTER", &["REPLICATE", &id]).await?;
        let began = Instant::now();
        let attached = format!("port={replica_port},state=online");
        loop {
            let info = admin::text(master_port, "INFO", &["replication"])
                .await
                .unwrap_or_default();
            if info.contains(&attached) {
                return Ok(());
            }
            if began.elapsed() > ATTACH_TIMEOUT {
                return Err(self
                    .not_ready(
                        ATTACH_TIMEOUT,
                        format!("node {replica_port} did not attach to {master_port}"),
                    )
                    .await);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Gives every master that serves slots a replica again: a replica of a master that
    /// has two or more is moved to each master that has none (see
    /// [`replicate`](Self::replicate)). How many were moved.
    pub async fn spread_replicas(&self) -> Result<usize, TestkitError> {
        let mut moved = 0;
        loop {
            let mut view = None;
            for node in &self.nodes {
                if *node.down.lock().unwrap_or_else(|e| e.into_inner()) {
                    continue;
                }
                if let Ok(lines) = admin::cluster_nodes(node.info.port).await {
                    view = Some(lines);
                    break;
                }
            }
            let lines = view.ok_or_else(|| TestkitError::Command("no node answers".into()))?;
            let masters: Vec<&admin::NodeLine> = lines
                .iter()
                .filter(|l| l.is_master() && l.has_slots && !l.is_failed())
                .collect();
            let replicas_of = |id: &str| {
                lines
                    .iter()
                    .filter(|l| !l.is_master() && !l.is_failed() && l.master_id == id)
                    .collect::<Vec<_>>()
            };
            let lonely = masters.iter().find(|m| replicas_of(&m.id).is_empty());
            let crowded = masters
                .iter()
                .map(|m| replicas_of(&m.id))
                .find(|r| r.len() >= 2);
            let (Some(lonely), Some(crowded)) = (lonely, crowded) else {
                return Ok(moved);
            };
            let index = |port: u16| {
                self.nodes
                    .iter()
                    .position(|n| n.info.port == port)
                    .ok_or_else(|| TestkitError::Command(format!("unknown port {port}")))
            };
            self.replicate(index(crowded[0].port)?, index(lonely.port)?)
                .await?;
            moved += 1;
        }
    }
}
