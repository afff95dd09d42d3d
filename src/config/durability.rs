//! How a grant or a renewal is confirmed before it counts: [`Durability`].

use std::time::Duration;

#[cfg(doc)]
use crate::error::Error;

/// How a grant or a renewal is confirmed before it counts.
///
/// Redis replicates asynchronously: a grant the master made and its replicas did not get
/// yet is lost if one of them is promoted, while its holder goes on working. With the
/// default, [`Durability::AllReplicas`], each grant and each renewal is followed, in the
/// same round trip, by `WAIT` for the replicas that could be promoted; a grant they do
/// not confirm in time is undone ([`Error::NotReplicated`]), a renewal they do not
/// confirm does not extend the holder's lease. [`Durability::MasterOnly`] skips that
/// step: one round trip less per grant, and two holders at once after a failover that
/// lost a grant.
///
/// ```
/// use std::time::Duration;
/// use cluster_rwlock::{Durability, LockConfig};
///
/// let safe = LockConfig::cluster(["redis://127.0.0.1:7000"]);
/// assert_eq!(safe.get_durability(), Durability::AllReplicas { timeout: Duration::from_millis(500) });
/// let fast = LockConfig::cluster(["redis://127.0.0.1:7000"]).durability(Durability::MasterOnly);
/// assert_eq!(fast.get_durability(), Durability::MasterOnly);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Durability {
    /// The default: `WAIT` for every replica the slot's master itself reports attached
    /// (`INFO replication`: a replica whose link is up, in sync or still loading its
    /// first copy, flagged failing by the cluster or not), for at most `timeout` (and never past the caller's
    /// deadline). A master that reports no replica confirms at once: nothing could be
    /// promoted in its place (this is logged and counted, see the metrics). The client
    /// needs `INFO` in its ACL rule.
    AllReplicas {
        /// How long to wait for the replicas' acknowledgement (never more than three
        /// quarters of the command timeout, nor past the caller's deadline).
        timeout: Duration,
    },
    /// `WAIT` for at least `replicas` replicas, however many the master has; with fewer,
    /// every grant fails.
    AtLeast {
        /// Replicas required.
        replicas: u32,
        /// How long to wait for their acknowledgement (never more than three quarters of
        /// the command timeout, nor past the caller's deadline).
        timeout: Duration,
    },
    /// No confirmation: a grant counts as soon as the master made it. Faster, and unsafe
    /// across failovers; choose it only where an occasional second holder is acceptable.
    MasterOnly,
}

/// The default confirmation of grants and renewals.
///
/// ```
/// assert!(matches!(cluster_rwlock::config::DEFAULT_DURABILITY, cluster_rwlock::Durability::AllReplicas { .. }));
/// ```
pub const DEFAULT_DURABILITY: Durability = Durability::AllReplicas {
    timeout: Duration::from_millis(500),
};
