//! Client configuration: [`LockConfig`], [`Durability`], and their defaults and limits.

use std::time::Duration;

use crate::error::{Error, Result};
use fred::prelude::ServerConfig;

mod durability; // `Durability`: how a grant or a renewal is confirmed
mod redis_config; // URLs and their servers

pub use durability::{Durability, DEFAULT_DURABILITY};

#[cfg(test)]
use redis_config::check_scheme;
use redis_config::parse_url;
pub(crate) use redis_config::redact;

/// Default lease of a hold: 30 s, renewed every 10 s while held.
///
/// ```
/// assert_eq!(cluster_rwlock::config::DEFAULT_LEASE.as_secs(), 30);
/// ```
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);
/// The longest lease: a day (longer ones would overflow the server's expiry arithmetic
/// long before they made sense for a lock).
///
/// ```
/// assert_eq!(cluster_rwlock::config::MAX_LEASE.as_secs(), 86_400);
/// ```
pub const MAX_LEASE: Duration = Duration::from_secs(86_400);
/// Default key prefix.
///
/// ```
/// assert_eq!(cluster_rwlock::config::DEFAULT_PREFIX, "rwlock");
/// ```
pub const DEFAULT_PREFIX: &str = "rwlock";

/// How to reach Redis and how locks behave. Built with [`LockConfig::cluster`] or
/// [`LockConfig::from_url`], then refined with the builder methods.
///
/// One naming rule: a setting's name sets it (`lease(..)`) and `get_` and that name reads
/// the value in force (`get_lease()`), as in `tokio_postgres::Config`.
///
/// ```
/// use std::time::Duration;
/// use cluster_rwlock::LockConfig;
///
/// let config = LockConfig::cluster(["redis://127.0.0.1:7000", "redis://127.0.0.1:7001"])
///     .prefix("locks")
///     .lease(Duration::from_secs(10))
///     .notifications(true)
///     .clock_margin(Duration::from_secs(2));
/// assert_eq!(config.get_lease(), Duration::from_secs(10));
/// ```
#[derive(Clone)]
pub struct LockConfig {
    pub(crate) urls: Vec<String>,
    pub(crate) topology: Topology,
    pub(crate) prefix: String,
    pub(crate) lease: Duration,
    pub(crate) notifications: bool,
    pub(crate) durability: Durability,
    pub(crate) clock_margin: Option<Duration>,
    pub(crate) command_timeout: Duration,
    pub(crate) retry_interval: Duration,
    pub(crate) connections: usize,
    pub(crate) metrics_lock_names: bool,
    pub(crate) client_name: String,
    #[cfg(feature = "tls")]
    pub(crate) tls: crate::tls::TlsSettings,
}

impl std::fmt::Debug for LockConfig {
    // URLs without their passwords; the TLS key never
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let urls: Vec<String> = self.urls.iter().map(|u| redact(u)).collect();
        let mut d = f.debug_struct("LockConfig");
        d.field("urls", &urls)
            .field("topology", &self.topology)
            .field("client_name", &self.client_name)
            .field("prefix", &self.prefix)
            .field("lease", &self.lease)
            .field("notifications", &self.notifications)
            .field("durability", &self.durability)
            .field("clock_margin", &self.clock_margin)
            .field("command_timeout", &self.command_timeout)
            .field("retry_interval", &self.retry_interval)
            .field("connections", &self.connections)
            .field("metrics_lock_names", &self.metrics_lock_names);
        #[cfg(feature = "tls")]
        d.field("tls", &self.tls);
        d.finish()
    }
}

/// What the URLs name: a cluster, one node, or whatever the first node says it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Topology {
    /// A cluster (`LockConfig::cluster`, `redis-cluster://`).
    Cluster,
    /// One node that is not a cluster, or a proxy that hides one
    /// (`LockConfig::single_node`).
    Single,
    /// `redis://` of `from_url`: a cluster when the node runs in cluster mode (`INFO
    /// cluster`), else one node; settled at `connect`.
    Detect,
}

impl LockConfig {
    /// A Redis Cluster reached through these seed nodes (`redis://host:port`, with
    /// optional `user:password@`; the first URL's credentials are used).
    pub fn cluster<I, S>(seeds: I) -> LockConfig
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        LockConfig::new(
            seeds.into_iter().map(Into::into).collect(),
            Topology::Cluster,
        )
    }

    /// One URL, as users write it: `redis-cluster://host:port` is a cluster;
    /// `redis://host:port` is a cluster when that node runs in cluster mode (asked at
    /// [`connect`](crate::LockClient::connect) with `INFO cluster`: any node of a cluster
    /// is a seed), else a single node. Fails on a malformed URL.
    ///
    /// ```
    /// # use cluster_rwlock::LockConfig;
    /// assert!(LockConfig::from_url("redis://127.0.0.1:7000").is_ok()); // either, asked at connect
    /// assert!(LockConfig::from_url("redis-cluster://127.0.0.1:7000").is_ok());
    /// assert!(LockConfig::from_url("http://nope").is_err());
    /// ```
    pub fn from_url(url: &str) -> Result<LockConfig> {
        let config = parse_url(url)?;
        let topology = match config.server {
            ServerConfig::Clustered { .. } => Topology::Cluster,
            _ => Topology::Detect,
        };
        Ok(LockConfig::new(vec![url.to_string()], topology))
    }

    /// One node that is not a cluster (a standalone Redis, or a proxy that hides a
    /// cluster), whatever it says: nothing is detected. A cluster node reached this way
    /// answers `MOVED` for the slots of other masters, which fails the call with
    /// [`Error::InvalidConfig`] saying to use [`cluster`](Self::cluster) or
    /// [`from_url`](Self::from_url).
    ///
    /// ```
    /// # use cluster_rwlock::LockConfig;
    /// assert!(LockConfig::single_node("redis://127.0.0.1:6379").is_ok());
    /// assert!(LockConfig::single_node("redis-cluster://127.0.0.1:7000").is_err());
    /// ```
    pub fn single_node(url: &str) -> Result<LockConfig> {
        let config = parse_url(url)?;
        if matches!(config.server, ServerConfig::Clustered { .. }) {
            return Err(Error::InvalidConfig(format!(
                "{}: a cluster URL for a single node; use LockConfig::from_url",
                redact(url)
            )));
        }
        Ok(LockConfig::new(vec![url.to_string()], Topology::Single))
    }

    fn new(urls: Vec<String>, topology: Topology) -> LockConfig {
        LockConfig {
            urls,
            topology,
            prefix: DEFAULT_PREFIX.to_string(),
            lease: DEFAULT_LEASE,
            notifications: true,
            durability: DEFAULT_DURABILITY,
            clock_margin: None,
            command_timeout: Duration::from_secs(5),
            retry_interval: Duration::from_millis(50),
            connections: 1,
            metrics_lock_names: false,
            client_name: default_client_name(),
            #[cfg(feature = "tls")]
            tls: crate::tls::TlsSettings::default(),
        }
    }

    /// With the cargo feature `metrics`: label the per-mode metrics with the lock name too
    /// (default off: the number of names is unbounded, and so would the number of series
    /// be). Use it only with a small, fixed set of names.
    ///
    /// ```
    /// let config = cluster_rwlock::LockConfig::cluster(["redis://127.0.0.1:7000"])
    ///     .metrics_lock_names(true);
    /// ```
    pub fn metrics_lock_names(mut self, on: bool) -> LockConfig {
        self.metrics_lock_names = on;
        self
    }

    /// A readable name for this client's holds (default `<pid>@<host>`): every owner
    /// token this client makes starts with it (`<name>/<random>:<n>`), so that
    /// [`RwLock::state`](crate::RwLock::state) ([`Holder::client_name`](crate::operator::Holder::client_name)),
    /// the CLI's `inspect`, `list` and `watch`, and the traces say who holds a lock. It
    /// changes nothing about ownership: two clients of one name still exclude each other
    /// (for holds shared on purpose, see [`RwLock::with_owner`](crate::RwLock::with_owner)).
    /// 1 to 64 bytes, without whitespace, control characters or `/` (operators read
    /// it on their terminals). Checked with the rest of the configuration, at
    /// [`LockClient::connect`](crate::LockClient::connect) ([`Error::InvalidConfig`]).
    ///
    /// ```
    /// use cluster_rwlock::{Error, LockClient, LockConfig};
    /// # async fn demo() {
    /// let config = LockConfig::cluster(["redis://127.0.0.1:7000"]).client_name("publisher@host-a");
    /// assert_eq!(config.get_client_name(), "publisher@host-a");
    /// let bad = LockConfig::cluster(["redis://127.0.0.1:7000"]).client_name("op\x1b[2Kname");
    /// assert!(matches!(LockClient::connect(bad).await, Err(Error::InvalidConfig(_))));
    /// # }
    /// ```
    pub fn client_name(mut self, name: impl Into<String>) -> LockConfig {
        self.client_name = name.into();
        self
    }

    /// The client name (see [`client_name`](Self::client_name)).
    ///
    /// ```
    /// let config = cluster_rwlock::LockConfig::cluster(["redis://127.0.0.1:7000"]);
    /// assert!(config.get_client_name().contains('@')); // <pid>@<host>
    /// ```
    pub fn get_client_name(&self) -> &str {
        &self.client_name
    }

    /// With the cargo feature `tls`: trust these certificate authorities (PEM, one or
    /// more certificates) for `rediss://` instead of the system's roots. Server
    /// certificates are checked against the host name or IP address the client connects
    /// to: the seed's, then the addresses the cluster announces (`CLUSTER NODES`), so
    /// node certificates must name those addresses (IP SANs when the cluster announces
    /// IPs, as most do).
    ///
    /// ```no_run
    /// # fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// let ca = std::fs::read("/etc/redis/ca.pem")?;
    /// let config = cluster_rwlock::LockConfig::from_url("rediss://10.0.0.5:6380")?.tls_ca_pem(ca);
    /// # Ok(()) }
    /// ```
    #[cfg(feature = "tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    pub fn tls_ca_pem(mut self, pem: impl Into<Vec<u8>>) -> LockConfig {
        self.tls.ca_pem = Some(pem.into());
        self
    }

    /// With the cargo feature `tls`: present this client certificate chain and key
    /// (PEM) to servers that ask for one (mutual TLS, `tls-auth-clients yes`). The key
    /// never shows in `Debug` or errors.
    ///
    /// ```no_run
    /// # fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// let config = cluster_rwlock::LockConfig::from_url("rediss://10.0.0.5:6380")?
    ///     .tls_client_auth(std::fs::read("client.pem")?, std::fs::read("client.key")?);
    /// # Ok(()) }
    /// ```
    #[cfg(feature = "tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    pub fn tls_client_auth(
        mut self,
        cert_pem: impl Into<Vec<u8>>,
        key_pem: impl Into<Vec<u8>>,
    ) -> LockConfig {
        self.tls.client = Some((cert_pem.into(), key_pem.into()));
        self
    }

    /// With the cargo feature `tls`: accept ANY server certificate. The link is still
    /// encrypted, but anyone in the path can read and change it. For tests against
    /// self-signed servers only; never in production.
    ///
    /// ```no_run
    /// # fn demo() -> cluster_rwlock::Result<()> {
    /// let config = cluster_rwlock::LockConfig::from_url("rediss://127.0.0.1:6380")?
    ///     .tls_skip_verification_for_tests_only();
    /// # Ok(()) }
    /// ```
    #[cfg(feature = "tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    pub fn tls_skip_verification_for_tests_only(mut self) -> LockConfig {
        self.tls.skip_verification = true;
        self
    }

    /// Key prefix (default `rwlock`); it may not contain `{` or `}`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use cluster_rwlock::LockConfig;
    /// let c = LockConfig::cluster(["redis://127.0.0.1:7000"]).prefix("locks");
    /// assert_eq!(c.get_prefix(), "locks");
    /// ```
    pub fn prefix(mut self, prefix: impl Into<String>) -> LockConfig {
        self.prefix = prefix.into();
        self
    }

    /// Lease of every hold (default 30 s). Holds are renewed every lease/3 while held; a
    /// holder that stops renewing (crash, partition) loses the lock after the lease.
    /// At least 30 ms.
    ///
    /// ```
    /// use std::time::Duration;
    /// use cluster_rwlock::LockConfig;
    /// let c = LockConfig::cluster(["redis://127.0.0.1:7000"]).lease(Duration::from_secs(10));
    /// assert_eq!(c.get_lease(), Duration::from_secs(10));
    /// ```
    pub fn lease(mut self, lease: Duration) -> LockConfig {
        self.lease = lease;
        self
    }

    /// Wake waiters with pub/sub release messages (default `true`); `false` waits by
    /// timed retries only.
    ///
    /// ```
    /// use std::time::Duration;
    /// use cluster_rwlock::LockConfig;
    /// let c = LockConfig::cluster(["redis://127.0.0.1:7000"]).notifications(false);
    /// ```
    pub fn notifications(mut self, on: bool) -> LockConfig {
        self.notifications = on;
        self
    }

    /// How grants and renewals are confirmed (default [`DEFAULT_DURABILITY`]: by the
    /// replicas that could be promoted; see [`Durability`]).
    ///
    /// ```
    /// use cluster_rwlock::{Durability, LockConfig};
    /// let c = LockConfig::cluster(["redis://127.0.0.1:7000"]).durability(Durability::MasterOnly);
    /// ```
    pub fn durability(mut self, durability: Durability) -> LockConfig {
        self.durability = durability;
        self
    }

    /// How long before its lease ends by the holder's own clock a hold counts as lost
    /// (default: a quarter of the lease). The holder's lease is counted from when the
    /// request whose grant or renewal was last confirmed was SENT; it ends `margin`
    /// before `sent + lease`. The margin covers what the holder cannot measure: the
    /// server clocks' drift and steps, and a replica promoted with a clock ahead of its
    /// old master's (every deadline is in server time). At most half the lease.
    ///
    /// The same margin is taken off the belief in a grant or renewal that a silent
    /// replica did not confirm and the other masters vouched for (see the crate docs, "A
    /// silent replica"): such a hold is believed until the replica could first be
    /// promoted less the margin, which needs a margin below the cluster's node timeout
    /// less the time since the masters last heard each other (at most about half the
    /// node timeout). With Redis's default node timeout (15 s) the default margin of a
    /// 30 s lease (7.5 s) leaves about 6 s; on a cluster with a 2 s node timeout, a
    /// margin of 0.5 s leaves about 1 s.
    ///
    /// ```
    /// use std::time::Duration;
    /// use cluster_rwlock::LockConfig;
    /// let c = LockConfig::cluster(["redis://127.0.0.1:7000"]).clock_margin(Duration::from_secs(1));
    /// assert_eq!(c.get_clock_margin(), Duration::from_secs(1));
    /// assert_eq!(LockConfig::cluster(["redis://127.0.0.1:7000"]).get_clock_margin(), Duration::from_millis(7500));
    /// ```
    pub fn clock_margin(mut self, margin: Duration) -> LockConfig {
        self.clock_margin = Some(margin);
        self
    }

    /// Checks that holds of lease `lease` may be taken under this configuration: at
    /// least 30 ms, at most [`MAX_LEASE`], and the clock margin at most half of it.
    pub(crate) fn check_lease(&self, lease: Duration) -> Result<()> {
        if lease < Duration::from_millis(30) {
            return Err(Error::InvalidConfig(format!(
                "the lease is {lease:?}; it must be at least 30 ms"
            )));
        }
        if lease > MAX_LEASE {
            return Err(Error::InvalidConfig(format!(
                "the lease is {lease:?}; it must be at most {MAX_LEASE:?}"
            )));
        }
        let margin = margin_for(self.clock_margin, lease);
        if margin > lease / 2 {
            return Err(Error::InvalidConfig(format!(
                "the clock margin is {margin:?}; it must be at most half the lease ({lease:?})"
            )));
        }
        Ok(())
    }

    /// The clock margin in force (see [`clock_margin`](Self::clock_margin)).
    ///
    /// ```
    /// let c = cluster_rwlock::LockConfig::cluster(["redis://127.0.0.1:7000"]);
    /// assert_eq!(c.get_clock_margin(), c.get_lease() / 4);
    /// ```
    pub fn get_clock_margin(&self) -> Duration {
        margin_for(self.clock_margin, self.lease)
    }

    /// The confirmation in force (see [`durability`](Self::durability)).
    ///
    /// ```
    /// let c = cluster_rwlock::LockConfig::cluster(["redis://127.0.0.1:7000"]);
    /// assert_eq!(c.get_durability(), cluster_rwlock::config::DEFAULT_DURABILITY);
    /// ```
    pub fn get_durability(&self) -> Durability {
        self.durability
    }

    /// How often a waiter tries again when it cannot be woken by a release message
    /// (notifications off, or the subscription failed). Default 50 ms.
    ///
    /// ```
    /// use std::time::Duration;
    /// use cluster_rwlock::LockConfig;
    /// let c = LockConfig::cluster(["redis://127.0.0.1:7000"]).retry_interval(Duration::from_millis(20));
    /// ```
    pub fn retry_interval(mut self, interval: Duration) -> LockConfig {
        self.retry_interval = interval;
        self
    }

    /// Command connections per node (default 1; each node also gets one subscriber
    /// connection when a lock of its slots has waiters). Each lock uses one, chosen by its
    /// slot. One is the default because confirmation is shared per connection: the calls
    /// that wait while a batch is on the wire go in the next batch with ONE `WAIT`, and one
    /// connection gathers the most calls per `WAIT` (more cycles per second and less
    /// server CPU per cycle than two: the benchmarks' B1 shows it). A `WAIT` that is slow is slow on every connection to that master, as they all
    /// wait for the same replicas. More than one lets a client that is CPU-bound in the
    /// client library use more than one core.
    ///
    /// ```
    /// use cluster_rwlock::LockConfig;
    /// let c = LockConfig::cluster(["redis://127.0.0.1:7000"]).connections(2);
    /// ```
    pub fn connections(mut self, n: usize) -> LockConfig {
        self.connections = n;
        self
    }

    /// How long one call to Redis may take (default 5 s), retries included: a call is sent
    /// again when its node times out, fails over or redirects it, until this much time has
    /// passed (a release is followed for a lease, at least this long). Also the timeout
    /// of connecting to a node.
    ///
    /// ```
    /// use std::time::Duration;
    /// use cluster_rwlock::LockConfig;
    /// let c = LockConfig::cluster(["redis://127.0.0.1:7000"]).command_timeout(Duration::from_secs(1));
    /// ```
    pub fn command_timeout(mut self, timeout: Duration) -> LockConfig {
        self.command_timeout = timeout;
        self
    }

    /// The lease set.
    ///
    /// ```
    /// use std::time::Duration;
    /// use cluster_rwlock::LockConfig;
    /// assert_eq!(LockConfig::cluster(["redis://127.0.0.1:7000"]).get_lease(), cluster_rwlock::config::DEFAULT_LEASE);
    /// ```
    pub fn get_lease(&self) -> Duration {
        self.lease
    }

    /// The key prefix set.
    ///
    /// ```
    /// use std::time::Duration;
    /// use cluster_rwlock::LockConfig;
    /// assert_eq!(LockConfig::cluster(["redis://127.0.0.1:7000"]).get_prefix(), "rwlock");
    /// ```
    pub fn get_prefix(&self) -> &str {
        &self.prefix
    }

    /// Whether waiters are woken by release messages (see
    /// [`notifications`](Self::notifications)).
    ///
    /// ```
    /// let c = cluster_rwlock::LockConfig::cluster(["redis://127.0.0.1:7000"]);
    /// assert!(c.get_notifications());
    /// ```
    pub fn get_notifications(&self) -> bool {
        self.notifications
    }

    /// The retry interval set (see [`retry_interval`](Self::retry_interval)).
    ///
    /// ```
    /// use std::time::Duration;
    /// let c = cluster_rwlock::LockConfig::cluster(["redis://127.0.0.1:7000"]);
    /// assert_eq!(c.get_retry_interval(), Duration::from_millis(50));
    /// ```
    pub fn get_retry_interval(&self) -> Duration {
        self.retry_interval
    }

    /// Command connections per node (see [`connections`](Self::connections)).
    ///
    /// ```
    /// let c = cluster_rwlock::LockConfig::cluster(["redis://127.0.0.1:7000"]).connections(1);
    /// assert_eq!(c.get_connections(), 1);
    /// ```
    pub fn get_connections(&self) -> usize {
        self.connections
    }

    /// The command timeout set (see [`command_timeout`](Self::command_timeout)).
    ///
    /// ```
    /// use std::time::Duration;
    /// let c = cluster_rwlock::LockConfig::cluster(["redis://127.0.0.1:7000"]);
    /// assert_eq!(c.get_command_timeout(), Duration::from_secs(5));
    /// ```
    pub fn get_command_timeout(&self) -> Duration {
        self.command_timeout
    }
}

/// `<pid>@<host>`: the host from the kernel (Linux) or the environment, else `host`.
fn default_client_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .or_else(|| std::env::var("COMPUTERNAME").ok())
        .map(|h| {
            h.trim()
                .replace(|c: char| c.is_whitespace() || c == '/', "-")
        })
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "host".into());
    let mut name = format!("{}@{host}", std::process::id());
    name.truncate(
        (0..=64.min(name.len()))
            .rev()
            .find(|&i| name.is_char_boundary(i))
            .unwrap_or(0),
    );
    name
}

/// A client name: 1 to 64 bytes, no whitespace (owner tokens are split on spaces), no
/// control character (it is shown on operators' terminals) and no `/` (it ends the name
/// in the token).
/// The clock margin of a hold of lease `lease`: the one set (`explicit`), or a quarter of
/// the lease (see [`LockConfig::clock_margin`]).
pub(crate) fn margin_for(explicit: Option<Duration>, lease: Duration) -> Duration {
    explicit.unwrap_or(lease / 4)
}

pub(crate) fn check_client_name(name: &str) -> Result<()> {
    let bad = |c: char| c.is_whitespace() || c.is_control() || c == '/';
    if name.is_empty() || name.len() > 64 || name.contains(bad) {
        return Err(Error::InvalidConfig(format!(
            "client name {name:?}: 1 to 64 bytes without whitespace, control characters or '/'"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests; // the unit tests of this module
