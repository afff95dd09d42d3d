//! What [`RwLock::state`](super::RwLock::state) reads: [`LockState`] and its [`Holder`]s.

use std::time::Duration;

use super::RwLock;
#[cfg(doc)]
use crate::error::Error;
use crate::error::Result;
use crate::keys::client_name_of;
use crate::mode::Mode;

/// One owner's holds, as [`RwLock::state`] reports them.
///
/// ```no_run
/// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
/// for h in lock.state().await?.holders {
///     println!("{}: {} read, {} write, {:?} left", h.owner, h.read_holds, h.write_holds, h.lease_left);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Holder {
    /// The owner token.
    pub owner: String,
    /// `Write` if the owner holds write (it may hold read too), else `Upgradable` if it
    /// holds an upgradable read, else `Read`.
    pub mode: Mode,
    /// Number of holds (all modes).
    pub count: u32,
    /// Read holds.
    pub read_holds: u32,
    /// Write holds.
    pub write_holds: u32,
    /// Upgradable read holds.
    pub upgradable_holds: u32,
    /// Time left on the owner's lease, by the server's clock: the latest deadline of its
    /// holds (each hold has its own, set by the grant or renewal that named it).
    pub lease_left: Duration,
    /// How long the owner has held: since the grant of its earliest hold, by the
    /// server's clock, read from that hold's fence (the server's time in µs at its
    /// grant; shorter than the truth only after a failover to a master whose clock is
    /// behind). A lease left that keeps falling while this grows is a holder that no
    /// longer renews (frozen, or cut off): it loses the lock when the lease runs out.
    pub held_for: Duration,
    /// Since the last grant or renewal of its latest-running hold, by the server's clock:
    /// a live holder renews every third of its lease (see [`overdue`](Self::overdue)).
    pub renewed_ago: Duration,
    /// That hold's lease, as its last grant or renewal gave it.
    pub lease: Duration,
}

impl Holder {
    /// The name of the client that made this owner token
    /// ([`LockConfig::client_name`](crate::LockConfig::client_name), default
    /// `<pid>@<host>`): the part of `<name>/<random>:<n>` before the `/`. `None` for an
    /// explicit owner token ([`RwLock::with_owner`]) that does not have that shape.
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// for h in lock.state().await?.holders {
    ///     println!("{} ({})", h.client_name().unwrap_or("-"), h.owner);
    /// }
    /// # Ok(()) }
    /// ```
    pub fn client_name(&self) -> Option<&str> {
        client_name_of(&self.owner)
    }

    /// The holder has not renewed for more than half its lease, where a live one renews
    /// every third: it is most likely frozen or cut off, and loses the lock when the
    /// lease runs out (unless it renews first).
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// for h in lock.state().await?.holders.iter().filter(|h| h.overdue()) {
    ///     eprintln!("{} last renewed {:?} ago", h.owner, h.renewed_ago);
    /// }
    /// # Ok(()) }
    /// ```
    pub fn overdue(&self) -> bool {
        self.renewed_ago > self.lease / 2
    }
}

/// A snapshot of a lock, read in one call.
///
/// ```no_run
/// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
/// let s = lock.state().await?;
/// println!("{:?}, fence {:?}, {} writers waiting", s.mode, s.fence, s.waiting_writers.len());
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct LockState {
    /// `None` when no one holds the lock; `Write` when a writer holds; `Read` when only
    /// readers (plain or upgradable) hold.
    pub mode: Option<Mode>,
    /// Every owner that holds, with its holds.
    pub holders: Vec<Holder>,
    /// The last fence granted, while the lock's hash exists.
    pub fence: Option<u64>,
    /// Owner tokens of queued writers, first first.
    pub waiting_writers: Vec<String>,
    /// Owner tokens of readers waiting in the queue, first first (the readers of one
    /// group, who will go in together, in name order).
    pub waiting_readers: Vec<String>,
}

impl RwLock {
    /// The lock's current state, read in one call (expired entries are left out). O(n)
    /// in the number of holders: a diagnostic, not for the hot path.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads (and drops expired entries).
    ///
    /// # Errors
    /// [`Error::WrongType`] or [`Error::Corrupt`] when the key is not a lock of this
    /// library; [`Error::Unavailable`] or [`Error::Connection`] when its master cannot be
    /// reached in time.
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// let state = lock.state().await?;
    /// for h in &state.holders {
    ///     println!("{} holds {:?} x{} for {:?} more", h.owner, h.mode, h.count, h.lease_left);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn state(&self) -> Result<LockState> {
        let raw = self.raw.state().await?;
        let holders: Vec<Holder> = raw
            .holders
            .into_iter()
            .map(|h| Holder {
                mode: if h.write > 0 {
                    Mode::Write
                } else if h.upgradable > 0 {
                    Mode::Upgradable
                } else {
                    Mode::Read
                },
                count: h.read.saturating_add(h.write).saturating_add(h.upgradable),
                read_holds: h.read,
                write_holds: h.write,
                upgradable_holds: h.upgradable,
                lease_left: Duration::from_millis(h.lease_left_ms),
                held_for: Duration::from_millis(h.held_ms),
                renewed_ago: Duration::from_millis(h.renewed_ago_ms),
                lease: Duration::from_millis(h.lease_ms),
                owner: h.owner,
            })
            .collect();
        let mode = if holders.iter().any(|h| h.mode == Mode::Write) {
            Some(Mode::Write)
        } else if holders.is_empty() {
            None
        } else {
            Some(Mode::Read)
        };
        Ok(LockState {
            mode,
            holders,
            fence: raw.fence,
            waiting_writers: raw.queued,
            waiting_readers: raw.queued_readers,
        })
    }
}
