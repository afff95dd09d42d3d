//! Replicas moved between masters (`CLUSTER REPLICATE`): a master left with none, another
//! with two, and every master given one again.

use std::time::{Duration, Instant};

use super::{admin, TestCluster, TestkitError};

/// How long a moved replica may take to attach and sync with its new master.
const ATTACH_TIMEOUT: Duration = Duration::from_secs(20);
/// How long the nodes' views may take to agree.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(30);

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
    /// [`replicate`](Self::replicate)), each move seen by every node that is up before
    /// the next is chosen. Waits first until every node is up and agrees (a master thawed
    /// after its failover has rejoined as a replica). How many were moved.
    pub async fn spread_replicas(&self) -> Result<usize, TestkitError> {
        // at most one move per master that could lack a replica, and a few views that lag
        for moved in 0..6 {
            let lines = self.settled_view(SETTLE_TIMEOUT).await?;
            let masters = admin::masters_and_replicas(&lines);
            let lonely = masters.iter().find(|(_, r)| r.is_empty()).map(|(m, _)| m);
            let crowded = masters.iter().map(|(_, r)| r).find(|r| r.len() >= 2);
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
        }
        Err(self
            .not_ready(SETTLE_TIMEOUT, "replicas not spread after 6 moves".into())
            .await)
    }

    /// The `CLUSTER NODES` view once every node that is up gives the same one (who is
    /// master of whom, none failing), at most `timeout`.
    async fn settled_view(&self, timeout: Duration) -> Result<Vec<admin::NodeLine>, TestkitError> {
        let began = Instant::now();
        loop {
            let mut views = Vec::new();
            for node in &self.nodes {
                if *node.down.lock().unwrap_or_else(|e| e.into_inner()) {
                    continue;
                }
                if let Ok(lines) = admin::cluster_nodes(node.info.port).await {
                    let mut shape: Vec<(u16, bool, String, bool)> = lines
                        .iter()
                        .map(|l| (l.port, l.is_master(), l.master_id.clone(), l.is_failed()))
                        .collect();
                    shape.sort();
                    views.push((shape, lines));
                }
            }
            let agreed = !views.is_empty()
                && views.windows(2).all(|w| w[0].0 == w[1].0)
                && views[0].0.iter().all(|(_, _, _, failed)| !failed);
            if agreed {
                return Ok(views.swap_remove(0).1);
            }
            if began.elapsed() > timeout {
                return Err(self
                    .not_ready(timeout, "the nodes' views do not agree".into())
                    .await);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}
