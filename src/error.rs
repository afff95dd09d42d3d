//! The error type.

use std::time::Duration;

/// Everything that can go wrong when using a lock.
///
/// ```no_run
/// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
/// match lock.write_timeout(std::time::Duration::from_secs(1)).await {
///     Ok(guard) => guard.release().await?,
///     Err(cluster_rwlock::Error::Timeout(t)) => eprintln!("busy for {t:?}"),
///     Err(cluster_rwlock::Error::UpgradeDeadlock) => eprintln!("release the read hold first"),
///     Err(e) => return Err(e),
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The lock name is empty, longer than 1,024 bytes, or starts with `}` without a
    /// hashtag of its own (which would leave the key without a hashtag).
    #[error("invalid lock name: {0}")]
    InvalidName(String),
    /// The configuration cannot work (a prefix with braces, a zero lease, a bad URL, ...).
    #[error("invalid configuration: {0}")]
    InvalidConfig(String),
    /// The lock was not granted within the given time.
    #[error("the lock was not granted within {0:?}")]
    Timeout(Duration),
    /// An owner that holds only read asked for write: waiting would deadlock if another
    /// reader did the same. Release the read hold first.
    #[error("this owner holds the lock for read only; asking for write would deadlock")]
    UpgradeDeadlock,
    /// The hold's lease ran out (or its entry was removed) before it was released: another
    /// owner may have taken the lock since.
    #[error("the lease of this hold was lost")]
    LockLost,
    /// The grant was not acknowledged by enough replicas in time and was undone.
    #[error(
        "the grant reached {acked} replica(s) of the {wanted} required in time; it was undone"
    )]
    NotReplicated {
        /// Replicas required.
        wanted: u32,
        /// Replicas that acknowledged.
        acked: u32,
    },
    /// The lock's key holds a value of another type (someone else wrote it).
    #[error("the key {key} holds a {found}, not a lock hash")]
    WrongType {
        /// The key.
        key: String,
        /// The type found there.
        found: String,
    },
    /// The lock's hash holds a field or value this library did not write.
    #[error("the lock hash {key} is corrupt: unexpected field or value {field:?}")]
    Corrupt {
        /// The key.
        key: String,
        /// The offending field.
        field: String,
    },
    /// The server sent a reply this library cannot read.
    #[error("unexpected reply from the server: {0}")]
    Protocol(String),
    /// The client was closed.
    #[error("the lock client is closed")]
    Closed,
    /// An error from the Redis client (connection, authentication, permissions, ...).
    #[error("redis: {0}")]
    Redis(#[from] fred::error::Error),
}

/// `Result` with this crate's [`Error`].
///
/// ```
/// fn check(name: &str) -> cluster_rwlock::Result<()> { Ok(()) }
/// ```
pub type Result<T, E = Error> = std::result::Result<T, E>;
