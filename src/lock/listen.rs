//! A lock's release messages, as they come ([`RwLock::release_messages`]).

use crate::cluster::notify::Subscription;
use crate::message::Heard;
#[cfg(doc)]
use crate::{lock::RwLock, message::ReleaseMessage};

/// The release messages of one lock, from the library's own subscription: on the node
/// that serves the lock's slot, placed again after a failover or a slot move (a
/// [`Heard::Gap`] says so). Made by [`RwLock::release_messages`]; dropping it leaves the
/// subscription (kept while the client's waiters of the lock need it).
///
/// ```no_run
/// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
/// use cluster_rwlock::operator::Heard;
/// let mut messages = lock.release_messages().await?;
/// loop {
///     match messages.next().await {
///         Heard::Message(m) => println!("{m}"),
///         Heard::Gap => println!("messages may have been missed: {:?}", lock.state().await?),
///         _ => {}
///     }
/// }
/// # }
/// ```
pub struct ReleaseMessages {
    subscription: Subscription,
}

impl ReleaseMessages {
    pub(crate) fn new(subscription: Subscription) -> ReleaseMessages {
        ReleaseMessages { subscription }
    }

    /// Whether the server confirmed the subscription: until then (and while it is placed
    /// again), messages may be missed.
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// let messages = lock.release_messages().await?;
    /// if !messages.is_live() {
    ///     eprintln!("not subscribed yet: look at the state meanwhile");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn is_live(&self) -> bool {
        self.subscription.is_live()
    }

    /// The next [`ReleaseMessage`], or a [`Heard::Gap`] where some may have been lost.
    ///
    /// # Cancel safety
    /// Cancel safe: a message that came meanwhile is kept for the next call (a reader
    /// that falls far behind hears a gap instead of the oldest ones).
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// let mut messages = lock.release_messages().await?;
    /// let heard = messages.next().await;
    /// println!("{heard:?}");
    /// # Ok(()) }
    /// ```
    pub async fn next(&mut self) -> Heard {
        self.subscription.hear().await
    }
}

impl std::fmt::Debug for ReleaseMessages {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReleaseMessages")
            .field("live", &self.is_live())
            .finish()
    }
}
