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

use std::collections::HashMap;

use serde::Serialize;

use crate::history::{Event, Mode, Outcome};

/// Slack added to a call's own time limit before it counts as slow.
pub const SLACK_NS: u64 = 1_000_000_000;
/// How long a name may take to be granted after the faults healed.
pub const PROBE_LIMIT_S: f64 = 10.0;
/// How long before a violation a fault counts as its context.
const CONTEXT_NS: u64 = 15_000_000_000;

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
    fn add(&mut self, example: impl FnOnce() -> String) {
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
    /// Seconds from the first to the last event.
    pub span_s: f64,
}

impl Verdict {
    /// The violation kinds with their findings, in report order.
    pub fn kinds(&self) -> [(&'static str, &Found); 8] {
        [
            ("overlap", &self.overlap),
            ("fence_order", &self.fence_order),
            ("stale_accepted", &self.stale_accepted),
            ("slow_op", &self.slow_op),
            ("unavailable", &self.unavailable),
            ("leftover", &self.leftover),
            ("guarded_outside", &self.guarded_outside),
            ("guarded_lost", &self.guarded_lost),
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

struct Fault<'a> {
    kind: &'a str,
    target: &'a str,
    start: u64,
    end: u64,
}

/// Seconds of `t` after `t0`.
fn secs(t: u64, t0: u64) -> f64 {
    (t as f64 - t0 as f64) / 1e9
}

fn context(faults: &[Fault<'_>], t: u64, t0: u64) -> String {
    let near: Vec<String> = faults
        .iter()
        .filter(|f| f.start <= t && f.end + CONTEXT_NS >= t)
        .map(|f| {
            format!(
                "{} {} {:.2}-{:.2} s",
                f.kind,
                f.target,
                secs(f.start, t0),
                secs(f.end, t0)
            )
        })
        .collect();
    if near.is_empty() {
        "no fault in the 15 s before".into()
    } else {
        format!("faults: {}", near.join("; "))
    }
}

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

/// ` via <node>`, or nothing when the node is not known.
fn via(node: Option<&str>) -> String {
    node.map(|n| format!(" via {n}")).unwrap_or_default()
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
    v
}

/// Guarded writes: every entry of a name's log was written under a write hold with its
/// fence, in the order of the holds (an entry behind a higher fence of another owner
/// landed after that owner's grant: outside its own hold); every write that returned
/// `Ok` is in the log.
fn guarded(events: &[Event], v: &mut Verdict) {
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

fn operations(events: &[Event], t0: u64, v: &mut Verdict) {
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

fn overlaps(events: &[Event], t0: u64, faults: &[Fault<'_>], v: &mut Verdict) {
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

struct Grant<'a> {
    proc: u32,
    call: &'a str,
    fence: u64,
    start: u64,
    end: u64,
    node: Option<&'a str>,
}

fn fences(events: &[Event], t0: u64, faults: &[Fault<'_>], v: &mut Verdict) {
    let mut by_name: HashMap<&str, Vec<Grant<'_>>> = HashMap::new();
    for e in events {
        if let Event::Op {
            proc,
            call,
            name,
            start,
            end,
            outcome: Outcome::Ok,
            fence: Some(fence),
            node,
            ..
        } = e
        {
            by_name.entry(name).or_default().push(Grant {
                proc: *proc,
                call,
                fence: *fence,
                start: *start,
                end: *end,
                node: node.as_deref(),
            });
        }
    }
    let mut names: Vec<&str> = by_name.keys().copied().collect();
    names.sort();
    for name in names {
        let grants = &by_name[name];
        let mut by_end: Vec<usize> = (0..grants.len()).collect();
        by_end.sort_by_key(|&i| grants[i].end);
        let mut by_start: Vec<usize> = (0..grants.len()).collect();
        by_start.sort_by_key(|&i| grants[i].start);
        // sweep: the highest fence among grants that returned before each one was asked
        let (mut k, mut best): (usize, Option<usize>) = (0, None);
        for &i in &by_start {
            while k < by_end.len() && grants[by_end[k]].end < grants[i].start {
                let j = by_end[k];
                if best.is_none_or(|b| grants[j].fence > grants[b].fence) {
                    best = Some(j);
                }
                k += 1;
            }
            if let Some(b) = best {
                let (earlier, later) = (&grants[b], &grants[i]);
                if later.fence <= earlier.fence {
                    v.fence_order.add(|| {
                        format!(
                            "{name}: p{} {} returned at {:.3} s with fence {}{}; p{} {} asked at {:.3} s got fence {}{} (lower by {} µs); {}",
                            earlier.proc,
                            earlier.call,
                            secs(earlier.end, t0),
                            earlier.fence,
                            via(earlier.node),
                            later.proc,
                            later.call,
                            secs(later.start, t0),
                            later.fence,
                            via(later.node),
                            earlier.fence - later.fence,
                            context(faults, later.start, t0)
                        )
                    });
                }
            }
        }
    }
}

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

fn accesses(events: &[Event], t0: u64, faults: &[Fault<'_>], v: &mut Verdict) {
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

fn after_run(events: &[Event], v: &mut Verdict) {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(hold: u64, owner: &str, explicit: bool, mode: Mode, from: u64, to: u64) -> Event {
        Event::Segment {
            proc: 0,
            hold,
            name: "n".into(),
            owner: owner.into(),
            explicit,
            mode,
            fence: hold,
            from,
            to,
            end: "release".into(),
            node: Some(format!("127.0.0.1:{}", 7000 + hold)),
        }
    }

    fn grant(fence: u64, start: u64, end: u64) -> Event {
        Event::Op {
            proc: 0,
            task: 0,
            call: "write".into(),
            name: "n".into(),
            hold: Some(fence),
            owner: None,
            timeout_ms: None,
            start,
            end,
            outcome: Outcome::Ok,
            error: None,
            fence: Some(fence),
            mode: Some(Mode::W),
            node: None,
        }
    }

    fn access(hold: u64, owner: &str, mode: Mode, fence: u64, accepted: bool) -> Event {
        Event::Access {
            name: "n".into(),
            hold,
            owner: owner.into(),
            mode,
            fence,
            at: 0,
            late: false,
            accepted,
        }
    }

    #[test]
    fn conflicting_overlaps_of_different_owners_are_found() {
        let h = [
            seg(1, "a", false, Mode::W, 0, 10),
            seg(2, "b", false, Mode::W, 10, 20), // touches, does not overlap
            seg(3, "c", false, Mode::R, 15, 30), // overlaps hold 2
            seg(4, "d", false, Mode::R, 16, 17), // overlaps hold 2, not hold 3
            seg(5, "e", false, Mode::U, 25, 40), // upgradable with read: fine
            seg(6, "f", false, Mode::U, 35, 50), // upgradable with upgradable: conflict
            seg(7, "j", true, Mode::W, 60, 70),
            seg(8, "j", true, Mode::W, 65, 75), // one explicit owner: reentrant
            seg(9, "j", false, Mode::W, 72, 80), // same text, not explicit: conflict
        ];
        let v = check(&h, 0);
        assert_eq!(v.overlap.count, 4, "{:?}", v.overlap.examples);
        assert!(v.overlap.examples[0].contains("hold 2"));
        assert!(
            v.overlap.examples[0].contains("via 127.0.0.1:7003"),
            "the grant's node is named: {}",
            v.overlap.examples[0]
        );
    }

    #[test]
    fn fences_must_grow_in_real_time_order_only() {
        let h = [
            grant(10, 0, 5),
            grant(9, 3, 8),    // concurrent with the first: no order known
            grant(11, 6, 9),   // after the first: greater, fine
            grant(10, 10, 12), // after the third: not greater
        ];
        let v = check(&h, 0);
        assert_eq!(v.fence_order.count, 1, "{:?}", v.fence_order.examples);
        assert!(v.fence_order.examples[0].contains("fence 11"));
    }

    #[test]
    fn stale_accesses_are_told_apart_from_refusals() {
        let h = [
            access(1, "a", Mode::W, 10, true),
            access(2, "b", Mode::W, 20, true),
            access(1, "a", Mode::W, 10, false), // refused: fencing at work
            access(3, "c", Mode::R, 15, true),  // accepted though write 20 came: stale
            access(2, "b", Mode::R, 19, true),  // its own owner's write: not stale
            access(4, "d", Mode::R, 25, true),
            access(5, "e", Mode::R, 21, true), // reads do not conflict with reads
            access(6, "f", Mode::W, 22, true), // a write below the read of fence 25: stale
            access(7, "b", Mode::W, 5, false), // refused, but only its own fence 20 is... not only
        ];
        let v = check(&h, 0);
        assert_eq!(v.stale_accepted.count, 2, "{:?}", v.stale_accepted.examples);
        assert_eq!(v.stale_refused, 2);
        assert_eq!(v.other_refused, 0);
        assert_eq!(v.accesses_accepted, 5);
    }

    #[test]
    fn slow_calls_probes_and_leftovers_are_reported() {
        let mut op = grant(1, 0, 3_000_000_000);
        if let Event::Op { timeout_ms, .. } = &mut op {
            *timeout_ms = Some(1_500);
        }
        let h = [
            op,
            Event::Probe {
                name: "n".into(),
                start: 0,
                took_s: Some(0.1),
                error: None,
            },
            Event::Probe {
                name: "m".into(),
                start: 0,
                took_s: None,
                error: Some("Timeout".into()),
            },
            Event::ClientEnd {
                proc: 1,
                held: 0,
                subscriptions: 1,
            },
            Event::Leftover {
                key: "p:{n}".into(),
                content: "{}".into(),
                persisted: false,
            },
        ];
        let v = check(&h, 0);
        assert_eq!(v.slow_op.count, 1);
        assert_eq!(v.unavailable.count, 1);
        assert_eq!(v.leftover.count, 2);
        assert_eq!(v.violations(), 4);
    }

    fn guarded_write(hold: u64, entry: &str, ok: bool) -> Event {
        Event::Guarded {
            proc: 0,
            hold,
            name: "n".into(),
            fence: hold,
            entry: entry.into(),
            start: 1,
            end: 2,
            outcome: if ok { Outcome::Ok } else { Outcome::Fail },
            error: None,
        }
    }

    #[test]
    fn guarded_writes_outside_their_hold_or_lost_are_found() {
        // holds 5 (owner a) then 7 (owner b), write holds whose fence is their id
        let mut h = vec![
            seg(5, "a", false, Mode::W, 10, 20),
            seg(7, "b", false, Mode::W, 30, 40),
            guarded_write(5, "0:5:5:0", true),
            guarded_write(7, "0:7:7:1", true),
            guarded_write(7, "0:7:7:2", true),
            guarded_write(5, "0:5:5:3", false),
        ];
        let log = |entries: &[&str]| Event::GuardedLog {
            name: "n".into(),
            entries: entries.iter().map(|e| e.to_string()).collect(),
        };
        h.push(log(&["0:5:5:0", "0:7:7:1", "0:7:7:2"]));
        let v = check(&h, 0);
        assert_eq!((v.guarded_ok, v.guarded_failed), (3, 1));
        assert_eq!(v.guarded_outside.count + v.guarded_lost.count, 0);
        // a write of hold 5 that landed after hold 7's; one Ok write missing; an entry of
        // a hold that never held write
        h.pop();
        h.push(log(&["0:5:5:0", "0:7:7:1", "0:5:5:3", "0:9:9:0"]));
        let v = check(&h, 0);
        assert_eq!(
            v.guarded_outside.count, 2,
            "{:?}",
            v.guarded_outside.examples
        );
        assert_eq!(v.guarded_lost.count, 1, "{:?}", v.guarded_lost.examples);
    }

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
