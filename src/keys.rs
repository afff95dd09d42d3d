//! Lock names, their keys and channels (the public ones are in `operator`).

use crate::error::{Error, Result};

/// An owner token is 1 to 256 bytes without whitespace (the functions split on spaces).
pub(crate) fn check_owner(owner: &str) -> Result<()> {
    if owner.is_empty() || owner.len() > 256 || has_whitespace(owner) {
        return Err(Error::InvalidOwner(format!(
            "{owner:?}: 1 to 256 bytes without whitespace"
        )));
    }
    Ok(())
}

/// Whether `s` has a whitespace character (`char::is_whitespace`), byte by byte when it
/// is ASCII (every acquire checks its owner token: this costs a fraction of decoding it).
fn has_whitespace(s: &str) -> bool {
    if s.is_ascii() {
        // the ASCII characters `char::is_whitespace` accepts: U+0009..=U+000D and U+0020
        s.bytes().any(|b| matches!(b, b'\t'..=b'\r' | b' '))
    } else {
        s.contains(char::is_whitespace)
    }
}

/// Longest accepted lock name, in bytes.
///
/// ```
/// assert_eq!(cluster_rwlock::operator::MAX_NAME_LEN, 1024);
/// ```
pub const MAX_NAME_LEN: usize = 1024;

/// Checks a key prefix: non-empty and free of `{` and `}` (it must not move the hashtag).
pub(crate) fn check_prefix(prefix: &str) -> Result<()> {
    if prefix.is_empty() {
        return Err(Error::InvalidConfig("the key prefix is empty".into()));
    }
    if prefix.contains(['{', '}']) {
        return Err(Error::InvalidConfig(format!(
            "the key prefix {prefix:?} contains a brace; braces would change the hashtag"
        )));
    }
    Ok(())
}

/// Checks a lock name.
pub(crate) fn check_name(name: &str) -> Result<()> {
    if name.is_empty() {
        return Err(Error::InvalidName("the name is empty".into()));
    }
    if name.len() > MAX_NAME_LEN {
        return Err(Error::InvalidName(format!(
            "the name is {} bytes long; at most {MAX_NAME_LEN} are accepted",
            name.len()
        )));
    }
    if let Some(why) = unbalanced(name) {
        // `acct:{3` or `acct:3}`: a typo that would put the lock in another slot than
        // the data it guards (`acct:{3}:balance`)
        return Err(Error::InvalidName(format!(
            "the name {name:?} has {why}; a hashtag is written `{{tag}}`"
        )));
    }
    if name
        .find('{')
        .is_some_and(|open| name[open..].starts_with("{}"))
    {
        // `product:{}`: Redis hashes a key whose first braces are empty whole, so the
        // data keys written with it (`product:{}:stock`) would not share the lock's slot
        return Err(Error::InvalidName(format!(
            "the name {name:?} has an empty hashtag `{{}}`; a hashtag is written `{{tag}}` (e.g. `product:{{42}}`)"
        )));
    }
    if let Some(bare) = alias_of(name) {
        // `{x}` would be the key of the lock `x`: one lock under two names
        return Err(Error::InvalidName(format!(
            "the name {name:?} is the lock {bare:?} written in braces; use {bare:?}"
        )));
    }
    if name.starts_with('}') && !has_own_tag(name) {
        // `{}` is an empty hashtag: the key and its channel would hash apart
        return Err(Error::InvalidName(format!(
            "the name {name:?} starts with '}}'"
        )));
    }
    Ok(())
}

/// The hash key of lock `name`: `<prefix>:{<name>}`, or `<prefix>:<name>` when the name
/// has a non-empty hashtag of its own (then the key hashes on that tag).
///
/// A lock named `orders:42` with prefix `rwlock` is the hash `rwlock:{orders:42}`; its
/// release channel is `rwlock:{orders:42}:released`. Both hash by the same tag, so they
/// live in one slot and one script may touch both.
///
/// A name that carries its own non-empty hashtag by Redis's rule (the text between the
/// first `{` and the next `}`) keeps it: `orders:{42}` is the hash `rwlock:orders:{42}`,
/// which lands in the slot of `{42}`, with the application's own `orders:{42}:*` keys.
///
/// ```
/// use cluster_rwlock::slot::key_slot;
/// assert_eq!(cluster_rwlock::operator::lock_key("rwlock", "orders:42"), "rwlock:{orders:42}");
/// assert_eq!(cluster_rwlock::operator::lock_key("rwlock", "orders:{42}"), "rwlock:orders:{42}");
/// assert_eq!(key_slot(b"rwlock:orders:{42}"), key_slot(b"orders:{42}:items"));
/// ```
///
/// ```
/// assert_eq!(cluster_rwlock::operator::lock_key("locks", "a{b}c"), "locks:a{b}c");
/// assert_eq!(cluster_rwlock::operator::lock_key("locks", "a{}b"), "locks:{a{}b}");
/// ```
pub fn lock_key(prefix: &str, name: &str) -> String {
    if has_own_tag(name) {
        format!("{prefix}:{name}")
    } else {
        format!("{prefix}:{{{name}}}")
    }
}

/// The lock name whose key is `key` under `prefix`, or `None` when `key` is not a lock
/// key of that prefix (the inverse of [`lock_key`]).
///
/// ```
/// use cluster_rwlock::operator::{lock_key, lock_name};
/// assert_eq!(lock_name("locks", "locks:{orders:42}").as_deref(), Some("orders:42"));
/// assert_eq!(lock_name("locks", &lock_key("locks", "a{b}c")).as_deref(), Some("a{b}c"));
/// assert_eq!(lock_name("locks", "locks:x"), None);
/// assert_eq!(lock_name("other", "locks:{x}"), None);
/// ```
pub fn lock_name(prefix: &str, key: &str) -> Option<String> {
    let rest = key.strip_prefix(prefix)?.strip_prefix(':')?;
    let wrapped = rest
        .strip_prefix('{')
        .and_then(|r| r.strip_suffix('}'))
        .filter(|inner| lock_key(prefix, inner) == key);
    let name = match wrapped {
        Some(inner) => inner,
        None if has_own_tag(rest) => rest,
        None => return None,
    };
    (check_name(name).is_ok()).then(|| name.to_string())
}

/// What is wrong with the braces of `name`: one not closed, one closed that was not
/// opened, or one opened inside another (`None`: every `{` has its `}`, in order).
fn unbalanced(name: &str) -> Option<&'static str> {
    let mut open = false;
    for c in name.chars() {
        match (c, open) {
            ('{', false) => open = true,
            ('{', true) => return Some("a '{' inside braces"),
            ('}', true) => open = false,
            ('}', false) => return Some("a '}' that closes nothing"),
            _ => {}
        }
    }
    open.then_some("a '{' that is not closed")
}

/// For a tagged name wrapped whole in braces whose inside has no tag of its own (`{x}`),
/// the untagged name whose key it would share (`x`, key `<prefix>:{x}`).
fn alias_of(name: &str) -> Option<&str> {
    let inner = name.strip_prefix('{')?.strip_suffix('}')?;
    (has_own_tag(name) && !has_own_tag(inner)).then_some(inner)
}

/// Whether `name` carries a non-empty hashtag by Redis's rule.
fn has_own_tag(name: &str) -> bool {
    crate::slot::hashtag(name.as_bytes()).len() != name.len()
}

/// The suffix of a lock's release channel after its key.
const CHANNEL_SUFFIX: &str = ":released";

/// The release channel of the lock whose key is `key`.
pub(crate) fn channel(key: &str) -> String {
    format!("{key}{CHANNEL_SUFFIX}")
}

/// Whether `key` belongs to a lock under `prefix`: the hash of ANY lock (not only one
/// name's), or a name spelled as a lock's release channel. Guarded commands and the
/// fenced store refuse such keys: a `DEL`, `HDEL` or `PEXPIRE` of a lock's hash would let
/// a second writer in, and drop the fence's tombstone. A key that is not UTF-8 is no
/// lock's (lock keys are text).
pub(crate) fn is_lock_key(prefix: &str, key: &[u8]) -> bool {
    let Ok(key) = std::str::from_utf8(key) else {
        return false;
    };
    let is_hash = |k: &str| lock_name(prefix, k).is_some();
    is_hash(key) || key.strip_suffix(CHANNEL_SUFFIX).is_some_and(is_hash)
}

/// The client name in an owner token a client made (of the shape `<name>/<32 hex>:<n>`:
/// see [`LockConfig::client_name`](crate::LockConfig::client_name)); `None` for a token of
/// another shape (an explicit owner token). For the queued owners of a
/// [`LockState`](crate::operator::LockState), as
/// [`Holder::client_name`](crate::operator::Holder::client_name) is for holders.
///
/// ```
/// use cluster_rwlock::operator::client_name_of;
/// let token = format!("worker-7@host-b/{}:3", "0f".repeat(16));
/// assert_eq!(client_name_of(&token), Some("worker-7@host-b"));
/// assert_eq!(client_name_of("job-17"), None);
/// ```
pub fn client_name_of(owner: &str) -> Option<&str> {
    let (name, rest) = owner.rsplit_once('/')?;
    let (random, n) = rest.split_once(':')?;
    let shaped = !name.is_empty()
        && random.len() == 32
        && random.bytes().all(|b| b.is_ascii_hexdigit())
        && !n.is_empty()
        && n.bytes().all(|b| b.is_ascii_digit());
    shaped.then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slot::key_slot;

    #[test]
    fn owner_tokens_are_checked() {
        assert!(check_owner("job-17").is_ok());
        assert!(check_owner(&"x".repeat(256)).is_ok());
        assert!(matches!(check_owner(""), Err(Error::InvalidOwner(_))));
        assert!(check_owner(&"x".repeat(257)).is_err());
        assert!(check_owner("a b").is_err());
        assert!(check_owner("a\tb").is_err());
        // every character the standard library calls whitespace, ASCII or not
        for c in (0..=0x10FFFF).filter_map(char::from_u32) {
            let token = format!("a{c}b");
            assert_eq!(has_whitespace(&token), c.is_whitespace(), "{:?}", c);
        }
    }

    #[test]
    fn tagged_names_hash_on_their_tag() {
        for (name, tag) in [
            ("orders:{42}", "42"),
            ("{user1}.x", "user1"),
            ("a{b}{c}", "b"),
            ("{{}}x", "{"),
        ] {
            let key = lock_key("rwlock", name);
            assert_eq!(key_slot(key.as_bytes()), key_slot(tag.as_bytes()), "{name}");
            assert_eq!(key_slot(channel(&key).as_bytes()), key_slot(key.as_bytes()));
        }
    }

    #[test]
    fn untagged_names_are_wrapped() {
        for name in ["orders:42", "a{}b", "{}", "a{", "x}y"] {
            let key = lock_key("rwlock", name);
            assert_eq!(key, format!("rwlock:{{{name}}}"));
            assert_eq!(
                key_slot(channel(&key).as_bytes()),
                key_slot(key.as_bytes()),
                "{name}"
            );
        }
    }

    #[test]
    fn keys_give_back_their_names() {
        for name in [
            "orders:42",
            "orders:{42}",
            "a{b}{}",
            "{u}:profile",
            "a:released",
        ] {
            let key = lock_key("rwlock", name);
            assert_eq!(lock_name("rwlock", &key).as_deref(), Some(name), "{key}");
        }
        // an empty hashtag is no lock's name
        assert_eq!(lock_name("rwlock", "rwlock:{a{}b}"), None);
        assert_eq!(lock_name("rwlock", "rwlock:plain"), None);
        assert_eq!(lock_name("rwlock", "rwlockx:{a}"), None);
    }

    #[test]
    fn lock_keys_and_channels_of_any_name_are_recognised() {
        for name in [
            "orders:{42}",
            "invoices:{42}",
            "orders:42",
            "a{b}{}",
            "{u}:x",
        ] {
            let key = lock_key("rwlock", name);
            assert!(is_lock_key("rwlock", key.as_bytes()), "{key}");
            assert!(is_lock_key("rwlock", channel(&key).as_bytes()), "{key}");
            // another prefix's locks are not this client's to judge
            assert!(!is_lock_key("other", key.as_bytes()), "{key}");
        }
        for data in [
            "orders:{42}",
            "orders:{42}:status",
            "rwlock:plain",
            "rwlockx:{a}",
            "rwlock:{a{b}c}",
        ] {
            assert!(!is_lock_key("rwlock", data.as_bytes()), "{data}");
        }
        assert!(!is_lock_key("rwlock", b"rwlock:{\xff}"));
        assert!(!is_lock_key("rwlock", &[b'r', 0xff, 0xfe]));
    }

    #[test]
    fn names_are_checked() {
        assert!(check_name("").is_err());
        assert!(check_name("}x").is_err());
        assert!(check_name(&"x".repeat(MAX_NAME_LEN + 1)).is_err());
        // one lock, one name: `{x}` would share the key of `x`
        // (and two tags, each whole: the key of the name inside the outer braces)
        for alias in ["{a}{b}", "{x}.{y}"] {
            assert!(check_name(alias).is_err(), "{alias}");
        }
        for alias in ["{alias}", "{orders:42}"] {
            assert!(check_name(alias).is_err(), "{alias}");
            let bare = alias_of(alias).unwrap();
            assert!(check_name(bare).is_ok());
            assert_eq!(lock_key("p", alias), lock_key("p", bare));
        }
        for fine in [
            "{alias}x",
            "x{alias}",
            "{a}{b}c",
            "{x}.y",
            "acct:{ 3}",
            "a{b}{}",
        ] {
            assert!(check_name(fine).is_ok(), "{fine}");
        }
        // braces that cannot be what was meant: the lock would land in another slot
        // than the data of the tag it seems to name
        for typo in [
            "acct:{3",
            "acct:3}",
            "}{tag}",
            "{{}}",
            "{a}b}",
            "a{b{c}}",
            "a{",
            "x}y",
            "a{}b",
            "product:{}",
            "{}",
        ] {
            match check_name(typo) {
                Err(Error::InvalidName(why)) => assert!(why.contains("hashtag"), "{why}"),
                other => panic!("{typo}: {other:?}"),
            }
        }
        assert!(check_prefix("a{b").is_err());
        assert!(check_prefix("").is_err());
        assert!(check_prefix("locks").is_ok());
    }
}
