//! **overlap**: two believed-valid holds of one name, of different owners, in
//! conflicting modes, whose belief intervals intersect (and the count of lost holds).

use std::collections::HashMap;

use crate::history::{Event, Mode};

use super::context::{context, secs, via, Fault};
use super::verdict::Verdict;

/// A belief segment of a hold, as the history recorded it.
struct Seg<'a> {
    proc: u32,
    hold: u64,
    owner: &'a str,
    explicit: bool,
    mode: Mode,
    fence: u64,
    from: u64,
    to: u64,
    end: &'a str,
    node: Option<&'a str>,
}

impl Seg<'_> {
    fn describe(&self, t0: u64) -> String {
        format!(
            "p{} hold {} {} fence {}{} {:.3}-{:.3} s (ended by {})",
            self.proc,
            self.hold,
            self.mode.label(),
            self.fence,
            via(self.node),
            secs(self.from, t0),
            secs(self.to, t0),
            self.end
        )
    }

    fn same_owner(&self, other: &Seg<'_>) -> bool {
        self.hold == other.hold || (self.explicit && other.explicit && self.owner == other.owner)
    }
}

/// Finds the overlapping conflicting beliefs of each name, and counts the lost holds.
pub(super) fn overlaps(events: &[Event], t0: u64, faults: &[Fault<'_>], v: &mut Verdict) {
    let mut by_name: HashMap<&str, Vec<Seg<'_>>> = HashMap::new();
    for e in events {
        if let Event::Segment {
            proc,
            hold,
            name,
            owner,
            explicit,
            mode,
            fence,
            from,
            to,
            end,
            node,
        } = e
        {
            if end == "lost" {
                v.lost += 1;
            }
            if to > from {
                by_name.entry(name).or_default().push(Seg {
                    proc: *proc,
                    hold: *hold,
                    owner,
                    explicit: *explicit,
                    mode: *mode,
                    fence: *fence,
                    from: *from,
                    to: *to,
                    end,
                    node: node.as_deref(),
                });
            }
        }
    }
    let mut names: Vec<&str> = by_name.keys().copied().collect();
    names.sort();
    for name in names {
        let segs = by_name.get_mut(name).expect("listed");
        segs.sort_by_key(|s| (s.from, s.to));
        let mut active: Vec<usize> = Vec::new();
        for i in 0..segs.len() {
            let from = segs[i].from;
            active.retain(|&a| segs[a].to > from);
            for &a in &active {
                let (x, y) = (&segs[a], &segs[i]);
                if x.mode.conflicts(y.mode) && !x.same_owner(y) {
                    let both = x.to.min(y.to) - y.from;
                    v.overlap.add(|| {
                        format!(
                            "{name}: {} and {} overlap {:.3} s from {:.3} s; {}",
                            x.describe(t0),
                            y.describe(t0),
                            both as f64 / 1e9,
                            secs(y.from, t0),
                            context(faults, y.from, t0)
                        )
                    });
                }
            }
            active.push(i);
        }
    }
}
