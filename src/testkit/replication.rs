//! Faults of the links between nodes: replication lag (a master's stream to its replicas
//! dropped while everything else flows), a node isolated from the other nodes while its
//! clients still reach it, and a manual failover.
//!
//! Why a cut and not a frozen replica: a frozen replica still receives the replication
//! stream, since the kernel buffers it, and applies it when it wakes. Dropping the
//! packets of the replication connection (iptables on `lo`, tagged with the session like
//! the partition rules) makes the replica fall behind for real, while it stays up and its
//! bus links keep it healthy in the cluster's eyes, so it can still be promoted.

use std::time::{Duration, Instant};

use super::partition::{node_gid, session_rule};
use super::reaper::tell_reaper;
use super::{admin, Backend, TestCluster, TestkitError};

/// The client ports of the replica connections of the master on `port`
/// (`CLIENT LIST TYPE replica`, field `addr=127.0.0.1:<port>`).
async fn replica_links(port: u16) -> Result<Vec<u16>, TestkitError> {
    let list = admin::text(port, "CLIENT", &["LIST", "TYPE", "replica"]).await?;
    Ok(list
        .lines()
        .filter_map(|line| {
            let addr = line
                .split_whitespace()
                .find_map(|f| f.strip_prefix("addr="))?;
            addr.rsplit(':').next()?.parse().ok()
        })
        .collect())
}

fn tcp(chain: &str, what: &[String]) -> Vec<String> {
    let io = if chain == "INPUT" { "-i" } else { "-o" };
    let mut args: Vec<String> = [chain, io, "lo", "-p", "tcp"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    args.extend(what.iter().cloned());
    args
}

fn ports(sport: u16, dport: u16) -> Vec<String> {
    vec![
        "--sport".into(),
        sport.to_string(),
        "--dport".into(),
        dport.to_string(),
    ]
}

fn sent_by_to(gid: u32, dport: u16) -> Vec<String> {
    vec![
        "-m".into(),
        "owner".into(),
        "--gid-owner".into(),
        gid.to_string(),
        "--dport".into(),
        dport.to_string(),
    ]
}

impl TestCluster {
    fn iptables_ok(&self, what: &'static str) -> Result<(), TestkitError> {
        if self.backend() == Backend::External {
            return Err(TestkitError::Unsupported(what));
        }
        Ok(())
    }

    /// Drops the replication stream of master `master` to every replica that follows it
    /// now, in both directions, while clients and the cluster bus keep flowing: the
    /// replicas stay up and healthy in the cluster's eyes but receive no more writes
    /// (real replication lag). [`restore_replication`](Self::restore_replication) and
    /// [`heal`](Self::heal) undo it. Needs root and iptables, like
    /// [`partition`](Self::partition).
    ///
    /// ```no_run
    /// # async fn demo(cluster: &cluster_rwlock::testkit::TestCluster) -> Result<(), cluster_rwlock::testkit::TestkitError> {
    /// cluster.cut_replication(0).await?;   // grants on node 0 from now on are not replicated
    /// cluster.pause(0).await?;             // ... and its replica is promoted without them
    /// cluster.wait_for_failover(std::time::Duration::from_secs(30)).await?;
    /// cluster.restore_replication(0).await?;
    /// cluster.unpause(0).await?;
    /// # Ok(()) }
    /// ```
    pub async fn cut_replication(&self, master: usize) -> Result<(), TestkitError> {
        self.iptables_ok("cut_replication")?;
        let port = self.node(master)?.info.port;
        let links = replica_links(port).await?;
        if links.is_empty() {
            return Err(TestkitError::Command(format!(
                "node {port} has no replica connected"
            )));
        }
        tell_reaper("rules:");
        for link in links {
            session_rule("-I", &tcp("INPUT", &ports(port, link))).await?;
            session_rule("-I", &tcp("INPUT", &ports(link, port))).await?;
        }
        Ok(())
    }

    /// Lets the replication stream of master `master` flow again (removes what
    /// [`cut_replication`](Self::cut_replication) added; nothing happens when there is
    /// nothing to remove). The replica catches up, or resyncs, shortly after.
    ///
    /// ```no_run
    /// # async fn demo(cluster: &cluster_rwlock::testkit::TestCluster) -> Result<(), cluster_rwlock::testkit::TestkitError> {
    /// cluster.restore_replication(0).await?;
    /// # Ok(()) }
    /// ```
    pub async fn restore_replication(&self, master: usize) -> Result<(), TestkitError> {
        self.iptables_ok("restore_replication")?;
        let port = self.node(master)?.info.port.to_string();
        // a cut's rules are the INPUT rules with both ports, one of them the master's
        self.remove_rules(|words| {
            let value = |flag: &str| words.windows(2).find(|w| w[0] == flag).map(|w| w[1]);
            match (value("--sport"), value("--dport")) {
                (Some(s), Some(d)) => words.contains(&"INPUT") && (s == port || d == port),
                _ => false,
            }
        })
        .await
    }

    /// Cuts node `index` off from the OTHER NODES only: their cluster bus links and
    /// replication links to and from it are dropped, while clients (any process that is
    /// not a node) still reach it. The cluster fails it over after its node timeout
    /// while it keeps serving the clients that talk to it, believing itself master: the
    /// side of a partition where the old master and some clients are. [`heal`](Self::heal)
    /// undoes it. Needs root and iptables.
    ///
    /// ```no_run
    /// # async fn demo(cluster: &cluster_rwlock::testkit::TestCluster) -> Result<(), cluster_rwlock::testkit::TestkitError> {
    /// cluster.isolate(0).await?;
    /// cluster.wait_for_failover(std::time::Duration::from_secs(30)).await?;
    /// cluster.heal(0).await?;
    /// # Ok(()) }
    /// ```
    pub async fn isolate(&self, index: usize) -> Result<(), TestkitError> {
        self.iptables_ok("isolate")?;
        let me = self.node(index)?.info.port;
        let gid_of = |port: u16| {
            node_gid(port).ok_or_else(|| {
                TestkitError::Iptables(
                    "the test bed does not run as root, so its nodes have no group of their own"
                        .into(),
                )
            })
        };
        let my_gid = gid_of(me)?;
        tell_reaper("rules:");
        for other in self.nodes.iter().map(|n| n.info.port).filter(|p| *p != me) {
            let gid = gid_of(other)?;
            for (from, to) in [
                (gid, me),
                (gid, me + 10_000),
                (my_gid, other),
                (my_gid, other + 10_000),
            ] {
                session_rule("-I", &tcp("OUTPUT", &sent_by_to(from, to))).await?;
            }
        }
        self.mark(index, true);
        Ok(())
    }

    /// Removes this session's rules that `matches` (given the words of each `iptables -S`
    /// line).
    pub(super) async fn remove_rules(
        &self,
        matches: impl Fn(&[&str]) -> bool,
    ) -> Result<(), TestkitError> {
        for line in self.partition_rules().await? {
            let words: Vec<&str> = line.split_whitespace().collect();
            if words.first() != Some(&"-A") || !matches(&words) {
                continue;
            }
            let spec: Vec<String> = words[1..].iter().map(|w| w.to_string()).collect();
            super::partition::raw_rule("-D", &spec).await?;
        }
        Ok(())
    }

    /// A manual failover: `CLUSTER FAILOVER` on replica node `replica`, a coordinated
    /// hand-over in which the master stops, the replica catches up and takes its slots
    /// (no write is lost). Returns once the node reports itself master, or fails after
    /// 10 s.
    ///
    /// ```no_run
    /// # async fn demo(cluster: &cluster_rwlock::testkit::TestCluster) -> Result<(), cluster_rwlock::testkit::TestkitError> {
    /// let replica = cluster.replica_of(0).await?;
    /// cluster.failover(replica.index).await?;
    /// # Ok(()) }
    /// ```
    pub async fn failover(&self, replica: usize) -> Result<(), TestkitError> {
        let port = self.node(replica)?.info.port;
        admin::text(port, "CLUSTER", &["FAILOVER"]).await?;
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(lines) = admin::cluster_nodes(port).await {
                if lines
                    .iter()
                    .any(|l| l.flags.contains("myself") && l.is_master())
                {
                    return Ok(());
                }
            }
            if Instant::now() > deadline {
                return Err(TestkitError::Command(format!(
                    "node {port} did not become master within 10 s of CLUSTER FAILOVER"
                )));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}
