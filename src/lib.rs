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
//!         tokio::select! {
//!             _ = guard.lost() => { /* lease lost: stop, another owner may hold it */ }
//!             _ = async { /* the protected work, under `fence` */ } => {}
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
//! let job = client.rwlock("nightly-report")?.with_owner("job-17");
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
//!   ([`ReadGuard::read_again`], [`WriteGuard::write_again`]), granted at once; holds of
//!   one explicit owner are reentrant. Each guard gives back its own hold. An explicit
//!   owner that holds write may also take read; one that holds only read and asks for
//!   write gets [`Error::UpgradeDeadlock`] at once instead of waiting forever.
//! - **Writer preference.** Once a writer waits, new readers wait too, and writers are
//!   served first come, first served: a stream of readers cannot starve a writer.
//! - **Upgradable reads.** One owner at a time holds an upgradable read
//!   ([`RwLock::upgradable_read`]); it shares with plain readers and excludes writers.
//!   [`UpgradableReadGuard::upgrade`] waits for the plain readers to leave (new readers
//!   wait behind it, as behind a queued writer) and becomes write before any queued
//!   writer, with a higher fence: no writer gets in between. Writes downgrade to read or
//!   to upgradable read in one step.
//! - **Leases.** Every hold has a lease (default 30 s) measured by the server's clock and
//!   renewed every lease/3 while the guard lives, by one task per client in one pipeline.
//!   A holder that dies loses its holds after the lease; a lock whose holders all died
//!   disappears by itself.
//! - **The holder is told.** When a renewal finds the hold gone, or Redis stays unreachable
//!   until the lease may have run out, [`WriteGuard::lost`] resolves, `is_lost()` is true and
//!   `release()` returns [`Error::LockLost`].
//! - **Fencing.** Every grant carries a fence strictly greater than all fences granted
//!   before for that name, also after the hash was deleted and re-created or a replica was
//!   promoted (it is at least the server's time in microseconds).
//! - **Waiting without polling.** Waiters subscribe to the lock's shard channel (one
//!   subscription per name per client) before they try, and sleep until a release that
//!   concerns them, or until the earliest lease deadline that could free the lock. A
//!   release that frees the lock hands it straight to the first queued writer, which
//!   learns it from the message without another round trip. Subscriptions follow their
//!   slot to its new master after failovers and slot moves.
//! - **Cancellation.** Dropping an acquire future never leaves a hold or a queued writer
//!   behind.
//!
//! # Failure modes
//! Measured under random faults by the project's nemesis (see the README, "Safety under
//! faults"), the guarantees above do not all hold yet: a holder whose renewals hang is
//! told at its own lease deadline, not before the server's copy of the lease ends; a
//! promoted replica that lacked a hold may grant the lock while that holder's
//! `release()` and `upgrade()` still succeed; and fences may step back after a clock
//! step or a slot move while the lock's key did not exist.
//! - Redis replication is asynchronous: if a master dies after a grant but before its
//!   replica has it, the promoted replica does not know the hold and may grant the lock
//!   again. [`LockConfig::replica_acks`] makes each grant wait for replicas (and undo it
//!   if they do not ack), which narrows that window to the failover itself.
//! - A lease is no substitute for a fence: a holder paused longer than its lease (GC,
//!   swap, a frozen VM) may act after another owner was granted the lock. Only the
//!   resource can refuse it, by checking fences.
//! - A holder cut off from Redis is told (`lost()`) at most one renewal interval after
//!   its lease may have ended, by its own monotonic clock.
//! - A master that hangs (frozen, or cut off by a partition) affects only the locks of
//!   its own slots, and only until the cluster fails it over: the client has connections
//!   per node, reads the slot map from the nodes that answer (merged by config epoch, so
//!   a stale master's own view cannot win), and sends a command again on the promoted
//!   replica as soon as its slot moves. Locks of the other masters keep their latency
//!   if the cluster runs with `cluster-require-full-coverage no`; with Redis's default
//!   every master refuses commands (`CLUSTERDOWN`) between the failure detection and the
//!   promotion, and lock calls wait for that window.
//! - A frozen master that wakes up may serve commands it had buffered before it learns
//!   it was demoted; what it does then is discarded when it resyncs as a replica, but a
//!   client that hears its reply may believe it holds. Fences expose such a holder.
//!
//! # Layout
//! The hash layout and the scripts' rules are documented in [`scripts`].
#![deny(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod acquire;
mod client;
mod cluster;
mod config;
mod error;
mod hold;
pub mod keys;
mod lease;
mod lock;
mod mode;
mod observe;
mod renewal;
pub mod scripts;
mod shared;
pub mod slot;

#[cfg(feature = "testkit")]
#[cfg_attr(docsrs, doc(cfg(feature = "testkit")))]
pub mod testkit;

/// The README's examples, compiled as doctests.
#[cfg(all(doctest, feature = "testkit"))]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

pub use client::{ClientStats, LockClient};
pub use config::{
    Durability, LockConfig, DEFAULT_DURABILITY, DEFAULT_LEASE, DEFAULT_PREFIX, MAX_LEASE,
};
pub use error::{Error, Result};
pub use lock::{Holder, LockState, RwLock};
pub use lock::{ReadGuard, UpgradableReadGuard, WriteGuard};
pub use mode::Mode;

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
        send_sync::<LockState>();
        send_sync::<LockConfig>();
        send_sync::<Error>();
    }

    /// Compiled, never run: the futures of the API can be spawned.
    #[allow(dead_code)]
    fn futures_are_send(lock: &RwLock, w: WriteGuard, u: UpgradableReadGuard) {
        send(&lock.read());
        send(&lock.write_timeout(std::time::Duration::ZERO));
        send(&lock.try_upgradable_read());
        send(&lock.state());
        send(&w.downgrade());
        send(&u.upgrade());
    }
}
