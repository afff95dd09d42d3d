//! Guarded commands: Redis commands on keys of the lock's slot that run only while the
//! hold is on the server ([`Grant::guarded`]).

use fred::types::Value;

use super::{Grant, RwLock};
use crate::error::{Error, Result};
use crate::mode::Mode;

/// Where a command's keys are among its arguments.
#[derive(Clone, Copy)]
enum Keys {
    /// The first argument.
    First,
    /// Every argument.
    All,
}

/// The commands a guarded call may run: name, whether it writes, where its keys are.
/// Commands on the keys of one slot that neither block, nor publish, nor touch the
/// cluster, scripts or the server: what a script may run and what a holder needs.
const COMMANDS: &[(&str, bool, Keys)] = &[
    // strings
    ("GET", false, Keys::First),
    ("MGET", false, Keys::All),
    ("STRLEN", false, Keys::First),
    ("GETRANGE", false, Keys::First),
    ("SET", true, Keys::First),
    ("SETNX", true, Keys::First),
    ("GETSET", true, Keys::First),
    ("GETDEL", true, Keys::First),
    ("APPEND", true, Keys::First),
    ("INCR", true, Keys::First),
    ("INCRBY", true, Keys::First),
    ("INCRBYFLOAT", true, Keys::First),
    ("DECR", true, Keys::First),
    ("DECRBY", true, Keys::First),
    // keys
    ("EXISTS", false, Keys::All),
    ("TYPE", false, Keys::First),
    ("TTL", false, Keys::First),
    ("PTTL", false, Keys::First),
    ("DEL", true, Keys::All),
    ("UNLINK", true, Keys::All),
    ("EXPIRE", true, Keys::First),
    ("PEXPIRE", true, Keys::First),
    ("PERSIST", true, Keys::First),
    // hashes
    ("HGET", false, Keys::First),
    ("HMGET", false, Keys::First),
    ("HGETALL", false, Keys::First),
    ("HEXISTS", false, Keys::First),
    ("HLEN", false, Keys::First),
    ("HKEYS", false, Keys::First),
    ("HVALS", false, Keys::First),
    ("HSET", true, Keys::First),
    ("HSETNX", true, Keys::First),
    ("HDEL", true, Keys::First),
    ("HINCRBY", true, Keys::First),
    ("HINCRBYFLOAT", true, Keys::First),
    // lists
    ("LRANGE", false, Keys::First),
    ("LLEN", false, Keys::First),
    ("LINDEX", false, Keys::First),
    ("LPUSH", true, Keys::First),
    ("RPUSH", true, Keys::First),
    ("LPOP", true, Keys::First),
    ("RPOP", true, Keys::First),
    ("LSET", true, Keys::First),
    ("LTRIM", true, Keys::First),
    // sets
    ("SMEMBERS", false, Keys::First),
    ("SISMEMBER", false, Keys::First),
    ("SCARD", false, Keys::First),
    ("SADD", true, Keys::First),
    ("SREM", true, Keys::First),
    // sorted sets
    ("ZSCORE", false, Keys::First),
    ("ZRANK", false, Keys::First),
    ("ZRANGE", false, Keys::First),
    ("ZCARD", false, Keys::First),
    ("ZADD", true, Keys::First),
    ("ZREM", true, Keys::First),
    ("ZINCRBY", true, Keys::First),
];

/// The most words (the command's name and its arguments) one guarded command may have:
/// the function hands a command's words to Redis as the arguments of one call, and Lua
/// cannot pass many more than 8,000 (a longer command would fail the function after the
/// commands before it ran).
pub const MAX_WORDS: usize = 4096;

/// A command that may run under the lock: its words (the name in capitals first),
/// whether it writes, and the keys it names.
struct Checked {
    words: Vec<Vec<u8>>,
    writes: bool,
    keys: Vec<Vec<u8>>,
}

/// Checks a command as [`Guarded::command`] does for a hold of `mode` on `lock`: the
/// command is allowed, a write comes with a write hold, each key is in the lock's slot
/// and is no lock's own key, the words are not too many.
fn checked(lock: &RwLock, mode: Mode, name: &str, args: Vec<Vec<u8>>) -> Result<Checked> {
    let upper = name.to_ascii_uppercase();
    let Some(&(_, writes, keys)) = COMMANDS.iter().find(|(n, _, _)| *n == upper) else {
        return Err(Error::InvalidCommand(format!(
            "{name} is not among the commands a guarded call may run"
        )));
    };
    if 1 + args.len() > MAX_WORDS {
        return Err(Error::InvalidCommand(format!(
            "{name} with {} arguments; a guarded command has at most {} (split it)",
            args.len(),
            MAX_WORDS - 1
        )));
    }
    let named: Vec<&Vec<u8>> = match keys {
        Keys::First => args.first().into_iter().collect(),
        Keys::All => args.iter().collect(),
    };
    if named.is_empty() {
        return Err(Error::InvalidCommand(format!("{name} without a key")));
    }
    let lock_slot = lock.slot();
    let prefix = &lock.raw.config().prefix;
    for key in &named {
        let key_slot = crate::slot::key_slot(key);
        if key_slot != lock_slot {
            return Err(Error::WrongSlot {
                key: String::from_utf8_lossy(key).into_owned(),
                key_slot,
                lock_slot,
                hint: same_slot_hint(lock.name(), lock.key(), key),
            });
        }
        if crate::keys::is_lock_key(prefix, key) {
            return Err(Error::LockKey {
                key: String::from_utf8_lossy(key).into_owned(),
            });
        }
    }
    if writes && mode != Mode::Write {
        return Err(Error::InvalidCommand(format!(
            "{name} writes, and this is a {} hold (writes need a write hold)",
            mode.as_str()
        )));
    }
    let keys = named.into_iter().cloned().collect();
    let mut words = Vec::with_capacity(1 + args.len());
    words.push(upper.into_bytes());
    words.extend(args);
    Ok(Checked {
        words,
        writes,
        keys,
    })
}

/// Checks, without sending anything, that the command `name` with `args` could run
/// under a hold of `mode` on `lock` ([`Guarded::command`]'s rules: an allowed command, a
/// write under a write hold, keys in the lock's slot that belong to no lock): for a
/// caller that takes the lock only for commands it knows will be accepted.
///
/// ```no_run
/// use cluster_rwlock::{guarded, Mode};
/// # fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
/// // the lock `orders:{42}`
/// guarded::check(&lock, Mode::Write, "HINCRBY", ["stock:{42}", "n", "-1"])?;
/// assert!(guarded::check(&lock, Mode::Write, "DEL", [lock.key()]).is_err());
/// assert!(guarded::check(&lock, Mode::Read, "SET", ["orders:{42}:x", "1"]).is_err());
/// # Ok(()) }
/// ```
///
/// # Errors
/// [`Error::InvalidCommand`], [`Error::WrongSlot`] and [`Error::LockKey`], as
/// [`Guarded::run`] would return them.
pub fn check<I, A>(lock: &RwLock, mode: Mode, name: &str, args: I) -> Result<()>
where
    I: IntoIterator<Item = A>,
    A: AsRef<[u8]>,
{
    let args = args.into_iter().map(|a| a.as_ref().to_vec()).collect();
    checked(lock, mode, name, args).map(|_| ())
}

/// What would put lock `name` (whose hash is `lock_key`) and `key` in one slot: a lock
/// name carrying the key's hashtag (or the key whole, when it has none), or a key
/// carrying the lock's.
fn same_slot_hint(name: &str, lock_key: &str, key: &[u8]) -> String {
    let key = String::from_utf8_lossy(key);
    let tag = String::from_utf8_lossy(crate::slot::hashtag(key.as_bytes()));
    let lock_tag = String::from_utf8_lossy(crate::slot::hashtag(lock_key.as_bytes()));
    if tag != key {
        // the key has a hashtag: a lock name with the same one shares its slot
        let bare = name.split('{').next().unwrap_or(name).trim_end_matches(':');
        let bare = if bare.is_empty() { "lock" } else { bare };
        format!(
            "a lock named {:?} would share the key's slot (or give the key the hashtag {{{lock_tag}}})",
            format!("{bare}:{{{tag}}}")
        )
    } else {
        format!("give the key the lock's hashtag: {{{lock_tag}}} (e.g. \"{key}:{{{lock_tag}}}\")")
    }
}

/// One command's reply in a guarded call. Its `Debug` shows text as text
/// (`Bytes("4651")`), bytes that are not UTF-8 as bytes.
///
/// ```
/// use cluster_rwlock::guarded::Reply;
/// assert_eq!(format!("{:?}", Reply::Bytes(b"4651".to_vec())), r#"Bytes("4651")"#);
/// assert_eq!(format!("{:?}", Reply::Bytes(vec![0xff])), "Bytes([255])");
/// ```
#[derive(Clone, PartialEq)]
#[non_exhaustive]
pub enum Reply {
    /// No value (a missing key, a field that is not there).
    Nil,
    /// An integer.
    Integer(i64),
    /// A string or a status (`OK`), as bytes.
    Bytes(Vec<u8>),
    /// A list of replies.
    Array(Vec<Reply>),
    /// The command failed (a wrong type, a value that is not a number, ...); the
    /// commands before it ran, and so did those after it (as in `MULTI`/`EXEC`).
    Error(String),
}

impl Reply {
    fn of(v: Value) -> Reply {
        match v {
            Value::Null => Reply::Nil,
            Value::Integer(i) => Reply::Integer(i),
            Value::Boolean(b) => Reply::Integer(i64::from(b)),
            Value::Double(d) => Reply::Bytes(d.to_string().into_bytes()),
            Value::String(s) => Reply::Bytes(s.as_bytes().to_vec()),
            Value::Bytes(b) => Reply::Bytes(b.to_vec()),
            Value::Array(a) => Reply::Array(a.into_iter().map(Reply::of).collect()),
            Value::Map(m) => Reply::Array(
                m.inner()
                    .into_iter()
                    .flat_map(|(k, v)| [Reply::Bytes(k.as_bytes().to_vec()), Reply::of(v)])
                    .collect(),
            ),
            Value::Queued => Reply::Nil,
        }
    }

    /// The reply as text, for a string or status reply that is UTF-8.
    ///
    /// ```
    /// use cluster_rwlock::guarded::Reply;
    /// assert_eq!(Reply::Bytes(b"paid".to_vec()).as_str(), Some("paid"));
    /// assert_eq!(Reply::Integer(1).as_str(), None);
    /// ```
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Reply::Bytes(b) => std::str::from_utf8(b).ok(),
            _ => None,
        }
    }

    /// The reply as an integer: an integer reply, or a string reply that is one in
    /// decimal (`HGET` of a counter, `GET`).
    ///
    /// ```
    /// use cluster_rwlock::guarded::Reply;
    /// assert_eq!(Reply::Integer(41).as_i64(), Some(41));
    /// assert_eq!(Reply::Bytes(b"-12".to_vec()).as_i64(), Some(-12));
    /// assert_eq!(Reply::Bytes(b"12 apples".to_vec()).as_i64(), None);
    /// assert_eq!(Reply::Nil.as_i64(), None);
    /// ```
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Reply::Integer(i) => Some(*i),
            Reply::Bytes(b) => std::str::from_utf8(b).ok()?.parse().ok(),
            _ => None,
        }
    }

    /// The reply's bytes, for a string or status reply.
    ///
    /// ```
    /// use cluster_rwlock::guarded::Reply;
    /// assert_eq!(Reply::Bytes(vec![0, 1]).as_bytes(), Some(&[0u8, 1][..]));
    /// assert_eq!(Reply::Nil.as_bytes(), None);
    /// ```
    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            Reply::Bytes(b) => Some(b),
            _ => None,
        }
    }

    /// Whether the reply is nil (a missing key or field).
    ///
    /// ```
    /// use cluster_rwlock::guarded::Reply;
    /// assert!(Reply::Nil.is_nil());
    /// assert!(!Reply::Integer(0).is_nil());
    /// ```
    pub fn is_nil(&self) -> bool {
        matches!(self, Reply::Nil)
    }

    /// The error message, for a command that failed.
    ///
    /// ```
    /// use cluster_rwlock::guarded::Reply;
    /// let r = Reply::Error("WRONGTYPE Operation against a key holding the wrong kind of value".into());
    /// assert!(r.error().is_some_and(|m| m.starts_with("WRONGTYPE")));
    /// assert_eq!(Reply::Nil.error(), None);
    /// ```
    pub fn error(&self) -> Option<&str> {
        match self {
            Reply::Error(m) => Some(m),
            _ => None,
        }
    }
}

impl std::fmt::Debug for Reply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reply::Nil => f.write_str("Nil"),
            Reply::Integer(i) => f.debug_tuple("Integer").field(i).finish(),
            Reply::Bytes(b) => match std::str::from_utf8(b) {
                Ok(s) => f.debug_tuple("Bytes").field(&s).finish(),
                Err(_) => f.debug_tuple("Bytes").field(b).finish(),
            },
            Reply::Array(a) => f.debug_tuple("Array").field(a).finish(),
            Reply::Error(m) => f.debug_tuple("Error").field(m).finish(),
        }
    }
}

/// Commands to run while a hold is on the server, made by [`Grant::guarded`]: add
/// commands with [`command`](Self::command) (or the shorthands), then
/// [`run`](Self::run) them, all in one function call on the lock's node.
///
/// ```no_run
/// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
/// // the lock `orders:{42}` lives in the slot of `{42}`, with the order's data
/// let guard = lock.write().await?;
/// let replies = guard
///     .guarded()
///     .set("orders:{42}:status", "paid")
///     .command("HINCRBY", ["stock:{42}", "n", "-1"])
///     .run()
///     .await?; // Error::LockLost, and nothing written, if the hold is gone
/// assert_eq!(replies[1].as_i64(), Some(9));
/// guard.release().await?;
/// # Ok(()) }
/// ```
#[must_use = "nothing is sent until `run` is awaited"]
pub struct Guarded<'a> {
    grant: &'a Grant,
    commands: Vec<Vec<Vec<u8>>>,
    keys: Vec<Vec<u8>>,
    writes: bool,
    /// The first mistake in the commands added: `run` returns it, sending nothing.
    refused: Option<Error>,
}

impl<'a> Guarded<'a> {
    pub(crate) fn new(grant: &'a Grant) -> Guarded<'a> {
        Guarded {
            grant,
            commands: Vec::new(),
            keys: Vec::new(),
            writes: false,
            refused: None,
        }
    }

    /// Adds the command `name` with its arguments, keys first (`SET key value`, `HINCRBY
    /// key field n`, `DEL key key ...`). Arguments are bytes, so any value may be sent
    /// (the fence is [`Grant::fence`], known before the call: put it in any argument).
    /// The commands allowed are those on keys that neither block nor publish nor touch
    /// scripts, the cluster or the server (strings, hashes, lists, sets, sorted sets,
    /// `DEL`, `EXPIRE`, ...; see the crate docs); a command that writes needs a write
    /// hold. A command outside that set, a key outside the lock's slot, or a key that
    /// belongs to a lock (the hash or release channel of ANY lock under the client's
    /// prefix: [`Error::LockKey`]) makes [`run`](Self::run) fail without sending
    /// anything; so does a command of more than [`MAX_WORDS`] words. [`check`] tells the
    /// same without a hold.
    ///
    /// ```no_run
    /// # async fn demo(guard: cluster_rwlock::WriteGuard) -> cluster_rwlock::Result<()> {
    /// let fence = guard.fence().to_string();
    /// guard
    ///     .guarded()
    ///     .command("HSET", ["orders:{42}", "status", "paid", "fence", fence.as_str()])
    ///     .run()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn command<I, A>(mut self, name: &str, args: I) -> Guarded<'a>
    where
        I: IntoIterator<Item = A>,
        A: AsRef<[u8]>,
    {
        if self.refused.is_some() {
            return self;
        }
        let args = args.into_iter().map(|a| a.as_ref().to_vec()).collect();
        match checked(&self.grant.lock, self.grant.mode(), name, args) {
            Err(e) => self.refused = Some(e),
            Ok(Checked {
                words,
                writes,
                keys,
            }) => {
                for key in keys {
                    if !self.keys.contains(&key) {
                        self.keys.push(key);
                    }
                }
                self.writes |= writes;
                self.commands.push(words);
            }
        }
        self
    }

    /// `SET key value`.
    ///
    /// ```no_run
    /// # async fn demo(guard: cluster_rwlock::WriteGuard) -> cluster_rwlock::Result<()> {
    /// guard.guarded().set("orders:{42}:status", "paid").run().await?;
    /// # Ok(()) }
    /// ```
    pub fn set(self, key: &str, value: impl AsRef<[u8]>) -> Guarded<'a> {
        self.command("SET", [key.as_bytes(), value.as_ref()])
    }

    /// `GET key`.
    ///
    /// ```no_run
    /// # async fn demo(guard: cluster_rwlock::ReadGuard) -> cluster_rwlock::Result<()> {
    /// let status = guard.guarded().get("orders:{42}:status").run().await?;
    /// println!("{:?}", status[0].as_str());
    /// # Ok(()) }
    /// ```
    pub fn get(self, key: &str) -> Guarded<'a> {
        self.command("GET", [key])
    }

    /// `DEL key`.
    ///
    /// ```no_run
    /// # async fn demo(guard: cluster_rwlock::WriteGuard) -> cluster_rwlock::Result<()> {
    /// guard.guarded().del("orders:{42}:draft").run().await?;
    /// # Ok(()) }
    /// ```
    pub fn del(self, key: &str) -> Guarded<'a> {
        self.command("DEL", [key])
    }

    /// Runs the commands in one function call on the lock's node, after checking there that the
    /// hold is still there and its lease, by the server's clock, has not run out: each
    /// command's reply, in order ([`Reply::Error`] for a command that failed: the others
    /// ran, as in `MULTI`/`EXEC`).
    ///
    /// Confirmed as grants are (see [`Durability`](crate::Durability)): by default the
    /// replies come back once the replicas that could be promoted have the writes, so
    /// that a confirmed write survives a failover with the hold.
    ///
    /// # Cancel safety
    /// Once sent, the commands run whether or not the future is awaited to the end; a
    /// dropped future does not tell whether they ran.
    ///
    /// # Errors
    /// - [`Error::LockLost`]: the hold is not on the server (its lease ran out, it was
    ///   broken by [`force_release`](crate::LockClient::force_release), or lost in a
    ///   failover): NOTHING ran.
    /// - [`Error::InvalidCommand`], [`Error::WrongSlot`], [`Error::LockKey`]: a command
    ///   that may not run, a write under a read hold, a key outside the lock's slot or
    ///   one that belongs to a lock: nothing was sent.
    /// - [`Error::WriteNotReplicated`]: the commands RAN on the master (nothing is
    ///   undone), but too few replicas acknowledged them in time: a failover now may lose
    ///   them (and the hold). Read the data back before writing again.
    /// - [`Error::Unavailable`]: no answer in time; the commands may or may not have run
    ///   (they are not sent again, since running them twice could write twice).
    pub async fn run(self) -> Result<Vec<Reply>> {
        if let Some(e) = self.refused {
            return Err(e);
        }
        if self.commands.is_empty() {
            return Ok(Vec::new());
        }
        let replies = self
            .grant
            .hold
            .guarded(self.writes, &self.keys, &self.commands)
            .await?;
        Ok(replies
            .into_iter()
            .map(|r| match r {
                Ok(v) => Reply::of(v),
                Err(message) => Reply::Error(message),
            })
            .collect())
    }

    /// As [`run`](Self::run), with the first command that failed turned into
    /// [`Error::CommandFailed`], which names it: for callers that treat any failed
    /// command as an error (the commands after it ran all the same).
    ///
    /// ```no_run
    /// # async fn demo(guard: cluster_rwlock::WriteGuard) -> cluster_rwlock::Result<()> {
    /// let replies = guard
    ///     .guarded()
    ///     .command("HINCRBY", ["stock:{42}", "n", "-1"])
    ///     .run_checked()
    ///     .await?; // Err(CommandFailed { command: "HINCRBY", .. }) on a bad value
    /// let left = replies[0].as_i64();
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// As [`run`](Self::run).
    ///
    /// # Errors
    /// As [`run`](Self::run), and [`Error::CommandFailed`].
    pub async fn run_checked(self) -> Result<Vec<Reply>> {
        let names: Vec<String> = self
            .commands
            .iter()
            .map(|words| String::from_utf8_lossy(words.first().map_or(&[][..], |w| w)).into())
            .collect();
        let replies = self.run().await?;
        match replies.iter().position(|r| r.error().is_some()) {
            None => Ok(replies),
            Some(index) => Err(Error::CommandFailed {
                index: u32::try_from(index).unwrap_or(u32::MAX),
                command: names.get(index).cloned().unwrap_or_default(),
                message: replies[index].error().unwrap_or_default().to_string(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_in_another_slot_gets_a_name_that_would_share_it() {
        let hint = same_slot_hint(
            "orders-42",
            &crate::keys::lock_key("p", "orders-42"),
            b"stock:{42}",
        );
        assert!(hint.contains(r#""orders-42:{42}""#), "{hint}");
        let suggested = crate::keys::lock_key("p", "orders-42:{42}");
        assert_eq!(
            crate::slot::key_slot(suggested.as_bytes()),
            crate::slot::key_slot(b"stock:{42}")
        );
        let hint = same_slot_hint(
            "orders:{7}",
            &crate::keys::lock_key("p", "orders:{7}"),
            b"stock:{42}",
        );
        assert!(hint.contains(r#""orders:{42}""#), "{hint}");
        let hint = same_slot_hint(
            "orders:{42}",
            &crate::keys::lock_key("p", "orders:{42}"),
            b"stock42",
        );
        assert!(
            hint.contains("{42}") && hint.contains("stock42:{42}"),
            "{hint}"
        );
    }

    #[test]
    fn replies_read_as_users_expect() {
        assert_eq!(Reply::Bytes(b"4651".to_vec()).as_i64(), Some(4651));
        assert_eq!(
            format!("{:?}", Reply::Bytes(b"4651".to_vec())),
            "Bytes(\"4651\")"
        );
        assert_eq!(
            format!("{:?}", Reply::Array(vec![Reply::Nil, Reply::Integer(2)])),
            "Array([Nil, Integer(2)])"
        );
    }

    #[test]
    fn every_command_is_named_once_in_capitals() {
        for (i, (name, _, _)) in COMMANDS.iter().enumerate() {
            assert_eq!(name.to_ascii_uppercase(), *name);
            assert!(
                COMMANDS[i + 1..].iter().all(|(n, _, _)| n != name),
                "{name} twice"
            );
        }
        // what must never run in a script under the lock
        for refused in [
            "BLPOP", "PUBLISH", "EVAL", "CLUSTER", "FLUSHALL", "KEYS", "WAIT",
        ] {
            assert!(COMMANDS.iter().all(|(n, _, _)| *n != refused), "{refused}");
        }
    }

    #[test]
    fn replies_are_the_crates_own() {
        assert_eq!(Reply::of(Value::Null), Reply::Nil);
        assert_eq!(Reply::of(Value::Integer(3)), Reply::Integer(3));
        assert_eq!(
            Reply::of(Value::Bytes(vec![0, 255].into())),
            Reply::Bytes(vec![0, 255])
        );
        assert_eq!(
            Reply::of(Value::Array(vec![Value::String("OK".into())])),
            Reply::Array(vec![Reply::Bytes(b"OK".to_vec())])
        );
    }
}
