//! RAII guards: a granted hold, renewed while it lives, released when dropped.

use std::sync::Arc;

use tokio::time::Instant;

use crate::error::{Error, Result};
use crate::lease::HoldState;
use crate::lock::RwLock;
use crate::scripts::Mode;

/// One hold in Redis; gives itself back when dropped.
pub(crate) struct Hold {
    pub lock: RwLock,
    pub id: u64,
    pub fence: u64,
    pub mode: Mode,
    pub state: Arc<HoldState>,
    /// Released (or handed over): nothing left to give back.
    pub done: bool,
}

impl Hold {
    /// A hold granted by a call sent at `sent`; renewed from now on.
    pub fn new(lock: RwLock, id: u64, fence: u64, mode: Mode, sent: Instant) -> Hold {
        let state = HoldState::new();
        lock.inner.keeper.add(&lock, id, state.clone(), sent);
        Hold {
            lock,
            id,
            fence,
            mode,
            state,
            done: false,
        }
    }

    /// Stops renewing and hands responsibility to the caller.
    pub fn forget(&mut self) {
        self.done = true;
        self.lock
            .inner
            .keeper
            .remove(self.lock.key(), self.lock.owner(), self.id);
    }

    pub async fn release(mut self) -> Result<()> {
        self.forget();
        let lost = self.state.is_lost();
        // followed through failovers for up to a lease: after that the hold is gone anyway
        let released = self
            .lock
            .release_hold(self.id, self.lock.release_budget())
            .await?;
        if released && !lost {
            Ok(())
        } else {
            self.state.mark_lost();
            Err(Error::LockLost)
        }
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        self.forget();
        let lock = self.lock.clone();
        let id = self.id;
        lock.inner.clone().runtime.spawn(async move {
            let _ = lock.release_hold(id, lock.release_budget()).await;
        });
    }
}

macro_rules! guard_common {
    () => {
        /// The fencing token of this grant: strictly greater than every fence granted
        /// before for this lock name. Pass it to the resource you guard, and have the
        /// resource reject writes with a lower fence than it has seen.
        ///
        /// ```no_run
        /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
        /// let guard = lock.write().await?;
        /// println!("write with fence {}", guard.fence());
        /// # Ok(()) }
        /// ```
        pub fn fence(&self) -> u64 {
            self.hold.fence
        }

        /// Whether the lease was lost: a renewal found the hold gone, or none succeeded
        /// for a whole lease. Another owner may hold the lock now.
        ///
        /// ```no_run
        /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
        /// let guard = lock.write().await?;
        /// if guard.is_lost() {
        ///     return Ok(()); // stop: not protected any more
        /// }
        /// # Ok(()) }
        /// ```
        pub fn is_lost(&self) -> bool {
            self.hold.state.is_lost()
        }

        /// Resolves when (and only if) the lease is lost; use it in `tokio::select!` to
        /// stop work that the lock no longer protects.
        ///
        /// ```no_run
        /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
        /// let guard = lock.write().await?;
        /// tokio::select! {
        ///     _ = guard.lost() => eprintln!("lease lost"),
        ///     _ = tokio::time::sleep(std::time::Duration::from_secs(1)) => {}
        /// }
        /// # Ok(()) }
        /// ```
        pub async fn lost(&self) {
            self.hold.state.lost().await
        }

        /// The lock this guard holds.
        ///
        /// ```no_run
        /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
        /// let guard = lock.read().await?;
        /// assert_eq!(guard.lock().name(), lock.name());
        /// # Ok(()) }
        /// ```
        pub fn lock(&self) -> &RwLock {
            &self.hold.lock
        }

        /// Releases the hold now. Fails with [`Error::LockLost`] when the lease had been
        /// lost (the hold was gone, or it was no longer protected), and with
        /// [`Error::Redis`] when Redis could not be reached twice (the hold then expires
        /// after its lease).
        ///
        /// ```no_run
        /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
        /// let guard = lock.write().await?;
        /// match guard.release().await {
        ///     Err(cluster_rwlock::Error::LockLost) => eprintln!("the lease had been lost"),
        ///     other => other?,
        /// }
        /// # Ok(()) }
        /// ```
        pub async fn release(self) -> Result<()> {
            self.hold.release().await
        }
    };
}

/// A shared (read) hold. Dropping it releases it in the background.
///
/// ```no_run
/// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
/// let guard = lock.read().await?;
/// tokio::select! {
///     _ = guard.lost() => eprintln!("lease lost: stop reading"),
///     _ = tokio::time::sleep(std::time::Duration::from_millis(10)) => {}
/// }
/// guard.release().await?;
/// # Ok(()) }
/// ```
#[must_use = "if unused the lock is released at once (in the background)"]
pub struct ReadGuard {
    pub(crate) hold: Hold,
}

impl ReadGuard {
    guard_common!();
}

/// An exclusive (write) hold. Dropping it releases it in the background.
///
/// ```no_run
/// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
/// let guard = lock.write().await?;
/// let fence = guard.fence();
/// let read = guard.downgrade().await?; // no writer gets in between
/// assert!(read.fence() > fence);
/// read.release().await?;
/// # Ok(()) }
/// ```
#[must_use = "if unused the lock is released at once (in the background)"]
pub struct WriteGuard {
    pub(crate) hold: Hold,
}

impl WriteGuard {
    guard_common!();

    /// Turns this write hold into a read hold in one step: no writer can take the lock in
    /// between, and readers may join. The read hold gets a new fence.
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// let read = lock.write().await?.downgrade().await?;
    /// read.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn downgrade(mut self) -> Result<ReadGuard> {
        let lock = self.hold.lock.clone();
        let read_id = lock.inner.next_hold_id();
        let sent = Instant::now();
        // sent again through timeouts and failovers: a retry finds the read hold the first
        // call made
        let fence = lock.downgrade_hold(self.hold.id, read_id).await?;
        self.hold.forget();
        match fence {
            Some(fence) if !self.hold.state.is_lost() => Ok(ReadGuard {
                hold: Hold::new(lock, read_id, fence, Mode::Read, sent),
            }),
            Some(_) => {
                // the lease had been lost: do not hand out a hold nobody protected
                let _ = lock.release_hold(read_id, lock.release_budget()).await;
                Err(Error::LockLost)
            }
            None => {
                self.hold.state.mark_lost();
                Err(Error::LockLost)
            }
        }
    }
}

macro_rules! guard_debug {
    ($t:ty) => {
        impl std::fmt::Debug for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($t))
                    .field("name", &self.hold.lock.name())
                    .field("owner", &self.hold.lock.owner())
                    .field("mode", &self.hold.mode)
                    .field("fence", &self.hold.fence)
                    .field("lost", &self.is_lost())
                    .finish()
            }
        }
    };
}
guard_debug!(ReadGuard);
guard_debug!(WriteGuard);
