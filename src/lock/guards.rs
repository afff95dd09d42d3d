//! The guards: [`ReadGuard`], [`WriteGuard`], [`UpgradableReadGuard`] and [`AnyGuard`],
//! each a [`Grant`] released when dropped, with the conversions between modes.

use crate::error::{Error, Result};
use crate::hold::Patience;
use crate::mode::Mode;

use super::grant::{Grant, LostSignal};
use super::RwLock;

/// Each guard derefs to its [`Grant`], releases with `release`, and shows its grant in
/// `Debug`.
macro_rules! guard_basics {
    ($t:ident) => {
        impl std::ops::Deref for $t {
            type Target = Grant;
            fn deref(&self) -> &Grant {
                &self.0
            }
        }

        impl std::fmt::Debug for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_tuple(stringify!($t)).field(&self.0).finish()
            }
        }

        impl $t {
            /// Releases the hold now. Fails with [`Error::LockLost`] when the lease had
            /// been lost (the hold was gone, or it was no longer protected), and with
            /// [`Error::Connection`] or [`Error::Unavailable`] when Redis could not be
            /// reached twice (the hold then expires after its lease).
            ///
            /// # Cancel safety
            /// A release cancelled half way is finished in the background.
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
                self.0.release().await
            }
        }
    };
}

/// The grant's methods on each guard itself, so that each guard's own page lists them
/// (not only under "Methods from Deref"): each is [`Grant`]'s method of the same name.
macro_rules! grant_methods {
    ($t:ident, $take:literal) => {
        impl $t {
            #[doc = concat!("Guarded calls under this hold: see [`Grant::guarded`].\n\n```no_run\n# async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {\nlet guard = ", $take, ";\nlet status = guard.guarded().get(\"orders:{42}:status\").run().await?;\n# Ok(()) }\n```")]
            pub fn guarded(&self) -> super::guarded::Guarded<&Grant> {
                std::ops::Deref::deref(self).guarded()
            }

            #[doc = concat!("This grant's fencing token: see [`Grant::fence`].\n\n```no_run\n# async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {\nlet guard = ", $take, ";\nprintln!(\"fence {}\", guard.fence());\n# Ok(()) }\n```")]
            pub fn fence(&self) -> u64 {
                std::ops::Deref::deref(self).fence()
            }

            #[doc = concat!("The mode of the hold: see [`Grant::mode`].\n\n```no_run\n# async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {\nlet guard = ", $take, ";\nprintln!(\"{:?}\", guard.mode());\n# Ok(()) }\n```")]
            pub fn mode(&self) -> Mode {
                std::ops::Deref::deref(self).mode()
            }

            #[doc = concat!("Whether the lease was lost: see [`Grant::is_lost`].\n\n```no_run\n# async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {\nlet guard = ", $take, ";\nif guard.is_lost() {\n    return Ok(()); // not protected any more\n}\n# Ok(()) }\n```")]
            pub fn is_lost(&self) -> bool {
                std::ops::Deref::deref(self).is_lost()
            }

            #[doc = concat!("Resolves when (and only if) the lease is lost: see [`Grant::lost`].\n\n```no_run\n# async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {\nlet guard = ", $take, ";\ntokio::select! {\n    _ = guard.lost() => eprintln!(\"lost\"),\n    _ = tokio::time::sleep(std::time::Duration::from_millis(10)) => {}\n}\n# Ok(()) }\n```")]
            pub fn lost(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
                std::ops::Deref::deref(self).lost()
            }

            #[doc = concat!("A handle that tells when the lease is lost: see [`Grant::lost_signal`].\n\n```no_run\n# async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {\nlet guard = ", $take, ";\nlet signal = guard.lost_signal();\ntokio::spawn(async move { signal.lost().await; eprintln!(\"lost\") });\n# Ok(()) }\n```")]
            pub fn lost_signal(&self) -> LostSignal {
                std::ops::Deref::deref(self).lost_signal()
            }

            #[doc = concat!("The owner token of this hold: see [`Grant::owner`].\n\n```no_run\n# async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {\nlet guard = ", $take, ";\nprintln!(\"held by {}\", guard.owner());\n# Ok(()) }\n```")]
            pub fn owner(&self) -> &str {
                std::ops::Deref::deref(self).owner()
            }

            #[doc = concat!("A second read hold of the same owner: see [`Grant::read_again`].\n\n# Cancel safety\nAs [`Grant::read_again`].\n\n```no_run\n# async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {\nlet guard = ", $take, ";\nlet again = guard.read_again().await?;\n# Ok(()) }\n```")]
            pub async fn read_again(&self) -> Result<ReadGuard> {
                std::ops::Deref::deref(self).read_again().await
            }

            #[doc = concat!("The lock this guard holds: see [`Grant::lock`].\n\n```no_run\n# async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {\nlet guard = ", $take, ";\nprintln!(\"{}\", guard.lock().name());\n# Ok(()) }\n```")]
            pub fn lock(&self) -> &RwLock {
                std::ops::Deref::deref(self).lock()
            }
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
pub struct ReadGuard(pub(crate) Grant);

guard_basics!(ReadGuard);
grant_methods!(ReadGuard, "lock.read().await?");

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
pub struct WriteGuard(pub(crate) Grant);

guard_basics!(WriteGuard);
grant_methods!(WriteGuard, "lock.write().await?");

impl WriteGuard {
    /// Turns this write hold into a read hold in one step: no writer can take the lock in
    /// between, and readers may join. The read hold gets a new fence.
    ///
    /// # Cancel safety
    /// If the future is dropped, the write hold is released, and the read hold, if the
    /// call had made it already, is given back too (both in the background): nothing is
    /// left on the server that nobody renews or gives back.
    ///
    /// # Errors
    /// [`Error::LockLost`] when the lease had been lost; [`Error::Unavailable`] or
    /// [`Error::Connection`] when the lock's master cannot be reached in time (the write hold
    /// is then released; when the call ran on the server and only its reply was lost, the
    /// read hold it made is given back as well, in the background, after the call on the
    /// same connection).
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// let read = lock.write().await?.downgrade().await?;
    /// read.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn downgrade(self) -> Result<ReadGuard> {
        Ok(ReadGuard(Grant::new(
            self.0.hold.downgrade(Mode::Read).await?,
            self.0.lock,
        )))
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
        Ok(UpgradableReadGuard(Grant::new(
            self.0.hold.downgrade(Mode::Upgradable).await?,
            self.0.lock,
        )))
    }

    /// Takes another write hold as this guard's owner: granted at once. The new guard is
    /// released on its own (the lock stays written until both are released).
    ///
    /// # Cancel safety
    /// Cancel safe: a hold granted for a dropped future is given back at once.
    ///
    /// # Errors
    /// [`Error::LockLost`] when this guard's lease was lost; [`Error::Unavailable`] or
    /// [`Error::Connection`] when the lock's master cannot be reached in time.
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// let w = lock.write().await?;
    /// let w2 = w.write_again().await?; // reentrant, on purpose
    /// assert!(w2.fence() > w.fence());
    /// # Ok(()) }
    /// ```
    pub async fn write_again(&self) -> Result<WriteGuard> {
        Ok(WriteGuard(Grant::new(
            self.0.hold.again(Mode::Write).await?,
            self.0.lock.clone(),
        )))
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
pub struct UpgradableReadGuard(pub(crate) Grant);

guard_basics!(UpgradableReadGuard);
grant_methods!(UpgradableReadGuard, "lock.upgradable_read().await?");

impl UpgradableReadGuard {
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
    /// [`Error::Connection`] when the lock's master cannot be reached within the command
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
        match self.upgrade_with(Patience::Wait(None)).await? {
            Ok(write) => Ok(write),
            // (waiting without a deadline, the upgrade is never given up as busy)
            Err(_kept) => Err(Error::Timeout(std::time::Duration::MAX)),
        }
    }

    /// The write hold made from this one, or this guard back, unchanged, when the
    /// readers did not leave within `patience`.
    async fn upgrade_with(
        self,
        patience: Patience,
    ) -> Result<std::result::Result<WriteGuard, UpgradableReadGuard>> {
        let Grant { hold, lock } = self.0;
        Ok(match hold.upgrade(patience).await? {
            Ok(write) => Ok(WriteGuard(Grant::new(write, lock))),
            Err(kept) => Err(UpgradableReadGuard(Grant::new(kept, lock))),
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
        self.upgrade_with(Patience::Wait(Some(timeout))).await
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
        self.upgrade_with(Patience::Once).await
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
        Ok(ReadGuard(Grant::new(
            self.0.hold.downgrade(Mode::Read).await?,
            self.0.lock,
        )))
    }
}

/// Any of the three guards, for code that picks the mode at run time (a command line
/// flag, a setting): it derefs to the [`Grant`] every guard has (fence, mode, lost
/// signal, owner) and releases with [`release`](Self::release). Made with `From` of each
/// guard.
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

impl std::ops::Deref for AnyGuard {
    type Target = Grant;
    fn deref(&self) -> &Grant {
        match self {
            AnyGuard::Read(g) => &g.0,
            AnyGuard::Write(g) => &g.0,
            AnyGuard::Upgradable(g) => &g.0,
        }
    }
}

impl AnyGuard {
    /// Releases the hold now, as each guard's `release` (e.g.
    /// [`WriteGuard::release`]).
    ///
    /// # Cancel safety
    /// A release cancelled half way is finished in the background.
    ///
    /// # Errors
    /// As [`WriteGuard::release`].
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// cluster_rwlock::AnyGuard::from(lock.read().await?).release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn release(self) -> Result<()> {
        match self {
            AnyGuard::Read(g) => g.0.release().await,
            AnyGuard::Write(g) => g.0.release().await,
            AnyGuard::Upgradable(g) => g.0.release().await,
        }
    }
}

grant_methods!(
    AnyGuard,
    "cluster_rwlock::AnyGuard::from(lock.write().await?)"
);

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
