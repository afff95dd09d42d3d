//! The connection shared by every lock of a service.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use fred::prelude::*;

use crate::config::LockConfig;
use crate::error::{Error, Result};
use crate::keys;
use crate::lease::Keeper;
use crate::lock::RwLock;
use crate::notify::Notifier;
use crate::scripts::{Counters, Scripts};

pub(crate) struct Inner {
    /// The first connection: renewals, topology, diagnostics.
    pub client: Client,
    /// Every connection (the first included); each lock uses one, chosen by its slot, so
    /// that its commands stay in order and WAIT sees its writes.
    pub pool: Vec<Client>,
    pub notifier: Option<Arc<Notifier>>,
    pub scripts: Scripts,
    pub counters: Counters,
    pub keeper: Keeper,
    pub config: LockConfig,
    /// `spublish` on Redis 7+, `publish` before.
    pub publish: &'static str,
    pub runtime: tokio::runtime::Handle,
    next_hold: AtomicU64,
    closed: AtomicBool,
}

impl Inner {
    /// A hold id no other hold of this process has; the random start keeps ids apart
    /// from other processes that use the same explicit owner token.
    pub fn next_hold_id(&self) -> u64 {
        self.next_hold.fetch_add(1, Ordering::Relaxed)
    }

    /// The connection that carries the commands of locks in `slot`.
    pub fn client_for(&self, slot: u16) -> &Client {
        &self.pool[usize::from(slot) % self.pool.len()]
    }

    pub fn closed(&self) -> bool {
        self.closed.load(Ordering::Relaxed)
    }

    pub fn lease_ms(&self) -> u64 {
        self.config.lease.as_millis() as u64
    }
}

/// A connection to Redis (a cluster or one node) that hands out locks.
///
/// Cheap to clone; every clone shares the connections, the renewal task (one per client,
/// however many locks are held) and the release subscriptions (one per lock name with
/// local waiters).
///
/// ```no_run
/// # async fn demo() -> cluster_rwlock::Result<()> {
/// use cluster_rwlock::{LockClient, LockConfig};
///
/// let client = LockClient::connect(LockConfig::cluster(["redis://127.0.0.1:7000"])).await?;
/// let lock = client.rwlock("orders:42")?;
/// let guard = lock.write().await?;
/// println!("fence {}", guard.fence());
/// guard.release().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct LockClient {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for LockClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockClient")
            .field("prefix", &self.inner.config.prefix)
            .field("lease", &self.inner.config.lease)
            .finish_non_exhaustive()
    }
}

/// Counters of what a client has sent, for benchmarks and diagnostics.
///
/// ```no_run
/// # async fn demo(client: cluster_rwlock::LockClient) -> cluster_rwlock::Result<()> {
/// let s = client.stats();
/// println!("{:.2} attempts per renewal round", s.attempts as f64 / s.renewal_rounds.max(1) as f64);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ClientStats {
    /// Acquire attempts (acquire script executions).
    pub attempts: u64,
    /// Commands sent for locking (scripts, reloads, WAITs); a renewal pipeline counts once.
    pub round_trips: u64,
    /// Scripts loaded again after NOSCRIPT (e.g. on a promoted replica).
    pub script_reloads: u64,
    /// Renewal rounds run.
    pub renewal_rounds: u64,
    /// Lock renewals sent (one per lock per round, whatever the number of holds).
    pub renewals: u64,
    /// Holds currently renewed.
    pub held: u64,
    /// Release channels currently subscribed.
    pub subscriptions: u64,
}

impl LockClient {
    /// Connects, loads the lock scripts on every master, and (unless notifications are
    /// off) opens the subscriber connection used to wake waiters.
    ///
    /// Must be called inside a tokio runtime; background work (renewals, releases of
    /// dropped guards) runs on that runtime.
    ///
    /// ```no_run
    /// # async fn demo() -> cluster_rwlock::Result<()> {
    /// let config = cluster_rwlock::LockConfig::cluster(["redis://127.0.0.1:7000"]);
    /// let client = cluster_rwlock::LockClient::connect(config).await?;
    /// # Ok(()) }
    /// ```
    pub async fn connect(config: LockConfig) -> Result<LockClient> {
        let fred_config = config.to_fred()?;
        let timeout = config.command_timeout;
        let mut builder = Builder::from_config(fred_config);
        builder
            .with_connection_config(|c| {
                c.connection_timeout = timeout;
                c.internal_command_timeout = timeout;
                c.max_command_attempts = 3;
                // lock traffic is small request/reply: never wait for Nagle
                c.tcp.nodelay = Some(true);
                // a frozen node keeps its connections open but answers nothing: drop the
                // connection, so that the client reconnects and learns of a failover
                c.unresponsive = fred::types::config::UnresponsiveConfig {
                    max_timeout: Some(timeout),
                    interval: (timeout / 4).max(Duration::from_millis(10)),
                };
            })
            .with_performance_config(|p| p.default_command_timeout = timeout)
            .set_policy(ReconnectPolicy::new_exponential(0, 50, 2_000, 2));
        let mut pool = Vec::new();
        for _ in 0..config.connections.max(1) {
            let client = builder.build()?;
            // a first connection that fails is reported, not retried forever
            let connected =
                tokio::time::timeout(timeout + Duration::from_secs(1), client.init()).await;
            let failure = match connected {
                Ok(Ok(_)) => None,
                Ok(Err(e)) => Some(Error::from(e)),
                Err(_) => Some(Error::Redis(fred::error::Error::new(
                    fred::error::ErrorKind::Timeout,
                    "could not connect in time",
                ))),
            };
            pool.push(client);
            if let Some(e) = failure {
                for c in &pool {
                    let _ = c.quit().await;
                }
                return Err(e);
            }
        }
        let client = pool[0].clone();

        let info: String = client.info(Some(fred::types::InfoKind::Server)).await?;
        let major = info
            .lines()
            .find_map(|l| l.strip_prefix("redis_version:"))
            .and_then(|v| v.trim().split('.').next()?.parse::<u32>().ok())
            .unwrap_or(0);
        let sharded = major >= 7;
        let scripts = Scripts::new();
        scripts.load_all(&client).await?;

        let notifier = if config.notifications {
            let subscriber = builder.build_subscriber_client()?;
            subscriber.init().await?;
            Some(Notifier::start(subscriber, &client, sharded))
        } else {
            None
        };
        let start = u64::from_le_bytes(
            uuid::Uuid::new_v4().as_bytes()[..8]
                .try_into()
                .unwrap_or([1; 8]),
        ) >> 17;
        let inner = Inner {
            client,
            pool,
            notifier,
            scripts,
            counters: Counters::default(),
            keeper: Keeper::new(config.lease),
            publish: if sharded { "spublish" } else { "publish" },
            config,
            runtime: tokio::runtime::Handle::current(),
            next_hold: AtomicU64::new(start),
            closed: AtomicBool::new(false),
        };
        let inner = Arc::new(inner);
        if inner.config.clustered {
            watch_topology(Arc::downgrade(&inner));
        }
        Ok(LockClient { inner })
    }

    /// The lock `name`, with a fresh owner token (a UUID): two calls give two owners that
    /// contend; clones of one `RwLock` share its owner.
    ///
    /// Fails with [`Error::InvalidName`] when the name is empty, longer than 1,024 bytes,
    /// or starts with `}`.
    ///
    /// ```no_run
    /// # async fn demo(client: cluster_rwlock::LockClient) -> cluster_rwlock::Result<()> {
    /// let a = client.rwlock("orders:42")?;
    /// let b = client.rwlock("orders:42")?;
    /// assert_ne!(a.owner(), b.owner()); // two owners that contend
    /// # Ok(()) }
    /// ```
    pub fn rwlock(&self, name: &str) -> Result<RwLock> {
        keys::check_name(name)?;
        Ok(RwLock::new(
            self.inner.clone(),
            name,
            uuid::Uuid::new_v4().simple().to_string(),
        ))
    }

    /// The configuration in use.
    ///
    /// ```no_run
    /// # async fn demo(client: cluster_rwlock::LockClient) -> cluster_rwlock::Result<()> {
    /// println!("lease {:?}", client.config().lease_duration());
    /// # Ok(()) }
    /// ```
    pub fn config(&self) -> &LockConfig {
        &self.inner.config
    }

    /// The underlying fred client (for diagnostics; do not touch the lock keys with it).
    ///
    /// ```no_run
    /// # async fn demo(client: cluster_rwlock::LockClient) -> cluster_rwlock::Result<()> {
    /// use fred::prelude::*;
    /// let pong: String = client.redis().ping(None).await?;
    /// # Ok(()) }
    /// ```
    pub fn redis(&self) -> &Client {
        &self.inner.client
    }

    /// What this client has sent so far.
    ///
    /// ```no_run
    /// # async fn demo(client: cluster_rwlock::LockClient) -> cluster_rwlock::Result<()> {
    /// let s = client.stats();
    /// println!("{} attempts, {} holds renewed", s.attempts, s.held);
    /// # Ok(()) }
    /// ```
    pub fn stats(&self) -> ClientStats {
        let c = &self.inner.counters;
        ClientStats {
            attempts: c.attempts.load(Ordering::Relaxed),
            round_trips: c.round_trips.load(Ordering::Relaxed),
            script_reloads: c.reloads.load(Ordering::Relaxed),
            renewal_rounds: self.inner.keeper.rounds.load(Ordering::Relaxed),
            renewals: self.inner.keeper.renewals.load(Ordering::Relaxed),
            held: self.inner.keeper.held() as u64,
            subscriptions: self
                .inner
                .notifier
                .as_ref()
                .map_or(0, |n| n.channel_count()) as u64,
        }
    }

    /// Closes the connections and stops renewing. Holds still held expire after their
    /// lease; release them first.
    ///
    /// ```no_run
    /// # async fn demo(client: cluster_rwlock::LockClient) -> cluster_rwlock::Result<()> {
    /// client.close().await;
    /// # Ok(()) }
    /// ```
    pub async fn close(&self) {
        self.inner.closed.store(true, Ordering::Relaxed);
        if let Some(n) = &self.inner.notifier {
            n.quit().await;
        }
        for c in &self.inner.pool {
            let _ = c.quit().await;
        }
    }
}

/// How often the slot map is read. A failover or a slot move is then noticed within this
/// interval even when no command of this client failed: the routing is refreshed and the
/// shard subscriptions (which Redis drops when a slot moves) are made again.
const TOPOLOGY_WATCH: Duration = Duration::from_secs(1);

fn watch_topology(weak: std::sync::Weak<Inner>) {
    tokio::spawn(async move {
        let mut last: Option<Vec<crate::slot::SlotRange>> = None;
        let mut tick = tokio::time::interval(TOPOLOGY_WATCH);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let Some(inner) = weak.upgrade() else { return };
            if inner.closed() {
                return;
            }
            let read = tokio::time::timeout(TOPOLOGY_WATCH, slot_owners(&inner.client)).await;
            let Ok(Some(now)) = read else { continue };
            if last.as_ref().is_some_and(|l| *l != now) {
                let _ =
                    tokio::time::timeout(inner.config.command_timeout, inner.client.sync_cluster())
                        .await;
                if let Some(n) = &inner.notifier {
                    n.renew_subscriptions(true).await;
                }
            }
            last = Some(now);
        }
    });
}

/// The slot ranges and their masters, sorted.
async fn slot_owners(client: &Client) -> Option<Vec<crate::slot::SlotRange>> {
    use fred::types::{ClusterHash, CustomCommand};
    let cmd = CustomCommand::new_static("CLUSTER", ClusterHash::Random, false);
    let reply: Value = client.custom(cmd, vec!["SLOTS"]).await.ok()?;
    crate::slot::parse_cluster_slots(reply)
}
