//! One guard type over the three modes, and the three ways to acquire in a mode.

use std::time::Duration;

use cluster_rwlock::{ReadGuard, RwLock, UpgradableReadGuard, WriteGuard};

use crate::history::Mode;

/// A granted hold of any mode.
pub enum Guard {
    /// Read.
    R(ReadGuard),
    /// Upgradable read.
    U(UpgradableReadGuard),
    /// Write.
    W(WriteGuard),
}

impl Guard {
    /// The mode held.
    pub fn mode(&self) -> Mode {
        match self {
            Guard::R(_) => Mode::R,
            Guard::U(_) => Mode::U,
            Guard::W(_) => Mode::W,
        }
    }

    /// The fence of the grant.
    pub fn fence(&self) -> u64 {
        match self {
            Guard::R(g) => g.fence(),
            Guard::U(g) => g.fence(),
            Guard::W(g) => g.fence(),
        }
    }

    /// The owner token of the hold.
    pub fn owner(&self) -> String {
        match self {
            Guard::R(g) => g.owner().to_string(),
            Guard::U(g) => g.owner().to_string(),
            Guard::W(g) => g.owner().to_string(),
        }
    }

    /// Whether the lease was lost.
    pub fn is_lost(&self) -> bool {
        match self {
            Guard::R(g) => g.is_lost(),
            Guard::U(g) => g.is_lost(),
            Guard::W(g) => g.is_lost(),
        }
    }

    /// Resolves when the lease is lost.
    pub async fn lost(&self) {
        match self {
            Guard::R(g) => g.lost().await,
            Guard::U(g) => g.lost().await,
            Guard::W(g) => g.lost().await,
        }
    }

    /// Releases the hold.
    pub async fn release(self) -> cluster_rwlock::Result<()> {
        match self {
            Guard::R(g) => g.release().await,
            Guard::U(g) => g.release().await,
            Guard::W(g) => g.release().await,
        }
    }
}

/// Waits for the lock in `mode`.
pub async fn blocking(lock: &RwLock, mode: Mode) -> cluster_rwlock::Result<Guard> {
    Ok(match mode {
        Mode::R => Guard::R(lock.read().await?),
        Mode::U => Guard::U(lock.upgradable_read().await?),
        Mode::W => Guard::W(lock.write().await?),
    })
}

/// Waits for the lock in `mode`, at most `d`.
pub async fn timed(lock: &RwLock, mode: Mode, d: Duration) -> cluster_rwlock::Result<Guard> {
    Ok(match mode {
        Mode::R => Guard::R(lock.read_timeout(d).await?),
        Mode::U => Guard::U(lock.upgradable_read_timeout(d).await?),
        Mode::W => Guard::W(lock.write_timeout(d).await?),
    })
}

/// One attempt at the lock in `mode`.
pub async fn attempt(lock: &RwLock, mode: Mode) -> cluster_rwlock::Result<Option<Guard>> {
    Ok(match mode {
        Mode::R => lock.try_read().await?.map(Guard::R),
        Mode::U => lock.try_upgradable_read().await?.map(Guard::U),
        Mode::W => lock.try_write().await?.map(Guard::W),
    })
}
