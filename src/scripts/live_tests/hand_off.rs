//! A contended hand-off: a release given the queue's head hands over as any release, and
//! the hand-off's fast paths (`fast_release.lua`, `fast_take.lua`) leave what the general
//! path leaves, step by step.

use std::collections::BTreeMap;

use fred::prelude::*;

use super::{snapshot, Snapshot, TwoPaths, LEASE_MS};
use crate::mode::Mode;
use crate::scripts::{AttemptReply, Intent, Others, Released, Scripts};

/// A grant made while writers are queued names the queue's head ticket field, and the
/// release given it back reads that field with the summary: what it does is what a
/// release told only that others waited does, and what one given a stale, wrong or
/// hostile field does (such a field is read as any, or not at all).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_given_the_queues_head_hands_over_as_any_release() {
    let t = TwoPaths::new("head").await;
    let keys: Vec<String> = ["told", "plain", "stale", "wrong", "hostile"]
        .iter()
        .map(|k| format!("{}:{k}", t.fast_key))
        .collect();
    // the release's arguments after the owner and hold id: as told, as a client that is
    // told only that others waited, a ticket that has left, one never given, and a field
    // of another shape (the summary's)
    let hints: [&[&str]; 5] = [
        &["1", "t:1"],
        &["1"],
        &["1", "t:0"],
        &["1", "t:99"],
        &["1", "s"],
    ];
    let s = &t.fast;
    let mut snapshots = Vec::new();
    for (key, hint) in keys.iter().zip(hints) {
        one_holds_two_queue(&t, s, key).await;
        // the release hands the lock to owner-2, whose attempt takes it: owner-3 is next
        let released = s.release(t.on(key), "owner-1", 1, Others::Nobody).await;
        assert_eq!(released.unwrap(), Released::Now);
        let taken = t
            .others(s, key, Mode::Write, "owner-2", 2, Intent::WaitBusy)
            .await;
        assert_eq!(
            taken,
            Others::Queued(1),
            "{key}: the head is owner-3's ticket"
        );
        let mut args = vec!["owner-2", "2"];
        args.extend_from_slice(hint);
        let reply: Value = t
            .node
            .fcall(
                format!("{}release", s.library.prefix),
                vec![key.as_str()],
                args,
            )
            .await
            .unwrap();
        assert_eq!(reply, Value::Array(vec![Value::Integer(1)]), "{key}");
        snapshots.push(snapshot(&t.node, key).await);
    }
    // (the handed hold's lease is what its place had left: a ms or two apart from key to
    // key, as the calls ran)
    let handed = leases_masked;
    for (key, s) in keys.iter().zip(&snapshots).skip(1) {
        assert_eq!(
            handed(s),
            handed(&snapshots[0]),
            "{key}: the hash after the hand-off"
        );
        assert!((s.1 - snapshots[0].1).abs() < 1_000, "{key}: TTL");
    }
    // owner-3 was handed the lock: its place waits for its take, the head moved past it
    assert!(
        snapshots[0].0.contains_key("q:owner-3"),
        "{:?}",
        snapshots[0].0
    );
    let _: i64 = t.node.del(keys.clone()).await.unwrap();
    t.remove().await;
}

/// owner-1 is granted `key`'s write hold by `scripts` with nobody else there, then owner-2
/// and owner-3 queue as writers (tickets 0 and 1), each attempt found busy.
async fn one_holds_two_queue(t: &TwoPaths, scripts: &Scripts, key: &str) {
    let first = t
        .others(scripts, key, Mode::Write, "owner-1", 1, Intent::Wait)
        .await;
    assert_eq!(first, Others::Nobody, "{key}");
    for (owner, hold) in [("owner-2", 2), ("owner-3", 3)] {
        let busy = scripts
            .acquire(t.on(key), Mode::Write, owner, hold, LEASE_MS, Intent::Wait)
            .await
            .unwrap();
        assert!(matches!(busy, AttemptReply::Busy { .. }), "{key}: {busy:?}");
    }
}

/// A snapshot's values with each hold's lease (the digits after its last ':') masked: a
/// hold handed over has what its place had left, a ms or two apart from key to key.
fn leases_masked(s: &Snapshot) -> BTreeMap<String, String> {
    s.0.iter()
        .map(|(f, v)| {
            let words: Vec<String> = v
                .split(' ')
                .map(|w| match w.rsplit_once(':') {
                    Some((hold, lease)) if lease.parse::<u64>().is_ok() => {
                        format!("{hold}:lease")
                    }
                    _ => w.to_string(),
                })
                .collect();
            (f.clone(), words.join(" "))
        })
        .collect()
}

/// A contended hand-off, step by step, with both script sets: the release that hands the
/// lock over (told nobody else was there, and told the queue's head) and the take
/// without the clock leave the same hash, TTL and replies on the fast paths
/// (`fast_release.lua`, `fast_take.lua`) as on the general path.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fast_and_general_paths_hand_over_alike() {
    let t = TwoPaths::new("handoff").await;
    let both = [(&t.fast, &t.fast_key), (&t.general, &t.general_key)];
    let compare = |step: &str, (f, g): (Snapshot, Snapshot)| {
        eprintln!("handoff: {step}: fast {f:?}, general {g:?}");
        assert_eq!(leases_masked(&f), leases_masked(&g), "{step}: the hash");
        assert!(
            (f.1 - g.1).abs() < 1_000,
            "{step}: TTLs {} and {}",
            f.1,
            g.1
        );
    };
    for (scripts, key) in both {
        one_holds_two_queue(&t, scripts, key).await;
    }
    compare("queued", t.snapshots().await);
    // owner-1's grant said nobody else was there: its release is told nothing
    t.release_on_both("owner-1", 1, Others::Nobody).await;
    compare("handed to owner-2", t.snapshots().await);
    // owner-2 takes it without the clock; owner-3 is the queue's head
    for (scripts, key) in both {
        let taken = t
            .others(scripts, key, Mode::Write, "owner-2", 2, Intent::Take)
            .await;
        assert_eq!(taken, Others::Queued(1), "{key}");
    }
    compare("taken by owner-2", t.snapshots().await);
    // owner-2's release, told the head, hands the lock to owner-3, who takes it
    t.release_on_both("owner-2", 2, Others::Queued(1)).await;
    compare("handed to owner-3", t.snapshots().await);
    for (scripts, key) in both {
        let taken = t
            .others(scripts, key, Mode::Write, "owner-3", 3, Intent::Take)
            .await;
        assert_eq!(taken, Others::Nobody, "{key}");
    }
    compare("taken by owner-3", t.snapshots().await);
    // nobody waits: the tombstone
    t.release_on_both("owner-3", 3, Others::Nobody).await;
    let (f, g) = t.snapshots().await;
    assert_eq!(f.0.len(), 1, "the summary alone: {f:?}");
    compare("released", (f, g));
    t.remove().await;
}
