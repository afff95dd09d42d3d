//! The rounds a task plays: the usual one (one name, acquired, held, released), the one
//! whose write waits in a queue behind a hold of its own and is dropped there, or dies
//! there with the worker, and the one whose write waits behind whoever holds and dies
//! there with the worker.

use std::sync::atomic::Ordering;
use std::time::Duration;

use rand::Rng;

use crate::guard::{blocking, Guard};
use crate::history::{now, Mode, Outcome};

use super::task::{err_text, Call, Held, Task};

/// One round in this many queues a write behind a hold of the task's own and drops it
/// while it waits.
const QUEUED_DROP_ODDS: u32 = 100;

impl Task {
    /// One round: acquire (in one of many ways), hold and write, maybe convert, release;
    /// one in ten takes several names at once with a multi-lock; one in a hundred queues
    /// a write behind its own hold and drops it there; when the worker is due to die, a
    /// round waits for write (behind someone else's hold, or its own) and the process
    /// dies while it waits.
    pub(super) async fn round(&mut self) {
        if self.ctx.kill_due() {
            // the worker dies while a write of it waits: behind a hold of anyone's
            // (usually another process's: its release may hand the lock to the dead
            // writer), or behind a hold of the task's own, which dies with it
            if self.rng.random_bool(0.5) {
                self.waiter_round().await;
            } else {
                self.queued_round(true).await;
            }
            // still alive: no hold to queue behind, or the write did not wait; the next
            // round tries again
            self.ctx.dying.store(false, Ordering::SeqCst);
            return;
        }
        if self.rng.random_range(0..QUEUED_DROP_ODDS) == 0 {
            return self.queued_round(false).await;
        }
        if self.locks.len() >= 2 && self.rng.random_range(0..10) == 0 {
            return self.multi_round().await;
        }
        let i = self.rng.random_range(0..self.locks.len());
        let mut lock = self.locks[i].clone();
        let name = lock.name().to_string();
        let explicit = self.rng.random_bool(0.15);
        if explicit {
            let owners = &self.ctx.spec.shared_owners;
            let owner = owners[self.rng.random_range(0..owners.len())].clone();
            // the shared owners are fixed words (`job-a`, `job-b`): valid tokens
            if let Ok(as_owner) = lock.with_owner(owner) {
                lock = as_owner;
            }
        }
        let mode = match self.rng.random_range(0..10) {
            0..=3 => Mode::W,
            4..=7 => Mode::R,
            _ if explicit => Mode::R,
            _ => Mode::U,
        };
        let Some(held) = self.acquire(&lock, &name, mode, explicit).await else {
            // not granted: a short pause before the next round
            let ms = self.rng.random_range(0..30);
            tokio::time::sleep(Duration::from_millis(ms)).await;
            return;
        };
        self.hold_and_release(held).await;
    }

    /// A writer that dies while it waits behind whoever holds (`waiter_kill`): the task,
    /// holding nothing, waits for write on a random name; if it is still waiting
    /// 50-500 ms later, the whole worker process is killed (`write_waiting_killed`).
    /// Returns (alive) when the write returned before (a grant is then held and released
    /// as any other) or the run's end came too near meanwhile (the call is dropped).
    pub(super) async fn waiter_round(&mut self) {
        let i = self.rng.random_range(0..self.locks.len());
        let lock = self.locks[i].clone();
        let name = lock.name().to_string();
        let wait = Duration::from_millis(self.rng.random_range(50..500));
        let mut c = Call::named("write_waiting_killed", &name);
        let returned = {
            let waiter = blocking(&lock, Mode::W);
            tokio::pin!(waiter);
            let r = tokio::select! {
                biased;
                r = &mut waiter => Some(r),
                _ = tokio::time::sleep(wait) => None,
            };
            if r.is_none() && self.ctx.may_die() {
                // the write waits (queued, or still on its first attempt): the process
                // dies with it there, before the call is dropped (which would withdraw
                // its place)
                self.op(c, Outcome::Cancelled, None, None);
                self.ctx.die();
            }
            r
            // a waiting call is dropped here
        };
        let Some(returned) = returned else {
            c.call = "write_cancelled".into();
            self.op(c, Outcome::Cancelled, None, None);
            return;
        };
        c.call = "write".into();
        let c = c.returned();
        match returned {
            Err(e) => self.op(c, Outcome::Fail, Some(err_text(&e)), None),
            Ok(guard) => {
                let belief = self.granted(c, &name, &guard, false, now());
                let held = Held {
                    guard,
                    belief,
                    wrote: false,
                };
                self.hold_and_release(held).await;
            }
        }
    }

    /// A writer that waits in a queue and dies there: the task takes a name (read or
    /// write, in one of the usual ways), then asks for write as a new owner, which
    /// queues behind its own hold; 50-1,500 ms later the waiting call is dropped
    /// (`write_queued_dropped`) and the hold released, or, with `kill`, the whole worker
    /// process is killed while the call waits (`write_queued_killed`). Returns (alive)
    /// when the name was not granted, the queued call returned before, or the run's end
    /// came too near meanwhile (then the call is dropped).
    pub(super) async fn queued_round(&mut self, kill: bool) {
        let i = self.rng.random_range(0..self.locks.len());
        let lock = self.locks[i].clone();
        let name = lock.name().to_string();
        let mode = if self.rng.random_bool(0.5) {
            Mode::W
        } else {
            Mode::R
        };
        let Some(held) = self.acquire(&lock, &name, mode, false).await else {
            return;
        };
        let wait = Duration::from_millis(self.rng.random_range(50..1_500));
        let mut c = Call::named("write_queued_dropped", &name);
        enum Next {
            Lost(u64),
            Returned(Box<cluster_rwlock::Result<Guard>>),
            Waited,
        }
        let next = {
            let waiter = blocking(&lock, Mode::W);
            tokio::pin!(waiter);
            let next = tokio::select! {
                biased;
                _ = held.guard.lost() => Next::Lost(now()),
                r = &mut waiter => Next::Returned(Box::new(r)),
                _ = tokio::time::sleep(wait) => Next::Waited,
            };
            // (the blocking acquire may have taken long: still far enough from the end)
            if matches!(next, Next::Waited) && kill && self.ctx.may_die() {
                // the write waits in the queue: the process dies with it there
                c.call = "write_queued_killed".into();
                self.op(c, Outcome::Cancelled, None, None);
                self.ctx.die();
            }
            next
            // a waiting call is dropped here, while it is queued
        };
        let returned = match next {
            Next::Lost(at) => {
                self.op(c, Outcome::Cancelled, None, None);
                return self.end(held, at, "lost").await;
            }
            Next::Waited => {
                self.op(c, Outcome::Cancelled, None, None);
                let at = now();
                return self.end(held, at, "release").await;
            }
            Next::Returned(r) => {
                c = c.returned();
                *r
            }
        };
        match returned {
            Err(e) => {
                self.op(c, Outcome::Fail, Some(err_text(&e)), None);
                let at = now();
                self.end(held, at, "release").await;
            }
            Ok(guard) => {
                // granted while this task believed it held the name: only right if the
                // hold was lost unnoticed (the checker reports the overlap otherwise)
                let belief = self.granted(c, &name, &guard, false, now());
                let at = now();
                self.end(held, at, "release").await;
                let waiter = Held {
                    guard,
                    belief,
                    wrote: false,
                };
                self.hold_and_release(waiter).await;
            }
        }
    }
}
