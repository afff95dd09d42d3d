//! What the checker reports: each violation kind's count and first examples
//! ([`Found`]), and the run's figures with every kind ([`Verdict`]).

use std::collections::HashMap;

use serde::Serialize;

/// One violation kind: how many, and the first few.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Found {
    /// How many.
    pub count: u64,
    /// The first examples (at most [`EXAMPLES`]), in words, with times from the run's start.
    pub examples: Vec<String>,
}

/// Examples kept per kind.
pub const EXAMPLES: usize = 3;

impl Found {
    pub(super) fn add(&mut self, example: impl FnOnce() -> String) {
        self.count += 1;
        if self.examples.len() < EXAMPLES {
            self.examples.push(example());
        }
    }
}

/// What the checker found in a history.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Verdict {
    /// Calls of the lock's API.
    pub operations: u64,
    /// Grants per mode (acquires and conversions that returned a hold).
    pub grants: HashMap<String, u64>,
    /// Calls that failed, per error.
    pub errors: HashMap<String, u64>,
    /// Faults per kind.
    pub faults: HashMap<String, u64>,
    /// Faults whose own commands failed (the fault may not have happened).
    pub fault_errors: u64,
    /// Holds whose `lost()` resolved.
    pub lost: u64,
    /// Accesses to the resource, accepted.
    pub accesses_accepted: u64,
    /// Accesses refused because a conflicting grant with a higher fence had written:
    /// fencing at work.
    pub stale_refused: u64,
    /// Accesses refused for another reason (a newer hold of the same owner had written).
    pub other_refused: u64,
    /// Late (replayed) accesses sent, and how many of them the resource refused.
    pub late_sent: u64,
    /// Late accesses refused.
    pub late_refused: u64,
    /// Overlapping conflicting holds.
    pub overlap: Found,
    /// Fences out of grant order.
    pub fence_order: Found,
    /// Stale accesses accepted by the resource.
    pub stale_accepted: Found,
    /// Calls that overran their limit by more than 1 s.
    pub slow_op: Found,
    /// Names not acquirable within 10 s after the faults healed.
    pub unavailable: Found,
    /// Keys, holds or subscriptions left behind.
    pub leftover: Found,
    /// Guarded writes that returned `Ok`, and those refused (the hold was gone).
    pub guarded_ok: u64,
    /// Guarded writes that failed (`LockLost` and the others).
    pub guarded_failed: u64,
    /// Guarded log entries that landed outside their hold: behind a conflicting hold's
    /// higher fence in the log, or from a hold that was never a write hold.
    pub guarded_outside: Found,
    /// Guarded writes that returned `Ok` and are not in the log.
    pub guarded_lost: Found,
    /// Hand-offs seen pending by the observer (each lock handed to a writer, until it
    /// took the hold or lost its turn).
    pub handoffs_seen: u64,
    /// Of them, hand-offs to an owner whose worker process had died before.
    pub dead_handoffs: u64,
    /// Of those, hand-offs seen while others waited.
    pub dead_handoffs_waited: u64,
    /// The longest span over which a hand-off to a dead owner was seen while others
    /// waited, seconds.
    pub dead_handoff_longest_s: f64,
    /// Hand-offs to dead owners seen, while others waited, longer than the claim window
    /// allows.
    pub handed_to_dead: Found,
    /// Seconds from the first to the last event.
    pub span_s: f64,
}

impl Verdict {
    /// The violation kinds with their findings, in report order.
    pub fn kinds(&self) -> [(&'static str, &Found); 9] {
        [
            ("overlap", &self.overlap),
            ("fence_order", &self.fence_order),
            ("stale_accepted", &self.stale_accepted),
            ("slow_op", &self.slow_op),
            ("unavailable", &self.unavailable),
            ("leftover", &self.leftover),
            ("guarded_outside", &self.guarded_outside),
            ("guarded_lost", &self.guarded_lost),
            ("handed_to_dead", &self.handed_to_dead),
        ]
    }

    /// Total violations of every kind.
    pub fn violations(&self) -> u64 {
        self.kinds().iter().map(|(_, f)| f.count).sum()
    }

    /// All grants.
    pub fn total_grants(&self) -> u64 {
        self.grants.values().sum()
    }
}
