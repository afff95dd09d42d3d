//! A hold's life once granted: how long it lasts, the writes to the resource (and the
//! guarded writes) while it does, a conversion now and then, and its end (released,
//! dropped or lost; a late write replayed for some).

use std::sync::atomic::Ordering;
use std::time::Duration;

use rand::Rng;

use crate::guard::Held as _;
use crate::history::{now, Event, Mode, Outcome};

use super::convert::Upgrade;
use super::task::{err_text, Call, Held, Task, COMMAND_TIMEOUT_MS};

impl Task {
    /// How long to hold: mostly 0-200 ms, 5 in 100 up to 1.5 s, `long_holds_pct` in 100
    /// longer than a lease (or `long_hold_ms`).
    pub(super) fn hold_time(&mut self) -> Duration {
        let lease = self.ctx.spec.lease_ms;
        let long = self.ctx.spec.long_holds_pct.min(100);
        let roll = self.rng.random_range(0..100);
        let ms = if roll < long {
            match self.ctx.spec.long_hold_ms {
                Some(ms) => self.rng.random_range(ms..ms + ms / 4 + 1),
                None => lease + self.rng.random_range(500..2_000),
            }
        } else if roll < long + 5 {
            self.rng.random_range(200..1_500)
        } else {
            self.rng.random_range(0..200)
        };
        Duration::from_millis(ms)
    }

    /// Writes to the resource now and then for `time`, or until the lease is lost;
    /// returns when it was lost, if it was.
    pub(super) async fn work(&mut self, h: &mut Held, time: Duration) -> Option<u64> {
        let until = tokio::time::Instant::now() + time;
        let ctx = &self.ctx;
        let conn = &mut self.conn;
        let rng = &mut self.rng;
        let guard = &h.guard;
        let (mode, fence) = (guard.held(), guard.fence());
        let b = &h.belief;
        let mut wrote = false;
        let lost = {
            let work = async {
                loop {
                    // only while believed valid: a lost lease stops the work first
                    if guard.is_lost() {
                        return;
                    }
                    if conn
                        .access(b.hold, fence, mode, false, &b.owner, &b.name)
                        .await
                        .is_ok()
                    {
                        wrote = true;
                    }
                    // now and then under a write hold, a guarded write to the name's
                    // log: the checker reads the log at the end
                    if mode == Mode::W && rng.random_bool(0.3) {
                        let n = ctx.guarded.fetch_add(1, Ordering::Relaxed);
                        let entry = format!("{}:{}:{fence}:{n}", ctx.spec.proc, b.hold);
                        let key = crate::after::guarded_log_key(guard.lock().key(), &b.name);
                        let start = now();
                        let r = guard
                            .guarded()
                            .command("RPUSH", [key.as_str(), entry.as_str()])
                            .run()
                            .await;
                        ctx.record(Event::Guarded {
                            proc: ctx.spec.proc,
                            hold: b.hold,
                            name: b.name.clone(),
                            fence,
                            entry,
                            start,
                            end: now(),
                            outcome: if r.is_ok() {
                                Outcome::Ok
                            } else {
                                Outcome::Fail
                            },
                            error: r.err().map(|e| format!("{e:?}")),
                        });
                    }
                    let pause = Duration::from_millis(rng.random_range(5..60));
                    if tokio::time::Instant::now() + pause >= until {
                        tokio::time::sleep_until(until).await;
                        return;
                    }
                    tokio::time::sleep(pause).await;
                }
            };
            tokio::select! {
                biased;
                _ = guard.lost() => Some(now()),
                _ = work => None,
            }
        };
        h.wrote |= wrote;
        lost.or_else(|| h.guard.is_lost().then(now))
    }

    /// Holds `h` for a while, writing, maybe converts it, then ends it.
    pub(super) async fn hold_and_release(&mut self, mut h: Held) {
        // a conversion now and then (the roll decides which); one in three comes at a
        // random point of the first two renewal periods (a renewal runs every lease/3),
        // not right after the grant: before, during or after a renewal
        let roll = self.rng.random_range(0..100);
        let converts = match h.guard.held() {
            Mode::W => roll < 20,
            Mode::U => roll < 60,
            Mode::R => false,
        };
        let time = if converts && self.rng.random_range(0..3) == 0 {
            let lease = self.ctx.spec.lease_ms;
            Duration::from_millis(self.rng.random_range(0..lease * 2 / 3))
        } else {
            self.hold_time()
        };
        if let Some(at) = self.work(&mut h, time).await {
            return self.end(h, at, "lost").await;
        }
        let mut h = match h.guard.held() {
            Mode::W if roll < 20 => match self.convert_down(h, roll < 15).await {
                Some(h) => h,
                None => return,
            },
            Mode::U if roll < 60 => {
                let how = match roll {
                    0..25 => Upgrade::Wait,
                    25..40 => Upgrade::Timeout(self.rng.random_range(20..800)),
                    _ => Upgrade::Try,
                };
                match self.upgrade(h, how).await {
                    Some(h) => h,
                    None => return,
                }
            }
            _ => h,
        };
        let time = Duration::from_millis(self.rng.random_range(0..100));
        if let Some(at) = self.work(&mut h, time).await {
            return self.end(h, at, "lost").await;
        }
        let at = now();
        self.end(h, at, "release").await;
    }

    /// Ends a hold: the belief ends at `at`; released (or, for a few, dropped); a late
    /// write replayed for some.
    pub(super) async fn end(&mut self, h: Held, at: u64, why: &str) {
        let (mode, fence, wrote) = (h.guard.held(), h.guard.fence(), h.wrote);
        if why != "lost" && self.rng.random_bool(0.05) {
            // dropped: released in the background
            self.held_segment(&h, at, "drop");
            drop(h.guard);
        } else {
            self.held_segment(&h, at.min(now()), why);
            let limit = self.ctx.spec.lease_ms.max(COMMAND_TIMEOUT_MS);
            let c = Call::on("release", &h.belief, Some(limit));
            match h.guard.release().await {
                Ok(()) => self.op(c, Outcome::Ok, None, None),
                Err(e) => self.op(c, Outcome::Fail, Some(err_text(&e)), None),
            }
        }
        if wrote && self.rng.random_bool(0.1) {
            // a late write, as a holder paused after its check would send it
            let ms = self.rng.random_range(0..self.ctx.spec.lease_ms / 2);
            tokio::time::sleep(Duration::from_millis(ms)).await;
            let b = &h.belief;
            let _ = self
                .conn
                .access(b.hold, fence, mode, true, &b.owner, &b.name)
                .await;
        }
    }
}
