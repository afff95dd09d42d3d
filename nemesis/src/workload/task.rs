//! A task of a worker ([`Task`]): its locks, randomness and resource connection, and how
//! it records what it does: each call with its outcome ([`Call`]), each belief segment,
//! each hold granted ([`Held`]).

use std::sync::Arc;
use std::time::Duration;

use cluster_rwlock::{LockClient, RwLock};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::guard::{Guard, Held as _};
use crate::history::{now, Event, Mode, Outcome};
use crate::resource::Conn;

use super::beliefs::{Belief, Ctx};

/// The client's default command timeout, the limit of `try_*` calls and conversions.
pub(super) const COMMAND_TIMEOUT_MS: u64 = 5_000;

/// A granted hold and the belief being recorded.
pub(super) struct Held {
    /// The library's guard.
    pub(super) guard: Guard,
    /// The belief being recorded.
    pub(super) belief: Belief,
    /// Whether it wrote to the resource (a late write replays the last one).
    pub(super) wrote: bool,
}

/// A call of the lock's API as invoked: recorded with its outcome when it returns.
pub(super) struct Call {
    /// The call, in the history's words (`write_timeout`, `try_upgrade`, ...).
    pub(super) call: String,
    /// The lock's name.
    pub(super) name: String,
    /// The hold it was made on, if any.
    pub(super) hold: Option<u64>,
    /// The owner it was made as, when known.
    pub(super) owner: Option<String>,
    /// Its time limit, ms, if it has one.
    pub(super) timeout_ms: Option<u64>,
    /// When it was invoked.
    pub(super) start: u64,
    /// When it returned, stamped as it did (see [`returned`](Self::returned)); `None`:
    /// when it is recorded, which follows its return with nothing in between.
    pub(super) returned: Option<u64>,
}

impl Call {
    /// A call on the hold of `b`, invoked now.
    pub(super) fn on(call: &str, b: &Belief, timeout_ms: Option<u64>) -> Call {
        Call {
            call: call.to_string(),
            name: b.name.clone(),
            hold: Some(b.hold),
            owner: Some(b.owner.clone()),
            timeout_ms,
            start: now(),
            returned: None,
        }
    }

    /// A call on no hold yet (an acquire), on lock `name`, invoked now.
    pub(super) fn named(call: &str, name: &str) -> Call {
        Call {
            call: call.to_string(),
            name: name.to_string(),
            hold: None,
            owner: None,
            timeout_ms: None,
            start: now(),
            returned: None,
        }
    }

    /// This call, returned now: its end is this moment, not when it is recorded after
    /// the worker's own bookkeeping (a belief recorded first takes the history's lock,
    /// which the worker's tasks share, and may write to its file). The lock's time is
    /// measured, not the harness's.
    pub(super) fn returned(self) -> Call {
        Call {
            returned: Some(now()),
            ..self
        }
    }
}

/// One task of a worker: it plays rounds until the run's end.
pub(super) struct Task {
    /// The worker's shared state.
    pub(super) ctx: Arc<Ctx>,
    /// Its number in the worker.
    pub(super) task: u32,
    /// Its randomness, seeded from the worker's.
    pub(super) rng: ChaCha8Rng,
    /// The worker's client.
    pub(super) client: LockClient,
    /// A lock of each name of the run.
    pub(super) locks: Vec<RwLock>,
    /// Its connection to the resource.
    pub(super) conn: Conn,
}

/// An error as the history records it: `Variant: message`.
pub(super) fn err_text(e: &cluster_rwlock::Error) -> String {
    let variant = format!("{e:?}");
    let variant = variant
        .split(['(', ' ', '{'])
        .next()
        .unwrap_or("?")
        .to_string();
    format!("{variant}: {e}")
}

impl Task {
    /// Task `task` of the worker, with its own locks, resource connection and seed.
    pub(super) async fn new(ctx: Arc<Ctx>, client: LockClient, task: u32) -> Result<Task, String> {
        let locks = ctx
            .spec
            .names
            .iter()
            .map(|n| {
                client
                    .rwlock(n)
                    .and_then(|l| ctx.spec.lock(l))
                    .map_err(|e| e.to_string())
            })
            .collect::<Result<Vec<_>, _>>()?;
        let conn = Conn::connect(&ctx.spec.resource)
            .await
            .map_err(|e| format!("cannot reach the resource: {e}"))?;
        let seed = ctx.spec.seed ^ (u64::from(ctx.spec.proc) << 32) ^ u64::from(task);
        Ok(Task {
            task,
            rng: ChaCha8Rng::seed_from_u64(seed),
            client,
            locks,
            conn,
            ctx,
        })
    }

    /// Records that call `c` was granted `guard` on `name`: a new belief from `from`
    /// (`explicit`: under an owner given with `with_owner`), and the call's success
    /// with the hold it made.
    pub(super) fn granted(
        &self,
        c: Call,
        name: &str,
        guard: &Guard,
        explicit: bool,
        from: u64,
    ) -> Belief {
        let belief = Belief {
            hold: self.ctx.next_hold(),
            name: name.to_string(),
            owner: guard.owner().to_string(),
            explicit,
            from,
            node: self.node_of(name),
        };
        self.ctx.believe(&belief, guard.held(), guard.fence());
        let c = Call {
            hold: Some(belief.hold),
            owner: Some(belief.owner.clone()),
            ..c
        };
        self.op(c, Outcome::Ok, None, Some((guard.fence(), guard.held())));
        belief
    }

    /// Records `c` as returned now.
    pub(super) fn op(
        &self,
        c: Call,
        outcome: Outcome,
        error: Option<String>,
        granted: Option<(u64, Mode)>,
    ) {
        let node = granted.and_then(|_| self.node_of(&c.name));
        self.ctx.record(Event::Op {
            proc: self.ctx.spec.proc,
            task: self.task,
            call: c.call,
            name: c.name,
            hold: c.hold,
            owner: c.owner,
            timeout_ms: c.timeout_ms,
            start: c.start,
            end: c.returned.unwrap_or_else(now),
            outcome,
            error,
            fence: granted.map(|g| g.0),
            mode: granted.map(|g| g.1),
            node,
        });
    }

    /// The node the client routes the slot of `name` to now (where a grant that returns
    /// now came from, unless it was redirected on the way).
    pub(super) fn node_of(&self, name: &str) -> Option<String> {
        let lock = self.locks.iter().find(|l| l.name() == name)?;
        self.client.node_for_slot(lock.slot())
    }

    /// Records the belief `b` in `mode` under `fence`, ended at `to` for reason `end`.
    pub(super) fn segment(&self, b: &Belief, mode: Mode, fence: u64, to: u64, end: &str) {
        self.ctx.end_belief(
            b.hold,
            Event::Segment {
                proc: self.ctx.spec.proc,
                hold: b.hold,
                name: b.name.clone(),
                owner: b.owner.clone(),
                explicit: b.explicit,
                mode,
                fence,
                from: b.from,
                to,
                end: end.to_string(),
                node: b.node.clone(),
            },
        );
    }

    /// Records the belief of `h`, in its guard's mode, ended at `to` for reason `end`.
    pub(super) fn held_segment(&self, h: &Held, to: u64, end: &str) {
        self.segment(&h.belief, h.guard.held(), h.guard.fence(), to, end);
    }

    /// The run's end (`spec.until`) as a tokio instant.
    pub(super) fn until(&self) -> tokio::time::Instant {
        let left = self.ctx.spec.until.saturating_sub(now());
        tokio::time::Instant::now() + Duration::from_nanos(left)
    }
}
