//! Lock names, their keys and channels.
//!
//! A lock named `orders:42` with prefix `rwlock` is the hash `rwlock:{orders:42}`; its
//! release channel is `rwlock:{orders:42}:released`. Both hash by the same tag, so they
//! live in one slot and one script may touch both.

use crate::error::{Error, Result};

/// Longest accepted lock name, in bytes.
///
/// ```
/// assert_eq!(cluster_rwlock::keys::MAX_NAME_LEN, 1024);
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
    if name.starts_with('}') {
        // `{}` is an empty hashtag: the key and its channel would hash apart
        return Err(Error::InvalidName(format!(
            "the name {name:?} starts with '}}'"
        )));
    }
    Ok(())
}

/// The hash key of lock `name`.
pub(crate) fn lock_key(prefix: &str, name: &str) -> String {
    format!("{prefix}:{{{name}}}")
}

/// The release channel of the lock whose key is `key`.
pub(crate) fn channel(key: &str) -> String {
    format!("{key}:released")
}
