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
    /// The lock name is empty, longer than 1,024 bytes, or its braces cannot be what was
    /// meant: a `{` not closed, a `}` that closes nothing, a `{` inside braces (`acct:{3`
    /// would land in another slot than the data `acct:{3}:balance`).
    #[error("invalid lock name: {0}")]
    InvalidName(String),
    /// The configuration cannot work (a prefix with braces, a zero lease, a bad URL, ...).
    #[error("invalid configuration: {0}")]
    InvalidConfig(String),
    /// An explicit owner token ([`RwLock::with_owner`](crate::RwLock::with_owner)) is
    /// empty, longer than 256 bytes, or contains whitespace.
    #[error("invalid owner token: {0}")]
    InvalidOwner(String),
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
    /// A node did not answer within the time allowed (the command timeout, or the
    /// caller's deadline), or could not be connected to in that time: it may be hung,
    /// cut off or failing over. The command may or may not have run; the lock's own
    /// calls are idempotent and are sent again where that is safe.
    #[error("no answer in time: {0}")]
    Unavailable(String),
    /// A guarded command ([`Grant::guarded`](crate::Grant::guarded)) that cannot run
    /// under the lock: not among the commands allowed, a write under a read hold, or
    /// too few arguments. Nothing was sent.
    #[error("invalid guarded command: {0}")]
    InvalidCommand(String),
    /// A guarded command names a key outside the lock's slot. Nothing was sent.
    #[error("the key {key:?} is in slot {key_slot}, not in the lock's slot {lock_slot}")]
    WrongSlot {
        /// The key.
        key: String,
        /// Its slot.
        key_slot: u16,
        /// The lock's slot.
        lock_slot: u16,
    },
    /// An error that the Redis client or server reported (a refused connection, an
    /// authentication or permission error, a cluster error, ...): the client's error is
    /// kept as the [`source`](std::error::Error::source), and [`fred`](crate::fred) is
    /// re-exported so that it can be inspected.
    #[error("redis: {}", describe(.0))]
    Redis(#[source] fred::error::Error),
    /// A node could not be connected to (refused, unknown host, bad password, ...) when
    /// the client was made: which node, and why. The Redis client's error is the
    /// [`source`](std::error::Error::source).
    #[error("could not connect to {addr}: {}", describe(.source))]
    Connect {
        /// The node's address, `host:port`.
        addr: String,
        /// The Redis client's error.
        #[source]
        source: fred::error::Error,
    },
}

/// `ConnectionRefused` as `connection refused`.
fn words(camel: &str) -> String {
    let mut out = String::new();
    for c in camel.chars() {
        if c.is_uppercase() && !out.is_empty() {
            out.push(' ');
        }
        out.extend(c.to_lowercase());
    }
    out
}

/// The Redis client's error as a sentence: its kind and what it says, with an I/O error
/// told by its message (the client keeps the `Debug` form of the I/O error).
pub(crate) fn describe(e: &fred::error::Error) -> String {
    let details = e.details();
    if *e.kind() == fred::error::ErrorKind::IO {
        let message = details
            .split_once("message: \"")
            .and_then(|(_, rest)| rest.split_once('"'))
            .map(|(m, _)| m.to_lowercase());
        let kind = details
            .split_once("kind: ")
            .and_then(|(_, rest)| rest.split([',', ' ', '}', ')']).next())
            .filter(|k| !k.is_empty());
        // `Custom { kind: InvalidData, error: InvalidCertificate(UnknownIssuer) }`: a TLS
        // or protocol error inside an I/O error; its own words are what matters
        let inner = details
            .strip_prefix("Custom {")
            .and_then(|rest| rest.split_once("error: "))
            .map(|(_, e)| e.trim_end_matches(|c: char| c == '}' || c.is_whitespace()))
            .filter(|e| !e.is_empty());
        if let (Some(kind), Some(inner)) = (kind, inner) {
            return format!("{}: {}", words(kind), inner.trim_matches('"'));
        }
        if let Some(m) = message.or_else(|| kind.map(words)) {
            return m;
        }
    }
    if details.is_empty() {
        e.kind().to_str().to_lowercase()
    } else {
        format!("{} ({})", details, e.kind().to_str().to_lowercase())
    }
}

impl From<fred::error::Error> for Error {
    fn from(e: fred::error::Error) -> Error {
        Error::Redis(e)
    }
}

impl Error {
    /// Whether the same call may succeed if made again a little later, unchanged: no
    /// answer in time, a connection or cluster error (a failover, a slot moving), a
    /// grant the replicas did not confirm, or a lock held by others until the timeout.
    /// Configuration, name, owner and layout errors, [`LockLost`](Error::LockLost) and
    /// [`UpgradeDeadlock`](Error::UpgradeDeadlock) are not: the same call fails again.
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// use std::time::Duration;
    /// let guard = loop {
    ///     match lock.write_timeout(Duration::from_secs(1)).await {
    ///         Err(e) if e.is_retryable() => continue,
    ///         other => break other?,
    ///     }
    /// };
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::Timeout(_) | Error::Unavailable(_) | Error::NotReplicated { .. } => true,
            Error::Redis(e) | Error::Connect { source: e, .. } => redis_retryable(e),
            _ => false,
        }
    }

    /// Whether the server refused the call for want of a permission: a command, key or
    /// channel the ACL user may not use (`NOPERM`), or no or wrong credentials
    /// (`NOAUTH`, `WRONGPASS`). The message names what was refused. Never retryable.
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// match lock.try_write().await {
    ///     Err(e) if e.is_permission_denied() => eprintln!("check the ACL rule: {e}"),
    ///     other => drop(other?),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn is_permission_denied(&self) -> bool {
        match self {
            Error::Redis(e) | Error::Connect { source: e, .. } => {
                let d = e.details();
                ["NOPERM", "NOAUTH", "WRONGPASS"]
                    .iter()
                    .any(|p| d.starts_with(p))
                    || *e.kind() == fred::error::ErrorKind::Auth
            }
            _ => false,
        }
    }

    /// Whether the server could not be reached or did not answer in time
    /// ([`Unavailable`](Error::Unavailable), or a connection error of the Redis client).
    ///
    /// ```
    /// let e = cluster_rwlock::Error::Unavailable("127.0.0.1:7001 did not answer in 1s".into());
    /// assert!(e.is_unavailable() && e.is_retryable());
    /// ```
    pub fn is_unavailable(&self) -> bool {
        use fred::error::ErrorKind as K;
        match self {
            Error::Unavailable(_) => true,
            Error::Redis(e) | Error::Connect { source: e, .. } => {
                matches!(e.kind(), K::Timeout | K::IO | K::Canceled) || no_connection(e)
            }
            _ => false,
        }
    }
}

/// The Redis client had no connection to send the command on (the node's connection is
/// down and being made again): the command was not sent.
fn no_connection(e: &fred::error::Error) -> bool {
    *e.kind() == fred::error::ErrorKind::Routing
        || e.details().starts_with("Failed to route command")
}

/// `Result` with this crate's [`Error`].
///
/// ```
/// fn check(name: &str) -> cluster_rwlock::Result<()> { Ok(()) }
/// ```
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Errors after which the same command may succeed on another node or a bit later.
pub(crate) fn redis_retryable(e: &fred::error::Error) -> bool {
    use fred::error::ErrorKind as K;
    let d = e.details();
    matches!(
        e.kind(),
        K::Timeout | K::IO | K::Canceled | K::Cluster | K::Backpressure
    ) || no_connection(e)
        || [
            "CLUSTERDOWN",
            "TRYAGAIN",
            "READONLY",
            "MASTERDOWN",
            "LOADING",
        ]
        .iter()
        .any(|p| d.starts_with(p))
}

#[cfg(test)]
mod tests {
    use super::*;
    use fred::error::{Error as FredError, ErrorKind};

    #[test]
    fn retryable_and_unavailable_errors_are_told_apart() {
        let io = Error::from(FredError::new(ErrorKind::IO, "connection reset"));
        assert!(io.is_retryable() && io.is_unavailable());
        let moved = Error::from(FredError::new(ErrorKind::Cluster, "MOVED 1 x:1"));
        assert!(moved.is_retryable() && !moved.is_unavailable());
        let noperm = Error::from(FredError::new(ErrorKind::Auth, "NOPERM no rights"));
        assert!(!noperm.is_retryable() && !noperm.is_unavailable());
        let down = Error::from(FredError::new(ErrorKind::Unknown, "CLUSTERDOWN down"));
        assert!(down.is_retryable());
        // fred's words when a node's connection is down: nothing was sent
        let unrouted = Error::from(FredError::new(
            ErrorKind::Unknown,
            "Failed to route command.",
        ));
        assert!(unrouted.is_retryable() && unrouted.is_unavailable());
        assert!(Error::Unavailable("x:1 did not answer in 1s".into()).is_unavailable());
        assert!(Error::Timeout(Duration::from_secs(1)).is_retryable());
        assert!(Error::NotReplicated {
            wanted: 1,
            acked: 0
        }
        .is_retryable());
        for e in [
            Error::LockLost,
            Error::UpgradeDeadlock,
            Error::InvalidOwner("a b".into()),
            Error::InvalidName(String::new()),
            Error::Closed,
        ] {
            assert!(!e.is_retryable() && !e.is_unavailable(), "{e:?}");
        }
    }

    #[test]
    fn errors_read_as_sentences_and_name_the_node() {
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "Connection refused");
        let refused = FredError::from(std::io::Error::from_raw_os_error(111));
        let e = Error::Connect {
            addr: "127.0.0.1:7000".into(),
            source: refused,
        };
        let text = e.to_string();
        assert!(
            text.starts_with("could not connect to 127.0.0.1:7000: "),
            "{text}"
        );
        assert!(text.contains("connection refused"), "{text}");
        assert!(!text.contains("Os {"), "{text}");
        assert!(e.is_retryable() && e.is_unavailable());
        let e = Error::from(FredError::from(io));
        assert_eq!(
            e.to_string(),
            "redis: connection refused: Connection refused"
        );
        let tls = FredError::new(
            ErrorKind::IO,
            "Custom { kind: InvalidData, error: InvalidCertificate(UnknownIssuer) }",
        );
        assert_eq!(
            Error::from(tls).to_string(),
            "redis: invalid data: InvalidCertificate(UnknownIssuer)"
        );
        let auth = Error::from(FredError::new(
            ErrorKind::Auth,
            "WRONGPASS invalid password",
        ));
        assert_eq!(
            auth.to_string(),
            "redis: WRONGPASS invalid password (authentication error)"
        );
    }

    #[test]
    fn the_redis_error_is_the_source() {
        use std::error::Error as _;
        let e = Error::from(FredError::new(ErrorKind::IO, "connection reset"));
        let source = e.source().expect("a source");
        assert!(source.to_string().contains("connection reset"), "{source}");
    }
}
