//! Conversions of a hold: a write hold downgraded (to read or upgradable), an
//! upgradable hold upgraded to write (waiting, with a timeout, or `try_upgrade`).

use std::time::Duration;

use crate::guard::{Guard, Held as _};
use crate::history::{now, Mode, Outcome};

use super::beliefs::Belief;
use super::task::{err_text, Call, Held, Task, COMMAND_TIMEOUT_MS};

/// How a task upgrades its upgradable hold.
#[derive(Clone, Copy)]
pub(super) enum Upgrade {
    /// `upgrade()`, cancelled at the end of the run.
    Wait,
    /// `upgrade_timeout(ms)`.
    Timeout(u64),
    /// `try_upgrade()`.
    Try,
}

impl Task {
    /// Write -> read (or upgradable): the write belief ends when the call is made; the
    /// weaker one runs from then on.
    pub(super) async fn convert_down(&mut self, h: Held, to_read: bool) -> Option<Held> {
        let Guard::Write(w) = h.guard else {
            return Some(h);
        };
        let call = if to_read {
            "downgrade"
        } else {
            "downgrade_to_upgradable"
        };
        let c = Call::on(call, &h.belief, Some(COMMAND_TIMEOUT_MS));
        self.segment(&h.belief, Mode::W, w.fence(), c.start, "convert");
        let r = if to_read {
            w.downgrade().await.map(Guard::Read)
        } else {
            w.downgrade_to_upgradable().await.map(Guard::Upgradable)
        };
        let c = c.returned();
        match r {
            Ok(g) => {
                let belief = Belief {
                    from: c.start,
                    node: self.node_of(&h.belief.name),
                    ..h.belief
                };
                self.ctx.believe(&belief, g.held(), g.fence());
                self.op(c, Outcome::Ok, None, Some((g.fence(), g.held())));
                Some(Held {
                    guard: g,
                    belief,
                    wrote: h.wrote,
                })
            }
            Err(e) => {
                self.op(c, Outcome::Fail, Some(err_text(&e)), None);
                None
            }
        }
    }

    /// Upgradable -> write: the upgradable belief lasts until the call returns; the
    /// write belief starts then (a busy or timed-out upgrade keeps the upgradable hold).
    pub(super) async fn upgrade(&mut self, h: Held, how: Upgrade) -> Option<Held> {
        let Guard::Upgradable(u) = h.guard else {
            return Some(h);
        };
        let fence = u.fence();
        let (call, limit) = match how {
            Upgrade::Wait => ("upgrade", None),
            Upgrade::Timeout(ms) => ("upgrade_timeout", Some(ms)),
            Upgrade::Try => ("try_upgrade", Some(COMMAND_TIMEOUT_MS)),
        };
        let c = Call::on(call, &h.belief, limit);
        let r = match how {
            Upgrade::Wait => {
                let until = self.until();
                tokio::select! {
                    r = u.upgrade() => Some(r.map(Ok)),
                    _ = tokio::time::sleep_until(until) => None,
                }
            }
            Upgrade::Timeout(ms) => Some(u.upgrade_timeout(Duration::from_millis(ms)).await),
            Upgrade::Try => Some(u.try_upgrade().await),
        };
        let c = c.returned();
        match r {
            None => {
                self.segment(&h.belief, Mode::U, fence, c.start, "cancelled");
                self.op(c, Outcome::Cancelled, None, None);
                None
            }
            Some(Err(e)) => {
                self.segment(&h.belief, Mode::U, fence, c.start, "error");
                self.op(c, Outcome::Fail, Some(err_text(&e)), None);
                None
            }
            Some(Ok(Err(u))) => {
                self.op(c, Outcome::Busy, None, None);
                Some(Held {
                    guard: Guard::Upgradable(u),
                    ..h
                })
            }
            Some(Ok(Ok(w))) => {
                let at = now();
                self.segment(&h.belief, Mode::U, fence, at, "convert");
                let belief = Belief {
                    from: at,
                    node: self.node_of(&h.belief.name),
                    ..h.belief
                };
                self.ctx.believe(&belief, Mode::W, w.fence());
                self.op(c, Outcome::Ok, None, Some((w.fence(), Mode::W)));
                Some(Held {
                    guard: Guard::Write(w),
                    belief,
                    wrote: h.wrote,
                })
            }
        }
    }
}
