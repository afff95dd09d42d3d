//! The errors: [`Error`], and what its variants carry ([`ConnectionError`],
//! [`ServerError`], [`ReplicaStatus`]).
//!
//! Each variant says whether anything happened on the server, and
//! [`Error::is_retryable`] whether trying again may succeed.

use std::time::Duration;

pub use crate::replica::ReplicaStatus;

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
    /// An operator broke this client on the lock while this acquire waited
    /// ([`LockClient::break_client`](crate::LockClient::break_client), `cluster-rwlock
    /// break --client`): its holds and its places in the queue were removed, and the
    /// acquire stops rather than take a new place at the tail. Not retryable: the
    /// operator meant the client to stop.
    #[error("an operator broke the client {client} on this lock while it waited")]
    Broken {
        /// The client name that was broken (this client's).
        client: String,
    },
    /// A grant (or a renewal) was not acknowledged by enough replicas in time: it does
    /// not count, and the library gives it back (a waiting acquire tries again, and
    /// returns this error rather than [`Timeout`](Error::Timeout) when its time runs out
    /// after such a refusal). Nothing the caller asked to write ran. Retryable. `silent`
    /// names the replicas that did not acknowledge, as their master lists them: a
    /// replica frozen, cut off or in a full sync stops grants on its master until it
    /// acknowledges again or the master drops it (`repl-timeout`: see
    /// `docs/GUARANTEES.md`).
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// use std::time::Duration;
    /// match lock.write_timeout(Duration::from_secs(1)).await {
    ///     Ok(guard) => guard.release().await?,
    ///     Err(cluster_rwlock::Error::NotReplicated { silent, .. }) => {
    ///         for r in &silent {
    ///             eprintln!("replica {} not acknowledging: {r}", r.addr);
    ///         }
    ///     }
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(()) }
    /// ```
    #[error(
        "the grant reached {acked} replica(s) of the {wanted} required in time; it does not count and is given back{}",
        crate::replica::named(silent)
    )]
    NotReplicated {
        /// Replicas required.
        wanted: u32,
        /// Replicas that acknowledged.
        acked: u32,
        /// The replicas that did not acknowledge, as the master listed them right after
        /// (`WAIT` does not say which: those that had acknowledged least); empty when
        /// the master's list could not be read.
        silent: Vec<ReplicaStatus>,
    },
    /// A write ([`Grant::guarded`](crate::Grant::guarded),
    /// [`LockClient::fenced_set`](crate::LockClient::fenced_set)) RAN on the master, but
    /// too few replicas acknowledged it in time: it stays written (nothing is undone),
    /// and a failover now may lose it. Not retryable as is: running the same write
    /// again could apply it twice (an `HINCRBY`); read the data back first.
    #[error(
        "the write ran on the master and reached {acked} replica(s) of the {wanted} required in time; it was NOT undone, and a failover now may lose it"
    )]
    WriteNotReplicated {
        /// Replicas required.
        wanted: u32,
        /// Replicas that acknowledged.
        acked: u32,
    },
    /// A guarded command or a fenced write names a key that belongs to a lock: the hash
    /// or the release channel of ANY lock under this client's prefix. Writing it would
    /// break the lock (a second writer granted, a fence that goes back). Nothing was
    /// sent.
    #[error("the key {key:?} is a lock's own (its hash or release channel): guarded commands and the fenced store never touch it")]
    LockKey {
        /// The key, as text (bytes that are not UTF-8 are replaced).
        key: String,
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
    /// The lock's hash was written by a client of another layout version (this one reads
    /// and writes layout 4: `docs/PROTOCOL.md`). Nothing was changed: the two cannot share
    /// a lock; stop the other clients, or let the hash expire.
    #[error("the lock hash {key} is of layout {found}; this client reads and writes layout 4 only, and left it untouched")]
    OtherLayout {
        /// The key.
        key: String,
        /// The layout version found in its summary.
        found: String,
    },
    /// The lock's function library is not loaded on a master (or an older revision is),
    /// and this client's user may not load it (`FUNCTION LOAD`): an operator runs
    /// `cluster-rwlock setup --url <url>` once as a user that may (the library then
    /// reaches the replicas by replication).
    #[error("the lock's function library {library} is not loaded on {node} and this user may not load it: run `cluster-rwlock setup --url <url>` as a user allowed FUNCTION LOAD")]
    NotSetUp {
        /// The master.
        node: String,
        /// The library's name.
        library: String,
    },
    /// The server lacks what the lock needs (Redis Functions and sharded pub/sub: Redis
    /// 7.0 or later, Valkey 7.2 or later).
    #[error("the server is not supported: {0}")]
    Unsupported(String),
    /// The server sent a reply this library cannot read.
    #[error("unexpected reply from the server: {0}")]
    Protocol(String),
    /// The client was closed.
    #[error("the lock client is closed")]
    Closed,
    /// A node did not answer within the time allowed (the command timeout, or the
    /// caller's deadline), or could not be connected to in that time: it may be hung,
    /// cut off or failing over. The command may or may not have run; the lock's own
    /// calls are idempotent and are sent again where that is safe. When the client
    /// itself was paused past the deadline (a stopped process, a blocked runtime), the
    /// reply that most likely came meanwhile is waited for a moment first, and the
    /// message says the client stalled when none came.
    #[error("no answer in time: {0}")]
    Unavailable(String),
    /// A guarded command ([`Grant::guarded`](crate::Grant::guarded)) that cannot run
    /// under the lock: not among the commands allowed, a write under a read hold, or
    /// too few arguments. Nothing was sent.
    #[error("invalid guarded command: {0}")]
    InvalidCommand(String),
    /// A guarded command names a key outside the lock's slot. Nothing was sent.
    #[error("the key {key:?} is in slot {key_slot}, not in the lock's slot {lock_slot}; {hint}")]
    WrongSlot {
        /// The key.
        key: String,
        /// Its slot.
        key_slot: u16,
        /// The lock's slot.
        lock_slot: u16,
        /// What would put them in one slot: a lock name with the key's hashtag, or a
        /// key with the lock's.
        hint: String,
    },
    /// A guarded command failed, or would have: by its place in the branch chosen and
    /// its name, with the server's message (`WRONGTYPE ...`, `ERR value is not an
    /// integer ...`). A guarded call is all or nothing
    /// ([`Guarded`](crate::guarded::Guarded) says how): with `nothing_ran`, NOTHING the
    /// call did stays written, no key it names changed (its value or its expiry),
    /// whether the failure was found before any command ran or (`undone`) the commands
    /// before it ran and what they wrote was put back. `nothing_ran` is false only when
    /// putting back failed too (the user may not run `RESTORE` or `DEL`: see
    /// docs/SECURITY.md): the commands before it ran and stay, the message says why, and
    /// none after it ran.
    #[error("guarded command {index} ({command}) failed, {}: {message}", if !*nothing_ran { "and what ran before it stays written" } else if *undone { "and what ran before it was undone" } else { "so nothing ran" })]
    CommandFailed {
        /// Its place in its branch, from 0.
        index: u32,
        /// Its name, in capitals (`a condition` for a condition that could not be read).
        command: String,
        /// The server's message.
        message: String,
        /// Nothing the call did stays written: it was found before any command ran, or
        /// (`undone`) the commands before it ran and were undone.
        nothing_ran: bool,
        /// The commands before it ran, and every key they wrote was put back as it was
        /// (false: it was found before any command ran, or `nothing_ran` is false).
        undone: bool,
    },
    /// A condition of a guarded call did not hold (by its place, from 0): the commands
    /// after [`otherwise`](crate::guarded::Guarded::otherwise), if any, ran instead of
    /// the others ([`Guarded::commit`](crate::guarded::Guarded::commit) returns their
    /// replies).
    #[error("guarded call: condition {index} did not hold")]
    ConditionFailed {
        /// Its place among the conditions, from 0.
        index: u32,
    },
    /// The server answered with an error: a permission refused (`NOPERM`), the
    /// cluster down (`CLUSTERDOWN`), a redirect that could not be followed in time
    /// (`MOVED`), a script error, ... [`ServerError::code`] names which.
    #[error("the server answered: {0}")]
    Server(ServerError),
    /// Talking to a node failed on the client's side: the connection was refused or
    /// broke, TLS failed, or nothing could be sent. [`ConnectionError::kind`] says which.
    #[error("{0}")]
    Connection(ConnectionError),
    /// A node could not be connected to (refused, unknown host, bad password, ...) when
    /// the client was made: which node, and why (a [`Server`](Error::Server) or
    /// [`Connection`](Error::Connection) error, which is also the
    /// [`source`](std::error::Error::source)).
    #[error("could not connect to {addr}: {source}")]
    Connect {
        /// The node's address, `host:port`.
        addr: String,
        /// Why.
        #[source]
        source: Box<Error>,
    },
}

/// An error reply of the server: its code (the reply's first word, as Redis spells it:
/// `NOPERM`, `CLUSTERDOWN`, `MOVED`, `ERR`, ...) and the whole text.
///
/// ```
/// # fn demo(e: cluster_rwlock::Error) {
/// if let cluster_rwlock::Error::Server(reply) = &e {
///     if reply.code() == "NOPERM" {
///         eprintln!("the ACL user may not: {}", reply.message());
///     }
/// }
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerError {
    text: String,
}

impl ServerError {
    /// The error code: the reply's first word (`NOPERM`, `CLUSTERDOWN`, `ERR`, ...).
    ///
    /// ```
    /// # fn demo(reply: &cluster_rwlock::error::ServerError) {
    /// let retry = matches!(reply.code(), "CLUSTERDOWN" | "TRYAGAIN" | "LOADING");
    /// # }
    /// ```
    pub fn code(&self) -> &str {
        self.text.split(' ').next().unwrap_or_default()
    }

    /// What follows the code.
    ///
    /// ```
    /// # fn demo(reply: &cluster_rwlock::error::ServerError) {
    /// println!("{}: {}", reply.code(), reply.message());
    /// # }
    /// ```
    pub fn message(&self) -> &str {
        self.text.split_once(' ').map_or("", |(_, m)| m)
    }

    /// The reply as the server sent it.
    pub(crate) fn text(&self) -> &str {
        &self.text
    }

    /// A `MOVED` or `ASK` redirect.
    pub(crate) fn is_redirect(&self) -> bool {
        matches!(self.code(), "MOVED" | "ASK")
    }

    /// Whether the same command may succeed on another node or a bit later (the
    /// cluster changes hands, a node loads its data, a slot moves).
    fn is_transient(&self) -> bool {
        matches!(
            self.code(),
            "CLUSTERDOWN" | "TRYAGAIN" | "READONLY" | "MASTERDOWN" | "LOADING" | "MOVED" | "ASK"
        )
    }

    fn is_permission(&self) -> bool {
        matches!(self.code(), "NOPERM" | "NOAUTH" | "WRONGPASS")
    }
}

impl std::fmt::Display for ServerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

/// What went wrong on a connection (see [`ConnectionError::kind`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConnectionErrorKind {
    /// The connection was refused, reset or broke (an I/O error).
    Io,
    /// TLS failed: a certificate refused, a handshake that did not finish.
    Tls,
    /// No answer within the command timeout.
    Timeout,
    /// The node had no connection to send on (it was being made again) or the client
    /// was busy: the command was not sent.
    NotSent,
    /// The command was cancelled as its connection closed: it may or may not have run.
    Closed,
    /// The client could not read or make sense of what it got.
    Protocol,
}

/// A failure on the client's side of a connection: its [`kind`](Self::kind), a sentence,
/// and the Redis client's own error as the [`source`](std::error::Error::source).
///
/// ```
/// # fn demo(e: cluster_rwlock::Error) {
/// use cluster_rwlock::error::{ConnectionErrorKind, Error};
/// if let Error::Connection(c) = &e {
///     if c.kind() == ConnectionErrorKind::Tls {
///         eprintln!("check the certificates: {c}");
///     }
/// }
/// # }
/// ```
#[derive(Debug)]
pub struct ConnectionError {
    kind: ConnectionErrorKind,
    message: String,
    source: Box<dyn std::error::Error + Send + Sync>,
}

impl ConnectionError {
    /// What went wrong.
    ///
    /// ```
    /// # fn demo(c: &cluster_rwlock::error::ConnectionError) {
    /// println!("{:?}", c.kind());
    /// # }
    /// ```
    pub fn kind(&self) -> ConnectionErrorKind {
        self.kind
    }
}

impl ConnectionError {
    /// The node could not be reached or did not answer (refused, broken, timed out, not
    /// sent, cancelled): the same call may succeed later. A TLS or protocol failure
    /// would fail again.
    fn is_link_down(&self) -> bool {
        !matches!(
            self.kind,
            ConnectionErrorKind::Tls | ConnectionErrorKind::Protocol
        )
    }
}

impl std::fmt::Display for ConnectionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ConnectionError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.source)
    }
}

impl From<ServerError> for Error {
    fn from(e: ServerError) -> Error {
        Error::Server(e)
    }
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

/// An I/O error as a sentence. The Redis client keeps an I/O error only as the text of
/// its `Debug` form (`Os { code: 111, kind: ConnectionRefused, message: "Connection
/// refused" }`, or `Custom { kind: InvalidData, error: InvalidCertificate(..) }` for a
/// TLS error inside it); this reads its words back, here and nowhere else.
fn io_sentence(details: &str) -> Option<String> {
    let message = details
        .split_once("message: \"")
        .and_then(|(_, rest)| rest.split_once('"'))
        .map(|(m, _)| m.to_lowercase());
    let kind = details
        .split_once("kind: ")
        .and_then(|(_, rest)| rest.split([',', ' ', '}', ')']).next())
        .filter(|k| !k.is_empty());
    let inner = details
        .strip_prefix("Custom {")
        .and_then(|rest| rest.split_once("error: "))
        .map(|(_, e)| e.trim_end_matches(|c: char| c == '}' || c.is_whitespace()))
        .filter(|e| !e.is_empty());
    if let (Some(kind), Some(inner)) = (kind, inner) {
        return Some(format!("{}: {}", words(kind), inner.trim_matches('"')));
    }
    message.or_else(|| kind.map(words))
}

/// Whether `details` reads as an error reply of the server: a code of capital letters
/// first (`NOPERM ...`, `ERR ...`, `CLUSTERDOWN ...`).
fn server_code(details: &str) -> bool {
    let code = details.split(' ').next().unwrap_or_default();
    code.len() >= 2
        && code
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
}

impl Error {
    /// The Redis client's error in this crate's words: an error reply of the server
    /// as [`Error::Server`], anything else as [`Error::Connection`] of its kind. The
    /// one place that reads the Redis client's errors.
    pub(crate) fn from_client(e: fred::error::Error) -> Error {
        use fred::error::ErrorKind as K;
        let details = e.details();
        let kind = match e.kind() {
            K::IO => ConnectionErrorKind::Io,
            #[cfg(feature = "tls")]
            K::Tls => ConnectionErrorKind::Tls,
            K::Timeout => ConnectionErrorKind::Timeout,
            K::Canceled => ConnectionErrorKind::Closed,
            K::Routing | K::Backpressure => ConnectionErrorKind::NotSent,
            K::Config | K::Url => return Error::InvalidConfig(details.to_string()),
            _ if server_code(details) => {
                return Error::Server(ServerError {
                    text: details.to_string(),
                })
            }
            // (the client's words when a node's connection is down: nothing was sent)
            _ if details.starts_with("Failed to route command") => ConnectionErrorKind::NotSent,
            _ => ConnectionErrorKind::Protocol,
        };
        let message = match kind {
            ConnectionErrorKind::Io => io_sentence(details),
            _ => None,
        }
        .unwrap_or_else(|| {
            if details.is_empty() {
                e.kind().to_str().to_lowercase()
            } else {
                format!("{} ({})", details, e.kind().to_str().to_lowercase())
            }
        });
        Error::Connection(ConnectionError {
            kind,
            message,
            source: Box::new(e),
        })
    }

    /// The error reply of the server this is, if it is one.
    pub(crate) fn server(&self) -> Option<&ServerError> {
        match self {
            Error::Server(s) => Some(s),
            Error::Connect { source, .. } => source.server(),
            _ => None,
        }
    }

    /// Whether the same call may succeed if made again a little later, unchanged: no
    /// answer in time, a connection or cluster error (a failover, a slot moving), a
    /// grant the replicas did not confirm, or a lock held by others until the timeout.
    /// Configuration, name, owner and layout errors, [`LockLost`](Error::LockLost),
    /// [`Broken`](Error::Broken) and [`UpgradeDeadlock`](Error::UpgradeDeadlock) are not:
    /// the same call fails again, or is not to be made again.
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
            Error::Server(e) => e.is_transient(),
            Error::Connection(e) => e.is_link_down(),
            Error::Connect { source, .. } => source.is_retryable(),
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
        matches!(self, Error::NotSetUp { .. })
            || self.server().is_some_and(ServerError::is_permission)
    }

    /// Whether the server could not be reached or did not answer in time
    /// ([`Unavailable`](Error::Unavailable), or a [`Connection`](Error::Connection)
    /// error other than TLS or protocol).
    ///
    /// ```
    /// let e = cluster_rwlock::Error::Unavailable("127.0.0.1:7001 did not answer in 1s".into());
    /// assert!(e.is_unavailable() && e.is_retryable());
    /// ```
    pub fn is_unavailable(&self) -> bool {
        match self {
            Error::Unavailable(_) => true,
            Error::Connection(e) => e.is_link_down(),
            Error::Connect { source, .. } => source.is_unavailable(),
            _ => false,
        }
    }
}

/// The Redis client's results in this crate's words (see [`Error::from_client`]): the
/// `?` of every call of the client goes through it.
pub(crate) trait ClientResult<T> {
    /// The value, or the error as this crate's.
    fn lock_err(self) -> Result<T>;
}

impl<T> ClientResult<T> for std::result::Result<T, fred::error::Error> {
    fn lock_err(self) -> Result<T> {
        self.map_err(Error::from_client)
    }
}

/// `Result` with this crate's [`Error`].
///
/// ```
/// fn check(name: &str) -> cluster_rwlock::Result<()> { Ok(()) }
/// ```
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests; // the unit tests of this module
