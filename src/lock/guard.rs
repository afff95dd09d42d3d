//! RAII guards: a granted hold, renewed while it lives, released when dropped.

use crate::acquire::{self, Ask};
use crate::error::{Error, Result};
use crate::hold::Hold;
use crate::mode::Mode;

use super::RwLock;

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

        /// The owner token this hold was taken as: the explicit one of
        /// [`RwLock::with_owner`], or one of its own (`<handle's owner>:<n>`); it is what
        /// [`RwLock::state`] lists.
        ///
        /// ```no_run
        /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
        /// let guard = lock.read().await?;
        /// println!("holding as {}", guard.owner());
        /// # Ok(()) }
        /// ```
        pub fn owner(&self) -> &str {
            &self.hold.owner
        }

        /// Takes another read hold as this guard's owner: granted at once, without
        /// waiting for queued writers (the owner holds already). The new guard is
        /// released on its own.
        ///
        /// # Cancel safety
        /// Cancel safe: a hold granted for a dropped future is given back at once.
        ///
        /// # Errors
        /// [`Error::LockLost`] when this guard's lease was lost; [`Error::Unavailable`] or
        /// [`Error::Redis`] when the lock's master cannot be reached in time.
        ///
        /// ```no_run
        /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
        /// let guard = lock.read().await?;
        /// let again = guard.read_again().await?; // reentrant, on purpose
        /// again.release().await?;
        /// guard.release().await?;
        /// # Ok(()) }
        /// ```
        pub async fn read_again(&self) -> Result<ReadGuard> {
            Ok(ReadGuard {
                hold: acquire::again(&self.hold, Mode::Read).await?,
                lock: self.lock.clone(),
            })
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
            &self.lock
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
    pub(crate) lock: RwLock,
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
    pub(crate) lock: RwLock,
}

impl WriteGuard {
    guard_common!();

    /// Turns this write hold into a read hold in one step: no writer can take the lock in
    /// between, and readers may join. The read hold gets a new fence.
    ///
    /// # Cancel safety
    /// If the future is dropped, the write hold is released (in the background); a read
    /// hold that was already made expires after its lease.
    ///
    /// # Errors
    /// [`Error::LockLost`] when the lease had been lost; [`Error::Unavailable`] or
    /// [`Error::Redis`] when the lock's master cannot be reached in time (the write hold
    /// is then released).
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// let read = lock.write().await?.downgrade().await?;
    /// read.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn downgrade(self) -> Result<ReadGuard> {
        Ok(ReadGuard {
            hold: self.hold.convert(Mode::Read).await?,
            lock: self.lock.clone(),
        })
    }

    /// Turns this write hold into an upgradable read hold in one step: readers may join,
    /// no writer can take the lock in between, and it can be upgraded again.
    ///
    /// # Cancel safety
    /// As [`downgrade`](Self::downgrade).
    ///
    /// # Errors
    /// As [`downgrade`](Self::downgrade).
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// let up = lock.write().await?.downgrade_to_upgradable().await?;
    /// let write = up.upgrade().await?;
    /// write.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn downgrade_to_upgradable(self) -> Result<UpgradableReadGuard> {
        Ok(UpgradableReadGuard {
            hold: self.hold.convert(Mode::Upgradable).await?,
            lock: self.lock.clone(),
        })
    }

    /// Takes another write hold as this guard's owner: granted at once. The new guard is
    /// released on its own (the lock stays written until both are released).
    ///
    /// # Cancel safety
    /// Cancel safe: a hold granted for a dropped future is given back at once.
    ///
    /// # Errors
    /// [`Error::LockLost`] when this guard's lease was lost; [`Error::Unavailable`] or
    /// [`Error::Redis`] when the lock's master cannot be reached in time.
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// let w = lock.write().await?;
    /// let w2 = w.write_again().await?; // reentrant, on purpose
    /// assert!(w2.fence() > w.fence());
    /// # Ok(()) }
    /// ```
    pub async fn write_again(&self) -> Result<WriteGuard> {
        Ok(WriteGuard {
            hold: acquire::again(&self.hold, Mode::Write).await?,
            lock: self.lock.clone(),
        })
    }
}

/// An upgradable read hold: shared with plain readers, at most one owner at a time, and
/// no writer while it lasts. Dropping it releases it in the background.
///
/// ```no_run
/// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
/// let up = lock.upgradable_read().await?;
/// let stale = true; // read, and decide whether to write
/// if stale {
///     let w = up.upgrade().await?; // no other writer in between
///     w.release().await?;
/// } else {
///     up.release().await?;
/// }
/// # Ok(()) }
/// ```
#[must_use = "if unused the lock is released at once (in the background)"]
pub struct UpgradableReadGuard {
    pub(crate) hold: Hold,
    pub(crate) lock: RwLock,
}

impl UpgradableReadGuard {
    guard_common!();

    /// Waits until the plain readers have left and turns this hold into the write hold,
    /// with a new, higher fence. Meanwhile new readers wait behind it as behind a queued
    /// writer, and it becomes write before any queued writer: no other writer gets in
    /// between.
    ///
    /// # Cancel safety
    /// Dropping the future gives up the upgrade AND this upgradable hold (the guard was
    /// moved into the future): both are released in the background. To keep the hold,
    /// use [`upgrade_timeout`](Self::upgrade_timeout) or
    /// [`try_upgrade`](Self::try_upgrade).
    ///
    /// # Errors
    /// [`Error::LockLost`] when the lease had been lost; [`Error::Unavailable`] or
    /// [`Error::Redis`] when the lock's master cannot be reached within the command
    /// timeout; [`Error::NotReplicated`] with replica acks. The upgradable hold is
    /// released on error.
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// let up = lock.upgradable_read().await?;
    /// let read_fence = up.fence();
    /// let w = up.upgrade().await?;
    /// assert!(w.fence() > read_fence);
    /// # Ok(()) }
    /// ```
    pub async fn upgrade(self) -> Result<WriteGuard> {
        let ask = Ask::Upgrade { from: self.hold.id };
        self.hold.state.set_converting(true);
        // (an error drops the guard: its hold is released)
        let write = acquire::wait_hold(&self.hold.raw, self.hold.owner.clone(), ask, None).await?;
        Ok(WriteGuard {
            hold: self.hold.upgraded(write).await?,
            lock: self.lock.clone(),
        })
    }

    /// [`upgrade`](Self::upgrade) for at most `timeout`: the write hold, or this guard
    /// back when the plain readers did not leave in time. Meanwhile new readers wait
    /// behind it as behind a queued writer; on timeout they may enter again, and the
    /// upgradable hold is kept (a write hold granted just as the time ran out turns
    /// back into it). Returns within `timeout` and one round trip: the pending upgrade
    /// is withdrawn before the guard comes back, so that the guard is known to hold. When
    /// that round trip fails or takes over half a second (the command timeout, if less),
    /// the call fails with that error and the upgradable hold is given up.
    ///
    /// # Cancel safety
    /// As [`upgrade`](Self::upgrade): dropping the future gives up the upgrade and this
    /// upgradable hold.
    ///
    /// # Errors
    /// As [`upgrade`](Self::upgrade); also when the withdrawal after the timeout fails
    /// (the upgradable hold is then released, as on any error).
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// use std::time::Duration;
    /// let up = lock.upgradable_read().await?;
    /// match up.upgrade_timeout(Duration::from_millis(500)).await? {
    ///     Ok(write) => write.release().await?,
    ///     Err(up) => up.release().await?, // readers stayed; still upgradable
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn upgrade_timeout(
        self,
        timeout: std::time::Duration,
    ) -> Result<std::result::Result<WriteGuard, UpgradableReadGuard>> {
        let ask = Ask::Upgrade { from: self.hold.id };
        let raw = self.hold.raw.clone();
        self.hold.state.set_converting(true);
        // (an error other than the timeout drops the guard: its hold is released)
        match acquire::wait_hold(&raw, self.hold.owner.clone(), ask, Some(timeout)).await {
            Ok(write) => Ok(Ok(WriteGuard {
                hold: self.hold.upgraded(write).await?,
                lock: self.lock.clone(),
            })),
            Err(Error::Timeout(_)) => {
                self.hold.state.set_converting(false);
                Ok(Err(self))
            }
            Err(e) => Err(e),
        }
    }

    /// One attempt to upgrade: the write hold if no plain reader of another owner holds,
    /// else this guard back, unchanged.
    ///
    /// # Cancel safety
    /// As [`upgrade`](Self::upgrade).
    ///
    /// # Errors
    /// As [`upgrade`](Self::upgrade).
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// let up = lock.upgradable_read().await?;
    /// match up.try_upgrade().await? {
    ///     Ok(write) => write.release().await?,
    ///     Err(up) => up.release().await?, // readers still hold
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn try_upgrade(self) -> Result<std::result::Result<WriteGuard, UpgradableReadGuard>> {
        let ask = Ask::Upgrade { from: self.hold.id };
        let raw = self.hold.raw.clone();
        self.hold.state.set_converting(true);
        let outcome = acquire::try_hold(&raw, self.hold.owner.clone(), ask).await;
        if !matches!(outcome, Ok(Some(_))) {
            self.hold.state.set_converting(false);
        }
        match outcome? {
            Some(write) => Ok(Ok(WriteGuard {
                hold: self.hold.upgraded(write).await?,
                lock: self.lock.clone(),
            })),
            None => Ok(Err(self)),
        }
    }

    /// Turns this hold into a plain read hold in one step (another owner may then take
    /// the upgradable read). The read hold gets a new fence.
    ///
    /// # Cancel safety
    /// As [`WriteGuard::downgrade`].
    ///
    /// # Errors
    /// As [`WriteGuard::downgrade`].
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// let read = lock.upgradable_read().await?.downgrade().await?;
    /// read.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn downgrade(self) -> Result<ReadGuard> {
        Ok(ReadGuard {
            hold: self.hold.convert(Mode::Read).await?,
            lock: self.lock.clone(),
        })
    }
}

/// Any of the three guards, for code that picks the mode at run time (a command line
/// flag, a setting): the methods every guard has, and [`mode`](Self::mode). Made with
/// `From` of each guard.
///
/// ```no_run
/// # async fn demo(lock: cluster_rwlock::RwLock, exclusive: bool) -> cluster_rwlock::Result<()> {
/// use cluster_rwlock::AnyGuard;
/// let guard: AnyGuard = if exclusive {
///     lock.write().await?.into()
/// } else {
///     lock.read().await?.into()
/// };
/// println!("{:?} under fence {}", guard.mode(), guard.fence());
/// tokio::select! {
///     _ = guard.lost() => eprintln!("lease lost"),
///     _ = tokio::time::sleep(std::time::Duration::from_millis(10)) => {}
/// }
/// guard.release().await?;
/// # Ok(()) }
/// ```
#[must_use = "if unused the lock is released at once (in the background)"]
#[derive(Debug)]
pub enum AnyGuard {
    /// A read hold.
    Read(ReadGuard),
    /// A write hold.
    Write(WriteGuard),
    /// An upgradable read hold.
    Upgradable(UpgradableReadGuard),
}

macro_rules! each {
    ($self:expr, $g:ident => $e:expr) => {
        match $self {
            AnyGuard::Read($g) => $e,
            AnyGuard::Write($g) => $e,
            AnyGuard::Upgradable($g) => $e,
        }
    };
}

impl AnyGuard {
    /// The mode of the hold.
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// let guard = cluster_rwlock::AnyGuard::from(lock.write().await?);
    /// assert_eq!(guard.mode(), cluster_rwlock::Mode::Write);
    /// # Ok(()) }
    /// ```
    pub fn mode(&self) -> Mode {
        match self {
            AnyGuard::Read(_) => Mode::Read,
            AnyGuard::Write(_) => Mode::Write,
            AnyGuard::Upgradable(_) => Mode::Upgradable,
        }
    }

    /// As [`WriteGuard::fence`].
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// let guard = cluster_rwlock::AnyGuard::from(lock.read().await?);
    /// println!("fence {}", guard.fence());
    /// # Ok(()) }
    /// ```
    pub fn fence(&self) -> u64 {
        each!(self, g => g.fence())
    }

    /// As [`WriteGuard::is_lost`].
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// let guard = cluster_rwlock::AnyGuard::from(lock.read().await?);
    /// assert!(!guard.is_lost());
    /// # Ok(()) }
    /// ```
    pub fn is_lost(&self) -> bool {
        each!(self, g => g.is_lost())
    }

    /// As [`WriteGuard::lost`].
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// let guard = cluster_rwlock::AnyGuard::from(lock.read().await?);
    /// guard.lost().await; // resolves only when the lease is lost
    /// # Ok(()) }
    /// ```
    pub async fn lost(&self) {
        each!(self, g => g.lost().await)
    }

    /// As [`WriteGuard::owner`].
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// let guard = cluster_rwlock::AnyGuard::from(lock.read().await?);
    /// println!("held as {}", guard.owner());
    /// # Ok(()) }
    /// ```
    pub fn owner(&self) -> &str {
        each!(self, g => g.owner())
    }

    /// As [`WriteGuard::lock`].
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// let guard = cluster_rwlock::AnyGuard::from(lock.read().await?);
    /// assert_eq!(guard.lock().name(), lock.name());
    /// # Ok(()) }
    /// ```
    pub fn lock(&self) -> &RwLock {
        each!(self, g => g.lock())
    }

    /// As [`WriteGuard::release`].
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// cluster_rwlock::AnyGuard::from(lock.read().await?).release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn release(self) -> Result<()> {
        each!(self, g => g.release().await)
    }
}

impl From<ReadGuard> for AnyGuard {
    fn from(g: ReadGuard) -> AnyGuard {
        AnyGuard::Read(g)
    }
}

impl From<WriteGuard> for AnyGuard {
    fn from(g: WriteGuard) -> AnyGuard {
        AnyGuard::Write(g)
    }
}

impl From<UpgradableReadGuard> for AnyGuard {
    fn from(g: UpgradableReadGuard) -> AnyGuard {
        AnyGuard::Upgradable(g)
    }
}

macro_rules! guard_debug {
    ($t:ty) => {
        impl std::fmt::Debug for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($t))
                    .field("name", &self.lock.name())
                    .field("owner", &self.hold.owner)
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
guard_debug!(UpgradableReadGuard);
