//! The fenced store: a value kept with the fence that wrote it, refused to a lower fence
//! ([`LockClient::fenced_set`](crate::LockClient::fenced_set)), for data outside a lock's slot.

use crate::error::Result;
use crate::shared::{CallKind, Shared};

/// What [`LockClient::fenced_set`](crate::LockClient::fenced_set) did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct FencedWrite {
    /// Whether the value was written.
    pub written: bool,
    /// The fence that wrote last: the caller's when written, else the higher one that
    /// refused it.
    pub fence: u64,
}

/// Stores `value` at `key` with `fence` unless a higher fence wrote there
/// (`lua/fenced_set.lua`), confirmed: whether it was written, and the fence that wrote
/// last.
pub(crate) async fn fenced_set(
    inner: &Shared,
    key: &str,
    fence: u64,
    value: &[u8],
) -> Result<(bool, u64)> {
    let slot = crate::slot::key_slot(key.as_bytes());
    inner
        .call(slot, |c| async move {
            let on = inner.on(&c, key, CallKind::FencedSet, None);
            inner.scripts.fenced_set(on, fence, value).await
        })
        .await
}
