//! Calls of the lock's API: counted, grants per mode, failures per error, and the
//! **slow_op** violations (a call with a time limit that returned more than 1 s after it).

use crate::history::{Event, Outcome};

use super::context::secs;
use super::verdict::Verdict;

/// Slack added to a call's own time limit before it counts as slow.
pub const SLACK_NS: u64 = 1_000_000_000;

/// Counts the calls, and finds those that overran their time limit.
pub(super) fn operations(events: &[Event], t0: u64, v: &mut Verdict) {
    for e in events {
        let Event::Op {
            proc,
            call,
            name,
            timeout_ms,
            start,
            end,
            outcome,
            error,
            mode,
            ..
        } = e
        else {
            continue;
        };
        v.operations += 1;
        if *outcome == Outcome::Ok {
            if let Some(m) = mode {
                *v.grants.entry(m.label().to_string()).or_default() += 1;
            }
        }
        if *outcome == Outcome::Fail {
            let kind = error
                .as_deref()
                .and_then(|e| e.split(':').next())
                .unwrap_or("?")
                .to_string();
            *v.errors.entry(format!("{call}: {kind}")).or_default() += 1;
        }
        if let Some(limit) = timeout_ms {
            let took = end.saturating_sub(*start);
            if took > limit * 1_000_000 + SLACK_NS {
                v.slow_op.add(|| {
                    format!(
                        "p{proc} {call}({limit} ms) on {name} took {:.2} s, {:.3}-{:.3} s, {:?} {}",
                        took as f64 / 1e9,
                        secs(*start, t0),
                        secs(*end, t0),
                        outcome,
                        error.as_deref().unwrap_or("")
                    )
                });
            }
        }
    }
}
