//! Acquiring a single name in one of many ways: blocking (cancelled at the run's end or
//! at a random point), with a timeout, `try_*`, or dropped at a random point.

use std::time::Duration;

use cluster_rwlock::RwLock;
use rand::Rng;

use crate::guard::{attempt, blocking, timed, Guard};
use crate::history::{now, Mode, Outcome};

use super::task::{err_text, Call, Held, Task, COMMAND_TIMEOUT_MS};

impl Task {
    /// Acquires `lock` (named `name`) in `mode`, in a way the task's randomness picks,
    /// and records the call; the hold granted, if one was.
    pub(super) async fn acquire(
        &mut self,
        lock: &RwLock,
        name: &str,
        mode: Mode,
        explicit: bool,
    ) -> Option<Held> {
        let style = self.rng.random_range(0..100);
        let start = now();
        let label = |suffix: &str| {
            let base = match mode {
                Mode::R => "read",
                Mode::U => "upgradable_read",
                Mode::W => "write",
            };
            match suffix {
                "try" => format!("try_{base}"),
                "" => base.to_string(),
                s => format!("{base}_{s}"),
            }
        };
        // (call, limit, result); a `None` result is a cancellation
        let (call, limit, result): (
            String,
            Option<u64>,
            Option<cluster_rwlock::Result<Option<Guard>>>,
        ) = if style < 30 {
            // blocking, cancelled at the run's end, or at a random point for some
            let cancel_at = if self.rng.random_bool(0.2) {
                tokio::time::Instant::now() + Duration::from_millis(self.rng.random_range(0..300))
            } else {
                self.until()
            };
            let fut = blocking(lock, mode);
            let r = tokio::select! {
                r = fut => Some(r.map(Some)),
                _ = tokio::time::sleep_until(cancel_at) => None,
            };
            (label(""), None, r)
        } else if style < 60 {
            let ms = self.rng.random_range(20..800);
            let r = timed(lock, mode, Duration::from_millis(ms)).await;
            let r = match r {
                Err(cluster_rwlock::Error::Timeout(_)) => Ok(None),
                r => r.map(Some),
            };
            (label("timeout"), Some(ms), Some(r))
        } else if style < 90 {
            let r = attempt(lock, mode).await;
            (label("try"), Some(COMMAND_TIMEOUT_MS), Some(r))
        } else {
            // dropped at a random point of its life
            let ms = self.rng.random_range(0..100);
            let r = tokio::time::timeout(Duration::from_millis(ms), blocking(lock, mode)).await;
            (label("cancelled"), None, r.ok().map(|r| r.map(Some)))
        };
        let c = Call {
            call,
            name: name.to_string(),
            hold: None,
            owner: explicit.then(|| lock.owner().to_string()),
            timeout_ms: limit,
            start,
            returned: Some(now()),
        };
        match result {
            None => {
                self.op(c, Outcome::Cancelled, None, None);
                None
            }
            Some(Ok(None)) => {
                // try_* busy, or *_timeout ran out
                if c.call.starts_with("try_") {
                    self.op(c, Outcome::Busy, None, None);
                } else {
                    let error = Some("Timeout: not granted in time".to_string());
                    self.op(c, Outcome::Fail, error, None);
                }
                None
            }
            Some(Err(e)) => {
                self.op(c, Outcome::Fail, Some(err_text(&e)), None);
                None
            }
            Some(Ok(Some(guard))) => {
                let belief = self.granted(c, name, &guard, explicit, now());
                Some(Held {
                    guard,
                    belief,
                    wrote: false,
                })
            }
        }
    }
}
