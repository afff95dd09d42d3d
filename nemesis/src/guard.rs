//! The library's `AnyGuard` in the history's words: the mode held, and the three ways to
//! acquire in a mode chosen at run time.

use std::time::Duration;

pub use cluster_rwlock::AnyGuard as Guard;
use cluster_rwlock::RwLock;

use crate::history::Mode;

/// The library's mode of a history mode.
fn lib(mode: Mode) -> cluster_rwlock::Mode {
    match mode {
        Mode::R => cluster_rwlock::Mode::Read,
        Mode::U => cluster_rwlock::Mode::Upgradable,
        Mode::W => cluster_rwlock::Mode::Write,
    }
}

/// What a guard holds, in the history's words.
pub trait Held {
    /// The mode held.
    fn held(&self) -> Mode;
}

impl Held for Guard {
    fn held(&self) -> Mode {
        match self {
            Guard::Read(_) => Mode::R,
            Guard::Upgradable(_) => Mode::U,
            Guard::Write(_) => Mode::W,
        }
    }
}

/// Waits for the lock in `mode`.
pub async fn blocking(lock: &RwLock, mode: Mode) -> cluster_rwlock::Result<Guard> {
    lock.acquire(lib(mode)).await
}

/// Waits for the lock in `mode`, at most `d`.
pub async fn timed(lock: &RwLock, mode: Mode, d: Duration) -> cluster_rwlock::Result<Guard> {
    lock.acquire_timeout(lib(mode), d).await
}

/// One attempt at the lock in `mode`.
pub async fn attempt(lock: &RwLock, mode: Mode) -> cluster_rwlock::Result<Option<Guard>> {
    lock.try_acquire(lib(mode)).await
}
