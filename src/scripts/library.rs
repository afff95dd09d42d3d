//! The function library as the servers load it: its text (the files of `src/lua/` in
//! one), its name and revision, and the step that makes sure a server serves it.

use fred::prelude::*;

use crate::error::{Error, Result};

/// The library's text: its first lines (its name, the prefix of its function names, and
/// whether the fast paths are used), then the files of `src/lua/`, each after those it
/// uses; `register.lua` names the functions last.
macro_rules! library_text {
    ($name:literal, $prefix:literal, $general_only:literal) => {
        concat!(
            "#!lua name=",
            $name,
            "\nlocal PREFIX = '",
            $prefix,
            "'\nlocal GENERAL_ONLY = ",
            $general_only,
            "\n",
            include_str!("../lua/layout.lua"),
            "\n",
            include_str!("../lua/lib.lua"),
            "\n",
            include_str!("../lua/fast_acquire.lua"),
            "\n",
            include_str!("../lua/fast_release.lua"),
            "\n",
            include_str!("../lua/fast_take.lua"),
            "\n",
            include_str!("../lua/acquire.lua"),
            "\n",
            include_str!("../lua/release.lua"),
            "\n",
            include_str!("../lua/renew.lua"),
            "\n",
            include_str!("../lua/upgrade.lua"),
            "\n",
            include_str!("../lua/downgrade.lua"),
            "\n",
            include_str!("../lua/withdraw.lua"),
            "\n",
            include_str!("../lua/state.lua"),
            "\n",
            include_str!("../lua/force_release.lua"),
            "\n",
            include_str!("../lua/guarded.lua"),
            "\n",
            include_str!("../lua/fenced_set.lua"),
            "\n",
            include_str!("../lua/register.lua"),
        )
    };
}

/// `REVISION` of `lua/layout.lua` (a unit test checks that they agree).
pub(crate) const REVISION: i64 = 10;

/// `CLAIM_MS` of `lua/layout.lua`, the claim window of a hand-off (a unit test checks that
/// they agree): a waiter that heard the lock handed to another looks again after it.
pub(crate) const CLAIM_WINDOW: std::time::Duration = std::time::Duration::from_millis(1000);

/// A function library: its name (`FUNCTION LOAD` replaces a library by name), the prefix
/// of its functions' names, and its text.
pub(crate) struct Library {
    pub name: &'static str,
    pub prefix: &'static str,
    pub text: &'static str,
}

/// The library every client loads and calls.
pub(crate) const LIBRARY: Library = Library {
    name: "cluster_rwlock_4",
    prefix: "rwlock4_",
    text: library_text!("cluster_rwlock_4", "rwlock4_", "false"),
};

/// The same functions without their fast paths, under other names (a test compares the
/// hashes both paths leave).
#[cfg(all(test, feature = "cluster-tests"))]
pub(crate) const GENERAL_ONLY: Library = Library {
    name: "cluster_rwlock_4_general",
    prefix: "rwlock4g_",
    text: library_text!("cluster_rwlock_4_general", "rwlock4g_", "true"),
};

/// What [`LockClient::setup`](crate::LockClient::setup) (and every connect) found on a
/// master, and did.
///
/// ```
/// use cluster_rwlock::operator::Setup;
/// let s = Setup::Loaded { revision: 1 };
/// assert_eq!(s.to_string(), "loaded revision 1");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Setup {
    /// The library was not there: loaded.
    Loaded {
        /// The revision loaded.
        revision: i64,
    },
    /// An older revision was there: replaced.
    Upgraded {
        /// The revision that was there.
        from: i64,
        /// The revision loaded.
        to: i64,
    },
    /// This revision, or a newer one, was there already: left as it was.
    Current {
        /// The revision there.
        revision: i64,
    },
}

impl std::fmt::Display for Setup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Setup::Loaded { revision } => write!(f, "loaded revision {revision}"),
            Setup::Upgraded { from, to } => write!(f, "upgraded from revision {from} to {to}"),
            Setup::Current { revision } => write!(f, "revision {revision} already there"),
        }
    }
}

/// The server has no function of that name (the library is not loaded there).
pub(super) fn is_function_missing(e: &fred::error::Error) -> bool {
    e.details()
        .to_ascii_lowercase()
        .contains("function not found")
}

impl Library {
    /// Makes sure the node behind `client` (`addr`, for errors) serves this library, or a
    /// newer revision of it: asks for the revision there, and loads this one where none
    /// is, or replaces an older one. A library another client loaded meanwhile is taken
    /// as it is. [`Error::NotSetUp`] when it must be loaded and this user may not.
    pub async fn ensure(&self, client: &Client, addr: &str) -> Result<Setup> {
        let version = format!("{}version", self.prefix);
        let there: std::result::Result<Value, _> = client
            .fcall(version, Vec::<Key>::new(), Vec::<Value>::new())
            .await;
        let from = match there {
            Ok(v) => {
                let revision = revision_of(&v)?;
                if revision >= REVISION {
                    return Ok(Setup::Current { revision });
                }
                Some(revision)
            }
            Err(e) if is_function_missing(&e) => None,
            Err(e) => return Err(Error::from_client(e)),
        };
        let loaded: std::result::Result<Value, _> =
            client.function_load(from.is_some(), self.text).await;
        match loaded {
            Ok(_) => Ok(match from {
                Some(from) => Setup::Upgraded { from, to: REVISION },
                None => Setup::Loaded { revision: REVISION },
            }),
            // loaded by another client between the two calls
            Err(e) if e.details().contains("already exists") => {
                Ok(Setup::Current { revision: REVISION })
            }
            Err(e) if e.details().starts_with("NOPERM") => Err(Error::NotSetUp {
                node: addr.to_string(),
                library: self.name.to_string(),
            }),
            Err(e) => Err(Error::from_client(e)),
        }
    }
}

/// The revision in a `version` function's reply `{layout, revision}`.
fn revision_of(v: &Value) -> Result<i64> {
    match v {
        Value::Array(parts) if parts.len() == 2 => match &parts[1] {
            Value::Integer(i) => Ok(*i),
            other => Err(Error::Protocol(format!("a library's revision: {other:?}"))),
        },
        other => Err(Error::Protocol(format!("a library's version: {other:?}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_revision_is_the_library_s_own() {
        assert!(LIBRARY
            .text
            .contains(&format!("\nlocal REVISION = {REVISION}\n")));
        assert!(LIBRARY.text.starts_with("#!lua name=cluster_rwlock_4\n"));
    }

    #[test]
    fn the_claim_window_is_the_library_s_own() {
        let ms = CLAIM_WINDOW.as_millis();
        assert!(LIBRARY.text.contains(&format!("\nlocal CLAIM_MS = {ms}\n")));
    }

    #[test]
    fn a_version_reply_is_read_strictly() {
        let ok = Value::Array(vec![Value::from("4"), Value::Integer(3)]);
        assert_eq!(revision_of(&ok).unwrap(), 3);
        assert!(revision_of(&Value::Integer(3)).is_err());
        assert!(revision_of(&Value::Array(vec![Value::from("4"), Value::from("x")])).is_err());
    }
}
