//! What [`RwLock::with_write`] and [`RwLock::with_read`] give back once the work ran.

#[cfg(doc)]
use super::RwLock;
use crate::error::{Error, Result};

/// The value the work returned under [`RwLock::with_write`] or [`RwLock::with_read`],
/// and whether the hold lasted until its release.
///
/// When the lease was lost while the work ran, the work ran partly unprotected: another
/// owner may have held the lock meanwhile. The value is kept all the same, so that the
/// caller sees what the work did (a commit the resource refused by its fence, say):
/// [`held`](Self::held) turns the loss into [`Error::LockLost`], and
/// [`into_value`](Self::into_value) gives the value whatever happened.
///
/// ```
/// use cluster_rwlock::{Error, Finished};
///
/// // what `with_write` returns when the work committed and the hold lasted...
/// let done = Finished::new("committed", false);
/// assert!(!done.was_lost());
/// assert_eq!(done.held().unwrap(), "committed");
/// // ...and when the lease was lost while it ran
/// let late = Finished::new("refused by the fence", true);
/// assert_eq!(late.value(), &"refused by the fence");
/// assert!(matches!(late.held(), Err(Error::LockLost)));
/// ```
#[must_use = "the hold may have been lost while the work ran: see `held()`"]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finished<T> {
    value: T,
    lost: bool,
}

impl<T> Finished<T> {
    /// What the work returned, `lost` telling whether the lease was lost before the
    /// release (for tests of code that handles a `Finished`).
    ///
    /// ```
    /// let f = cluster_rwlock::Finished::new(7, false);
    /// assert_eq!(f.into_value(), 7);
    /// ```
    pub fn new(value: T, lost: bool) -> Finished<T> {
        Finished { value, lost }
    }

    /// The value, when the hold lasted until its release.
    ///
    /// # Errors
    /// [`Error::LockLost`] when the lease was lost while the work ran (the value is
    /// dropped: see [`into_value`](Self::into_value) to keep it).
    ///
    /// ```
    /// let f = cluster_rwlock::Finished::new("ok", false);
    /// assert_eq!(f.held().unwrap(), "ok");
    /// ```
    pub fn held(self) -> Result<T> {
        if self.lost {
            Err(Error::LockLost)
        } else {
            Ok(self.value)
        }
    }

    /// Whether the lease was lost before the release: a renewal found the hold gone, or
    /// none was confirmed for a lease.
    ///
    /// ```
    /// assert!(cluster_rwlock::Finished::new((), true).was_lost());
    /// ```
    pub fn was_lost(&self) -> bool {
        self.lost
    }

    /// The value, whether or not the hold lasted.
    ///
    /// ```
    /// assert_eq!(cluster_rwlock::Finished::new(1, true).value(), &1);
    /// ```
    pub fn value(&self) -> &T {
        &self.value
    }

    /// The value, whether or not the hold lasted.
    ///
    /// ```
    /// assert_eq!(cluster_rwlock::Finished::new(1, true).into_value(), 1);
    /// ```
    pub fn into_value(self) -> T {
        self.value
    }
}
