//! Holds scoped to a closure: [`RwLock::with_write`] and [`RwLock::with_read`], released
//! when the closure ends, however it ends.

use std::future::Future;
use std::time::Duration;

use super::{Finished, Grant, LostSignal, RwLock};
#[cfg(doc)]
use crate::error::Error;
use crate::error::Result;

/// Runs `work` under `grant` and releases it after (see [`RwLock::with_write`]); the grant
/// lives in this future, so a panic or a drop releases it as a dropped guard does.
async fn run_under<F, Fut, T>(grant: Grant, work: F) -> Finished<T>
where
    F: FnOnce(u64, LostSignal) -> Fut,
    Fut: Future<Output = T>,
{
    let signal = grant.lost_signal();
    let out = work(grant.fence(), signal.clone()).await;
    let released = grant.release().await;
    // a release that cannot reach Redis is no error of `work` (the hold expires after its
    // lease), unless the lease had been lost by then
    let lost = signal.is_lost() || matches!(released, Err(crate::error::Error::LockLost));
    Finished::new(out, lost)
}

impl RwLock {
    /// Runs `work` under a write hold taken within `timeout`, and releases the hold after,
    /// also when `work` fails or panics (a panic releases it in the background, as a
    /// dropped guard does). `work` gets the grant's fence, for the resource to check, and
    /// the hold's [`LostSignal`].
    ///
    /// What `work` should do with them: race `lost` against the preparation (reads,
    /// computing), then commit once, with the fence, and do not cancel the commit (a
    /// write cancelled half way may tear the resource; the fence makes a late commit
    /// harmless instead). See [`Grant::lost`].
    ///
    /// # Cancel safety
    /// Dropping the future drops `work` and releases the hold (in the background).
    ///
    /// Once `work` ran, its value comes back in a [`Finished`], which says whether the
    /// lease was lost while it ran (it then ran partly unprotected; the fence told the
    /// resource): `.held()?` makes that [`Error::LockLost`], `.into_value()` keeps the
    /// value (what the resource said of a late commit, say). A release that cannot reach
    /// Redis is not a loss (the hold expires after its lease).
    ///
    /// # Errors
    /// As [`write_timeout`](Self::write_timeout), before `work` runs (it then does not
    /// run).
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// use std::time::Duration;
    /// let written = lock
    ///     .with_write(Duration::from_secs(5), |fence, lost| async move {
    ///         let data = tokio::select! {
    ///             _ = lost.lost() => return Err("lease lost while preparing"),
    ///             data = async { /* read, compute */ "new value" } => data,
    ///         };
    ///         // commit `data` with `fence`: not raced against `lost`
    ///         Ok((data, fence))
    ///     })
    ///     .await?
    ///     .held()?; // Error::LockLost if the lease was lost while the work ran
    /// match written {
    ///     Ok((data, fence)) => println!("wrote {data} under fence {fence}"),
    ///     Err(why) => eprintln!("not written: {why}"),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn with_write<F, Fut, T>(&self, timeout: Duration, work: F) -> Result<Finished<T>>
    where
        F: FnOnce(u64, LostSignal) -> Fut,
        Fut: Future<Output = T>,
    {
        let guard = self.write_timeout(timeout).await?;
        Ok(run_under(guard.0, work).await)
    }

    /// [`with_write`](Self::with_write) under a read hold.
    ///
    /// # Cancel safety
    /// As [`with_write`](Self::with_write).
    ///
    /// # Errors
    /// As [`with_write`](Self::with_write), with [`read_timeout`](Self::read_timeout).
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// use std::time::Duration;
    /// let seen = lock
    ///     .with_read(Duration::from_secs(5), |fence, _lost| async move { fence })
    ///     .await?
    ///     .held()?;
    /// println!("read under fence {seen}");
    /// # Ok(()) }
    /// ```
    pub async fn with_read<F, Fut, T>(&self, timeout: Duration, work: F) -> Result<Finished<T>>
    where
        F: FnOnce(u64, LostSignal) -> Fut,
        Fut: Future<Output = T>,
    {
        let guard = self.read_timeout(timeout).await?;
        Ok(run_under(guard.0, work).await)
    }
}
