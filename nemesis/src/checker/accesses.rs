//! Accesses to the fenced resource: counted, accepted or refused, and the
//! **stale_accepted** violations (accepted behind a conflicting access of another owner
//! with a higher fence).

use std::collections::HashMap;

use crate::history::{Event, Mode};

use super::context::{context, secs, Fault};
use super::verdict::Verdict;

/// The two highest fences of accepted accesses, of two different owners.
#[derive(Default, Clone)]
struct Top<'a> {
    best: Option<(u64, &'a str, u64)>,
    second: Option<(u64, &'a str, u64)>,
}

impl<'a> Top<'a> {
    fn push(&mut self, fence: u64, owner: &'a str, hold: u64) {
        let entry = Some((fence, owner, hold));
        match self.best {
            None => self.best = entry,
            Some((f, o, _)) if o == owner => {
                if fence > f {
                    self.best = entry;
                }
            }
            Some((f, _, _)) if fence > f => {
                // the old best is of another owner than the new one: it is the second
                self.second = self.best;
                self.best = entry;
            }
            Some(_) => {
                if self.second.is_none_or(|(f, _, _)| fence > f) {
                    self.second = entry;
                }
            }
        }
    }

    /// The highest fence accepted from an owner other than `owner`.
    fn other_than(&self, owner: &str) -> Option<(u64, &'a str, u64)> {
        match self.best {
            Some((_, o, _)) if o == owner => self.second,
            best => best,
        }
    }
}

/// Counts the accesses, and finds the stale ones the resource accepted.
pub(super) fn accesses(events: &[Event], t0: u64, faults: &[Fault<'_>], v: &mut Verdict) {
    // per name: accepted writes, and accepted reads (read or upgradable)
    let mut writes: HashMap<&str, Top<'_>> = HashMap::new();
    let mut reads: HashMap<&str, Top<'_>> = HashMap::new();
    for e in events {
        let Event::Access {
            name,
            hold,
            owner,
            mode,
            fence,
            at,
            late,
            accepted,
        } = e
        else {
            continue;
        };
        v.late_sent += u64::from(*late);
        v.late_refused += u64::from(*late && !*accepted);
        let w = writes.get(name.as_str()).and_then(|t| t.other_than(owner));
        let r = reads.get(name.as_str()).and_then(|t| t.other_than(owner));
        let newer = match mode {
            Mode::W => [w, r].into_iter().flatten().max_by_key(|x| x.0),
            Mode::R | Mode::U => w,
        }
        .filter(|(f, _, _)| *f > *fence);
        match (accepted, newer) {
            (true, Some((f, o, h))) => v.stale_accepted.add(|| {
                format!(
                    "{name}: {} access of hold {hold} ({owner}) with fence {fence} accepted at {:.3} s{} after hold {h} ({o}) had written with fence {f}; {}",
                    mode.label(),
                    secs(*at, t0),
                    if *late { " (late)" } else { "" },
                    context(faults, *at, t0)
                )
            }),
            (true, None) => v.accesses_accepted += 1,
            (false, Some(_)) => v.stale_refused += 1,
            (false, None) => v.other_refused += 1,
        }
        if *accepted {
            let top = if *mode == Mode::W {
                writes.entry(name).or_default()
            } else {
                reads.entry(name).or_default()
            };
            top.push(*fence, owner, *hold);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_keeps_two_owners() {
        let mut t = Top::default();
        t.push(5, "a", 1);
        t.push(7, "a", 2);
        t.push(6, "b", 3);
        assert_eq!(t.other_than("a").map(|x| x.0), Some(6));
        assert_eq!(t.other_than("b").map(|x| x.0), Some(7));
        t.push(9, "c", 4);
        assert_eq!(t.other_than("c").map(|x| x.0), Some(7));
        assert_eq!(t.other_than("a").map(|x| x.0), Some(9));
    }
}
