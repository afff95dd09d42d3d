//! Exit codes, as `flock(1)`, `timeout(1)` and sysexits.h have them, and the one step
//! that turns an error of the library into one (said on stderr).

/// Bad arguments.
pub const USAGE: i32 = 64;
/// Redis could not be reached, or answered with an error.
pub const UNAVAILABLE: i32 = 69;
/// The lease was lost while the command ran.
pub const LOST: i32 = 70;
/// The lock was not granted within `--timeout`.
pub const BUSY: i32 = 75;
/// `exec`: a command failed, or would have: nothing the call did stays written (all
/// or nothing).
pub const COMMAND_FAILED: i32 = 65;
/// `break`: the lock held nothing to break (of the owner given).
pub const NOTHING_HELD: i32 = 3;
/// The command could not be run.
pub const NOT_EXECUTABLE: i32 = 126;
/// The command was not found.
pub const NOT_FOUND: i32 = 127;

/// Prints an error of the library and returns its exit code.
pub fn fail(what: &str, e: &cluster_rwlock::Error) -> i32 {
    eprintln!(
        "cluster-rwlock: {}: {}",
        crate::shown::escaped(what),
        crate::shown::escaped(&e.to_string())
    );
    match e {
        cluster_rwlock::Error::Timeout(_) => BUSY,
        cluster_rwlock::Error::InvalidName(_)
        | cluster_rwlock::Error::InvalidCommand(_)
        | cluster_rwlock::Error::WrongSlot { .. }
        | cluster_rwlock::Error::LockKey { .. }
        | cluster_rwlock::Error::InvalidConfig(_)
        | cluster_rwlock::Error::InvalidOwner(_) => USAGE,
        cluster_rwlock::Error::LockLost => LOST,
        _ => UNAVAILABLE,
    }
}
