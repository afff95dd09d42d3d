//! The verdict as a table for people.

use std::collections::HashMap;
use std::fmt::Write;

use crate::checker::Verdict;

fn list(map: &HashMap<String, u64>) -> String {
    let mut items: Vec<(&String, &u64)> = map.iter().collect();
    items.sort();
    if items.is_empty() {
        return "none".into();
    }
    items
        .iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The run's figures and each violation kind with its count and first examples.
pub fn table(v: &Verdict, title: &str) -> String {
    let mut s = String::new();
    let grants = v.total_grants();
    let per_k = |n: u64| {
        if grants == 0 {
            "-".to_string()
        } else {
            format!("{:.2}", n as f64 * 1000.0 / grants as f64)
        }
    };
    let _ = writeln!(s, "\n## nemesis: {title}\n");
    let _ = writeln!(s, "| what | figures |\n|---|---|");
    let _ = writeln!(s, "| history | {:.1} s |", v.span_s);
    let _ = writeln!(s, "| operations | {} |", v.operations);
    let _ = writeln!(s, "| grants | {grants} ({}) |", list(&v.grants));
    let _ = writeln!(
        s,
        "| faults | {} (commands that failed: {}) |",
        list(&v.faults),
        v.fault_errors
    );
    let _ = writeln!(s, "| errors | {} |", list(&v.errors));
    let _ = writeln!(s, "| holds told lost | {} |", v.lost);
    let _ = writeln!(
        s,
        "| resource | {} accepted; refused: {} stale (fencing at work), {} other; late writes {} refused of {} |",
        v.accesses_accepted, v.stale_refused, v.other_refused, v.late_refused, v.late_sent
    );
    let _ = writeln!(
        s,
        "| guarded writes | {} returned Ok (each checked in the log), {} failed |",
        v.guarded_ok, v.guarded_failed
    );
    let _ = writeln!(
        s,
        "| hand-offs to dead owners | {} seen ({} while others waited), the longest pending {:.2} s while others waited (limit {:.1} s, more across a clock step or a fault of the nodes); {} hand-offs seen in all |",
        v.dead_handoffs,
        v.dead_handoffs_waited,
        v.dead_handoff_longest_s,
        crate::checker::HANDED_LIMIT_S,
        v.handoffs_seen
    );
    let _ = writeln!(
        s,
        "\n| violation | count | per 1,000 grants |\n|---|---|---|"
    );
    for (kind, found) in v.kinds() {
        let _ = writeln!(s, "| {kind} | {} | {} |", found.count, per_k(found.count));
    }
    for (kind, found) in v.kinds() {
        if found.examples.is_empty() {
            continue;
        }
        let _ = writeln!(s, "\n{kind}, first {}:", found.examples.len());
        for e in &found.examples {
            let _ = writeln!(s, "- {e}");
        }
    }
    let _ = writeln!(
        s,
        "\nverdict: {}",
        match v.violations() {
            0 => "no violation found".to_string(),
            n => format!("{n} violation(s)"),
        }
    );
    s
}
