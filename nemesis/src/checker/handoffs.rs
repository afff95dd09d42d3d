//! **handed_to_dead**: a lock handed to a writer whose worker process was dead, and
//! still handed to it, while others waited, longer than the claim window allows.
//!
//! The controller reads each name's hash every 100 ms while the run lasts and records
//! the hand-offs it sees pending ([`Event::Handoff`]: the lock handed to the first queued
//! writer, which has not taken the hold yet). A worker killed while a write of it waited
//! (`client_kill`, with its pid) never takes what it is handed: the library drops such a
//! hand-off at the first call after its claim window (1 s from the release, server
//! time), and those behind it make that call (they look again after the window). So a
//! hand-off to an owner whose process died before the hand-off was first seen must not
//! be seen, while others waited, over a span longer than the window and a slack:
//!
//! - the slack, 1 s: the waiters behind look again 50 ms after the window as they count
//!   it from the release message, which comes a round trip after the release; their call
//!   takes a round trip more, or a 100 ms back-off after an error; and each read of the
//!   observer is stamped when its reply came, up to 250 ms after the server read the
//!   hash, on a machine whose two cores also run the six nodes and the workers;
//! - a run of observations ends where the observer could not read the name for more than
//!   [`POLL_GAP_NS`] (a master frozen, failing over or cut off: nobody's call reaches it
//!   then, and the window, counted on the server's clock, passes meanwhile), and where
//!   nobody else waited (nothing calls the lock then, and reading does not prune);
//! - a node's clock stepped back (`skew`, at most 2 s) while the hand-off was pending
//!   makes the window longer by the step: a span with a skew's start or end in it is
//!   allowed [`SKEW_STEP_NS`] more;
//! - while a fault of the nodes is on, and [`AFTER_FAULT_NS`] after it healed, the
//!   observer may reach the name's master before the waiters do (a replica promoted with
//!   a hand-off whose window passed long ago is read at once, while the workers' clients
//!   still look for the slot's new master): a span that overlaps such a time is allowed
//!   [`FAULT_GRACE_NS`] more, the time a fresh client is given to take a name after the
//!   faults healed (the checks after the run).
//!
//! The figures (hand-offs to dead owners seen, the longest span) show the rule is not
//! vacuous.

use std::collections::HashMap;

use crate::history::Event;

use super::context::{context, secs, Fault};
use super::verdict::Verdict;

/// The library's claim window (`CLAIM_MS` in src/lua/layout.lua).
pub const CLAIM_WINDOW_NS: u64 = 1_000_000_000;
/// What a span may exceed the claim window by (see the module's doc).
pub const SLACK_NS: u64 = 1_000_000_000;
/// Observations further apart than this are not one run (the observer reads every
/// 100 ms; a read gives up after 250 ms).
pub const POLL_GAP_NS: u64 = 500_000_000;
/// How long after a fault of the nodes healed the clients may still be finding the
/// slot's master.
pub const AFTER_FAULT_NS: u64 = 5_000_000_000;
/// What a span that overlaps a fault of the nodes is allowed more.
pub const FAULT_GRACE_NS: u64 = 10_000_000_000;
/// The faults that are not of the nodes' reachability.
const NOT_NODE_FAULTS: [&str; 4] = ["skew", "client_kill", "pause_client", "not_healed"];
/// The limit of a hand-off's span without a clock step or a fault of the nodes, seconds (for the table).
pub const HANDED_LIMIT_S: f64 = (CLAIM_WINDOW_NS + SLACK_NS) as f64 / 1e9;
/// The largest step of a node's clock the `skew` fault makes.
pub const SKEW_STEP_NS: u64 = 2_000_000_000;

/// A hand-off: the name, the owner token handed to, the hold id.
type Handed<'a> = (&'a str, &'a str, &'a str);

/// The pid of the worker whose client name begins owner token `owner` (`<pid>@<host>/...`);
/// `None` for an explicit owner.
fn pid_of(owner: &str) -> Option<u32> {
    owner.split_once('@')?.0.parse().ok()
}

/// Finds the hand-offs to dead owners, and those that lasted too long.
pub(super) fn handoffs(events: &[Event], t0: u64, faults: &[Fault<'_>], v: &mut Verdict) {
    let mut died: HashMap<u32, u64> = HashMap::new();
    let mut seen: HashMap<Handed<'_>, Vec<(u64, bool)>> = HashMap::new();
    for e in events {
        match e {
            Event::Fault {
                kind,
                start,
                pid: Some(pid),
                ..
            } if kind == "client_kill" => {
                died.insert(*pid, *start);
            }
            Event::Handoff {
                name,
                owner,
                hold,
                at,
                waiting,
            } => seen
                .entry((name.as_str(), owner.as_str(), hold.as_str()))
                .or_default()
                .push((*at, *waiting)),
            _ => {}
        }
    }
    v.handoffs_seen = seen.len() as u64;
    let mut handoffs: Vec<_> = seen.into_iter().collect();
    handoffs.sort_by_key(|(_, obs)| obs.iter().map(|o| o.0).min());
    for ((name, owner, hold), mut obs) in handoffs {
        obs.sort_unstable();
        let first = obs[0].0;
        let Some((pid, death)) = pid_of(owner).and_then(|p| died.get(&p).map(|d| (p, *d))) else {
            continue;
        };
        if death > first {
            continue;
        }
        v.dead_handoffs += 1;
        // the longest run of observations while others waited, none further apart than
        // the gap
        let mut runs: Vec<(u64, u64)> = Vec::new();
        let mut open: Option<(u64, u64)> = None;
        for (at, waiting) in obs {
            open = match (open, waiting) {
                (Some((from, last)), true) if at - last <= POLL_GAP_NS => Some((from, at)),
                (Some(run), true) => {
                    runs.push(run);
                    Some((at, at))
                }
                (None, true) => Some((at, at)),
                (Some(run), false) => {
                    runs.push(run);
                    None
                }
                (None, false) => None,
            };
        }
        runs.extend(open);
        let Some((from, to)) = runs.into_iter().max_by_key(|(from, to)| to - from) else {
            continue;
        };
        v.dead_handoffs_waited += 1;
        let span = to - from;
        v.dead_handoff_longest_s = v.dead_handoff_longest_s.max(secs(span, 0));
        let stepped = faults.iter().any(|f| {
            f.kind == "skew"
                && [f.start, f.end]
                    .iter()
                    .any(|t| *t + CLAIM_WINDOW_NS >= from && *t <= to)
        });
        let faulted = faults.iter().any(|f| {
            !NOT_NODE_FAULTS.contains(&f.kind) && f.start <= to && f.end + AFTER_FAULT_NS >= from
        });
        let limit = CLAIM_WINDOW_NS
            + SLACK_NS
            + if stepped { SKEW_STEP_NS } else { 0 }
            + if faulted { FAULT_GRACE_NS } else { 0 };
        if span > limit {
            v.handed_to_dead.add(|| {
                format!(
                    "{name}: handed to {owner} (hold {hold}) of worker pid {pid}, dead since {:.2} s, and pending while others waited {:.2}-{:.2} s: {:.2} s, more than {:.1} s; {}",
                    secs(death, t0),
                    secs(from, t0),
                    secs(to, t0),
                    secs(span, 0),
                    secs(limit, 0),
                    context(faults, from, t0)
                )
            });
        }
    }
}
