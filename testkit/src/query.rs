//! What the cluster looks like now: slot owners, keys, replicas; commands on every node.

use std::collections::HashMap;

use super::{admin, NodeInfo, TestCluster, TestkitError};

impl TestCluster {
    /// The node that serves `slot` now, as an up node reports it (CLUSTER SLOTS).
    ///
    /// ```no_run
    /// # async fn demo(cluster: &cluster_rwlock_testkit::TestCluster) -> Result<(), cluster_rwlock_testkit::TestkitError> {
    /// let node = cluster.master_for_slot(1234).await?;
    /// # Ok(()) }
    /// ```
    pub async fn master_for_slot(&self, slot: u16) -> Result<NodeInfo, TestkitError> {
        let by_port: HashMap<u16, NodeInfo> = self
            .nodes
            .iter()
            .map(|n| (n.info.port, n.info.clone()))
            .collect();
        for node in &self.nodes {
            if *node.down.lock().unwrap_or_else(|e| e.into_inner()) {
                continue;
            }
            if let Ok(ranges) = admin::slot_ranges(node.info.port).await {
                if let Some((_, _, port)) =
                    ranges.iter().find(|(a, b, _)| (*a..=*b).contains(&slot))
                {
                    return by_port.get(port).cloned().ok_or_else(|| {
                        TestkitError::Command(format!("slot {slot} served by unknown port {port}"))
                    });
                }
            }
        }
        Err(TestkitError::Command(format!(
            "no node reports an owner for slot {slot}"
        )))
    }

    /// Every key matching `pattern` (a KEYS glob) on the masters that are up.
    ///
    /// ```no_run
    /// # async fn demo(cluster: &cluster_rwlock_testkit::TestCluster) -> Result<(), cluster_rwlock_testkit::TestkitError> {
    /// let left = cluster.keys_matching("rwlock:*").await?;
    /// # Ok(()) }
    /// ```
    pub async fn keys_matching(&self, pattern: &str) -> Result<Vec<String>, TestkitError> {
        let mut out: Vec<String> = self
            .keys_on_masters(pattern)
            .await?
            .into_iter()
            .flat_map(|(_, keys)| keys)
            .collect();
        out.sort();
        Ok(out)
    }

    /// The plain ports of the nodes that are up and say they are masters.
    async fn master_ports(&self) -> Result<Vec<u16>, TestkitError> {
        let mut out = Vec::new();
        for node in &self.nodes {
            if *node.down.lock().unwrap_or_else(|e| e.into_inner()) {
                continue;
            }
            let lines = admin::cluster_nodes(node.info.port).await?;
            if lines
                .iter()
                .any(|l| l.flags.contains("myself") && l.is_master())
            {
                out.push(node.info.port);
            }
        }
        Ok(out)
    }

    /// The keys matching `pattern` on each master that is up, with its port.
    async fn keys_on_masters(
        &self,
        pattern: &str,
    ) -> Result<Vec<(u16, Vec<String>)>, TestkitError> {
        let mut out = Vec::new();
        for port in self.master_ports().await? {
            let reply = admin::call(port, "KEYS", vec![pattern.to_string()]).await?;
            if let fred::prelude::Value::Array(keys) = reply {
                let keys = keys.into_iter().filter_map(|k| k.into_string()).collect();
                out.push((port, keys));
            }
        }
        Ok(out)
    }

    /// The lock keys matching `pattern` on the masters that still record a hold, a queued
    /// writer or a waiting reader: every key but the tombstones a free lock leaves for a
    /// while (a hash with its summary `s` alone, saying nobody holds, which remembers the
    /// last fence, and the
    /// fence of its last forced release `x` when there was one).
    ///
    /// ```no_run
    /// # async fn demo(cluster: &cluster_rwlock_testkit::TestCluster) -> Result<(), cluster_rwlock_testkit::TestkitError> {
    /// assert!(cluster.held_keys_matching("rwlock:*").await?.is_empty());
    /// # Ok(()) }
    /// ```
    pub async fn held_keys_matching(&self, pattern: &str) -> Result<Vec<String>, TestkitError> {
        let mut out = Vec::new();
        for (port, keys) in self.keys_on_masters(pattern).await? {
            for key in keys {
                let fields = admin::call(port, "HKEYS", vec![key.clone()]).await;
                let summary_only = match &fields {
                    // no fields: the key expired between KEYS and HKEYS (HKEYS answers
                    // an empty list for a missing key), so it records no hold
                    Ok(fred::prelude::Value::Array(f)) => f
                        .iter()
                        .all(|f| matches!(f.as_str().as_deref(), Some("s" | "x"))),
                    Ok(fred::prelude::Value::Null) => true,
                    // not a hash (WRONGTYPE): reported
                    _ => false,
                };
                // the summary alone may still carry a lone hold (layout 4: one owner
                // with one hold has no field of its own): a tombstone says 0 holders
                let tombstone = summary_only
                    && match admin::call(port, "HGET", vec![key.clone(), "s".into()]).await {
                        Ok(fred::prelude::Value::Null) => true,
                        Ok(v) => v
                            .as_string()
                            .is_some_and(|s| s.split(' ').nth(2) == Some("0")),
                        Err(_) => false,
                    };
                if !tombstone {
                    out.push(key);
                }
            }
        }
        out.sort();
        Ok(out)
    }

    /// Runs a command on every master that is up (e.g. `FUNCTION DELETE`, which a replica
    /// refuses): each master's reply, by port.
    ///
    /// ```no_run
    /// # async fn demo(cluster: &cluster_rwlock_testkit::TestCluster) -> Result<(), cluster_rwlock_testkit::TestkitError> {
    /// let replies = cluster.command_on_masters("FUNCTION", &["LIST"]).await?;
    /// assert_eq!(replies.len(), 3);
    /// # Ok(()) }
    /// ```
    pub async fn command_on_masters(
        &self,
        cmd: &'static str,
        args: &[&str],
    ) -> Result<Vec<(u16, Result<fred::prelude::Value, TestkitError>)>, TestkitError> {
        let mut out = Vec::new();
        for port in self.master_ports().await? {
            let args = args.iter().map(|a| a.to_string()).collect();
            out.push((port, admin::call(port, cmd, args).await));
        }
        Ok(out)
    }

    /// Runs a command on every node that is up (e.g. `ACL SETUSER`, which is per node).
    ///
    /// ```no_run
    /// # async fn demo(cluster: &cluster_rwlock_testkit::TestCluster) -> Result<(), cluster_rwlock_testkit::TestkitError> {
    /// cluster.command_on_all("ACL", &["SETUSER", "app", "on", ">pw", "~*", "&*", "+@all"]).await?;
    /// # Ok(()) }
    /// ```
    pub async fn command_on_all(
        &self,
        cmd: &'static str,
        args: &[&str],
    ) -> Result<(), TestkitError> {
        for node in &self.nodes {
            if *node.down.lock().unwrap_or_else(|e| e.into_inner()) {
                continue;
            }
            admin::call(
                node.info.port,
                cmd,
                args.iter().map(|a| a.to_string()).collect(),
            )
            .await?;
        }
        Ok(())
    }

    /// The replica that follows node `index` now.
    ///
    /// ```no_run
    /// # async fn demo(cluster: &cluster_rwlock_testkit::TestCluster) -> Result<(), cluster_rwlock_testkit::TestkitError> {
    /// let replica = cluster.replica_of(0).await?;
    /// # Ok(()) }
    /// ```
    pub async fn replica_of(&self, index: usize) -> Result<NodeInfo, TestkitError> {
        let port = self.node(index)?.info.port;
        let lines = admin::cluster_nodes(port).await?;
        let id = lines
            .iter()
            .find(|l| l.flags.contains("myself"))
            .map(|l| l.id.clone())
            .ok_or_else(|| TestkitError::Command(format!("node {port} does not list itself")))?;
        let replica = lines
            .iter()
            .find(|l| l.master_id == id && !l.is_failed())
            .ok_or_else(|| TestkitError::Command(format!("node {port} has no replica")))?;
        self.nodes
            .iter()
            .find(|n| n.info.port == replica.port)
            .map(|n| n.info.clone())
            .ok_or_else(|| TestkitError::Command(format!("unknown replica port {}", replica.port)))
    }
}
