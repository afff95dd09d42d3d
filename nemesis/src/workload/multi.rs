//! The multi-lock round: several names taken at once, each member recorded as a hold of
//! its own.

use std::time::Duration;

use rand::Rng;

use crate::guard::Held as _;
use crate::history::{now, Mode, Outcome};

use super::task::{err_text, Call, Held, Task, COMMAND_TIMEOUT_MS};

impl Task {
    /// A multi-lock round: 2 or 3 names in a random order and random modes, taken with
    /// `lock_timeout`, `try_lock` or a `lock` dropped at a random point; each member is
    /// recorded as a hold of its own (its grant, its belief, its release).
    pub(super) async fn multi_round(&mut self) {
        let count = self.rng.random_range(2..=3.min(self.locks.len()));
        let mut pool: Vec<usize> = (0..self.locks.len()).collect();
        let mut picked = Vec::new();
        for _ in 0..count {
            let i = pool.remove(self.rng.random_range(0..pool.len()));
            let mode = if self.rng.random_bool(0.5) {
                Mode::W
            } else {
                Mode::R
            };
            picked.push((self.locks[i].name().to_string(), mode));
        }
        let to_api = |m: Mode| match m {
            Mode::W => cluster_rwlock::Mode::Write,
            _ => cluster_rwlock::Mode::Read,
        };
        let lease = Duration::from_millis(self.ctx.spec.lease_ms);
        let per_lock = self.ctx.spec.lease_per_lock();
        let multi = match self
            .client
            .multi(picked.iter().map(|(n, m)| (n.as_str(), to_api(*m))))
            .and_then(|m| if per_lock { m.with_lease(lease) } else { Ok(m) })
        {
            Ok(m) => m,
            Err(e) => {
                let c = Call::named("multi", &picked[0].0);
                return self.op(c, Outcome::Fail, Some(err_text(&e)), None);
            }
        };
        let style = self.rng.random_range(0..100);
        let start = now();
        let (call, limit, result) = if style < 50 {
            let ms = self.rng.random_range(50..1_500);
            let r = match multi.lock_timeout(Duration::from_millis(ms)).await {
                Err(cluster_rwlock::Error::Timeout(_)) => Ok(None),
                r => r.map(Some),
            };
            ("multi_lock_timeout", Some(ms), Some(r))
        } else if style < 85 {
            let r = multi.try_lock().await;
            ("multi_try_lock", Some(COMMAND_TIMEOUT_MS * 3), Some(r))
        } else {
            let ms = self.rng.random_range(0..200);
            let r = tokio::time::timeout(Duration::from_millis(ms), multi.lock()).await;
            ("multi_cancelled", None, r.ok().map(|r| r.map(Some)))
        };
        let returned = Some(now());
        // one operation per member, so that the checker sees every grant by name
        let member_call = |name: &str| Call {
            call: call.to_string(),
            name: name.to_string(),
            hold: None,
            owner: None,
            timeout_ms: limit,
            start,
            returned,
        };
        let guard = match result {
            None => {
                for (name, _) in &picked {
                    self.op(member_call(name), Outcome::Cancelled, None, None);
                }
                return;
            }
            Some(Ok(None)) => {
                for (name, _) in &picked {
                    if call == "multi_try_lock" {
                        self.op(member_call(name), Outcome::Busy, None, None);
                    } else {
                        let error = Some("Timeout: not granted in time".to_string());
                        self.op(member_call(name), Outcome::Fail, error, None);
                    }
                }
                let ms = self.rng.random_range(0..30);
                return tokio::time::sleep(Duration::from_millis(ms)).await;
            }
            Some(Err(e)) => {
                for (name, _) in &picked {
                    self.op(member_call(name), Outcome::Fail, Some(err_text(&e)), None);
                }
                return;
            }
            Some(Ok(Some(g))) => g,
        };
        let from = now();
        let mut held = Vec::new();
        for guard in guard.into_guards() {
            let name = guard.lock().name().to_string();
            let belief = self.granted(member_call(&name), &name, &guard, false, from);
            held.push(Held {
                guard,
                belief,
                wrote: false,
            });
        }
        // the work: each member's resource in turn, while no member is lost
        let until = tokio::time::Instant::now() + self.hold_time();
        let mut lost_at = None;
        'work: while tokio::time::Instant::now() < until {
            for h in held.iter_mut() {
                if h.guard.is_lost() {
                    lost_at = Some(now());
                    break 'work;
                }
                let (fence, mode) = (h.guard.fence(), h.guard.held());
                let b = &h.belief;
                if self
                    .conn
                    .access(b.hold, fence, mode, false, &b.owner, &b.name)
                    .await
                    .is_ok()
                {
                    h.wrote = true;
                }
            }
            let pause = Duration::from_millis(self.rng.random_range(5..60));
            tokio::time::sleep(
                pause.min(until.saturating_duration_since(tokio::time::Instant::now())),
            )
            .await;
        }
        let (at, why) = match lost_at {
            Some(at) => (at, "lost"),
            None => (now(), "release"),
        };
        for h in held {
            self.end(h, at, why).await;
        }
    }
}
