//! Isolation: a node cut off from the other nodes only, while its clients still reach it
//! (the side of a split brain where the old master and some clients are).
//!
//! What the nodes send each other is told by the sender's group (each node runs with a
//! group of its own, see [`node_gid`](super::session::node_gid)): every packet another
//! node sends to the node's client or bus port, and every packet the node sends to another
//! node's, is dropped. Two kinds of packets travel the other way, from a listening port to
//! an ephemeral one: the answers on bus links that a peer opened, and a master's
//! replication stream. The first are dropped by the node's group and its bus port (only
//! nodes talk to a bus port); the second by the ports of the replication links open now
//! (the client ports of the nodes stay open to clients, so no broader rule is possible).

use super::reaper::tell_reaper;
use super::replication::{link_rules, links, sent_by};
use super::rules;
use super::session::{fault_tag, gid_of, ISOLATE};
use super::{Backend, TestCluster, TestkitError};

impl TestCluster {
    /// Cuts node `index` off from the OTHER NODES only: the cluster bus links between it
    /// and them (both ways) and the replication links between it and their client ports
    /// are dropped, while clients (any process that is not a node) still reach it. The
    /// others fail it over after the node timeout (2 s); a master goes on serving the
    /// clients that talk to it, believing itself master, and takes their writes, which the
    /// failover loses, until it notices that it is in a minority (after the node timeout
    /// too): from then on it answers `CLUSTERDOWN` to key commands, and `PING` and admin
    /// commands as before.
    ///
    /// [`heal`](Self::heal) undoes it (the node is marked down meanwhile, so that
    /// [`wait_for_failover`](Self::wait_for_failover) does not wait for it). The rules are
    /// added at once, carry this process's session (the reaper removes them when it
    /// ends) and are listed by [`partition_rules`](Self::partition_rules).
    /// [`partition`](Self::partition) cuts a node off from its clients too.
    ///
    /// Needs `iptables` and root: [`TestkitError::Iptables`] otherwise, and
    /// [`TestkitError::Unsupported`] on an external cluster.
    ///
    /// ```no_run
    /// # async fn demo(cluster: &cluster_rwlock_testkit::TestCluster) -> Result<(), cluster_rwlock_testkit::TestkitError> {
    /// cluster.isolate(0).await?;
    /// cluster.wait_for_failover(std::time::Duration::from_secs(30)).await?;
    /// cluster.heal(0).await?;
    /// cluster.wait_ready(std::time::Duration::from_secs(30)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn isolate(&self, index: usize) -> Result<(), TestkitError> {
        if self.backend() == Backend::External {
            return Err(TestkitError::Unsupported("isolate"));
        }
        let port = self.node(index)?.info.port;
        let (gid, bus) = (gid_of(port)?, port + 10000);
        let tag = fault_tag(ISOLATE, port);
        let mut cut = Vec::new();
        let mine = self.client_ports(index)?;
        for other in self.nodes.iter().map(|n| n.info.index) {
            if other == index {
                continue;
            }
            let theirs = self.client_ports(other)?;
            let other_bus = theirs[0] + 10000;
            let other_gid = gid_of(theirs[0])?;
            for &p in mine.iter().chain([&bus]) {
                cut.push(sent_by(other_gid, "--dport", p, &tag));
            }
            for &p in theirs.iter().chain([&other_bus]) {
                cut.push(sent_by(gid, "--dport", p, &tag));
            }
        }
        // its answers on the bus links that the others opened
        cut.push(sent_by(gid, "--sport", bus, &tag));
        // best effort: a node that is down or frozen does not answer, and the rules above
        // still stop every new link
        for kind in ["replica", "master"] {
            for (local, remote) in links(port, kind).await.unwrap_or_default() {
                cut.extend(link_rules(local, remote, &tag));
            }
        }
        // told first, so that the reaper removes the rules even if we die while adding them
        tell_reaper(&format!("rule:{tag}"));
        rules::insert(&cut).await?;
        self.mark(index, true);
        Ok(())
    }
}
