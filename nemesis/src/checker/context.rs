//! Where an example stands: seconds from the run's start, the faults around a moment,
//! the node a grant came from.

/// How long before a violation a fault counts as its context.
const CONTEXT_NS: u64 = 15_000_000_000;

/// A fault of the history, as the examples name it.
pub(super) struct Fault<'a> {
    pub(super) kind: &'a str,
    pub(super) target: &'a str,
    pub(super) start: u64,
    pub(super) end: u64,
}

/// Seconds of `t` after `t0`.
pub(super) fn secs(t: u64, t0: u64) -> f64 {
    (t as f64 - t0 as f64) / 1e9
}

/// The faults that were on at `t` or ended less than 15 s before it, in words.
pub(super) fn context(faults: &[Fault<'_>], t: u64, t0: u64) -> String {
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

/// ` via <node>`, or nothing when the node is not known.
pub(super) fn via(node: Option<&str>) -> String {
    node.map(|n| format!(" via {n}")).unwrap_or_default()
}
