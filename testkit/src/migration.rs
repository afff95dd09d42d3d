//! Slot migrations, whole or left half done: a slot MIGRATING on its master and IMPORTING
//! on another, some of its keys moved, then finished or rolled back.

use super::{admin, NodeInfo, TestCluster, TestkitError};

/// How many keys one `MIGRATE` moves at most.
const BATCH: usize = 100;

/// A slot migration under way, as [`TestCluster::start_migration`] left it: the slot is
/// `MIGRATING` on `from`, which still serves it, and `IMPORTING` on `to`. A client that
/// asks `from` for a key it no longer has is redirected to `to` with `ASK`; a command on
/// several keys of the slot, some moved and some not, gets `TRYAGAIN`.
///
/// ```no_run
/// # async fn demo(cluster: &cluster_rwlock_testkit::TestCluster) -> Result<(), cluster_rwlock_testkit::TestkitError> {
/// let migration = cluster.start_migration(42, 1).await?;
/// println!("slot {} from node {} to node {}", migration.slot, migration.from, migration.to);
/// if !cluster.roll_back_migration(&migration).await? {
///     cluster.finish_migration(&migration).await?;
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Migration {
    /// The slot.
    pub slot: u16,
    /// The index of the node that served the slot when the migration started (the slot is
    /// `MIGRATING` there).
    pub from: usize,
    /// The index of the node the slot moves to (`IMPORTING` there).
    pub to: usize,
    /// How many keys of the slot `from` had when the migration started.
    pub keys: usize,
    /// The target's node id, which the slot is assigned to when the migration finishes.
    to_id: String,
}

/// The keys of `slot` that the node at `port` has (up to `count`).
async fn keys_in_slot(port: u16, slot: u16, count: usize) -> Result<Vec<String>, TestkitError> {
    let reply = admin::call(
        port,
        "CLUSTER",
        vec!["GETKEYSINSLOT".into(), slot.to_string(), count.to_string()],
    )
    .await?;
    Ok(match reply {
        fred::prelude::Value::Array(k) => k.into_iter().filter_map(|k| k.into_string()).collect(),
        _ => Vec::new(),
    })
}

/// `MIGRATE`s `keys` from the node at `port` to the node `to` (its TLS port on a TLS
/// cluster: with `tls-cluster`, a node MIGRATEs over TLS).
async fn migrate(port: u16, to: &NodeInfo, keys: Vec<String>) -> Result<(), TestkitError> {
    if keys.is_empty() {
        return Ok(());
    }
    let mut args = vec![
        "127.0.0.1".to_string(),
        to.tls_port.unwrap_or(to.port).to_string(),
        String::new(),
        "0".into(),
        "5000".into(),
        "KEYS".into(),
    ];
    args.extend(keys);
    admin::call(port, "MIGRATE", args).await?;
    Ok(())
}

impl TestCluster {
    /// Starts moving `slot` from the master that serves it to the master `to`, as a
    /// resharding does, and stops there: `CLUSTER SETSLOT <slot> IMPORTING` on `to`,
    /// `MIGRATING` on the slot's master, no key moved yet
    /// ([`migrate_keys`](Self::migrate_keys) moves some). The slot stays in that state
    /// until [`finish_migration`](Self::finish_migration) or
    /// [`roll_back_migration`](Self::roll_back_migration) ends it.
    ///
    /// [`TestkitError::Command`] when `to` serves the slot already, or a node refused
    /// (then neither state is left behind).
    ///
    /// ```no_run
    /// # async fn demo(cluster: &cluster_rwlock_testkit::TestCluster) -> Result<(), cluster_rwlock_testkit::TestkitError> {
    /// let migration = cluster.start_migration(42, 1).await?;
    /// cluster.migrate_keys(&migration, 1).await?; // one key moved, the others not
    /// cluster.finish_migration(&migration).await?;
    /// # Ok(()) }
    /// ```
    pub async fn start_migration(&self, slot: u16, to: usize) -> Result<Migration, TestkitError> {
        let from = self.master_for_slot(slot).await?;
        let to = self.node(to)?.info.clone();
        if from.port == to.port {
            return Err(TestkitError::Command(format!(
                "node {} serves slot {slot} already",
                to.index
            )));
        }
        let id = |port: u16| async move { admin::text(port, "CLUSTER", &["MYID"]).await };
        let (from_id, to_id) = (id(from.port).await?, id(to.port).await?);
        let s = slot.to_string();
        admin::text(to.port, "CLUSTER", &["SETSLOT", &s, "IMPORTING", &from_id]).await?;
        if let Err(e) =
            admin::text(from.port, "CLUSTER", &["SETSLOT", &s, "MIGRATING", &to_id]).await
        {
            let _ = admin::text(to.port, "CLUSTER", &["SETSLOT", &s, "STABLE"]).await;
            return Err(e);
        }
        let keys = admin::call(
            from.port,
            "CLUSTER",
            vec!["COUNTKEYSINSLOT".into(), s.clone()],
        )
        .await?
        .as_u64()
        .unwrap_or(0) as usize;
        Ok(Migration {
            slot,
            from: from.index,
            to: to.index,
            keys,
            to_id,
        })
    }

    /// Moves up to `count` of the keys that the source of `migration` still has to its
    /// target (`MIGRATE`), and returns how many it moved.
    ///
    /// ```no_run
    /// # async fn demo(cluster: &cluster_rwlock_testkit::TestCluster) -> Result<(), cluster_rwlock_testkit::TestkitError> {
    /// let migration = cluster.start_migration(42, 1).await?;
    /// let moved = cluster.migrate_keys(&migration, migration.keys / 2).await?;
    /// # Ok(()) }
    /// ```
    pub async fn migrate_keys(
        &self,
        migration: &Migration,
        count: usize,
    ) -> Result<usize, TestkitError> {
        let from = self.node(migration.from)?.info.port;
        let to = self.node(migration.to)?.info.clone();
        let mut moved = 0;
        while moved < count {
            let keys = keys_in_slot(from, migration.slot, (count - moved).min(BATCH)).await?;
            if keys.is_empty() {
                break;
            }
            let n = keys.len();
            migrate(from, &to, keys).await?;
            moved += n;
        }
        Ok(moved)
    }

    /// Finishes `migration`: the keys its source still has move to its target, and every
    /// master that is up assigns the slot to the target (`CLUSTER SETSLOT <slot> NODE`),
    /// which ends the `MIGRATING` and `IMPORTING` states.
    ///
    /// ```no_run
    /// # async fn demo(cluster: &cluster_rwlock_testkit::TestCluster) -> Result<(), cluster_rwlock_testkit::TestkitError> {
    /// let migration = cluster.start_migration(42, 1).await?;
    /// cluster.finish_migration(&migration).await?;
    /// assert_eq!(cluster.master_for_slot(42).await?.index, 1);
    /// # Ok(()) }
    /// ```
    pub async fn finish_migration(&self, migration: &Migration) -> Result<(), TestkitError> {
        self.migrate_keys(migration, usize::MAX).await?;
        let s = migration.slot.to_string();
        for node in &self.nodes {
            if *node.down.lock().unwrap_or_else(|e| e.into_inner()) {
                continue;
            }
            let lines = admin::cluster_nodes(node.info.port).await?;
            if lines
                .iter()
                .any(|l| l.flags.contains("myself") && l.is_master())
            {
                let to_id = migration.to_id.as_str();
                admin::text(node.info.port, "CLUSTER", &["SETSLOT", &s, "NODE", to_id]).await?;
            }
        }
        Ok(())
    }

    /// Rolls `migration` back, if nothing of the slot is on its target yet: the target
    /// ends its `IMPORTING` state, then the source its `MIGRATING` state (`CLUSTER SETSLOT
    /// <slot> STABLE`), and the source serves the slot as before. `Ok(false)`, and the
    /// migration left as it was, when the target has keys of the slot (moved there, or
    /// made there by clients sent with `ASK`): the source, still `MIGRATING`, would not
    /// take them back (it answers `ASK` for a key it lacks), and once `STABLE` it would
    /// serve the slot without them until they were back, so such a migration is finished
    /// instead.
    ///
    /// ```no_run
    /// # async fn demo(cluster: &cluster_rwlock_testkit::TestCluster) -> Result<(), cluster_rwlock_testkit::TestkitError> {
    /// let migration = cluster.start_migration(42, 1).await?;
    /// if cluster.roll_back_migration(&migration).await? {
    ///     assert_eq!(cluster.master_for_slot(42).await?.index, migration.from);
    /// } else {
    ///     cluster.finish_migration(&migration).await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn roll_back_migration(&self, migration: &Migration) -> Result<bool, TestkitError> {
        let from = self.node(migration.from)?.info.port;
        let to = self.node(migration.to)?.info.port;
        let s = migration.slot.to_string();
        if !keys_in_slot(to, migration.slot, 1).await?.is_empty() {
            return Ok(false);
        }
        admin::text(to, "CLUSTER", &["SETSLOT", &s, "STABLE"]).await?;
        // a key made there by a client sent with ASK just before: importing again
        if !keys_in_slot(to, migration.slot, 1).await?.is_empty() {
            let from_id = admin::text(from, "CLUSTER", &["MYID"]).await?;
            admin::text(to, "CLUSTER", &["SETSLOT", &s, "IMPORTING", &from_id]).await?;
            return Ok(false);
        }
        admin::text(from, "CLUSTER", &["SETSLOT", &s, "STABLE"]).await?;
        Ok(true)
    }
}
