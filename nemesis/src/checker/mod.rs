//! The checker: reads a whole history and reports each kind of violation.
//!
//! - **overlap**: two believed-valid holds of one name, of different owners, in
//!   conflicting modes (write with anything, upgradable with upgradable), whose belief
//!   intervals intersect. Holds of one explicit owner are reentrant, not conflicts.
//!
//! Examples name the faults around them, and the node each grant came from (the one the
//! client routed the name's slot to when it returned).
//! - **fence_order**: a grant whose fence is not greater than the fence of a grant of
//!   the same name that returned before this one was asked for (real-time order: the
//!   first was certainly granted first).
//! - **stale_accepted**: an access the resource accepted although it had already
//!   accepted a conflicting access of another owner with a higher fence (refusals of
//!   such accesses are counted as fencing at work, not as violations).
//! - **slow_op**: a call with a time limit (`*_timeout`, `try_*`, conversions and
//!   releases: the command timeout or the lease) that returned more than 1 s after it.
//! - **unavailable**: a name a fresh client could not take for write within 10 s once
//!   every fault had healed.
//! - **leftover**: a key left after every holder released (unless a release of that name
//!   had failed, and then only if it outlived a lease), or a client still renewing a hold
//!   or subscribed to a channel after its tasks ended.
//! - **handed_to_dead**: a lock handed to a writer whose worker process had died (killed
//!   while the write waited), seen still handed to it, while others waited, for longer
//!   than the library's claim window and a slack (see [`mod@handoffs`]).
//!
//! One file per concern: [`verdict`] holds what is reported, [`context`] how examples
//! are placed in time and among the faults; each of the others finds one family of
//! violations or figures.

mod accesses;
mod after_run;
mod context;
mod fences;
mod guarded;
mod handoffs;
mod operations;
mod overlaps;
#[cfg(test)]
mod tests;
mod verdict;

use crate::history::Event;

use accesses::accesses;
use after_run::after_run;
use context::{secs, Fault};
use fences::fences;
use guarded::guarded;
use handoffs::handoffs;
pub use handoffs::HANDED_LIMIT_S;
use operations::operations;
use overlaps::overlaps;
pub use verdict::Verdict;

/// Reads `events` and reports what it finds. `t0` is the run's start (times in examples
/// are seconds after it).
pub fn check(events: &[Event], t0: u64) -> Verdict {
    let mut v = Verdict::default();
    let faults: Vec<Fault<'_>> = events
        .iter()
        .filter_map(|e| match e {
            Event::Fault {
                kind,
                target,
                start,
                end,
                error,
                ..
            } => {
                *v.faults.entry(kind.clone()).or_default() += 1;
                v.fault_errors += u64::from(error.is_some());
                Some(Fault {
                    kind,
                    target,
                    start: *start,
                    end: *end,
                })
            }
            _ => None,
        })
        .collect();
    let (mut first, mut last) = (u64::MAX, 0u64);
    for e in events {
        let (a, b) = match e {
            Event::Op { start, end, .. } => (*start, *end),
            Event::Segment { from, to, .. } => (*from, *to),
            Event::Access { at, .. } => (*at, *at),
            _ => continue,
        };
        first = first.min(a);
        last = last.max(b);
    }
    if last >= first {
        v.span_s = secs(last, first);
    }
    operations(events, t0, &mut v);
    overlaps(events, t0, &faults, &mut v);
    fences(events, t0, &faults, &mut v);
    accesses(events, t0, &faults, &mut v);
    after_run(events, &mut v);
    guarded(events, &mut v);
    handoffs(events, t0, &faults, &mut v);
    v
}
