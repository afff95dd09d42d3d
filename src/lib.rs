//! A distributed read/write lock for Redis Cluster.
//!
//! Many readers or one writer of a shared resource, across processes and machines, with
//! the state of each lock in ONE Redis hash whose key carries a `{hashtag}`, so that all
//! of it, and its release channel, live in one slot of the cluster.
//!
//! **The handle is the lock: every acquire through a [`RwLock`] is a hold of its own, and
//! a write excludes every other hold, also those taken through clones or an `Arc` of the
//! same handle; reentrancy exists only on purpose, through a guard or an explicit owner.**
//!
//! A handle shared by tasks:
//! ```no_run
//! # async fn demo() -> cluster_rwlock::Result<()> {
//! use std::time::Duration;
//! use cluster_rwlock::{LockClient, LockConfig};
//!
//! let client = LockClient::connect(LockConfig::cluster(["redis://127.0.0.1:7000"])).await?;
//! let lock = client.rwlock("orders:42")?;
//! for _ in 0..8 {
//!     let lock = lock.clone(); // the same lock: the eight tasks never write together
//!     tokio::spawn(async move {
//!         let guard = lock.write_timeout(Duration::from_secs(5)).await?;
//!         // hand the fence to the resource, which refuses lower fences than it has seen
//!         let fence = guard.fence();
//!         // race the lease against the preparation, not against the commit: a write
//!         // cancelled half way may tear the resource, a late one is refused by its fence
//!         let prepared = tokio::select! {
//!             _ = guard.lost() => None, // lease lost: stop, another owner may hold it
//!             data = async { /* read, compute */ 42 } => Some(data),
//!         };
//!         if let Some(data) = prepared {
//!             let _ = (data, fence); // commit once, under `fence`, not cancelled
//!         }
//!         guard.release().await
//!     });
//! }
//! # Ok(()) }
//! ```
//!
//! An explicit owner, for work that spans tasks or processes on purpose (its holds are
//! reentrant):
//! ```no_run
//! # async fn demo(client: cluster_rwlock::LockClient) -> cluster_rwlock::Result<()> {
//! let job = client.rwlock("nightly-report")?.with_owner("job-17")?;
//! let w = job.write().await?;
//! let again = job.write().await?; // the same owner: granted at once
//! # Ok(()) }
//! ```
//!
//! An upgradable read: read, decide, then write with no other writer in between:
//! ```no_run
//! # async fn demo(client: cluster_rwlock::LockClient) -> cluster_rwlock::Result<()> {
//! let lock = client.rwlock("cache:users")?;
//! let up = lock.upgradable_read().await?; // plain readers still enter
//! let stale = true;
//! if stale {
//!     let w = up.upgrade().await?; // waits for the readers; new ones wait behind it
//!     w.release().await?;
//! }
//! # Ok(()) }
//! ```
//!
//! A name that carries its own hashtag lands in the slot of the tag, with the data it
//! guards (one slot: a `MULTI` or a script may touch both):
//! ```no_run
//! # async fn demo(client: cluster_rwlock::LockClient) -> cluster_rwlock::Result<()> {
//! let lock = client.rwlock("orders:{42}")?;
//! assert_eq!(lock.key(), "rwlock:orders:{42}");
//! assert_eq!(lock.slot(), cluster_rwlock::slot::key_slot(b"orders:{42}:items"));
//! # Ok(()) }
//! ```
//!
//! # Guarantees
//! - **Owners.** Holds belong to owner tokens: each hold through a handle has one of its
//!   own (`<handle's token>:<n>`), and holds through [`RwLock::with_owner`] share the
//!   token given. Only the owner's guard releases its hold, and a release retried after a
//!   connection error never removes another hold.
//! - **Reentrancy, on purpose only.** A guard takes another hold as its owner
//!   ([`read_again`](Grant::read_again), [`WriteGuard::write_again`]), granted at once; holds of
//!   one explicit owner are reentrant. Each guard gives back its own hold. An explicit
//!   owner that holds write may also take read; one that holds only read and asks for
//!   write gets [`Error::UpgradeDeadlock`] at once instead of waiting forever.
//! - **Phase-fair: nobody starves.** Writers and readers wait in one queue, in the order
//!   they came; readers that came one after another share a place and go in together.
//!   Once a writer waits, new readers wait behind it (a stream of readers cannot starve a
//!   writer), and a writer waits only for the readers that came before it (a stream of
//!   writers cannot starve a reader). A waiter's place lives one lease past its last
//!   attempt, but when its turn comes it has a claim window of one second to take it
//!   (a writer the lock was handed to, the readers of the group first in line): a
//!   waiter that died holds up those behind it about a second, not a lease.
//! - **Upgradable reads.** One owner at a time holds an upgradable read
//!   ([`RwLock::upgradable_read`]); it shares with plain readers and excludes writers.
//!   [`UpgradableReadGuard::upgrade`] waits for the plain readers to leave (new readers
//!   wait behind it, as behind a queued writer) and becomes write before any queued
//!   writer, with a higher fence: no writer gets in between;
//!   [`UpgradableReadGuard::upgrade_timeout`] gives the upgradable guard back when the
//!   readers stay. Writes downgrade to read or to upgradable read in one step.
//! - **Confirmed grants, by default.** A grant or a renewal counts only once the replicas
//!   that could be promoted in place of the slot's master have it: each is sent with a
//!   `WAIT`, in the same round trip, and counts only when as many replicas acknowledged
//!   as the master itself reports attached (`INFO replication`; a replica whose link is
//!   up counts, even one the cluster flags as failing, since it may come back and be
//!   promoted) ([`Durability`]). A grant they do not confirm in time is undone
//!   ([`Error::NotReplicated`]; calls with a timeout try again until it runs out); a
//!   renewal they do not confirm does not extend the holder's lease. A failover then keeps
//!   every hold its holder believes in.
//! - **A silent replica.** When they do not confirm because a replica is silent (frozen,
//!   cut off, in a full sync), the client asks the other masters when they last heard
//!   from the master: none of its replicas can be promoted before a majority of masters
//!   has gone its node timeout without the master's `PONG`, and an election waits 500 ms
//!   more (less the 500 ms a `PONG` time learnt by gossip may be ahead). The grant or
//!   renewal is then believed until that moment less the clock
//!   margin (at least 100 ms, else it is undone as above), and renewed halfway there;
//!   while that word is in force, a `WAIT` on that master blocks at most 50 ms. With
//!   Redis's default node timeout (15 s) and the default lease, a hold is believed about
//!   6 s at a time this way; a node timeout below about twice the margin leaves no room,
//!   and the silent replica stops grants on its master until it is back
//!   (`docs/PROTOCOL.md`, "A silent replica"; [`ClientStats::vouched`](operator::ClientStats)
//!   counts the times). [`Durability::MasterOnly`] is the faster, weaker
//!   mode, chosen by name.
//! - **Leases.** Every hold has a lease (default 30 s) measured by the server's clock and
//!   renewed every lease/3 while the guard lives, by one task per client in one pipeline.
//!   Each hold has its own lease: a process that dies loses its holds one lease later,
//!   also under an explicit owner token that a live process renews for its own holds; a
//!   lock whose holders all died disappears by itself a minute later.
//! - **The holder is told first.** A hold counts as lost at `sent + lease - margin` by
//!   the holder's monotonic clock, `sent` being when the request of its last confirmed
//!   grant or renewal was sent (the server's deadline, its clock at execution plus the
//!   lease, is later), by a timer of its own; or as soon as a renewal, or any call made
//!   under the hold (a guarded call, a release, a reentrant grant, an upgrade or a
//!   downgrade), finds it gone: the server's word is final (a renewal also runs at once
//!   when a slot moves). The margin
//!   ([`LockConfig::clock_margin`], default a quarter of the lease) covers the server
//!   clocks' steps and drift. Then [`lost`](Grant::lost) resolves, `is_lost()` is true and
//!   `release()` returns [`Error::LockLost`]; `is_lost()` and `lost()` read the deadline
//!   itself, so they are on time even on a runtime too busy to run the timer. A release
//!   sent again after a sending whose reply never came, that finds nothing, returns `Ok`
//!   only when the lock's last fence is still the hold's own: nothing was granted or
//!   forced since, so the first sending released it. Otherwise the hold may have been
//!   removed before (by [`LockClient::force_release`], which raises the fence), and it
//!   returns [`Error::LockLost`]: never `Ok` when that is not known. A downgrade is not confirmed by the replicas (a replica that misses it keeps
//!   the stronger hold), so the hold it makes is believed no longer than the hold it
//!   came from, until its next confirmed renewal.
//! - **Fencing.** Every grant carries a fence strictly greater than all fences granted
//!   before for that name: the last fence + 1, or the server's time in microseconds when
//!   higher. A free lock keeps its hash for a minute as a tombstone that remembers its
//!   last fence, the last confirmed grant is on any replica that can be promoted, and a
//!   slot move carries the hash: fences grow across free periods, failovers and slot
//!   moves, with master clocks up to a minute apart.
//! - **Waiting without polling.** Waiters subscribe to the lock's shard channel (one
//!   subscription per name per client) before they try, and sleep until a release that
//!   concerns them, or until the earliest lease deadline that could free the lock. A
//!   release that frees the lock hands it straight to the first queued writer (with a
//!   claim window of one second: a writer that died while queued blocks the lock that
//!   long, and a waiter that hears the lock handed to another looks again after it).
//!   The message only wakes that writer: its
//!   next attempt, under the same hold id, finds the hold on the node that serves the
//!   slot now and is a grant like any other (fence from the server, confirmed), in every
//!   durability mode. Its lease is the one its place had left: counted from the send of
//!   its first attempt under that id when that was less than a quarter lease ago (the
//!   place's deadline, set by an attempt under that id, is later; the taking call then
//!   reads no clock), else the lease left that the call says, from its own send. A
//!   message alone is never believed: a master that lost its slot, frozen and thawed,
//!   may still publish one. Only a release wakes waiting readers (a refused attempt or a
//!   renewal does not). Subscriptions follow their slot to its new master after
//!   failovers and slot moves.
//! - **Cancellation.** Dropping an acquire future never leaves a hold or a queued writer
//!   behind.
//! - **What a timeout bounds.** A timeout bounds the wait for the lock, not the first
//!   attempt: however short it is (zero too), one attempt is made in full (subscribing,
//!   the call and its confirmation), so zero means "one attempt now", as `try_*`, and a
//!   grant won in time is never thrown away because its round trip outlasted the
//!   timeout. Later attempts and the waiting between them stop at the timeout.
//! - **No call hangs.** `*_timeout` returns within its time (within 100 ms for a shorter
//!   timeout: the first attempt's bound), also while the slot's master hangs
//!   ([`UpgradableReadGuard::upgrade_timeout`] within half a second more: it
//!   withdraws the pending upgrade before it gives the guard back). Other calls are
//!   bounded by the command timeout ([`LockConfig::command_timeout`]); a release is
//!   followed through failovers for up to a lease.
//!
//! # Failure modes
//! What the guarantees assume, and what they cannot cover (measured under random faults
//! by the project's nemesis: see `docs/SAFETY.md` in the repository):
//! - **Clocks.** Leases are in server time: a replica promoted with a clock ahead of its
//!   old master's, or a master whose clock steps forward, ends leases early by that
//!   much. The holder is safe while that is less than the clock margin.
//! - **Persistence.** A master that is killed and restarted before its replica is
//!   promoted comes back with what it persisted: without an append-only file
//!   (`appendonly yes`), empty, and its replica resyncs to nothing. Every hold of its
//!   slots is then forgotten while its holders believe in it. Run Redis masters with
//!   the append-only file, or do not restart a failed master before the cluster failed
//!   it over.
//! - **A lease is no substitute for a fence**: a holder paused longer than its lease (GC,
//!   swap, a frozen VM) may act after another owner was granted the lock. Only the
//!   resource can refuse it, by checking fences.
//! - **WAIT is not consensus.** A confirmed grant is on every replica its master reported
//!   attached (read in the same pipeline when the count is 0 or older than 250 ms, and
//!   again after any `WAIT` that came back short). What that trades against: a replica
//!   whose link to its master is DOWN (killed, or dropped by the master after
//!   `repl-timeout`) is not waited for, so grants go on without it; if that replica
//!   comes back and is promoted (a manual `CLUSTER FAILOVER TAKEOVER`, or an election
//!   it wins because the replicas that have the grants are gone too) it lacks them. A
//!   replica attached within the last 250 ms of a master that already has one is
//!   counted from the next read. A master that reports no replica confirms alone (a
//!   just-promoted master whose old master is down): its grants are safe while it
//!   serves the slot, but nothing outside it proves that it still serves the slot, and
//!   what it confirmed alone is lost if a replica that attaches later is promoted
//!   before its first copy has loaded (Redis allows it with
//!   `cluster-replica-validity-factor 0`, or by `TAKEOVER`). From the moment such a
//!   replica attaches, grants wait for it.
//!   The other side of the trade: a replica frozen with its link up is waited for, so
//!   grants on its master are refused ([`Error::NotReplicated`]) until it thaws, its
//!   master drops its link after `repl-timeout` (60 s by default), or the other masters
//!   vouch for its master (above); a dead replica stops grants for one `WAIT` at most.
//!   What they vouch for assumes the cluster's own failure detection: a failover an
//!   operator forces (`CLUSTER FAILOVER FORCE`, `TAKEOVER`) can promote the silent
//!   replica at once, without what was granted on the master's word. A master's clock
//!   that steps forward by more than the clock margin flags its peer failing that much
//!   sooner.
//! - **Slot moves.** A lock's hash moved by `MIGRATE` reaches the target's replicas
//!   asynchronously; the client renews every hold at once when it sees a slot change
//!   owner, with a `WAIT` on the target. Until that renewal is confirmed (one round
//!   trip after the client learns of the move), a failover of the target could promote
//!   a replica without the hash. While a slot is half migrated, calls follow `ASK` to
//!   the importing node (with `ASKING` in the same pipeline as the call and its
//!   `WAIT`).
//! - **Eviction.** A master with a memory limit and a policy other than `noeviction`
//!   may evict a lock's hash (every policy may: the hash has a TTL), and with it live
//!   holds and the last fence. Run lock masters with `maxmemory-policy noeviction`; the
//!   client warns at connect (with the `tracing` feature) when a master may evict.
//! - **Fences and clocks.** A fence is above the last one the lock's hash (or its
//!   tombstone, kept a minute after the lock is free) remembers. After a free minute the
//!   next fence is the server's time in microseconds: a master whose clock stepped back
//!   by more than that minute (plus the time the lock was held), or a hash evicted, may
//!   give a fence below one granted before. Fences are below 2^53 (server microseconds
//!   until the year 2255), so a Lua script at a resource compares them exactly.
//! - **The weaker mode**, [`Durability::MasterOnly`]: a grant or renewal the replica did
//!   not get is lost at failover while its holder goes on; a demoted master that wakes up
//!   may grant fences above its successor's.
//! - **A single node** (a URL that is not a cluster) has no replicas the client knows
//!   of: its grants are confirmed alone.
//! - **A lock excludes overlap, not repetition.** "Once per fleet" jobs started by each
//!   machine's own clock (cron) run again on a machine whose clock is behind by more than
//!   the job takes: the first run is over, the lock free. Record what was done (with the
//!   fence) and skip it when it is there, or hold the lock longer than the clocks' skew.
//! - A master that hangs (frozen, or cut off by a partition) affects only the locks of
//!   its own slots, and only until the cluster fails it over: the client has connections
//!   per node, reads the slot map from the nodes that answer (merged by config epoch, so
//!   a stale master's own view cannot win), and sends a command again on the promoted
//!   replica as soon as its slot moves. Locks of the other masters keep their latency
//!   if the cluster runs with `cluster-require-full-coverage no`; with Redis's default
//!   every master refuses commands (`CLUSTERDOWN`) between the failure detection and the
//!   promotion, and lock calls wait for that window.
//!
//! # Metrics and tracing
//! With the cargo feature `metrics`, through the `metrics` facade (install any
//! recorder); with `tracing`, `tracing` events and spans. Without them, nothing is
//! recorded and nothing is compiled in.
//!
//! ## Metrics
//! | name | kind | labels |
//! |---|---|---|
//! | `cluster_rwlock_grants_total` | counter | `mode` |
//! | `cluster_rwlock_timeouts_total` | counter | `mode` |
//! | `cluster_rwlock_handoffs_total` | counter | - (a release handed the lock to a waiting writer or upgrader) |
//! | `cluster_rwlock_lost_total` | counter | - (holds whose lease was lost) |
//! | `cluster_rwlock_renewals_total` | counter | - (locks renewed) |
//! | `cluster_rwlock_library_reloads_total` | counter | - |
//! | `cluster_rwlock_not_replicated_total` | counter | - (grants undone and renewals not counted: too few replicas acknowledged in time) |
//! | `cluster_rwlock_vouches_total` | counter | `vouched` (`yes`, `no`): the other masters asked, after a `WAIT` fell short, how soon the master could be replaced (see "A silent replica") |
//! | `cluster_rwlock_confirmed_alone_total` | counter | - (writes that counted without WAIT: the slot's master has no replica that could be promoted) |
//! | `cluster_rwlock_forced_releases_total` | counter | - (locks broken by [`LockClient::force_release`]) |
//! | `cluster_rwlock_acquire_wait_seconds` | histogram | `mode` |
//! | `cluster_rwlock_hold_seconds` | histogram | `mode` |
//! | `cluster_rwlock_held` | gauge | - (holds this process renews) |
//! | `cluster_rwlock_waiting` | gauge | - (acquires waiting in this process) |
//!
//! Labels never carry the lock name (its cardinality is unbounded), unless
//! [`LockConfig::metrics_lock_names`](crate::LockConfig::metrics_lock_names) is set: then
//! the per-mode series get a `lock` label too.
//!
//! ## Tracing
//! Spans `acquire` (name, mode, owner token: it starts with the client name) around each acquire, and events at `debug` when it ends
//! (wait, attempts, fence, outcome), for releases, hand-offs and renewal rounds; events
//! at `warn` for a lost lease, a lock broken by [`LockClient::force_release`], a write the replicas did not confirm, a change of slot owners (failover, slot move) and a
//! subscriber connection made again. Nothing above `debug` on the hot path.
//!
//! # Errors
//! [`Error`] is the crate's own: [`Error::is_retryable`] tells the errors after which the
//! same call may succeed a little later (no answer in time, a failover under way, a grant
//! the replicas did not confirm) from those it cannot (a bad name or owner, a lost lease,
//! a key that is not a lock, a refused permission). An error reply of the server is an
//! [`Error::Server`] with its [`code`](error::ServerError::code) (`NOPERM`, `CLUSTERDOWN`, ...);
//! a failure on the client's side of a connection is an [`Error::Connection`] of a
//! [`ConnectionErrorKind`](error::ConnectionErrorKind). No type of the Redis client appears in them.
//!
//! # Several locks, breaking a lock
//! [`LockClient::multi`] holds several locks in any slots at once without deadlock (see
//! [`MultiLock`]); [`LockClient::force_release`] breaks a stuck lock for an operator, and [`operator`]
//! has what an operator's tools read (lock states, release messages, the function library).
//!
//! # TLS and permissions
//! With the cargo feature `tls`, `rediss://` URLs connect over TLS (rustls; see
//! [`LockConfig::from_url`] and the `tls_*` settings); without it they are refused at
//! connect, never sent in plaintext. `docs/SECURITY.md` gives the least-privilege ACL rule for
//! an application user; [`Error::is_permission_denied`] tells a refusal. Passwords never
//! appear in `Debug`, errors or traces.
//!
//! # Crates
//! This crate is the lock. Its workspace also has `cluster-rwlock-testkit`, the six-node
//! test cluster with its faults (for tests: `[dev-dependencies]`), and
//! `cluster-rwlock-cli`, the `cluster-rwlock` command (`cargo install`); neither is a
//! dependency of this one.
//!
//! # Layout
//! The lock is a Redis Functions library (`cluster_rwlock_4`, loaded by every client
//! that may, or once by `cluster-rwlock setup`: [`LockClient::setup`]); its functions,
//! the hash layout and the rules a client must follow are written down in
//! `docs/PROTOCOL.md` (in the repository). Inside, one
//! type per lock makes the calls of the functions (route, `FCALL`, typed reply); the
//! waiting, hand-offs, confirmation and clean-up sit above it, and [`RwLock`] and the
//! guards above those.
#![deny(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

// The modules, one line each (docs/DESIGN.md's map puts them in layers, and a test checks
// that no module imports one of a higher layer).
mod acquire; // one attempt, and the waiting loop around it (subscribe, attempt, sleep until a message)
mod book; // the renewal book: which holds a client renews, by hold id, and until when each is believed
mod client; // `LockClient`: what a service makes first; every lock, multi-lock and fenced write comes from it
mod cluster; // connections per node, the slot map, routing, pipelines that confirm by WAIT
pub mod config; // `LockConfig` and its parts: URLs, TLS, leases, durability
mod contention; // the slots where attempts lately found the lock busy (the fast paths skipped there)
pub mod error; // `Error` and what it carries: `ConnectionError`, `ServerError`, `ReplicaStatus`
mod fenced; // the fenced store: a value kept with the fence that wrote it
mod hold; // `Hold`: one granted hold, renewed while it lives, given back when dropped
mod keys; // lock names, their keys and channels; the client name in an owner token
mod lock; // `RwLock`, its guards and guarded calls: the API a lock user meets
mod message; // the release messages a lock's channel carries
mod mode; // `Mode`: read, write or upgradable
mod multi; // `MultiLock`: several locks at once, without deadlock
mod mutex; // the one mutex helper every module uses (a poisoned mutex is still taken)
mod observe; // tracing events and metrics, in one place
pub mod operator; // for operators and tools: lock states, release messages, breaking, the function library
mod pending; // give-backs in flight (releases, undos, withdrawals in the background)
mod raw; // the raw lock: one lock on a client's connections, one call per function
mod renewal; // the renewal task: one per client, every third of a lease, and its calls
mod replica; // a master's replicas as it lists them (INFO replication)
mod scripts; // the calls of the functions (src/lua/), their arguments and typed replies
mod shared; // what every lock of a client shares: connections, subscriptions, the renewal book
pub mod slot; // cluster hash slots, computed locally (crc16)
#[cfg(feature = "tls")]
mod tls; // TLS for rediss:// (rustls)

/// The README's examples, compiled as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

/// The examples of `docs/WRITES.md`, compiled as doctests.
#[cfg(doctest)]
#[doc = include_str!("../docs/WRITES.md")]
struct WritesDoctests;

/// The examples of `docs/MULTI.md`, compiled as doctests.
#[cfg(doctest)]
#[doc = include_str!("../docs/MULTI.md")]
struct MultiDoctests;

/// The examples of `docs/SECURITY.md`, compiled as doctests.
#[cfg(doctest)]
#[doc = include_str!("../docs/SECURITY.md")]
struct SecurityDoctests;

/// The examples of `docs/TESTBED.md`, compiled as doctests.
#[cfg(doctest)]
#[doc = include_str!("../docs/TESTBED.md")]
struct TestbedDoctests;

#[cfg(test)]
mod docs_drift; // the documents and the map checked against what CI runs and what the code imports

/// The Redis client this crate is built on, for [`LockClient::redis`]: the one place
/// where its types are part of this crate's API. [`LockClient::redis`] hands out a client
/// of the same servers, credentials and TLS for the application's own data (the keys that
/// share a lock's slot), so it must be the client's own type; this re-export gives it in
/// the version this crate was built with. A new major version of `fred` therefore means
/// a new major version of this crate only for code that uses [`LockClient::redis`];
/// the lock's own API and its errors carry no type of `fred`.
pub use fred;

// The names a lock user meets; operators' are in `operator`, errors' parts in `error`,
// configuration constants in `config`.
pub use client::LockClient;
pub use config::{Durability, LockConfig};
pub use error::{Error, Result};
pub use fenced::FencedWrite;
pub use lock::guarded;
pub use lock::{
    AnyGuard, Finished, Grant, LostSignal, ReadGuard, RwLock, UpgradableReadGuard, WriteGuard,
};
pub use mode::Mode;
pub use multi::{MultiGuard, MultiLock};

#[cfg(test)]
mod tests {
    use super::*;

    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>(_: &T) {}

    #[test]
    fn public_types_are_send_and_sync() {
        send_sync::<LockClient>();
        send_sync::<RwLock>();
        send_sync::<ReadGuard>();
        send_sync::<WriteGuard>();
        send_sync::<UpgradableReadGuard>();
        send_sync::<AnyGuard>();
        send_sync::<Grant>();
        send_sync::<LostSignal>();
        send_sync::<MultiLock>();
        send_sync::<MultiGuard>();
        send_sync::<operator::LockState>();
        send_sync::<LockConfig>();
        send_sync::<Error>();
    }

    /// Compiled, never run: the futures of the API can be spawned.
    #[allow(dead_code)]
    fn futures_are_send(
        lock: &RwLock,
        w: WriteGuard,
        u: UpgradableReadGuard,
        u2: UpgradableReadGuard,
    ) {
        send(&lock.read());
        send(&lock.write_timeout(std::time::Duration::ZERO));
        send(&lock.try_upgradable_read());
        send(&lock.state());
        send(&w.downgrade());
        send(&u.upgrade());
        send(&u2.upgrade_timeout(std::time::Duration::ZERO));
    }
}
