//! Give-backs in flight: the releases, undos and withdrawals that run in the background
//! (a dropped guard, an attempt cancelled or not confirmed), counted so that
//! [`LockClient::close`](crate::LockClient::close) sends them all before it closes the
//! connections. Without it a program that exits right after an error or a dropped guard
//! would leave its hold on the server for a whole lease.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::Notify;

/// The count of give-backs in flight, and a wake-up for whoever waits for none.
#[derive(Default)]
pub(crate) struct Pending {
    count: AtomicUsize,
    settled: Notify,
}

/// Counts one give-back until it is dropped (finished, or its task dropped unrun when
/// the runtime ends).
struct Counted(std::sync::Arc<Pending>);

impl Drop for Counted {
    fn drop(&mut self) {
        if self.0.count.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.settled.notify_waiters();
        }
    }
}

impl Pending {
    /// `task`, counted from now until it ends.
    pub fn track<F>(
        self: &std::sync::Arc<Self>,
        task: F,
    ) -> impl Future<Output = ()> + Send + 'static
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.count.fetch_add(1, Ordering::AcqRel);
        // made now, not at the first poll: a task dropped unpolled is uncounted too
        let counted = Counted(self.clone());
        async move {
            task.await;
            drop(counted);
        }
    }

    /// Give-backs in flight now.
    pub fn count(&self) -> usize {
        self.count.load(Ordering::Acquire)
    }

    /// Waits until none is in flight, at most `bound`: how many were still in flight then.
    pub async fn settle(&self, bound: Duration) -> usize {
        let wait = async {
            loop {
                let settled = self.settled.notified();
                tokio::pin!(settled);
                // registered before the count is read: a last give-back that ends in
                // between wakes it
                settled.as_mut().enable();
                if self.count() == 0 {
                    return;
                }
                settled.await;
            }
        };
        let _ = tokio::time::timeout(bound, wait).await;
        self.count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[tokio::test(start_paused = true)]
    async fn close_waits_for_every_give_back_and_no_longer_than_its_bound() {
        let pending = Arc::new(Pending::default());
        assert_eq!(pending.settle(Duration::from_secs(1)).await, 0);
        for ms in [10, 20, 30] {
            tokio::spawn(pending.track(tokio::time::sleep(Duration::from_millis(ms))));
        }
        assert_eq!(pending.count(), 3);
        let started = tokio::time::Instant::now();
        assert_eq!(pending.settle(Duration::from_secs(1)).await, 0);
        assert_eq!(started.elapsed(), Duration::from_millis(30));
        // one that does not end in time is reported
        tokio::spawn(pending.track(tokio::time::sleep(Duration::from_secs(60))));
        tokio::spawn(pending.track(async {}));
        assert_eq!(pending.settle(Duration::from_secs(2)).await, 1);
        assert_eq!(started.elapsed(), Duration::from_millis(2_030));
        // a task dropped without running (its runtime gone) is no longer counted
        drop(pending.track(async {}));
        assert_eq!(pending.count(), 1);
    }
}
