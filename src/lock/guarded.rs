//! Guarded commands: Redis commands on keys of the lock's slot that run only while the
//! hold is on the server ([`Grant::guarded`]).

use fred::types::Value;

use super::{Grant, RwLock};
use crate::error::{Error, Result};
use crate::mode::Mode;
use crate::scripts::GuardedReply;

/// Where a command's keys are among its arguments.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Keys {
    /// The first argument.
    First,
    /// Every argument.
    All,
}

/// A command a guarded call may run, and what can be checked of it before it runs.
struct Spec {
    /// Its name, in capitals.
    name: &'static str,
    /// Whether it writes (it needs a write hold).
    writes: bool,
    /// Where its keys are.
    keys: Keys,
    /// What the function checks before any command runs (`lua/guarded.lua`): the type
    /// its key must have, what it leaves there, the value it adds to.
    check: &'static str,
    /// The fewest and the most arguments it takes (its name not counted).
    args: (usize, usize),
    /// The places (among the arguments, from 0) of those that must be integers.
    integers: &'static [usize],
    /// After the key, its arguments come in pairs (`HSET key field value ...`).
    pairs: bool,
}

const ANY: usize = usize::MAX;

const fn spec(
    name: &'static str,
    writes: bool,
    keys: Keys,
    check: &'static str,
    args: (usize, usize),
    integers: &'static [usize],
) -> Spec {
    Spec {
        name,
        writes,
        keys,
        check,
        args,
        integers,
        pairs: false,
    }
}

use Keys::{All, First};

/// The commands a guarded call may run. Commands on the keys of one slot that neither
/// block, nor publish, nor touch the cluster, scripts or the server: what a script may
/// run and what a holder needs. `check` is three letters (`lua/guarded.lua`): the type
/// the key must have (`s` string, `h` hash, `l` list, `S` set, `z` sorted set, `*` any),
/// what the command leaves there (`.` nothing changed, `=` that type, `0` no key, `s` a
/// string, `?` cannot be told), the value it adds to (`i` an integer, `f` a number,
/// `-` none).
const COMMANDS: &[Spec] = &[
    // strings
    spec("GET", false, First, "s.-", (1, 1), &[]),
    spec("MGET", false, All, "*.-", (1, ANY), &[]),
    spec("STRLEN", false, First, "s.-", (1, 1), &[]),
    spec("GETRANGE", false, First, "s.-", (3, 3), &[1, 2]),
    spec("SET", true, First, "*s-", (2, ANY), &[]),
    spec("SETNX", true, First, "*?-", (2, 2), &[]),
    spec("GETSET", true, First, "ss-", (2, 2), &[]),
    spec("GETDEL", true, First, "s0-", (1, 1), &[]),
    spec("APPEND", true, First, "s=-", (2, 2), &[]),
    spec("INCR", true, First, "s=i", (1, 1), &[]),
    spec("INCRBY", true, First, "s=i", (2, 2), &[1]),
    spec("INCRBYFLOAT", true, First, "s=f", (2, 2), &[]),
    spec("DECR", true, First, "s=i", (1, 1), &[]),
    spec("DECRBY", true, First, "s=i", (2, 2), &[1]),
    // keys
    spec("EXISTS", false, All, "*.-", (1, ANY), &[]),
    spec("TYPE", false, First, "*.-", (1, 1), &[]),
    spec("TTL", false, First, "*.-", (1, 1), &[]),
    spec("PTTL", false, First, "*.-", (1, 1), &[]),
    spec("DEL", true, All, "*0-", (1, ANY), &[]),
    spec("UNLINK", true, All, "*0-", (1, ANY), &[]),
    // (an expiry in the past deletes the key)
    spec("EXPIRE", true, First, "*?-", (2, 3), &[1]),
    spec("PEXPIRE", true, First, "*?-", (2, 3), &[1]),
    spec("PERSIST", true, First, "*.-", (1, 1), &[]),
    // hashes
    spec("HGET", false, First, "h.-", (2, 2), &[]),
    spec("HMGET", false, First, "h.-", (2, ANY), &[]),
    spec("HGETALL", false, First, "h.-", (1, 1), &[]),
    spec("HEXISTS", false, First, "h.-", (2, 2), &[]),
    spec("HLEN", false, First, "h.-", (1, 1), &[]),
    spec("HKEYS", false, First, "h.-", (1, 1), &[]),
    spec("HVALS", false, First, "h.-", (1, 1), &[]),
    Spec {
        pairs: true,
        ..spec("HSET", true, First, "h=-", (3, ANY), &[])
    },
    spec("HSETNX", true, First, "h=-", (3, 3), &[]),
    spec("HDEL", true, First, "h?-", (2, ANY), &[]),
    spec("HINCRBY", true, First, "h=i", (3, 3), &[2]),
    spec("HINCRBYFLOAT", true, First, "h=f", (3, 3), &[]),
    // lists
    spec("LRANGE", false, First, "l.-", (3, 3), &[1, 2]),
    spec("LLEN", false, First, "l.-", (1, 1), &[]),
    spec("LINDEX", false, First, "l.-", (2, 2), &[1]),
    spec("LPUSH", true, First, "l=-", (2, ANY), &[]),
    spec("RPUSH", true, First, "l=-", (2, ANY), &[]),
    spec("LPOP", true, First, "l?-", (1, 2), &[1]),
    spec("RPOP", true, First, "l?-", (1, 2), &[1]),
    spec("LSET", true, First, "l.-", (3, 3), &[1]),
    spec("LTRIM", true, First, "l?-", (3, 3), &[1, 2]),
    // sets
    spec("SMEMBERS", false, First, "S.-", (1, 1), &[]),
    spec("SISMEMBER", false, First, "S.-", (2, 2), &[]),
    spec("SCARD", false, First, "S.-", (1, 1), &[]),
    spec("SADD", true, First, "S=-", (2, ANY), &[]),
    spec("SREM", true, First, "S?-", (2, ANY), &[]),
    // sorted sets
    spec("ZSCORE", false, First, "z.-", (2, 2), &[]),
    spec("ZRANK", false, First, "z.-", (2, 3), &[]),
    spec("ZRANGE", false, First, "z.-", (3, ANY), &[]),
    spec("ZCARD", false, First, "z.-", (1, 1), &[]),
    spec("ZADD", true, First, "z=-", (3, ANY), &[]),
    spec("ZREM", true, First, "z?-", (2, ANY), &[]),
    spec("ZINCRBY", true, First, "z=-", (3, 3), &[]),
];

/// The most words (the command's name and its arguments) one guarded command may have:
/// the function hands a command's words to Redis as the arguments of one call, and Lua
/// cannot pass many more than 8,000 (a longer command would fail the function after the
/// commands before it ran).
pub const MAX_WORDS: usize = 4096;

/// A command that may run under the lock: its words as the function takes them (the
/// count, the check, the name in capitals, the arguments), whether it writes, the keys
/// it names.
struct Checked {
    words: Vec<Vec<u8>>,
    writes: bool,
    keys: Vec<Vec<u8>>,
}

/// Checks that `key` may be named under `lock`: in its slot, and no lock's own key.
fn check_key(lock: &RwLock, key: &[u8]) -> Result<()> {
    let key_slot = crate::slot::key_slot(key);
    let lock_slot = lock.slot();
    if key_slot != lock_slot {
        return Err(Error::WrongSlot {
            key: String::from_utf8_lossy(key).into_owned(),
            key_slot,
            lock_slot,
            hint: same_slot_hint(lock.name(), lock.key(), key),
        });
    }
    if crate::keys::is_lock_key(&lock.raw.config().prefix, key) {
        return Err(Error::LockKey {
            key: String::from_utf8_lossy(key).into_owned(),
        });
    }
    Ok(())
}

/// Checks a command as [`Guarded::command`] does for a hold of `mode` on `lock` (`None`:
/// the mode is not known yet): the command is allowed, its arguments are as many as it
/// takes (and numbers where it takes numbers), a write comes with a write hold, each key
/// is in the lock's slot and is no lock's own key, the words are not too many.
fn checked(lock: &RwLock, mode: Option<Mode>, name: &str, args: Vec<Vec<u8>>) -> Result<Checked> {
    let upper = name.to_ascii_uppercase();
    let Some(spec) = COMMANDS.iter().find(|c| c.name == upper) else {
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
    let (fewest, most) = spec.args;
    let unpaired = spec.pairs && args.len().is_multiple_of(2);
    if args.len() < fewest || args.len() > most || unpaired {
        let takes = match (fewest, most) {
            (a, b) if a == b => format!("{a}"),
            (a, ANY) if spec.pairs => format!("a key and pairs ({a}, {}, ...)", a + 2),
            (a, ANY) => format!("at least {a}"),
            (a, b) => format!("{a} to {b}"),
        };
        return Err(Error::InvalidCommand(format!(
            "{upper} with {} argument(s); it takes {takes}",
            args.len()
        )));
    }
    for &at in spec.integers {
        if let Some(arg) = args.get(at) {
            let is_integer = std::str::from_utf8(arg).is_ok_and(|a| a.parse::<i64>().is_ok());
            if !is_integer {
                return Err(Error::InvalidCommand(format!(
                    "{upper}: argument {} ({:?}) must be an integer",
                    at + 1,
                    String::from_utf8_lossy(arg)
                )));
            }
        }
    }
    let named: Vec<&Vec<u8>> = match spec.keys {
        First => args.first().into_iter().collect(),
        All => args.iter().collect(),
    };
    for key in &named {
        check_key(lock, key)?;
    }
    if spec.writes && mode.is_some_and(|m| m != Mode::Write) {
        return Err(Error::InvalidCommand(format!(
            "{name} writes, and this is a {} hold (writes need a write hold)",
            mode.map_or("", Mode::as_str)
        )));
    }
    let keys = named.into_iter().cloned().collect();
    let mut words = Vec::with_capacity(3 + args.len());
    words.push((1 + args.len()).to_string().into_bytes());
    let mut check = spec.check.as_bytes().to_vec();
    check.push(if spec.keys == All { b'a' } else { b'1' });
    words.push(check);
    words.push(upper.into_bytes());
    words.extend(args);
    Ok(Checked {
        words,
        writes: spec.writes,
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
    checked(lock, Some(mode), name, args).map(|_| ())
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

/// A condition of a guarded call, checked on the server before any command runs:
/// [`Guarded::when`] and [`Batch::when`]. Every condition must hold for the commands
/// to run; when one does not, the commands after [`otherwise`](Guarded::otherwise)
/// run instead (as etcd's `Txn().If(..).Then(..).Else(..)`).
///
/// ```
/// use cluster_rwlock::guarded::Condition;
/// let in_stock = Condition::field("stock:{42}", "n").gt(0);
/// let unpaid = Condition::value("orders:{42}:status").ne("paid");
/// let fresh = Condition::missing("orders:{42}:draft");
/// # let _ = (in_stock, unpaid, fresh);
/// ```
#[derive(Clone, Debug)]
#[must_use = "a condition does nothing until given to `when`"]
pub struct Condition {
    /// Its words as the function takes them (`lua/guarded.lua`), without their count.
    words: Vec<Vec<u8>>,
}

/// What a [`Condition`] compares: the string value at a key ([`Condition::value`]) or a
/// field of a hash ([`Condition::field`]). A missing value, or one that is not an integer,
/// fails the integer comparisons (`lt`, `le`, `gt`, `ge`), which compare exactly (64
/// bits).
#[derive(Clone, Debug)]
#[must_use = "a comparison is made by `eq`, `gt`, `exists`, ..."]
pub struct Compare {
    /// The source and the key (and field) read.
    words: Vec<Vec<u8>>,
}

impl Condition {
    /// The key exists (of any type).
    ///
    /// ```
    /// let c = cluster_rwlock::guarded::Condition::exists("orders:{42}");
    /// # let _ = c;
    /// ```
    pub fn exists(key: impl AsRef<[u8]>) -> Condition {
        Condition {
            words: vec![b"e".to_vec(), key.as_ref().to_vec(), b"exists".to_vec()],
        }
    }

    /// The key does not exist.
    ///
    /// ```
    /// let c = cluster_rwlock::guarded::Condition::missing("orders:{42}:draft");
    /// # let _ = c;
    /// ```
    pub fn missing(key: impl AsRef<[u8]>) -> Condition {
        Condition {
            words: vec![b"e".to_vec(), key.as_ref().to_vec(), b"missing".to_vec()],
        }
    }

    /// The string value at `key` (`GET`), to compare. A key of another type makes the
    /// call fail before anything runs ([`Error::CommandFailed`]).
    ///
    /// ```
    /// let c = cluster_rwlock::guarded::Condition::value("orders:{42}:status").eq("new");
    /// # let _ = c;
    /// ```
    pub fn value(key: impl AsRef<[u8]>) -> Compare {
        Compare {
            words: vec![b"k".to_vec(), key.as_ref().to_vec()],
        }
    }

    /// The field `field` of the hash at `key` (`HGET`), to compare.
    ///
    /// ```
    /// let c = cluster_rwlock::guarded::Condition::field("stock:{42}", "n").ge(1);
    /// # let _ = c;
    /// ```
    pub fn field(key: impl AsRef<[u8]>, field: impl AsRef<[u8]>) -> Compare {
        Compare {
            words: vec![
                b"f".to_vec(),
                key.as_ref().to_vec(),
                field.as_ref().to_vec(),
            ],
        }
    }

    /// The key it reads.
    fn key(&self) -> &[u8] {
        &self.words[1]
    }
}

impl Compare {
    fn with(mut self, test: &str, operand: Option<Vec<u8>>) -> Condition {
        self.words.push(test.as_bytes().to_vec());
        self.words.extend(operand);
        Condition { words: self.words }
    }

    /// The value is there.
    ///
    /// ```
    /// let c = cluster_rwlock::guarded::Condition::field("orders:{42}", "paid_at").exists();
    /// # let _ = c;
    /// ```
    pub fn exists(self) -> Condition {
        self.with("exists", None)
    }

    /// The value is not there.
    ///
    /// ```
    /// let c = cluster_rwlock::guarded::Condition::field("orders:{42}", "paid_at").missing();
    /// # let _ = c;
    /// ```
    pub fn missing(self) -> Condition {
        self.with("missing", None)
    }

    /// The value is these bytes (a missing value is not).
    ///
    /// ```
    /// let c = cluster_rwlock::guarded::Condition::value("orders:{42}:status").eq("new");
    /// # let _ = c;
    /// ```
    pub fn eq(self, bytes: impl AsRef<[u8]>) -> Condition {
        self.with("eq", Some(bytes.as_ref().to_vec()))
    }

    /// The value is not these bytes (a missing value is not them).
    ///
    /// ```
    /// let c = cluster_rwlock::guarded::Condition::value("orders:{42}:status").ne("paid");
    /// # let _ = c;
    /// ```
    pub fn ne(self, bytes: impl AsRef<[u8]>) -> Condition {
        self.with("ne", Some(bytes.as_ref().to_vec()))
    }

    /// The value is an integer below `n`.
    ///
    /// ```
    /// let c = cluster_rwlock::guarded::Condition::field("stock:{42}", "n").lt(100);
    /// # let _ = c;
    /// ```
    pub fn lt(self, n: i64) -> Condition {
        self.with("lt", Some(n.to_string().into_bytes()))
    }

    /// The value is an integer at most `n`.
    ///
    /// ```
    /// let c = cluster_rwlock::guarded::Condition::field("stock:{42}", "n").le(99);
    /// # let _ = c;
    /// ```
    pub fn le(self, n: i64) -> Condition {
        self.with("le", Some(n.to_string().into_bytes()))
    }

    /// The value is an integer above `n`.
    ///
    /// ```
    /// let c = cluster_rwlock::guarded::Condition::field("stock:{42}", "n").gt(0);
    /// # let _ = c;
    /// ```
    pub fn gt(self, n: i64) -> Condition {
        self.with("gt", Some(n.to_string().into_bytes()))
    }

    /// The value is an integer at least `n`.
    ///
    /// ```
    /// let c = cluster_rwlock::guarded::Condition::field("stock:{42}", "n").ge(1);
    /// # let _ = c;
    /// ```
    pub fn ge(self, n: i64) -> Condition {
        self.with("ge", Some(n.to_string().into_bytes()))
    }
}

/// What a guarded call with conditions did ([`Guarded::commit`]).
///
/// ```no_run
/// # async fn demo(guard: cluster_rwlock::WriteGuard) -> cluster_rwlock::Result<()> {
/// use cluster_rwlock::guarded::Condition;
/// let out = guard
///     .guarded()
///     .when(Condition::field("stock:{42}", "n").gt(0))
///     .command("HINCRBY", ["stock:{42}", "n", "-1"])
///     .otherwise()
///     .command("HGET", ["stock:{42}", "n"])
///     .commit()
///     .await?;
/// if !out.succeeded {
///     println!("sold out: {:?}", out.replies[0]);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Outcome {
    /// Every condition held: the commands before [`otherwise`](Guarded::otherwise)
    /// ran (always, for a call without conditions); else those after it ran.
    pub succeeded: bool,
    /// The first condition that did not hold, by its place (from 0).
    pub failed_condition: Option<u32>,
    /// The replies of the commands that ran, in order. A command that failed ends the
    /// list with its [`Reply::Error`]: the commands after it did not run.
    pub replies: Vec<Reply>,
}

/// Conditions and commands for one guarded call, built and checked before the lock is
/// taken, and run under a guard later ([`Batch::run`], [`Batch::commit`]): for a caller
/// that must not wait for a lock to find its commands refused (the CLI's `exec`), or that
/// builds its call once. [`Grant::guarded`] builds the same under a guard already held.
///
/// ```no_run
/// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
/// use cluster_rwlock::guarded::{Batch, Condition};
/// let batch = Batch::new(&lock)
///     .when(Condition::field("stock:{42}", "n").gt(0))
///     .command("HINCRBY", ["stock:{42}", "n", "-1"])
///     .command("RPUSH", ["orders:{42}", "order-7"])
///     .check()?; // a mistake is found here, before waiting for the lock
/// let guard = lock.write().await?;
/// let out = batch.commit(&guard).await?;
/// guard.release().await?;
/// println!("sold: {}", out.succeeded);
/// # Ok(()) }
/// ```
#[must_use = "nothing is sent until `run` or `commit` is awaited"]
pub struct Batch {
    lock: RwLock,
    /// The mode of the hold it is built under, when known (a [`Guarded`]).
    mode: Option<Mode>,
    /// The conditions' words, each led by its count.
    conditions: Vec<Vec<u8>>,
    condition_count: u32,
    /// The then-branch's and the else-branch's words, and their commands' names.
    then: (Vec<Vec<u8>>, Vec<String>),
    otherwise: (Vec<Vec<u8>>, Vec<String>),
    in_else: bool,
    keys: Vec<Vec<u8>>,
    writes: bool,
    /// The first mistake: `run` returns it, sending nothing.
    refused: Option<Error>,
}

impl std::fmt::Debug for Batch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batch")
            .field("lock", &self.lock.name())
            .field("conditions", &self.condition_count)
            .field("then", &self.then.1)
            .field("otherwise", &self.otherwise.1)
            .field("writes", &self.writes)
            .field("refused", &self.refused)
            .finish()
    }
}

impl Batch {
    /// An empty call on `lock`'s slot.
    ///
    /// ```no_run
    /// # fn demo(lock: cluster_rwlock::RwLock) {
    /// let batch = cluster_rwlock::guarded::Batch::new(&lock).set("orders:{42}:status", "paid");
    /// assert!(batch.writes());
    /// # }
    /// ```
    pub fn new(lock: &RwLock) -> Batch {
        Batch {
            lock: lock.clone(),
            mode: None,
            conditions: Vec::new(),
            condition_count: 0,
            then: (Vec::new(), Vec::new()),
            otherwise: (Vec::new(), Vec::new()),
            in_else: false,
            keys: Vec::new(),
            writes: false,
            refused: None,
        }
    }

    fn declare(&mut self, key: &[u8]) {
        if !self.keys.iter().any(|k| k == key) {
            self.keys.push(key.to_vec());
        }
    }

    /// Adds a condition (see [`Guarded::when`]).
    ///
    /// ```no_run
    /// # fn demo(lock: cluster_rwlock::RwLock) {
    /// use cluster_rwlock::guarded::{Batch, Condition};
    /// let batch = Batch::new(&lock).when(Condition::missing("orders:{42}:paid"));
    /// # let _ = batch;
    /// # }
    /// ```
    pub fn when(mut self, condition: Condition) -> Batch {
        if self.refused.is_some() {
            return self;
        }
        if let Err(e) = check_key(&self.lock, condition.key()) {
            self.refused = Some(e);
            return self;
        }
        self.declare(condition.key());
        self.conditions
            .push(condition.words.len().to_string().into_bytes());
        self.conditions.extend(condition.words);
        self.condition_count += 1;
        self
    }

    /// Adds a command (see [`Guarded::command`]), to the then-branch, or after
    /// [`otherwise`](Self::otherwise) to the else-branch.
    ///
    /// ```no_run
    /// # fn demo(lock: cluster_rwlock::RwLock) {
    /// let batch = cluster_rwlock::guarded::Batch::new(&lock).command("HINCRBY", ["stock:{42}", "n", "-1"]);
    /// # let _ = batch;
    /// # }
    /// ```
    pub fn command<I, A>(mut self, name: &str, args: I) -> Batch
    where
        I: IntoIterator<Item = A>,
        A: AsRef<[u8]>,
    {
        if self.refused.is_some() {
            return self;
        }
        let args = args.into_iter().map(|a| a.as_ref().to_vec()).collect();
        match checked(&self.lock, self.mode, name, args) {
            Err(e) => self.refused = Some(e),
            Ok(Checked {
                words,
                writes,
                keys,
            }) => {
                for key in &keys {
                    self.declare(key);
                }
                self.writes |= writes;
                let branch = if self.in_else {
                    &mut self.otherwise
                } else {
                    &mut self.then
                };
                branch
                    .1
                    .push(String::from_utf8_lossy(&words[2]).into_owned());
                branch.0.extend(words);
            }
        }
        self
    }

    /// `SET key value`.
    ///
    /// ```no_run
    /// # fn demo(lock: cluster_rwlock::RwLock) {
    /// let batch = cluster_rwlock::guarded::Batch::new(&lock).set("orders:{42}:status", "paid");
    /// # let _ = batch;
    /// # }
    /// ```
    pub fn set(self, key: &str, value: impl AsRef<[u8]>) -> Batch {
        self.command("SET", [key.as_bytes(), value.as_ref()])
    }

    /// `GET key`.
    ///
    /// ```no_run
    /// # fn demo(lock: cluster_rwlock::RwLock) {
    /// let batch = cluster_rwlock::guarded::Batch::new(&lock).get("orders:{42}:status");
    /// # let _ = batch;
    /// # }
    /// ```
    pub fn get(self, key: &str) -> Batch {
        self.command("GET", [key])
    }

    /// `DEL key`.
    ///
    /// ```no_run
    /// # fn demo(lock: cluster_rwlock::RwLock) {
    /// let batch = cluster_rwlock::guarded::Batch::new(&lock).del("orders:{42}:draft");
    /// # let _ = batch;
    /// # }
    /// ```
    pub fn del(self, key: &str) -> Batch {
        self.command("DEL", [key])
    }

    /// The commands added from here on run when a condition does not hold (see
    /// [`Guarded::otherwise`]).
    ///
    /// ```no_run
    /// # fn demo(lock: cluster_rwlock::RwLock) {
    /// use cluster_rwlock::guarded::{Batch, Condition};
    /// let batch = Batch::new(&lock)
    ///     .when(Condition::field("stock:{42}", "n").gt(0))
    ///     .command("HINCRBY", ["stock:{42}", "n", "-1"])
    ///     .otherwise()
    ///     .command("HGET", ["stock:{42}", "n"]);
    /// # let _ = batch;
    /// # }
    /// ```
    pub fn otherwise(mut self) -> Batch {
        self.in_else = true;
        self
    }

    /// Whether a command writes: the call needs a write hold.
    ///
    /// ```no_run
    /// # fn demo(lock: cluster_rwlock::RwLock) {
    /// assert!(!cluster_rwlock::guarded::Batch::new(&lock).get("orders:{42}").writes());
    /// # }
    /// ```
    pub fn writes(&self) -> bool {
        self.writes
    }

    /// The batch, or the first mistake in it (what [`run`](Self::run) would return
    /// without sending anything): check it before taking the lock.
    ///
    /// ```no_run
    /// # fn demo(lock: cluster_rwlock::RwLock) {
    /// use cluster_rwlock::guarded::Batch;
    /// assert!(Batch::new(&lock).command("HINCRBY", ["stock:{42}", "n"]).check().is_err());
    /// # }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidCommand`] (a command that may not run, or with the wrong number
    /// of arguments, or a word that must be a number and is not), [`Error::WrongSlot`],
    /// [`Error::LockKey`].
    pub fn check(self) -> Result<Batch> {
        match self.refused {
            Some(e) => Err(e),
            None => Ok(self),
        }
    }

    /// Runs the call under `guard` (a guard of the same lock): the replies of the
    /// commands that ran ([`Guarded::run`]'s rules).
    ///
    /// # Cancel safety
    /// As [`Guarded::run`].
    ///
    /// # Errors
    /// As [`Guarded::run`]; [`Error::InvalidCommand`] for a guard of another lock, or a
    /// command that writes under a read guard (nothing sent).
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// let batch = cluster_rwlock::guarded::Batch::new(&lock).get("orders:{42}:status").check()?;
    /// let guard = lock.read().await?;
    /// let replies = batch.run(&guard).await?;
    /// # Ok(()) }
    /// ```
    pub async fn run(self, guard: &Grant) -> Result<Vec<Reply>> {
        let out = self.commit(guard).await?;
        match out.failed_condition {
            Some(index) => Err(Error::ConditionFailed { index }),
            None => Ok(out.replies),
        }
    }

    /// Runs the call under `guard`: which branch ran, and its replies
    /// ([`Guarded::commit`]'s rules).
    ///
    /// # Cancel safety
    /// As [`Guarded::run`].
    ///
    /// # Errors
    /// As [`run`](Self::run), but a condition that does not hold is no error.
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// use cluster_rwlock::guarded::{Batch, Condition};
    /// let batch = Batch::new(&lock)
    ///     .when(Condition::missing("orders:{42}:paid"))
    ///     .set("orders:{42}:paid", "1");
    /// let guard = lock.write().await?;
    /// let paid_now = batch.commit(&guard).await?.succeeded;
    /// # Ok(()) }
    /// ```
    pub async fn commit(self, guard: &Grant) -> Result<Outcome> {
        if let Some(e) = self.refused {
            return Err(e);
        }
        if guard.lock.key() != self.lock.key() {
            return Err(Error::InvalidCommand(format!(
                "a batch built for the lock {:?} run under a guard of {:?}",
                self.lock.name(),
                guard.lock.name()
            )));
        }
        if self.writes && guard.mode() != Mode::Write {
            return Err(Error::InvalidCommand(format!(
                "a command writes, and this is a {} hold (writes need a write hold)",
                guard.mode().as_str()
            )));
        }
        if self.condition_count == 0 && self.then.1.is_empty() {
            return Ok(Outcome {
                succeeded: true,
                failed_condition: None,
                replies: Vec::new(),
            });
        }
        let mut words = self.conditions;
        words.extend(self.then.0);
        words.extend(self.otherwise.0);
        let call = crate::scripts::GuardedCall {
            writes: self.writes,
            conditions: self.condition_count,
            then: u32::try_from(self.then.1.len()).unwrap_or(u32::MAX),
            keys: &self.keys,
            words: &words,
        };
        match guard.hold.guarded(&call).await? {
            GuardedReply::Refused {
                branch,
                index,
                message,
            } => {
                let index = index.saturating_sub(1);
                let command = match branch.as_str() {
                    "then" => self.then.1.get(index as usize).cloned(),
                    "else" => self.otherwise.1.get(index as usize).cloned(),
                    _ => Some("a condition".to_string()),
                };
                Err(Error::CommandFailed {
                    index,
                    command: command.unwrap_or_default(),
                    message,
                    nothing_ran: true,
                })
            }
            GuardedReply::Ran {
                held,
                failed,
                replies,
            } => Ok(Outcome {
                succeeded: held,
                failed_condition: (!held).then(|| failed.saturating_sub(1)),
                replies: replies
                    .into_iter()
                    .map(|r| match r {
                        Ok(v) => Reply::of(v),
                        Err(message) => Reply::Error(message),
                    })
                    .collect(),
            }),
        }
    }
}

/// Commands to run while a hold is on the server, made by [`Grant::guarded`]: add
/// conditions with [`when`](Self::when) and commands with [`command`](Self::command) (or
/// the shorthands), then [`run`](Self::run) or [`commit`](Self::commit) them, all in one
/// function call on the lock's node.
///
/// What is atomic: the hold's check, the conditions and the commands run as one function
/// call on one node, with nothing else in between; nothing runs if the hold is gone.
/// What is all-or-nothing: before the first command runs, each is checked against the
/// keys as they are and as the commands before it leave them: the arguments it takes
/// (before sending), its key's type (what would be `WRONGTYPE`), and the value an
/// `INCR`/`DECR`/`HINCRBY` or kin adds to: a command that would fail so fails the call,
/// and NOTHING ran ([`Error::CommandFailed`] with `nothing_ran`). A command that fails
/// all the same (an overflow, a bad option: Redis has no rollback) stops the call there:
/// those before it stay written, those after it do not run, and its [`Reply::Error`]
/// ends the replies.
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
    batch: Batch,
}

impl<'a> Guarded<'a> {
    pub(crate) fn new(grant: &'a Grant) -> Guarded<'a> {
        let mut batch = Batch::new(&grant.lock);
        batch.mode = Some(grant.mode());
        Guarded { grant, batch }
    }

    /// Adds a condition, checked on the server before any command runs: the commands run
    /// only when every condition holds; when one does not, those added after
    /// [`otherwise`](Self::otherwise) run instead (none by default). [`run`](Self::run)
    /// then says [`Error::ConditionFailed`]; [`commit`](Self::commit) says which branch
    /// ran. The key must be in the lock's slot, as a command's.
    ///
    /// ```no_run
    /// # async fn demo(guard: cluster_rwlock::WriteGuard) -> cluster_rwlock::Result<()> {
    /// use cluster_rwlock::guarded::Condition;
    /// // decrement if > 0, in one call
    /// let sold = guard
    ///     .guarded()
    ///     .when(Condition::field("stock:{42}", "n").gt(0))
    ///     .command("HINCRBY", ["stock:{42}", "n", "-1"])
    ///     .command("RPUSH", ["orders:{42}", "order-7"])
    ///     .commit()
    ///     .await?
    ///     .succeeded;
    /// # Ok(()) }
    /// ```
    pub fn when(mut self, condition: Condition) -> Guarded<'a> {
        self.batch = self.batch.when(condition);
        self
    }

    /// The commands added from here on run when a condition does not hold (etcd's
    /// `Else`).
    ///
    /// ```no_run
    /// # async fn demo(guard: cluster_rwlock::WriteGuard) -> cluster_rwlock::Result<()> {
    /// use cluster_rwlock::guarded::Condition;
    /// let out = guard
    ///     .guarded()
    ///     .when(Condition::value("orders:{42}:status").eq("new"))
    ///     .set("orders:{42}:status", "paid")
    ///     .otherwise()
    ///     .get("orders:{42}:status")
    ///     .commit()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn otherwise(mut self) -> Guarded<'a> {
        self.batch = self.batch.otherwise();
        self
    }

    /// Adds the command `name` with its arguments, keys first (`SET key value`, `HINCRBY
    /// key field n`, `DEL key key ...`). Arguments are bytes, so any value may be sent
    /// (the fence is [`Grant::fence`], known before the call: put it in any argument).
    /// The commands allowed are those on keys that neither block nor publish nor touch
    /// scripts, the cluster or the server (strings, hashes, lists, sets, sorted sets,
    /// `DEL`, `EXPIRE`, ...; see the crate docs); a command that writes needs a write
    /// hold. A command outside that set, with too few or too many arguments (or a word
    /// that must be an integer and is not), a key outside the lock's slot, or a key that
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
        self.batch = self.batch.command(name, args);
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

    /// Runs the call in one function call on the lock's node, after checking there that
    /// the hold is still there and its lease, by the server's clock, has not run out,
    /// and that every condition holds: each command's reply, in order. A command that
    /// failed ends the list with its [`Reply::Error`] (none after it ran; see the type's
    /// docs for what is checked before any runs).
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
    /// - [`Error::ConditionFailed`]: a condition did not hold: the else-branch ran (use
    ///   [`commit`](Self::commit) for its replies).
    /// - [`Error::CommandFailed`] with `nothing_ran`: a condition or command would have
    ///   failed (a key of another type, a value that is not an integer): NOTHING ran.
    /// - [`Error::InvalidCommand`], [`Error::WrongSlot`], [`Error::LockKey`]: a command
    ///   that may not run, a write under a read hold, a key outside the lock's slot or
    ///   one that belongs to a lock: nothing was sent.
    /// - [`Error::WriteNotReplicated`]: the commands RAN on the master (nothing is
    ///   undone), but too few replicas acknowledged them in time: a failover now may lose
    ///   them (and the hold). Read the data back before writing again.
    /// - [`Error::Unavailable`]: no answer in time; the commands may or may not have run
    ///   (they are not sent again, since running them twice could write twice).
    pub async fn run(self) -> Result<Vec<Reply>> {
        self.batch.run(self.grant).await
    }

    /// As [`run`](Self::run), telling which branch ran instead of failing when a
    /// condition does not hold: etcd's `Txn` commit.
    ///
    /// ```no_run
    /// # async fn demo(guard: cluster_rwlock::WriteGuard) -> cluster_rwlock::Result<()> {
    /// use cluster_rwlock::guarded::Condition;
    /// let out = guard
    ///     .guarded()
    ///     .when(Condition::field("stock:{42}", "n").gt(0))
    ///     .command("HINCRBY", ["stock:{42}", "n", "-1"])
    ///     .commit()
    ///     .await?;
    /// println!("sold: {}, left: {:?}", out.succeeded, out.replies.first());
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// As [`run`](Self::run).
    ///
    /// # Errors
    /// As [`run`](Self::run), but a condition that does not hold is no error.
    pub async fn commit(self) -> Result<Outcome> {
        self.batch.commit(self.grant).await
    }

    /// As [`run`](Self::run), with a command that failed while running turned into
    /// [`Error::CommandFailed`], which names it: for callers that treat any failed
    /// command as an error (the commands before it ran, none after it).
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
        let (then, otherwise) = (self.batch.then.1.clone(), self.batch.otherwise.1.clone());
        let out = self.batch.commit(self.grant).await?;
        let names = if out.succeeded { then } else { otherwise };
        if let Some(index) = out.replies.iter().position(|r| r.error().is_some()) {
            return Err(Error::CommandFailed {
                index: u32::try_from(index).unwrap_or(u32::MAX),
                command: names.get(index).cloned().unwrap_or_default(),
                message: out.replies[index].error().unwrap_or_default().to_string(),
                nothing_ran: false,
            });
        }
        match out.failed_condition {
            Some(index) => Err(Error::ConditionFailed { index }),
            None => Ok(out.replies),
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
        for (i, spec) in COMMANDS.iter().enumerate() {
            let name = spec.name;
            assert_eq!(name.to_ascii_uppercase(), name);
            assert!(
                COMMANDS[i + 1..].iter().all(|c| c.name != name),
                "{name} twice"
            );
            // the check the function reads: a type, what it leaves, what it adds to
            let check = spec.check.as_bytes();
            assert_eq!(check.len(), 3, "{name}");
            assert!(b"shlSz*".contains(&check[0]), "{name}");
            assert!(b".=0s?".contains(&check[1]), "{name}");
            assert!(b"if-".contains(&check[2]), "{name}");
            assert!(spec.args.0 >= 1 && spec.args.0 <= spec.args.1, "{name}");
            assert!(spec.integers.iter().all(|&at| at < spec.args.1), "{name}");
            // a read leaves its key as it was
            assert!(spec.writes || check[1] == b'.', "{name}");
        }
        // what must never run in a script under the lock
        for refused in [
            "BLPOP", "PUBLISH", "EVAL", "CLUSTER", "FLUSHALL", "KEYS", "WAIT",
        ] {
            assert!(COMMANDS.iter().all(|c| c.name != refused), "{refused}");
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
