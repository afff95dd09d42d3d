//! What the checks after the run found: **unavailable** names (not granted for write
//! within 10 s once the faults healed) and **leftover** keys, holds or subscriptions.

use std::collections::HashMap;

use crate::history::{Event, Outcome};

use super::verdict::Verdict;

/// How long a name may take to be granted after the faults healed.
pub const PROBE_LIMIT_S: f64 = 10.0;

/// Finds the names not granted after the faults healed, and what was left behind.
pub(super) fn after_run(events: &[Event], v: &mut Verdict) {
    let mut failed_release: HashMap<&str, u64> = HashMap::new();
    for e in events {
        if let Event::Op {
            call,
            name,
            outcome: Outcome::Fail,
            ..
        } = e
        {
            if call == "release" || call == "dropped" {
                *failed_release.entry(name).or_default() += 1;
            }
        }
    }
    for e in events {
        match e {
            Event::Probe {
                name,
                took_s,
                error,
                ..
            } if took_s.is_none_or(|t| t > PROBE_LIMIT_S) => {
                v.unavailable.add(|| {
                    format!(
                        "{name}: not granted for write within {PROBE_LIMIT_S} s after the faults healed ({})",
                        error.as_deref().unwrap_or("timeout")
                    )
                });
            }
            Event::ClientEnd {
                proc,
                held,
                subscriptions,
                ..
            } if *held > 0 || *subscriptions > 0 => {
                v.leftover.add(|| {
                    format!("p{proc}: {held} hold(s) still renewed and {subscriptions} channel(s) subscribed after its tasks ended")
                });
            }
            Event::Leftover {
                key,
                content,
                persisted,
            } => {
                let explained = failed_release.keys().any(|n| key.contains(n));
                if *persisted || !explained {
                    v.leftover.add(|| {
                        format!(
                            "{key} left after every holder released{}: {content}",
                            if *persisted {
                                " and one lease later"
                            } else {
                                ""
                            }
                        )
                    });
                }
            }
            _ => {}
        }
    }
}
