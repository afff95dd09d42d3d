//! The connection shared by every lock of a service.

mod fenced; // fenced_set and fenced_get: the fenced store
mod multi; // multi: several locks taken together

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use fred::prelude::*;

use crate::book::Book;
use crate::cluster::Cluster;
use crate::config::{LockConfig, Topology};
use crate::error::{ClientResult, Error, Result};
use crate::keys;
use crate::lock::RwLock;
use crate::scripts::{Breaking, Counters, Scripts, Setup};
use crate::shared::Shared;

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
    pub(crate) inner: Arc<Shared>,
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
#[non_exhaustive]
pub struct ClientStats {
    /// Acquire attempts (calls of the acquire function).
    pub attempts: u64,
    /// Commands sent for locking (function calls, reloads, WAITs); a renewal pipeline
    /// counts once.
    pub round_trips: u64,
    /// Times the function library was loaded again on a master that lacked it (a node
    /// restarted without its data, a master added by a reshard, `FUNCTION DELETE`).
    pub library_reloads: u64,
    /// Renewal rounds run.
    pub renewal_rounds: u64,
    /// Lock renewals sent (one per lock per round, whatever the number of holds).
    pub renewals: u64,
    /// Confirmations sent: `WAIT`s, one per batch of calls to one connection (grants,
    /// renewals, guarded writes that came together share one).
    pub confirmations: u64,
    /// Holds currently renewed.
    pub held: u64,
    /// Release channels currently subscribed.
    pub subscriptions: u64,
    /// Times the other masters were asked how soon a master could be replaced, after a
    /// `WAIT` there fell short (a silent replica: see the crate docs, "A silent
    /// replica").
    pub vouches_asked: u64,
    /// Of those, the times they vouched for the master (its grants and renewals were
    /// then believed for a bounded time without the silent replica).
    pub vouched: u64,
}

/// What [`LockClient::force_release`] did.
///
/// ```no_run
/// # async fn demo(client: cluster_rwlock::LockClient) -> cluster_rwlock::Result<()> {
/// let r = client.force_release("stuck-job", Some("job-17")).await?;
/// assert!(r.holds_removed <= 1 || r.fence.is_some());
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ForceReleased {
    /// How many holds were removed (0: nothing was held, by that owner).
    pub holds_removed: u64,
    /// The fence the break raised: every later grant's fence is above it (when nothing
    /// was removed, the last fence; `None` when the lock remembers none).
    pub fence: Option<u64>,
    /// How many places in the queue were taken out (by
    /// [`LockClient::break_client`]; 0 otherwise).
    pub places_removed: u64,
}

/// Makes sure every master serves the lock's function library (see
/// [`Library::ensure`](crate::scripts::Library)), each within `within`: what each had.
async fn load_library(
    cluster: &Cluster,
    scripts: &Scripts,
    within: Duration,
) -> Result<Vec<(Arc<crate::cluster::node::Node>, Setup)>> {
    let mut found = Vec::new();
    for node in cluster.router.routes().nodes() {
        node.connected(within).await;
        let setup = tokio::time::timeout(within, scripts.load_all(node.client(0), &node.addr))
            .await
            .map_err(|_| {
                Error::Unavailable(format!(
                    "{} did not answer about the lock's function library in time",
                    node.addr
                ))
            })??;
        found.push((node.clone(), setup));
    }
    Ok(found)
}

/// Warns (with the `tracing` feature) when the master at `addr` may evict keys: a
/// `maxmemory` with a policy other than `noeviction` may drop a lock's hash (every
/// policy, `volatile-*` too: the hash has a TTL), and with it live holds and the last
/// fence. Best effort: a node that does not answer `INFO memory` is not checked.
async fn warn_if_evicting(addr: &str, client: &fred::prelude::Client, within: Duration) {
    let info = tokio::time::timeout(
        within,
        client.info::<String>(Some(fred::types::InfoKind::Memory)),
    )
    .await;
    if let Ok(Ok(text)) = info {
        if let Some(policy) = evicting_policy(&text) {
            crate::observe::evicting(addr, &policy);
        }
    }
}

/// The eviction policy named in an `INFO memory` reply when it may evict keys (a memory
/// limit is set and the policy is not `noeviction`).
fn evicting_policy(info: &str) -> Option<String> {
    let field = |name: &str| {
        info.lines()
            .find_map(|l| l.trim().strip_prefix(name)?.strip_prefix(':'))
            .map(str::to_string)
    };
    let limit: u64 = field("maxmemory")?.parse().ok()?;
    let policy = field("maxmemory_policy")?;
    (limit > 0 && policy != "noeviction").then_some(policy)
}

impl LockClient {
    /// Loads (or upgrades) the lock's function library on every master and returns what
    /// each had: the step an operator runs once where the clients' ACL user may not run
    /// `FUNCTION LOAD` (the CLI's `cluster-rwlock setup`). A promoted replica has the
    /// library already (it is replicated); a master added later, or restarted empty,
    /// needs it again.
    ///
    /// ```no_run
    /// # async fn demo() -> cluster_rwlock::Result<()> {
    /// let config = cluster_rwlock::LockConfig::cluster(["redis://127.0.0.1:7000"]);
    /// for (master, found) in cluster_rwlock::LockClient::setup(&config).await? {
    ///     println!("{master}: {found}");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn setup(config: &LockConfig) -> Result<Vec<(String, Setup)>> {
        let config = LockConfig {
            notifications: false,
            ..config.clone()
        };
        let cluster = Cluster::connect(&config).await?;
        let found = load_library(&cluster, &Scripts::new(), config.command_timeout).await;
        cluster.close();
        Ok(found?
            .into_iter()
            .map(|(node, setup)| (node.addr.clone(), setup))
            .collect())
    }

    /// Connects, makes sure every master serves the lock's function library (loads it
    /// where it is missing or older, when this user may: [`Error::NotSetUp`] otherwise),
    /// and (unless notifications are off) opens the subscriber connection used to wake
    /// waiters.
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
    pub async fn connect(mut config: LockConfig) -> Result<LockClient> {
        let cluster = Cluster::connect(&config).await?;
        // what `from_url` left to the node to say is settled now
        config.topology = if cluster.router.clustered() {
            Topology::Cluster
        } else {
            Topology::Single
        };
        match LockClient::with_cluster(config, cluster.clone()).await {
            Ok(client) => Ok(client),
            Err(e) => {
                cluster.close();
                Err(e)
            }
        }
    }

    async fn with_cluster(config: LockConfig, cluster: Arc<Cluster>) -> Result<LockClient> {
        let scripts = Scripts::new();
        for (node, _) in load_library(&cluster, &scripts, config.command_timeout).await? {
            warn_if_evicting(&node.addr, node.client(0), config.command_timeout).await;
        }
        // as a cluster client when the node said it is one (`config.topology` is settled
        // now), with the TLS built at connect (the system's roots are read once)
        let diagnostics = Builder::from_config(
            config.to_fred_reusing_tls(cluster.router.connector().template())?,
        )
        .with_config(|c| c.fail_fast = false)
        .with_performance_config(|p| p.default_command_timeout = config.command_timeout)
        .set_policy(crate::cluster::node::reconnect_policy())
        .build()
        .lock_err()?;
        let start = u64::from_le_bytes(
            uuid::Uuid::new_v4().as_bytes()[..8]
                .try_into()
                .unwrap_or([1; 8]),
        ) >> 17;
        let book = Arc::new(Book::new(config.lease, config.clock_margin));
        tokio::spawn(Book::expiry_task(Arc::downgrade(&book)));
        let inner = Shared {
            cluster,
            scripts,
            counters: Counters::default(),
            book,
            config,
            runtime: tokio::runtime::Handle::current(),
            diagnostics,
            diagnostics_started: std::sync::Once::new(),
            next_hold: AtomicU64::new(start),
            contention: crate::contention::Contention::new(),
            pending: Default::default(),
        };
        Ok(LockClient {
            inner: Arc::new(inner),
        })
    }

    /// The lock `name`. Every acquire through the handle (or its clones) is a hold of its
    /// own, which contends with every other; see [`RwLock::with_owner`] for reentrant
    /// holds on purpose.
    ///
    /// Fails with [`Error::InvalidName`] when the name is empty, longer than 1,024 bytes,
    /// or has braces that cannot be what was meant (a `{` not closed, a `}` that closes
    /// nothing, a `{` inside braces: `acct:{3`). A name with a non-empty `{tag}` keeps
    /// it: the lock lands in the tag's slot, with the application's keys of that tag
    /// (see [`lock_key`](crate::operator::lock_key), and [`RwLock::same_slot_as`] to check a data key).
    ///
    /// ```no_run
    /// # async fn demo(client: cluster_rwlock::LockClient) -> cluster_rwlock::Result<()> {
    /// let lock = client.rwlock("orders:42")?;
    /// let w = lock.write().await?;
    /// assert!(lock.try_read().await?.is_none()); // the same handle: still excluded
    /// # Ok(()) }
    /// ```
    pub fn rwlock(&self, name: &str) -> Result<RwLock> {
        keys::check_name(name)?;
        Ok(RwLock::new(
            self.inner.clone(),
            name,
            format!(
                "{}/{}",
                self.inner.config.client_name,
                uuid::Uuid::new_v4().simple()
            ),
            false,
        ))
    }

    /// Breaks the lock `name`: removes every hold, or only those of the owner token
    /// `owner`; tells the waiters as a release does (the first queued writer is handed
    /// the lock); and raises the fence, so that the next grant's fence is above every
    /// fence a broken holder had and a resource that checks fences refuses their late
    /// writes once the next holder has written. A broken holder learns it at its next
    /// renewal, or at once when a call it makes under the hold (a guarded call, say) is
    /// answered that the hold is gone (`lost()` resolves, `is_lost()` is true,
    /// `release()` says [`Error::LockLost`]); until then it
    /// may still believe it holds: make sure it is dead or stuck, and rely on the fence.
    /// Logged at `warn` and counted in `cluster_rwlock_forced_releases_total`.
    ///
    /// # Cancel safety
    /// Not cancel safe: a dropped call may or may not have broken the lock (look with
    /// [`RwLock::state`]).
    ///
    /// # Errors
    /// [`Error::InvalidName`] or [`Error::InvalidOwner`] for bad input; as
    /// [`RwLock::state`] otherwise.
    ///
    /// ```no_run
    /// # async fn demo(client: cluster_rwlock::LockClient) -> cluster_rwlock::Result<()> {
    /// let broken = client.force_release("nightly-report", None).await?;
    /// println!("{} holds removed; fence now {:?}", broken.holds_removed, broken.fence);
    /// # Ok(()) }
    /// ```
    pub async fn force_release(&self, name: &str, owner: Option<&str>) -> Result<ForceReleased> {
        keys::check_name(name)?;
        if let Some(o) = owner {
            crate::keys::check_owner(o)?;
        }
        let raw = crate::raw::RawLock::new(self.inner.clone(), name);
        let only = owner.map_or(Breaking::Everyone, Breaking::Owner);
        let (holds_removed, fence, places_removed) = raw.force_release(only).await?;
        crate::observe::forced(name, owner, holds_removed);
        Ok(ForceReleased {
            holds_removed,
            fence,
            places_removed,
        })
    }

    /// Breaks every hold a CLIENT has on the lock `name`, as etcd's lease revoke does for
    /// its keys: the holds of every owner token made by a client of that
    /// [`client_name`](LockConfig::client_name) (each hold has its own token, so
    /// [`force_release`](Self::force_release) with one token reaches one hold), AND their
    /// places in the queue, so that the lock is not handed to another task of the same
    /// stuck process: a waiter of that client still running stops with [`Error::Broken`]
    /// (it heard the break on the lock's channel) rather than take a new place at the
    /// tail. The other waiters are told and the fence is raised as by
    /// [`force_release`](Self::force_release); holds taken under an explicit owner token
    /// ([`RwLock::with_owner`](crate::RwLock::with_owner)) are not the client's and stay.
    /// [`RwLock::state`] before it tells who would go ([`Holder::client_name`](crate::operator::Holder::client_name))
    /// and who is next. Logged at `warn` and counted as a forced release.
    ///
    /// # Cancel safety
    /// Not cancel safe: a dropped call may or may not have broken the lock (look with
    /// [`RwLock::state`]).
    ///
    /// # Errors
    /// [`Error::InvalidName`], or [`Error::InvalidConfig`] for a name no client may have
    /// (see [`LockConfig::client_name`]); as [`RwLock::state`] otherwise.
    ///
    /// ```no_run
    /// # async fn demo(client: cluster_rwlock::LockClient) -> cluster_rwlock::Result<()> {
    /// // the process "worker-7@host-b" froze holding the lock and queued for it again
    /// let broken = client.break_client("orders:{42}", "worker-7@host-b").await?;
    /// println!(
    ///     "{} holds and {} places removed; fence now {:?}",
    ///     broken.holds_removed, broken.places_removed, broken.fence
    /// );
    /// # Ok(()) }
    /// ```
    pub async fn break_client(&self, name: &str, client_name: &str) -> Result<ForceReleased> {
        keys::check_name(name)?;
        crate::config::check_client_name(client_name)?;
        let raw = crate::raw::RawLock::new(self.inner.clone(), name);
        let (holds_removed, fence, places_removed) =
            raw.force_release(Breaking::Client(client_name)).await?;
        crate::observe::forced(name, Some(client_name), holds_removed);
        Ok(ForceReleased {
            holds_removed,
            fence,
            places_removed,
        })
    }

    /// The configuration in use.
    ///
    /// ```no_run
    /// # async fn demo(client: cluster_rwlock::LockClient) -> cluster_rwlock::Result<()> {
    /// println!("lease {:?}", client.config().get_lease());
    /// # Ok(()) }
    /// ```
    pub fn config(&self) -> &LockConfig {
        &self.inner.config
    }

    /// A cluster-aware fred client on the same servers (the same URLs, credentials and
    /// TLS), connected on first use. The application may use it for its own data, such as
    /// the keys a lock guards under the same `{tag}`, instead of building a second client:
    /// the locks never use it (they go through connections of their own to each node), so
    /// its traffic does not delay lock calls, nor theirs its commands. Do not touch the
    /// lock keys (`<prefix>:...`) with it.
    ///
    /// ```no_run
    /// # async fn demo(client: cluster_rwlock::LockClient) -> Result<(), Box<dyn std::error::Error>> {
    /// use fred::prelude::*;
    /// let pong: String = client.redis().ping(None).await?;
    /// # Ok(()) }
    /// ```
    pub fn redis(&self) -> &Client {
        let inner = &self.inner;
        inner.diagnostics_started.call_once(|| {
            let _task = inner.diagnostics.connect();
        });
        &inner.diagnostics
    }

    /// The address (`host:port`) of the node this client sends the commands of `slot` to
    /// now: the slot's master as this client's slot map has it.
    ///
    /// ```no_run
    /// # async fn demo(client: cluster_rwlock::LockClient) -> cluster_rwlock::Result<()> {
    /// let lock = client.rwlock("orders:42")?;
    /// println!("{} is served by {:?}", lock.key(), client.node_for_slot(lock.slot()));
    /// # Ok(()) }
    /// ```
    pub fn node_for_slot(&self, slot: u16) -> Option<String> {
        self.inner
            .cluster
            .router
            .node_for(slot)
            .map(|n| n.addr.clone())
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
        let (vouches_asked, vouched) = self.inner.cluster.router.vouches.counts();
        ClientStats {
            attempts: c.attempts.load(Ordering::Relaxed),
            round_trips: c.round_trips.load(Ordering::Relaxed),
            library_reloads: c.reloads.load(Ordering::Relaxed),
            renewal_rounds: self.inner.book.rounds.load(Ordering::Relaxed),
            renewals: self.inner.book.renewals.load(Ordering::Relaxed),
            confirmations: self.inner.cluster.router.connector().waits(),
            held: self.inner.book.held() as u64,
            subscriptions: self.inner.notifier().map_or(0, |n| n.channel_count()) as u64,
            vouches_asked,
            vouched,
        }
    }

    /// Sends what is still to be given back, then closes the connections and stops
    /// renewing: the releases of dropped guards, and the undos of attempts that were
    /// cancelled or not confirmed, which run in the background, are sent first (for at
    /// most the command timeout), so that a program may exit right after `close` without
    /// leaving a hold on the server. Returns how many of those were still unsent when
    /// that time ran out (0: all were answered); each such hold stays until its lease
    /// ends. Holds still held (guards alive) expire after their lease: release them
    /// first.
    ///
    /// # Cancel safety
    /// Dropping the future before it ends leaves the connections open; the give-backs go
    /// on in the background.
    ///
    /// ```no_run
    /// # async fn demo(client: cluster_rwlock::LockClient) -> cluster_rwlock::Result<()> {
    /// let unsent = client.close().await;
    /// if unsent > 0 {
    ///     eprintln!("{unsent} hold(s) could not be given back; they end with their lease");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn close(&self) -> usize {
        let unsent = self
            .inner
            .pending
            .settle(self.inner.config.command_timeout)
            .await;
        self.inner.cluster.close();
        let _ = tokio::time::timeout(self.inner.config.command_timeout, async {
            if self.inner.diagnostics_started.is_completed() {
                let _ = self.inner.diagnostics.quit().await;
            }
        })
        .await;
        unsent
    }
}

#[cfg(test)]
mod tests {
    use super::evicting_policy;

    #[test]
    fn a_memory_limit_with_an_evicting_policy_is_found() {
        let info = "# Memory\r\nused_memory:1000\r\nmaxmemory:104857600\r\nmaxmemory_human:100.00M\r\nmaxmemory_policy:volatile-lru\r\n";
        assert_eq!(evicting_policy(info).as_deref(), Some("volatile-lru"));
        let no_limit = "maxmemory:0\r\nmaxmemory_policy:allkeys-lru\r\n";
        assert_eq!(evicting_policy(no_limit), None);
        let safe = "maxmemory:1000\r\nmaxmemory_policy:noeviction\r\n";
        assert_eq!(evicting_policy(safe), None);
        assert_eq!(evicting_policy("garbage"), None);
    }
}
