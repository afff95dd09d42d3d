//! **fence_order**: a grant whose fence is not greater than that of a grant of the
//! same name that returned before it was asked for.

use std::collections::HashMap;

use crate::history::{Event, Outcome};

use super::context::{context, secs, via, Fault};
use super::verdict::Verdict;

/// A call that returned a hold, with its fence.
struct Grant<'a> {
    proc: u32,
    call: &'a str,
    fence: u64,
    start: u64,
    end: u64,
    node: Option<&'a str>,
}

/// Finds the grants whose fence is out of real-time order.
pub(super) fn fences(events: &[Event], t0: u64, faults: &[Fault<'_>], v: &mut Verdict) {
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
