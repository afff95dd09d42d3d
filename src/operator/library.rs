//! The function library every client loads, as the servers receive it.
//!
//! For operators who load it themselves (`FUNCTION LOAD` as a user that may, when the
//! application's user may not: `cluster-rwlock setup` does the same), and for tools that
//! run the functions elsewhere (the workspace's model checker, `model/`, runs this very
//! text in an embedded Lua 5.1). `docs/PROTOCOL.md` gives each function's keys,
//! arguments and replies.
//!
//! ```
//! use cluster_rwlock::operator::library;
//! assert!(library::TEXT.starts_with("#!lua name=cluster_rwlock_4\n"));
//! assert!(library::TEXT.contains(&format!("local REVISION = {}\n", library::REVISION)));
//! assert_eq!(library::PREFIX, "rwlock4_");
//! ```

use crate::scripts::LIBRARY;

/// The library's text, as `FUNCTION LOAD` receives it (its first line names it).
pub const TEXT: &str = LIBRARY.text;

/// The library's name (`FUNCTION LOAD REPLACE` replaces a library of this name).
pub const NAME: &str = LIBRARY.name;

/// The prefix of its functions' names: `rwlock4_acquire`, `rwlock4_release`, ...
pub const PREFIX: &str = LIBRARY.prefix;

/// The revision of this text (what `rwlock4_version` answers after the layout).
pub const REVISION: i64 = crate::scripts::REVISION;
