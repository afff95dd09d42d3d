//! What a client remembers of contention: the slots where an attempt lately found a
//! lock busy, or was granted a lock that others held or waited for. The next multi-lock
//! with a member there takes its members one by one instead of all at once (an
//! all-at-once round that finds a member busy must give back the members after it,
//! which costs more than it saves under contention), and a waiter's first attempt there
//! skips the acquire function's path for a free lock (which would most likely fall
//! through).
//!
//! A fixed table of buckets (a slot's bucket is `slot % BUCKETS`), each the time of the
//! last mark in ms since the table was made: constant memory and no lock, whatever the
//! number of names. Two slots that share a bucket only make a multi-lock take its
//! members one by one when it need not, never the other way round.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

/// Buckets of the table.
const BUCKETS: usize = 1024;

/// How long a mark lasts: after it, a multi-lock tries all at once again (and marks
/// again if it finds a member still busy).
pub(crate) const REMEMBERED: Duration = Duration::from_secs(1);

/// The slots where a lock was lately found busy or shared.
pub(crate) struct Contention {
    origin: Instant,
    /// Per bucket: ms since `origin` of the last mark, plus one (0: never marked).
    marks: Box<[AtomicU64]>,
}

impl Contention {
    pub fn new() -> Contention {
        Contention {
            origin: Instant::now(),
            marks: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    fn bucket(&self, slot: u16) -> &AtomicU64 {
        &self.marks[usize::from(slot) % BUCKETS]
    }

    fn ms(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.origin).as_millis()).unwrap_or(u64::MAX)
    }

    /// A lock in `slot` was found busy (or shared) at `now`.
    pub fn mark(&self, slot: u16, now: Instant) {
        self.bucket(slot)
            .fetch_max(self.ms(now).saturating_add(1), Ordering::Relaxed);
    }

    /// Whether a lock in `slot` was found busy (or shared) within [`REMEMBERED`] before
    /// `now`.
    pub fn recent(&self, slot: u16, now: Instant) -> bool {
        let mark = self.bucket(slot).load(Ordering::Relaxed);
        let window = u64::try_from(REMEMBERED.as_millis()).unwrap_or(u64::MAX);
        mark != 0 && self.ms(now).saturating_add(1) < mark.saturating_add(window)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_mark_lasts_its_window_and_only_its_bucket() {
        let c = Contention::new();
        let t0 = Instant::now();
        assert!(!c.recent(7, t0));
        c.mark(7, t0);
        assert!(c.recent(7, t0));
        assert!(c.recent(7, t0 + REMEMBERED - Duration::from_millis(1)));
        assert!(!c.recent(7, t0 + REMEMBERED));
        // another bucket is untouched; a slot of the same bucket shares the mark
        assert!(!c.recent(8, t0));
        assert!(c.recent(7 + BUCKETS as u16, t0));
        // a later mark moves it on, an earlier one does not move it back
        c.mark(7, t0 + Duration::from_millis(900));
        c.mark(7, t0);
        assert!(c.recent(7, t0 + Duration::from_millis(1_500)));
    }
}
