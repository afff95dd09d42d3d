//! A worker's shared state ([`Ctx`]): its history writer and the beliefs its tasks hold
//! now, so that a worker that kills itself records each of them as ended first; and
//! [`Belief`], whose belief a task is recording.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

use crate::history::{now, Event, Mode, Writer};

use super::spec::WorkerSpec;

/// A belief being held: what its segment will say, but its end.
struct Open {
    name: String,
    owner: String,
    explicit: bool,
    mode: Mode,
    fence: u64,
    from: u64,
    node: Option<String>,
}

/// What the tasks of a worker share.
pub(super) struct Ctx {
    /// What the controller told this worker.
    pub(super) spec: WorkerSpec,
    /// The history, written as it happens.
    pub(super) out: Mutex<Writer>,
    /// Holds made, for hold numbers.
    holds: AtomicU64,
    /// The beliefs held now, by hold: recorded as ended when the worker kills itself.
    /// Locked after `out` when both are.
    open: Mutex<HashMap<u64, Open>>,
    /// A task has taken on the worker's death (`kill_at`).
    pub(super) dying: AtomicBool,
    /// Guarded writes made, for unique log entries.
    pub(super) guarded: AtomicU64,
}

impl Ctx {
    /// The state of a worker told `spec`, writing its history to `out`.
    pub(super) fn new(spec: WorkerSpec, out: Writer) -> Ctx {
        Ctx {
            spec,
            out: Mutex::new(out),
            holds: AtomicU64::new(0),
            open: Mutex::new(HashMap::new()),
            dying: AtomicBool::new(false),
            guarded: AtomicU64::new(0),
        }
    }

    /// Writes `ev` to the history.
    pub(super) fn record(&self, ev: Event) {
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        let _ = out.write(&ev);
    }

    /// A belief begins (or goes on in another mode, after a conversion).
    pub(super) fn believe(&self, b: &Belief, mode: Mode, fence: u64) {
        let open = Open {
            name: b.name.clone(),
            owner: b.owner.clone(),
            explicit: b.explicit,
            mode,
            fence,
            from: b.from,
            node: b.node.clone(),
        };
        self.open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(b.hold, open);
    }

    /// Records the end of the belief of `hold` (its segment `ev`).
    pub(super) fn end_belief(&self, hold: u64, ev: Event) {
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        self.open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&hold);
        let _ = out.write(&ev);
    }

    /// Whether this worker is due to kill itself now: its `kill_at` has come, the run
    /// ends more than a lease and 5 s later (its holds expire before the checks after
    /// the run), and no other task has taken it on.
    pub(super) fn kill_due(&self) -> bool {
        self.spec.kill_at.is_some_and(|at| now() >= at)
            && self.may_die()
            && self
                .dying
                .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
    }

    /// Whether the run ends more than a lease and 5 s from now.
    pub(super) fn may_die(&self) -> bool {
        now() + (self.spec.lease_ms + 5_000) * 1_000_000 < self.spec.until
    }

    /// Kills this process (SIGKILL, as the OOM killer or a `kill -9` would) after
    /// recording every belief held as ended now (`killed`) and flushing the history;
    /// other tasks record nothing more (the history's lock is kept to the end).
    pub(super) fn die(&self) -> ! {
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        let at = now();
        let open: Vec<(u64, Open)> = self
            .open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain()
            .collect();
        for (hold, o) in open {
            let _ = out.write(&Event::Segment {
                proc: self.spec.proc,
                hold,
                name: o.name,
                owner: o.owner,
                explicit: o.explicit,
                mode: o.mode,
                fence: o.fence,
                from: o.from,
                to: at,
                end: "killed".into(),
                node: o.node,
            });
        }
        let _ = out.flush();
        // SAFETY: kill(2) of this very process with a valid signal number.
        unsafe {
            libc::kill(libc::getpid(), libc::SIGKILL);
        }
        std::process::abort()
    }

    /// A new hold number, unique in the run (the worker's number in the high bits).
    pub(super) fn next_hold(&self) -> u64 {
        (u64::from(self.spec.proc) << 40) | self.holds.fetch_add(1, Ordering::Relaxed)
    }
}

/// Whose belief is being recorded, and since when: a segment's fields besides the mode
/// and fence, which are the guard's (kept apart from it, since conversions consume it).
pub(super) struct Belief {
    /// The hold's number.
    pub(super) hold: u64,
    /// The lock's name.
    pub(super) name: String,
    /// The owner the hold was granted to.
    pub(super) owner: String,
    /// Whether that owner was given with `with_owner`.
    pub(super) explicit: bool,
    /// Start of the current belief segment.
    pub(super) from: u64,
    /// The node the client routed the name's slot to when the segment began.
    pub(super) node: Option<String>,
}
