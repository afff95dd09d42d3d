//! Partitions: every packet to a node's client port and cluster bus port is dropped, and
//! every packet the node sends (iptables on the loopback interface, where the nodes listen
//! in both backends; what a node sends is told by its group: each node runs with a group
//! of its own when the test bed runs as root). Clients and the other nodes lose it without a
//! reset: open connections stay open but nothing arrives, and new ones hang at SYN. Each
//! rule is tagged with this process's session, and the reaper removes the session's rules
//! when the process ends in any way.

use std::process::{Command, Stdio};

use super::{session_id, tell_reaper, TestCluster, TestkitError};

/// The comment on this session's rules.
pub(super) fn rule_tag() -> String {
    format!("cluster-rwlock-{}", session_id())
}

/// The group the node on `port` runs with (only when the test bed runs as root: a group
/// per node needs it, and so does iptables).
pub(super) fn node_gid(port: u16) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    let root = std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0);
    root.then_some(100_000 + u32::from(port))
}

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
    .map_err(|e| {
        TestkitError::Command(format!(
            "cannot run iptables (partitions need it, and root): {e}"
        ))
    })?;
    if out.status.success() {
        Ok(true)
    } else if op == "-D" {
        Ok(false)
    } else {
        Err(TestkitError::Command(format!(
            "iptables refused to add a rule (partitions need root): {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

impl TestCluster {
    /// Cuts node `index` off: every packet to its client port and its cluster bus port is
    /// dropped, so that clients and the other nodes stop hearing from it (the cluster
    /// fails it over after its node timeout) while it runs on, believing itself master.
    /// Needs `iptables` and root; [`heal`](Self::heal) undoes it.
    ///
    /// ```no_run
    /// # async fn demo(cluster: &cluster_rwlock::testkit::TestCluster) -> Result<(), cluster_rwlock::testkit::TestkitError> {
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
        let gid = node_gid(port).ok_or_else(|| {
            TestkitError::Command("partitions need root (iptables, a group per node)".into())
        })?;
        tell_reaper(&format!("rule:{port}:{gid}"));
        for t in [
            Target::To(port),
            Target::To(port + 10000),
            Target::From(gid),
        ] {
            rule("-I", t).await?;
        }
        self.mark(index, true);
        Ok(())
    }

    /// Ends the partition of node `index`: its packets flow again.
    ///
    /// ```no_run
    /// # async fn demo(cluster: &cluster_rwlock::testkit::TestCluster) -> Result<(), cluster_rwlock::testkit::TestkitError> {
    /// cluster.heal(0).await?;
    /// # Ok(()) }
    /// ```
    pub async fn heal(&self, index: usize) -> Result<(), TestkitError> {
        if self.backend() == super::Backend::External {
            return Err(TestkitError::Unsupported("heal"));
        }
        let port = self.node(index)?.info.port;
        let mut targets = vec![Target::To(port), Target::To(port + 10000)];
        targets.extend(node_gid(port).map(Target::From));
        for t in targets {
            while rule("-D", t).await? {}
        }
        self.mark(index, false);
        Ok(())
    }
}
