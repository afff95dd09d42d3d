//! The hand-off observer: while the run lasts, the controller reads each name's hash
//! every [`POLL`] (a raw `HGETALL`, as the checks after the run read keys, through the
//! controller's own client, routed by slot) and records each hand-off it sees pending
//! ([`Event::Handoff`]), for the checker's `handed_to_dead`.
//!
//! A hand-off is pending from the release that hands the lock to the first queued
//! writer until that writer's call takes the hold (which removes its place) or a later
//! call drops both once the claim window has passed: the writer's place `q:<owner>`
//! (`<ticket> <deadline> <hold id> <lease>`) stays below the queue's head (its ticket
//! below `qh`, the summary's sixth word), and the owner holds the write hold of the
//! place's id (the lone hold at the end of the summary, or one of the holds of its field
//! `o:<owner>`). Reading does not prune: a hand-off whose window passed on a lock nobody
//! calls stays in the hash, harmlessly, which is why the checker counts only the time
//! in which others waited (`qh` below `qt`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cluster_rwlock::LockClient;
use fred::interfaces::HashesInterface;

use crate::history::{now, Event};

/// How often each name's hash is read.
pub const POLL: Duration = Duration::from_millis(100);
/// How long one read may take: a read of a frozen master gives up, and the next one
/// comes (the gap in the observations tells the checker).
const READ_LIMIT: Duration = Duration::from_millis(250);

/// A hand-off pending in a lock's hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    /// The owner token the lock was handed to.
    pub owner: String,
    /// The handed hold's id.
    pub hold: String,
    /// Whether anyone else waits (the queue's head below its tail).
    pub waiting: bool,
}

/// Whether the holds `holds` (space-separated, `<r|w|u><id>:<fence>:<deadline>:<lease>`)
/// include the write hold `id`.
fn has_write(holds: &str, id: &str) -> bool {
    holds.split_whitespace().any(|h| {
        h.strip_prefix('w')
            .and_then(|h| h.split_once(':'))
            .is_some_and(|(i, _)| i == id)
    })
}

/// The hand-offs pending in a lock's hash, as `HGETALL` returns it (layout 4; nothing
/// for a hash of another shape, or none).
pub fn pending(fields: &HashMap<String, String>) -> Vec<Pending> {
    let Some(summary) = fields.get("s") else {
        return Vec::new();
    };
    let words: Vec<&str> = summary.split(' ').collect();
    if words.len() < 9 || words[0] != "4" {
        return Vec::new();
    }
    let (Ok(qh), Ok(qt)) = (words[5].parse::<u64>(), words[6].parse::<u64>()) else {
        return Vec::new();
    };
    // the lone hold and its owner, when the summary carries them
    let lone = (words.len() == 11).then(|| (words[9], words[10]));
    let mut out = Vec::new();
    for (field, place) in fields {
        let Some(owner) = field.strip_prefix("q:") else {
            continue;
        };
        // a writer's place: no 'r'
        let parts: Vec<&str> = place.split(' ').collect();
        let [ticket, _deadline, id, _lease] = parts[..] else {
            continue;
        };
        let Ok(ticket) = ticket.parse::<u64>() else {
            continue;
        };
        if ticket >= qh {
            continue;
        }
        let handed = match lone {
            Some((hold, o)) if o == owner => has_write(hold, id),
            _ => fields
                .get(&format!("o:{owner}"))
                .is_some_and(|holds| has_write(holds, id)),
        };
        if handed {
            out.push(Pending {
                owner: owner.to_string(),
                hold: id.to_string(),
                waiting: qh < qt,
            });
        }
    }
    out.sort_by(|a, b| a.owner.cmp(&b.owner));
    out
}

/// Reads the hashes `keys` (`(name, key)`) every [`POLL`] until `stop` is set, and
/// returns an event for each pending hand-off seen by each read.
pub async fn observe(
    client: LockClient,
    keys: Vec<(String, String)>,
    stop: Arc<AtomicBool>,
) -> Vec<Event> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut readers = Vec::new();
    // one reader per name: a name whose master hangs does not hold up the others
    for (name, key) in keys {
        let (client, stop, seen) = (client.clone(), stop.clone(), seen.clone());
        readers.push(tokio::spawn(async move {
            while !stop.load(Ordering::SeqCst) {
                let next = tokio::time::Instant::now() + POLL;
                let read = tokio::time::timeout(
                    READ_LIMIT,
                    client
                        .redis()
                        .hgetall::<HashMap<String, String>, _>(key.as_str()),
                )
                .await;
                if let Ok(Ok(fields)) = read {
                    let at = now();
                    let found = pending(&fields);
                    if !found.is_empty() {
                        let mut seen = seen.lock().unwrap_or_else(|e| e.into_inner());
                        seen.extend(found.into_iter().map(|p| Event::Handoff {
                            name: name.clone(),
                            owner: p.owner,
                            hold: p.hold,
                            at,
                            waiting: p.waiting,
                        }));
                    }
                }
                tokio::time::sleep_until(next).await;
            }
        }));
    }
    for r in readers {
        let _ = r.await;
    }
    client.close().await;
    let mut seen = seen.lock().unwrap_or_else(|e| e.into_inner());
    std::mem::take(&mut *seen)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hash(fields: &[(&str, &str)]) -> HashMap<String, String> {
        fields
            .iter()
            .map(|(f, v)| (f.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_hand_off_is_a_place_below_the_head_with_its_write_hold() {
        // handed to a (lone hold in the summary), b waits behind it
        let h = hash(&[
            ("s", "4 17 1 900 900 6 7 - 61000 w42:17:900:8000 a/x:1"),
            ("q:a/x:1", "5 900 42 8000"),
            ("t:6", "b/y:1 8000 43 8000"),
            ("q:b/y:1", "6 8000 43 8000"),
        ]);
        let p = pending(&h);
        assert_eq!(
            p,
            vec![Pending {
                owner: "a/x:1".into(),
                hold: "42".into(),
                waiting: true
            }]
        );
        // in an owner's field, nobody else waiting
        let h = hash(&[
            ("s", "4 17 2 900 900 6 6 - 61000"),
            ("o:a/x:1", "r40:16:950:8000 w42:17:900:8000"),
            ("o:c", "r41:16:950:8000"),
            ("q:a/x:1", "5 900 42 8000"),
        ]);
        assert_eq!(
            pending(&h),
            vec![Pending {
                owner: "a/x:1".into(),
                hold: "42".into(),
                waiting: false
            }]
        );
        // taken (no place), not yet handed (ticket at the head), another id, a reader
        for h in [
            hash(&[("s", "4 17 1 900 900 6 6 - 61000 w42:17:900:8000 a/x:1")]),
            hash(&[
                ("s", "4 17 1 900 900 5 6 - 61000 w41:16:900:8000 c"),
                ("q:a/x:1", "5 900 42 8000"),
            ]),
            hash(&[
                ("s", "4 17 1 900 900 6 6 - 61000 w41:17:900:8000 a/x:1"),
                ("q:a/x:1", "5 900 42 8000"),
            ]),
            hash(&[
                ("s", "4 17 1 900 900 6 6 - 61000 r42:17:900:8000 a/x:1"),
                ("q:a/x:1", "r5 900 42 8000"),
            ]),
            hash(&[("s", "3 17 1 900 900 6 6 - 61000")]),
        ] {
            assert!(pending(&h).is_empty(), "{h:?}");
        }
    }
}
