//! The fenced store's methods of [`LockClient`]: a value kept with the fence that wrote
//! it, for data outside a lock's slot.

use super::LockClient;
use crate::error::{ClientResult, Error, Result};
use crate::fenced::{fenced_set, FencedWrite};

impl LockClient {
    /// Stores `value` at `key` with `fence`, unless a higher fence wrote there: a holder
    /// that lost its lock and writes late with its old fence cannot overwrite what a
    /// later holder wrote. For data that cannot live in the lock's slot (see
    /// [`Grant::guarded`](crate::Grant::guarded) for data that can), written by code
    /// that holds only the fence (another process, a job runner). The key is a hash of
    /// two fields, `fence` and `value`; an equal fence may write again. Confirmed as a
    /// grant is (see [`Durability`](crate::Durability)).
    ///
    /// # Cancel safety
    /// Once sent, the write lands whether or not the future is awaited to the end.
    ///
    /// # Errors
    /// [`Error::WrongType`] when `key` holds something else than a hash (nothing is
    /// touched); [`Error::LockKey`] when `key` is a lock's own hash or channel under the
    /// client's prefix (nothing is sent); [`Error::WriteNotReplicated`] when the value
    /// was written on the master (and stays) but too few replicas acknowledged it in
    /// time; [`Error::Unavailable`],
    /// [`Error::Connection`] when the key's master did not answer.
    ///
    /// ```no_run
    /// # async fn demo(client: cluster_rwlock::LockClient, fence: u64) -> cluster_rwlock::Result<()> {
    /// let w = client.fenced_set("report:latest", fence, b"totals ...").await?;
    /// if !w.written {
    ///     eprintln!("a newer holder (fence {}) wrote the report; ours is dropped", w.fence);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn fenced_set(
        &self,
        key: &str,
        fence: u64,
        value: impl AsRef<[u8]>,
    ) -> Result<FencedWrite> {
        let inner = &self.inner;
        if crate::keys::is_lock_key(&inner.config.prefix, key.as_bytes()) {
            return Err(Error::LockKey { key: key.into() });
        }
        let (written, fence) = fenced_set(inner, key, fence, value.as_ref()).await?;
        Ok(FencedWrite { written, fence })
    }

    /// The value [`fenced_set`](Self::fenced_set) stored at `key`, with the fence that
    /// wrote it; `None` when there is none.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    ///
    /// # Errors
    /// [`Error::Protocol`] when `key` is not a value of `fenced_set`; as
    /// [`fenced_set`](Self::fenced_set) when its master does not answer.
    ///
    /// ```no_run
    /// # async fn demo(client: cluster_rwlock::LockClient) -> cluster_rwlock::Result<()> {
    /// if let Some((fence, value)) = client.fenced_get("report:latest").await? {
    ///     println!("{} bytes written under fence {fence}", value.len());
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn fenced_get(&self, key: &str) -> Result<Option<(u64, Vec<u8>)>> {
        use fred::interfaces::HashesInterface as _;
        let inner = &self.inner;
        let slot = crate::slot::key_slot(key.as_bytes());
        let (fence, value): (Option<String>, Option<Vec<u8>>) = inner
            .call(slot, |c| async move {
                c.client.hmget(key, vec!["fence", "value"]).await.lock_err()
            })
            .await?;
        match (fence, value) {
            (Some(f), Some(v)) => {
                let fence = f
                    .parse()
                    .map_err(|_| Error::Protocol(format!("{key}: fence {f:?}")))?;
                Ok(Some((fence, v)))
            }
            (None, None) => Ok(None),
            _ => Err(Error::Protocol(format!("{key} is not a fenced value"))),
        }
    }
}
