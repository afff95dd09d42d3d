//! Partitions: every packet to a node's client port and cluster bus port is dropped, and
//! every packet the node sends (iptables on the loopback interface, where the nodes listen
//! in both backends; what a node sends is told by its group: each node runs with a group
//! of its own when the test bed runs as root). Clients and the other nodes lose it without a
//! reset: open connections stay open but nothing arrives, and new ones hang at SYN. Each
//! rule is tagged with this process's session, and the reaper removes the session's rules
//! when the process ends in any way.
//!
//! Why what it sends too: a node also keeps links of its own to the other nodes' bus
//! ports, from ephemeral ports that no rule on its own ports matches. With only the
//! packets to its ports dropped, its PINGs on those links still reach the others, who
//! count them as a sign of life (Redis 7 and Valkey fail a node only when neither a PONG
//! nor any other packet came from it for the node timeout): it is never failed over.

use std::process::{Command, Stdio};

use super::reaper::tell_reaper;
use super::session::{gid_of, node_gid, rule_tag, ISOLATE};
use super::{rules, TestCluster, TestkitError};

/// The iptables arguments of one rule of a partition: packets to `port`, or packets sent
/// by the group `gid`.
fn spec(target: Target) -> Vec<String> {
    let mut args: Vec<String> = match target {
        Target::To(port) => ["INPUT", "-i", "lo", "-p", "tcp", "--dport"]
            .iter()
            .map(|s| s.to_string())
            .chain([port.to_string()])
            .collect(),
        Target::From(gid) => ["OUTPUT", "-o", "lo", "-m", "owner", "--gid-owner"]
            .iter()
            .map(|s| s.to_string())
            .chain([gid.to_string()])
            .collect(),
    };
    args.extend(["-m", "comment", "--comment", &rule_tag(), "-j", "DROP"].map(String::from));
    args
}

#[derive(Clone, Copy)]
enum Target {
    To(u16),
    From(u32),
}

/// Adds (`-I`) or removes (`-D`) one rule; `Ok(false)` when there was none to remove.
async fn rule(op: &'static str, target: Target) -> Result<bool, TestkitError> {
    let args = spec(target);
    let out = tokio::task::spawn_blocking(move || {
        Command::new("iptables")
            .args(["-w", op])
            .args(&args)
            .stdin(Stdio::null())
            .output()
    })
    .await
    .map_err(|e| TestkitError::Command(e.to_string()))?
    .map_err(|e| TestkitError::Iptables(format!("cannot run iptables: {e}")))?;
    if out.status.success() {
        Ok(true)
    } else if op == "-D" && out.status.code() == Some(1) {
        // no such rule (left); 2 and above are usage errors, 4 a resource problem
        Ok(false)
    } else {
        Err(TestkitError::Iptables(format!(
            "iptables {op} {} refused: {}",
            spec(target).join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

impl TestCluster {
    /// Cuts node `index` off: every packet to its client ports and its cluster bus port is
    /// dropped, and every packet it sends, so that clients and the other nodes stop
    /// hearing from it (the cluster fails it over after its node timeout) while it runs
    /// on, believing itself master. [`heal`](Self::heal) undoes it; the rules carry this
    /// process's session and are removed when it ends, however it ends.
    ///
    /// Needs `iptables` and root: [`TestkitError::Iptables`] otherwise, and
    /// [`TestkitError::Unsupported`] on an external cluster.
    ///
    /// ```no_run
    /// # async fn demo(cluster: &cluster_rwlock_testkit::TestCluster) -> Result<(), cluster_rwlock_testkit::TestkitError> {
    /// cluster.partition(0).await?;
    /// cluster.wait_for_failover(std::time::Duration::from_secs(30)).await?;
    /// cluster.heal(0).await?;
    /// # Ok(()) }
    /// ```
    pub async fn partition(&self, index: usize) -> Result<(), TestkitError> {
        if self.backend() == super::Backend::External {
            return Err(TestkitError::Unsupported("partition"));
        }
        let port = self.node(index)?.info.port;
        let gid = gid_of(port)?;
        // told first, so that the reaper removes the rules even if we die while adding them
        tell_reaper(&format!("rule:{port}:{gid}"));
        let mut targets: Vec<Target> = self
            .client_ports(index)?
            .into_iter()
            .map(Target::To)
            .collect();
        targets.extend([Target::To(port + 10000), Target::From(gid)]);
        for (added, t) in targets.iter().enumerate() {
            if let Err(e) = rule("-I", *t).await {
                // no half-made partition: take back the rules already added
                for done in &targets[..added] {
                    let _ = rule("-D", *done).await;
                }
                return Err(e);
            }
        }
        self.mark(index, true);
        Ok(())
    }

    /// Ends the partition or the [isolation](Self::isolate) of node `index`: its packets
    /// flow again (this session's rules for it are removed; nothing happens when there are
    /// none). An old master that was failed over meanwhile rejoins as a replica of the node
    /// that replaced it. A [replication cut](Self::cut_replication) is left as it is.
    ///
    /// ```no_run
    /// # async fn demo(cluster: &cluster_rwlock_testkit::TestCluster) -> Result<(), cluster_rwlock_testkit::TestkitError> {
    /// cluster.heal(0).await?;
    /// # Ok(()) }
    /// ```
    pub async fn heal(&self, index: usize) -> Result<(), TestkitError> {
        if self.backend() == super::Backend::External {
            return Err(TestkitError::Unsupported("heal"));
        }
        let port = self.node(index)?.info.port;
        let mut targets: Vec<Target> = self
            .client_ports(index)?
            .into_iter()
            .map(Target::To)
            .collect();
        targets.push(Target::To(port + 10000));
        targets.extend(node_gid(port).map(Target::From));
        for t in targets {
            while rule("-D", t).await? {}
        }
        rules::remove_tagged(&super::session::fault_tag(ISOLATE, port)).await?;
        self.mark(index, false);
        Ok(())
    }

    /// This process's partition and isolation rules, as `iptables -S` prints them (none
    /// when no node is cut off): three per [partitioned](Self::partition) node, two on
    /// `INPUT` (its client and bus ports; three with its TLS port on a TLS cluster) and one
    /// on `OUTPUT` (its group), and about
    /// twenty per [isolated](Self::isolate) node. [`heal`](Self::heal) removes them;
    /// [`replication_rules`](Self::replication_rules) lists the replication cuts.
    ///
    /// ```no_run
    /// # async fn demo(cluster: &cluster_rwlock_testkit::TestCluster) -> Result<(), cluster_rwlock_testkit::TestkitError> {
    /// cluster.partition(0).await?;
    /// assert_eq!(cluster.partition_rules().await?.len(), 3);
    /// cluster.heal(0).await?;
    /// assert!(cluster.partition_rules().await?.is_empty());
    /// # Ok(()) }
    /// ```
    pub async fn partition_rules(&self) -> Result<Vec<String>, TestkitError> {
        if self.backend() == super::Backend::External {
            return Err(TestkitError::Unsupported("partition_rules"));
        }
        let tag = rule_tag();
        let isolation = format!("{tag}-{ISOLATE}-");
        rules::listed(|c| c == tag || c.starts_with(&isolation)).await
    }
}
