//! Replication faults: the stream from a master to its replicas cut (real replication
//! lag), and a manual failover.
//!
//! Why a cut and not a frozen replica: the kernel buffers the stream for a frozen process,
//! which catches up the moment it runs again. With the stream's packets dropped the
//! replica runs on, connected as far as it can tell, and serves reads of stale data; its
//! master's writes pile up in the master's backlog until the cut ends.

use std::time::{Duration, Instant};

use super::reaper::tell_reaper;
use super::rules::{self, Rule};
use super::session::{fault_tag, gid_of, rule_tag};
use super::{admin, Backend, TestCluster, TestkitError};

/// The comment kind of a replication cut's rules (see [`fault_tag`]).
const REPL: &str = "repl";

/// The comment kind of the rule that drops a node's replies.
const REPLIES: &str = "replies";

/// How long [`TestCluster::failover`] waits for the replica to take over.
const FAILOVER_TIMEOUT: Duration = Duration::from_secs(10);

/// The replication links of the node at `port`, as `(local port, remote port)` pairs:
/// its replicas' connections (`kind` `replica`: its client port, their ephemeral ports),
/// or its own connection to its master (`master`: its ephemeral port, the master's port).
pub(super) async fn links(port: u16, kind: &str) -> Result<Vec<(u16, u16)>, TestkitError> {
    let list = admin::text(port, "CLIENT", &["LIST", "TYPE", kind]).await?;
    let port_of = |line: &str, field: &str| -> Option<u16> {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(field))?
            .rsplit(':')
            .next()?
            .parse()
            .ok()
    };
    Ok(list
        .lines()
        .filter_map(|l| Some((port_of(l, "laddr=")?, port_of(l, "addr=")?)))
        .collect())
}

/// The two rules that drop a TCP connection between the local ports `a` and `b`, both
/// ways (on `INPUT`: what the nodes of both backends send each other crosses `lo`).
pub(super) fn link_rules(a: u16, b: u16, tag: &str) -> [Rule; 2] {
    let (a, b) = (a.to_string(), b.to_string());
    [
        Rule::new("INPUT", &["-m", "tcp", "--sport", &a, "--dport", &b], tag),
        Rule::new("INPUT", &["-m", "tcp", "--sport", &b, "--dport", &a], tag),
    ]
}

/// The rule that drops what the node of group `gid` sends to (`--dport`) or from
/// (`--sport`) the local port `port`.
pub(super) fn sent_by(gid: u32, way: &str, port: u16, tag: &str) -> Rule {
    let (gid, port) = (gid.to_string(), port.to_string());
    let matches = ["-m", "owner", "--gid-owner", &gid, "-m", "tcp", way, &port];
    Rule::new("OUTPUT", &matches, tag)
}

impl TestCluster {
    /// Silently drops the replication stream from the master `master` to every replica
    /// that follows it now, while clients and the cluster bus go on as before: each
    /// replica stays up, believes itself connected (`master_link_status:up` until
    /// `repl-timeout`, 60 s) and serves what it had, but receives no more writes, so that
    /// a failover meanwhile loses them (real replication lag). `WAIT` on the master times
    /// out. [`restore_replication`](Self::restore_replication) ends it; the stream then
    /// resumes where it stopped (TCP retransmits after its back-off, up to about as long as
    /// the cut lasted).
    ///
    /// iptables rules on `lo`, tagged with this process's session (the reaper removes
    /// them when it ends): both directions of each replica's connection to the master, and
    /// any new connection from those replicas to the master's port (a replica reconnecting
    /// after `repl-timeout`, or a `MIGRATE` from it). [`heal`](Self::heal) leaves them;
    /// [`replication_rules`](Self::replication_rules) lists them.
    ///
    /// [`TestkitError::Command`] when the node is not a master or has no replica;
    /// [`TestkitError::Iptables`] without iptables and root; [`TestkitError::Unsupported`]
    /// on an external cluster.
    ///
    /// ```no_run
    /// # async fn demo(cluster: &cluster_rwlock_testkit::TestCluster) -> Result<(), cluster_rwlock_testkit::TestkitError> {
    /// cluster.cut_replication(0).await?;
    /// // writes to node 0 now never reach its replica
    /// cluster.restore_replication(0).await?;
    /// # Ok(()) }
    /// ```
    pub async fn cut_replication(&self, master: usize) -> Result<(), TestkitError> {
        if self.backend() == Backend::External {
            return Err(TestkitError::Unsupported("cut_replication"));
        }
        let port = self.node(master)?.info.port;
        let lines = admin::cluster_nodes(port).await?;
        let me = lines
            .iter()
            .find(|l| l.flags.contains("myself"))
            .ok_or_else(|| TestkitError::Command(format!("node {port} does not list itself")))?;
        if !me.is_master() {
            return Err(TestkitError::Command(format!(
                "node {master} (port {port}) is not a master: no replication stream to cut"
            )));
        }
        let replicas: Vec<u16> = lines
            .iter()
            .filter(|l| l.master_id == me.id)
            .map(|l| l.port)
            .collect();
        if replicas.is_empty() {
            return Err(TestkitError::Command(format!(
                "node {master} (port {port}) has no replica"
            )));
        }
        let tag = fault_tag(REPL, port);
        let mut cut = Vec::new();
        for (local, remote) in links(port, "replica").await? {
            cut.extend(link_rules(local, remote, &tag));
        }
        for replica in replicas {
            for to in self.client_ports(master)? {
                cut.push(sent_by(gid_of(replica)?, "--dport", to, &tag));
            }
        }
        // told first, so that the reaper removes the rules even if we die while adding them
        tell_reaper(&format!("rule:{tag}"));
        rules::insert(&cut).await
    }

    /// Ends a [replication cut](Self::cut_replication) of the master `master`: its rules
    /// are removed (nothing happens when there are none), so the stream flows again.
    ///
    /// ```no_run
    /// # async fn demo(cluster: &cluster_rwlock_testkit::TestCluster) -> Result<(), cluster_rwlock_testkit::TestkitError> {
    /// cluster.restore_replication(0).await?;
    /// assert!(cluster.replication_rules().await?.is_empty());
    /// # Ok(()) }
    /// ```
    pub async fn restore_replication(&self, master: usize) -> Result<(), TestkitError> {
        if self.backend() == Backend::External {
            return Err(TestkitError::Unsupported("restore_replication"));
        }
        let port = self.node(master)?.info.port;
        rules::remove_tagged(&fault_tag(REPL, port)).await
    }

    /// Silently drops everything the node `index` sends from its client port (and its TLS
    /// port on a TLS cluster) (replies
    /// to clients, the replication stream), while it goes on taking and running commands:
    /// a command runs and its caller never hears back, as when a reply is lost on the
    /// way. [`restore_replies`](Self::restore_replies) ends it. An iptables rule on `lo`,
    /// tagged like a [replication cut](Self::cut_replication)'s and listed with them by
    /// [`replication_rules`](Self::replication_rules).
    ///
    /// [`TestkitError::Iptables`] without iptables and root;
    /// [`TestkitError::Unsupported`] on an external cluster.
    ///
    /// ```no_run
    /// # async fn demo(cluster: &cluster_rwlock_testkit::TestCluster) -> Result<(), cluster_rwlock_testkit::TestkitError> {
    /// cluster.drop_replies(0).await?;
    /// // commands sent to node 0 now run, and their replies never arrive
    /// cluster.restore_replies(0).await?;
    /// # Ok(()) }
    /// ```
    pub async fn drop_replies(&self, index: usize) -> Result<(), TestkitError> {
        if self.backend() == Backend::External {
            return Err(TestkitError::Unsupported("drop_replies"));
        }
        let tag = fault_tag(REPLIES, self.node(index)?.info.port);
        let drop: Vec<Rule> = self
            .client_ports(index)?
            .into_iter()
            .map(|p| Rule::new("INPUT", &["-m", "tcp", "--sport", &p.to_string()], &tag))
            .collect();
        tell_reaper(&format!("rule:{tag}"));
        rules::insert(&drop).await
    }

    /// Ends [`drop_replies`](Self::drop_replies) for the node `index` (nothing happens
    /// when its rule is not there).
    ///
    /// ```no_run
    /// # async fn demo(cluster: &cluster_rwlock_testkit::TestCluster) -> Result<(), cluster_rwlock_testkit::TestkitError> {
    /// cluster.restore_replies(0).await?;
    /// # Ok(()) }
    /// ```
    pub async fn restore_replies(&self, index: usize) -> Result<(), TestkitError> {
        if self.backend() == Backend::External {
            return Err(TestkitError::Unsupported("restore_replies"));
        }
        let port = self.node(index)?.info.port;
        rules::remove_tagged(&fault_tag(REPLIES, port)).await
    }

    /// This process's [replication cut](Self::cut_replication) rules, as `iptables -S`
    /// prints them (none when no stream is cut). With
    /// [`partition_rules`](Self::partition_rules), what a test checks to know that no
    /// fault of its is left.
    ///
    /// ```no_run
    /// # async fn demo(cluster: &cluster_rwlock_testkit::TestCluster) -> Result<(), cluster_rwlock_testkit::TestkitError> {
    /// assert!(cluster.replication_rules().await?.is_empty());
    /// assert!(cluster.partition_rules().await?.is_empty());
    /// # Ok(()) }
    /// ```
    pub async fn replication_rules(&self) -> Result<Vec<String>, TestkitError> {
        if self.backend() == Backend::External {
            return Err(TestkitError::Unsupported("replication_rules"));
        }
        let cut = format!("{}-{REPL}-", rule_tag());
        let replies = format!("{}-{REPLIES}-", rule_tag());
        rules::listed(|c| c.starts_with(&cut) || c.starts_with(&replies)).await
    }

    /// A manual failover: `CLUSTER FAILOVER` on the replica `replica`, which takes over
    /// from its master in a coordinated hand-over (the master stops taking writes until
    /// the replica has all of them, so nothing is lost); the old master becomes its
    /// replica. Waits up to 10 s until the node reports itself master.
    ///
    /// [`TestkitError::Command`] when the node is a master (Redis refuses);
    /// [`TestkitError::NotReady`] when it did not take over in time (its master is down,
    /// say: a manual failover needs it).
    ///
    /// ```no_run
    /// # async fn demo(cluster: &cluster_rwlock_testkit::TestCluster) -> Result<(), cluster_rwlock_testkit::TestkitError> {
    /// let replica = cluster.replica_of(0).await?;
    /// cluster.failover(replica.index).await?;
    /// # Ok(()) }
    /// ```
    pub async fn failover(&self, replica: usize) -> Result<(), TestkitError> {
        let port = self.node(replica)?.info.port;
        admin::text(port, "CLUSTER", &["FAILOVER"]).await?;
        let began = Instant::now();
        loop {
            let lines = admin::cluster_nodes(port).await.unwrap_or_default();
            if lines
                .iter()
                .any(|l| l.flags.contains("myself") && l.is_master())
            {
                return Ok(());
            }
            if began.elapsed() > FAILOVER_TIMEOUT {
                return Err(self
                    .not_ready(
                        FAILOVER_TIMEOUT,
                        format!(
                            "node {replica} (port {port}) is not master after CLUSTER FAILOVER"
                        ),
                    )
                    .await);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_rules_cover_both_ways() {
        let [a, b] = link_rules(7000, 41234, "t");
        assert_eq!(
            a.matches,
            ["-m", "tcp", "--sport", "7000", "--dport", "41234"]
        );
        assert_eq!(
            b.matches,
            ["-m", "tcp", "--sport", "41234", "--dport", "7000"]
        );
    }
}
