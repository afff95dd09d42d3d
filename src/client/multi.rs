//! The multi-lock's constructor on [`LockClient`]: several locks taken together, in one
//! global order.

use super::LockClient;
use crate::error::{Error, Result};
use crate::mode::Mode;
use crate::multi::MultiLock;

impl LockClient {
    /// A [`MultiLock`] of these names, each in its mode, in any order and any slots.
    ///
    /// # Errors
    /// [`Error::InvalidName`] when a name is invalid (as [`rwlock`](Self::rwlock)), when a
    /// name is given twice, or when no name is given.
    ///
    /// ```no_run
    /// # async fn demo(client: cluster_rwlock::LockClient) -> cluster_rwlock::Result<()> {
    /// use cluster_rwlock::Mode;
    /// let both = client.multi([("orders:{42}", Mode::Write), ("customers:7", Mode::Read)])?;
    /// assert!(client.multi([("a", Mode::Read), ("a", Mode::Write)]).is_err());
    /// # Ok(()) }
    /// ```
    pub fn multi<I, S>(&self, members: I) -> Result<MultiLock>
    where
        I: IntoIterator<Item = (S, Mode)>,
        S: AsRef<str>,
    {
        let mut locks = Vec::new();
        for (name, mode) in members {
            locks.push((self.rwlock(name.as_ref())?, mode));
        }
        if locks.is_empty() {
            return Err(Error::InvalidName(
                "a multi-lock needs at least one name".into(),
            ));
        }
        MultiLock::of(locks)
    }
}
