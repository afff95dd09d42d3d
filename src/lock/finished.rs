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
/// ```no_run
/// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
/// use std::time::Duration;
/// use cluster_rwlock::Error;
///
/// let done = lock
///     .with_write(Duration::from_secs(5), |fence, _lost| async move {
///         format!("committed under fence {fence}")
///     })
///     .await?;
/// if done.was_lost() {
///     // the work ran partly unprotected: what it did is still there to look at
///     eprintln!("lease lost while it ran: {}", done.value());
/// }
/// match done.held() {
///     Ok(what) => println!("{what}"),
///     Err(Error::LockLost) => eprintln!("check what the fence let through"),
///     Err(e) => return Err(e),
/// }
/// # Ok(()) }
/// ```
#[must_use = "the hold may have been lost while the work ran: see `held()`"]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finished<T> {
    value: T,
    lost: bool,
}

impl<T> Finished<T> {
    /// What the work returned, `lost` telling whether the lease was lost before the
    /// release.
    pub(crate) fn new(value: T, lost: bool) -> Finished<T> {
        Finished { value, lost }
    }

    /// The value, when the hold lasted until its release.
    ///
    /// # Errors
    /// [`Error::LockLost`] when the lease was lost while the work ran (the value is
    /// dropped: see [`into_value`](Self::into_value) to keep it).
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// # use std::time::Duration;
    /// let f = lock.with_read(Duration::from_secs(5), |_, _| async { "ok" }).await?;
    /// assert_eq!(f.held()?, "ok");
    /// # Ok(()) }
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
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// # use std::time::Duration;
    /// let f = lock.with_read(Duration::from_secs(5), |_, _| async {}).await?;
    /// if f.was_lost() {
    ///     eprintln!("the lease was lost while the work ran");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn was_lost(&self) -> bool {
        self.lost
    }

    /// The value, whether or not the hold lasted.
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// # use std::time::Duration;
    /// let f = lock.with_read(Duration::from_secs(5), |_, _| async { 1 }).await?;
    /// assert_eq!(f.value(), &1);
    /// # Ok(()) }
    /// ```
    pub fn value(&self) -> &T {
        &self.value
    }

    /// The value, whether or not the hold lasted.
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// # use std::time::Duration;
    /// let f = lock.with_read(Duration::from_secs(5), |_, _| async { 1 }).await?;
    /// assert_eq!(f.into_value(), 1);
    /// # Ok(()) }
    /// ```
    pub fn into_value(self) -> T {
        self.value
    }
}

#[cfg(test)]
mod tests {
    use super::Finished;
    use crate::error::Error;

    #[test]
    fn a_lost_hold_keeps_the_value_and_says_so() {
        let done = Finished::new("committed", false);
        assert!(!done.was_lost());
        assert_eq!(done.held().unwrap(), "committed");
        let late = Finished::new("refused by the fence", true);
        assert!(late.was_lost());
        assert_eq!(late.value(), &"refused by the fence");
        assert!(matches!(late.clone().held(), Err(Error::LockLost)));
        assert_eq!(late.into_value(), "refused by the fence");
    }
}
