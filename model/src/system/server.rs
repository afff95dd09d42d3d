//! Reading a node's keyspace as the documented layout says (for traces and
//! properties).

use super::*;

/// The lock's hash on a node, one field per line (for traces).
pub fn describe_hash(keys: &Keyspace) -> String {
    match keys.get(KEY) {
        None => "(no hash)".to_string(),
        Some(Entry {
            value: Value::Hash(h),
            ..
        }) => h
            .iter()
            .map(|(f, v)| format!("{f}={v}"))
            .collect::<Vec<_>>()
            .join("; "),
        Some(other) => format!("{other:?}"),
    }
}

/// Whether the lock's hash in `keys` has `owner`'s hold `id` with a deadline after `now`
/// (read by the layout docs/PROTOCOL.md documents, not by the functions: the summary's
/// lone hold, or the owner's entry `o:<owner>`).
pub(super) fn holds_on_server(keys: &Keyspace, owner: &str, id: u32, now: u64) -> bool {
    let Some(Entry {
        value: Value::Hash(h),
        ..
    }) = keys.get(KEY)
    else {
        return false;
    };
    let mut holds: Vec<&str> = Vec::new();
    if let Some(summary) = h.get("s") {
        let words: Vec<&str> = summary.split(' ').collect();
        if words.len() == 11 && words[10] == owner {
            holds.push(words[9]);
        }
    }
    if let Some(entry) = h.get(&format!("o:{owner}")) {
        holds.extend(entry.split(' '));
    }
    holds.iter().any(|hold| {
        let mut parts = hold[1..].split(':');
        let (Some(hid), Some(_fence), Some(deadline)) = (parts.next(), parts.next(), parts.next())
        else {
            return false;
        };
        hold.starts_with('w')
            && hid == id.to_string()
            && deadline.parse::<u64>().is_ok_and(|d| d > now)
    })
}
