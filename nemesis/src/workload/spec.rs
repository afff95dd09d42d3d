//! What the controller tells a worker: the cluster, the names, the resource, the
//! configuration under test, how to play and when to stop (or die).

use serde::{Deserialize, Serialize};

impl WorkerSpec {
    /// Whether each lock handle has the lease (`with_lease`) instead of the client.
    pub fn lease_per_lock(&self) -> bool {
        self.durability == "lock-lease"
    }

    /// The client's lease, ms: the run's, or four times it when each lock has its own.
    pub fn client_lease_ms(&self) -> u64 {
        if self.lease_per_lock() {
            self.lease_ms * 4
        } else {
            self.lease_ms
        }
    }

    /// `lock` with the run's lease on its handle, when locks have their own.
    pub fn lock(
        &self,
        lock: cluster_rwlock::RwLock,
    ) -> cluster_rwlock::Result<cluster_rwlock::RwLock> {
        if self.lease_per_lock() {
            lock.with_lease(std::time::Duration::from_millis(self.lease_ms))
        } else {
            Ok(lock)
        }
    }
}

/// What a worker is told by the controller (as JSON in `NEMESIS_WORKER`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkerSpec {
    /// Worker number.
    pub proc: u32,
    /// Seed URLs of the cluster (`rediss://` on a TLS cluster).
    pub seeds: Vec<String>,
    /// The CA of a TLS cluster, in PEM.
    pub ca_pem: Option<String>,
    /// Key prefix of the run.
    pub prefix: String,
    /// Lock names.
    pub names: Vec<String>,
    /// Explicit owners shared by every worker.
    pub shared_owners: Vec<String>,
    /// The resource's address.
    pub resource: String,
    /// Lease, ms.
    pub lease_ms: u64,
    /// The configuration under test: `default`, `acks` (`Durability::AtLeast { replicas: 1, timeout: 500 ms }`),
    /// `master-only` (`Durability::MasterOnly`) or `lock-lease` (the defaults, each lock
    /// handle with the lease, the client's four times longer).
    pub durability: String,
    /// Tasks.
    pub tasks: u32,
    /// Holds in 100 that last long: longer than a lease, or `long_hold_ms` (to 1.25 x).
    pub long_holds_pct: u32,
    /// How long the long holds last, when not longer than a lease.
    pub long_hold_ms: Option<u64>,
    /// Seed of this worker's randomness.
    pub seed: u64,
    /// `CLOCK_MONOTONIC` ns at which tasks stop starting new rounds.
    pub until: u64,
    /// `CLOCK_MONOTONIC` ns after which the worker kills itself (SIGKILL) while a write
    /// of one of its tasks waits for the lock, if it is still a lease and 5 s before
    /// `until`.
    #[serde(default)]
    pub kill_at: Option<u64>,
    /// Where to write the history.
    pub out: String,
}
