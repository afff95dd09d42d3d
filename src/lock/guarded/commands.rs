//! The commands a guarded call may run, and what is checked of each before anything is
//! sent: its name, its arguments, its keys (the lock's slot, no lock's own key), and the
//! check the function makes before any command runs.

use super::super::RwLock;
use crate::error::{Error, Result};
use crate::mode::Mode;

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
/// what the command leaves there (`.` nothing changed: it reads; `=` that type, or for
/// `*` the type it found; `0` no key; `s` a string; `?` cannot be told), the value it
/// adds to (`i` an integer, `f` a number, `-` none). The function takes a command whose
/// second letter is not `.` as a write, as it does any command not among its reads.
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
    spec("PERSIST", true, First, "*=-", (1, 1), &[]),
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
    spec("LSET", true, First, "l=-", (3, 3), &[1]),
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
pub(super) struct Checked {
    pub(super) words: Vec<Vec<u8>>,
    pub(super) writes: bool,
    pub(super) keys: Vec<Vec<u8>>,
}

/// Checks that `key` may be named under `lock`: in its slot, and no lock's own key.
pub(super) fn check_key(lock: &RwLock, key: &[u8]) -> Result<()> {
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

/// Checks a command as [`Guarded::command`](super::Guarded::command) does for a hold of `mode` on `lock` (`None`:
/// the mode is not known yet): the command is allowed, its arguments are as many as it
/// takes (and numbers where it takes numbers), a write comes with a write hold, each key
/// is in the lock's slot and is no lock's own key, the words are not too many.
pub(super) fn checked(
    lock: &RwLock,
    mode: Option<Mode>,
    name: &str,
    args: Vec<Vec<u8>>,
) -> Result<Checked> {
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
/// under a hold of `mode` on `lock` ([`Guarded::command`](super::Guarded::command)'s rules: an allowed command, a
/// write under a write hold, keys in the lock's slot that belong to no lock): for a
/// caller that takes the lock only for commands it knows will be accepted.
///
/// ```no_run
/// use cluster_rwlock::{guarded, Mode};
/// # fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
/// // the lock `orders:{42}`
/// guarded::check_command(&lock, Mode::Write, "HINCRBY", ["stock:{42}", "n", "-1"])?;
/// assert!(guarded::check_command(&lock, Mode::Write, "DEL", [lock.key()]).is_err());
/// assert!(guarded::check_command(&lock, Mode::Read, "SET", ["orders:{42}:x", "1"]).is_err());
/// # Ok(()) }
/// ```
///
/// # Errors
/// [`Error::InvalidCommand`], [`Error::WrongSlot`] and [`Error::LockKey`], as
/// [`Guarded::run`](super::Guarded::run) would return them.
pub fn check_command<I, A>(lock: &RwLock, mode: Mode, name: &str, args: I) -> Result<()>
where
    I: IntoIterator<Item = A>,
    A: AsRef<[u8]>,
{
    let args = args.into_iter().map(|a| a.as_ref().to_vec()).collect();
    checked(lock, Some(mode), name, args).map(|_| ())
}

/// The names of the commands a guarded call may run, in capitals (the table
/// [`Guarded::command`](super::Guarded::command) and [`check_command`] read): for a tool that
/// lists them, or a test that draws from all of them.
///
/// ```
/// let names: Vec<&str> = cluster_rwlock::guarded::commands().collect();
/// assert!(names.contains(&"HINCRBY") && names.contains(&"GET"));
/// assert!(!names.contains(&"EVAL"));
/// ```
pub fn commands() -> impl Iterator<Item = &'static str> {
    COMMANDS.iter().map(|c| c.name)
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
            // a read leaves its key as it was, and a write says it does not (the
            // function tells writes by it)
            assert_eq!(spec.writes, check[1] != b'.', "{name}");
        }
        // what must never run in a script under the lock
        for refused in [
            "BLPOP", "PUBLISH", "EVAL", "CLUSTER", "FLUSHALL", "KEYS", "WAIT",
        ] {
            assert!(COMMANDS.iter().all(|c| c.name != refused), "{refused}");
        }
    }
}
