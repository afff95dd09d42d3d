//! What `top` shows of a refresh: one line per lock someone holds or waits for, sorted
//! and filtered, as cells (the terminal view draws them; `--once` prints them), and as
//! JSON. Names are escaped as everywhere in the CLI.

use std::time::{Duration, SystemTime};

use cluster_rwlock::LockClient;
use serde_json::{json, Value as Json};

use super::sample::{Row, Sample};
use crate::clock::secs;
use crate::shown::escaped;

/// The order of the lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sort {
    /// Most waiters first, then the longest held (the default: contention on top).
    Waiters,
    /// The longest held first.
    HeldFor,
    /// By name.
    Name,
}

impl Sort {
    /// The next order (the `s` key).
    pub fn next(self) -> Sort {
        match self {
            Sort::Waiters => Sort::HeldFor,
            Sort::HeldFor => Sort::Name,
            Sort::Name => Sort::Waiters,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Sort::Waiters => "waiters",
            Sort::HeldFor => "held for",
            Sort::Name => "name",
        }
    }
}

/// The column titles.
pub const HEADER: [&str; 10] = [
    "NAME",
    "MODE",
    "HOLDERS",
    "HELD FOR",
    "LEASE LEFT",
    "RENEWED",
    "W-WAIT",
    "R-WAIT",
    "FENCE AGE",
    "MASTER",
];

fn waiters(r: &Row) -> usize {
    r.state.waiting_writers.len() + r.state.waiting_readers.len()
}

fn held_for(r: &Row) -> Duration {
    r.state
        .holders
        .iter()
        .map(|h| h.held_for)
        .max()
        .unwrap_or_default()
}

/// Whether a holder of the lock has not renewed for over half its lease.
pub fn overdue(r: &Row) -> bool {
    r.state.holders.iter().any(|h| h.overdue())
}

/// The rows to show, in `sort` order, those whose name contains `filter`.
pub fn arrange<'a>(sample: &'a Sample, sort: Sort, filter: &str) -> Vec<&'a Row> {
    let mut rows: Vec<&Row> = sample
        .rows
        .iter()
        .filter(|r| filter.is_empty() || r.name().contains(filter))
        .collect();
    match sort {
        Sort::Waiters => rows.sort_by(|a, b| {
            waiters(b)
                .cmp(&waiters(a))
                .then(held_for(b).cmp(&held_for(a)))
                .then(a.name().cmp(b.name()))
        }),
        Sort::HeldFor => {
            rows.sort_by(|a, b| held_for(b).cmp(&held_for(a)).then(a.name().cmp(b.name())))
        }
        Sort::Name => rows.sort_by(|a, b| a.name().cmp(b.name())),
    }
    rows
}

/// The holders as people read them: their client names (or owner tokens), at most two,
/// and how many more.
fn holders(r: &Row) -> String {
    let hs = &r.state.holders;
    if hs.is_empty() {
        return "-".into();
    }
    let mut names: Vec<String> = hs
        .iter()
        .map(|h| escaped(h.client_name().unwrap_or(&h.owner)).into_owned())
        .collect();
    names.dedup();
    let more = names.len().saturating_sub(2);
    names.truncate(2);
    let mut out = format!("{} {}", hs.len(), names.join(","));
    if more > 0 {
        out.push_str(&format!(" +{more}"));
    }
    out
}

/// One row's cells, in the order of [`HEADER`].
pub fn cells(r: &Row, now: SystemTime) -> [String; 10] {
    let s = &r.state;
    let lease_left = s.holders.iter().map(|h| h.lease_left).min();
    let renewed = s.holders.iter().map(|h| h.renewed_ago).max();
    let fence_age = s
        .fence
        .and_then(crate::clock::fence_time)
        .and_then(|t| now.duration_since(t).ok());
    [
        escaped(r.name()).into_owned(),
        crate::state::mode(s.mode).to_string(),
        holders(r),
        if s.holders.is_empty() {
            "-".into()
        } else {
            secs(held_for(r))
        },
        lease_left.map_or("-".into(), secs),
        match renewed {
            None => "-".into(),
            Some(d) if overdue(r) => format!("{} OVERDUE", secs(d)),
            Some(d) => format!("{} ago", secs(d)),
        },
        s.waiting_writers.len().to_string(),
        s.waiting_readers.len().to_string(),
        fence_age.map_or("-".into(), secs),
        r.master.clone(),
    ]
}

/// The footer: totals and what the refresh cost.
pub fn footer(sample: &Sample, shown: usize) -> String {
    let held = sample
        .rows
        .iter()
        .filter(|r| r.state.mode.is_some())
        .count();
    let waited: usize = sample.rows.iter().map(waiters).sum();
    let c = sample.cost;
    format!(
        "{} locks, {held} held, {waited} waiting, {shown} shown{}; refresh: {}{} summaries, {} states, {} ms",
        sample.locks,
        if sample.unreadable > 0 {
            format!(", {} unreadable", sample.unreadable)
        } else {
            String::new()
        },
        if c.scanned { "SCAN, " } else { "" },
        c.summaries,
        c.states,
        c.took.as_millis()
    )
}

/// A line for each replica that is not acknowledging (grants on its master wait).
pub fn warnings(sample: &Sample) -> Vec<String> {
    sample
        .silent
        .iter()
        .map(|(m, r)| crate::replicas::warning(m, r))
        .collect()
}

/// One frame as plain text (`--once`): a header, one line per row, the footer, then a
/// line for each replica not acknowledging.
pub fn text(sample: &Sample, sort: Sort, filter: &str) -> String {
    let now = sample.at.unwrap_or_else(SystemTime::now);
    let rows = arrange(sample, sort, filter);
    let mut table: Vec<[String; 10]> = vec![HEADER.map(String::from)];
    table.extend(rows.iter().map(|r| cells(r, now)));
    let mut widths = [0usize; 10];
    for line in &table {
        for (w, cell) in widths.iter_mut().zip(line) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for line in &table {
        let mut parts = Vec::new();
        for (w, cell) in widths.iter().zip(line) {
            parts.push(format!("{cell:<w$}"));
        }
        out.push_str(parts.join("  ").trim_end());
        out.push('\n');
    }
    out.push_str(&footer(sample, rows.len()));
    for w in warnings(sample) {
        out.push('\n');
        out.push_str(&w);
    }
    out
}

/// One refresh as JSON (`--json`): each row as `inspect --json` gives a lock's state,
/// the totals and the cost.
pub fn json(client: &LockClient, sample: &Sample, sort: Sort, filter: &str) -> Json {
    let rows: Vec<Json> = arrange(sample, sort, filter)
        .into_iter()
        .map(|r| crate::state::state_json(client, &r.lock, &r.state))
        .collect();
    json!({
        "at": sample.at.map(crate::clock::utc),
        "locks": sample.locks,
        "rows": rows,
        // the replicas not acknowledging, with their masters
        "silent_replicas": sample.silent.iter().map(|(m, r)| {
            let mut j = crate::replicas::json(r);
            j["master"] = json!(m);
            j
        }).collect::<Vec<_>>(),
        "cost": {
            "scanned": sample.cost.scanned,
            "summaries": sample.cost.summaries,
            "states": sample.cost.states,
            "ms": sample.cost.took.as_millis() as u64,
        },
    })
}
