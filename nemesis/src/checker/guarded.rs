//! Guarded writes: **guarded_outside** (a log entry outside its write hold) and
//! **guarded_lost** (a write that returned `Ok` and is not in the log).

use std::collections::HashMap;

use crate::history::{Event, Mode, Outcome};

use super::verdict::Verdict;

/// Guarded writes: every entry of a name's log was written under a write hold with its
/// fence, in the order of the holds (an entry behind a higher fence of another owner
/// landed after that owner's grant: outside its own hold); every write that returned
/// `Ok` is in the log.
pub(super) fn guarded(events: &[Event], v: &mut Verdict) {
    // write holds: hold -> (owner, fence)
    let mut writes: HashMap<u64, (&str, u64)> = HashMap::new();
    let mut returned_ok: HashMap<&str, &str> = HashMap::new();
    for e in events {
        match e {
            Event::Segment {
                hold,
                owner,
                mode: Mode::W,
                fence,
                ..
            } => {
                writes.insert(*hold, (owner, *fence));
            }
            Event::Guarded {
                entry,
                name,
                outcome,
                ..
            } => {
                if *outcome == Outcome::Ok {
                    v.guarded_ok += 1;
                    returned_ok.insert(entry, name);
                } else {
                    v.guarded_failed += 1;
                }
            }
            _ => {}
        }
    }
    for e in events {
        let Event::GuardedLog { name, entries } = e else {
            continue;
        };
        // the highest fence so far, and its owner
        let mut highest: Option<(u64, &str)> = None;
        for entry in entries {
            returned_ok.remove(entry.as_str());
            let mut parts = entry.split(':').map(|p| p.parse::<u64>().ok());
            let (_proc, hold, fence) = (
                parts.next().flatten(),
                parts.next().flatten(),
                parts.next().flatten(),
            );
            let (Some(hold), Some(fence)) = (hold, fence) else {
                v.guarded_outside
                    .add(|| format!("{name}: a log entry {entry:?} that no guarded write made"));
                continue;
            };
            let Some(&(owner, granted)) = writes.get(&hold).filter(|(_, f)| *f == fence) else {
                v.guarded_outside.add(|| {
                    format!("{name}: entry {entry:?} of hold {hold}, which never believed a write hold under fence {fence}")
                });
                continue;
            };
            if let Some((top, top_owner)) = highest {
                if granted < top && top_owner != owner {
                    v.guarded_outside.add(|| {
                        format!("{name}: entry {entry:?} (fence {granted}) landed after an entry of another owner under fence {top}")
                    });
                }
            }
            if highest.is_none_or(|(top, _)| granted > top) {
                highest = Some((granted, owner));
            }
        }
    }
    // (only for names whose log was read)
    let read: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            Event::GuardedLog { name, .. } => Some(name.as_str()),
            _ => None,
        })
        .collect();
    for (entry, name) in returned_ok {
        if read.contains(&name) {
            v.guarded_lost.add(|| {
                format!("{name}: guarded write {entry:?} returned Ok and is not in the log")
            });
        }
    }
}
