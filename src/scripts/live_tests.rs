//! The functions on a live server (the test bed's cluster, cargo feature
//! `cluster-tests`): the fast paths (`fast_acquire.lua`, `fast_release.lua`) and the
//! general path (`lib.lua` with `acquire.lua` / `release.lua`, a library of its own)
//! leave the same hash (the same fields, the same values but for the clock's digits, and
//! the same TTL); an upgrade that gives up keeps its upgradable hold.

use std::collections::BTreeMap;

use cluster_rwlock_testkit::TestCluster;
use fred::prelude::*;

use super::{
    AttemptReply, Confirm, Counters, Intent, Lane, On, Others, RenewItem, Scripts, Target,
};
use crate::mode::Mode;

mod hand_off; // a contended hand-off, the fast paths beside the general path
mod lane_order; // calls on one lane keep the order they were made in

const LEASE_MS: u64 = 30_000;
/// `FENCE_MEMORY` of `lua/layout.lua`.
const FENCE_MEMORY_MS: i64 = 60_000;

/// A value with every run of 10 or more digits (fences and deadlines: the server's
/// clock) replaced by `#`.
fn clockless(v: &str) -> String {
    let mut out = String::new();
    let mut digits = String::new();
    for c in v.chars().chain(std::iter::once(' ')) {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        out.push_str(if digits.len() >= 10 { "#" } else { &digits });
        digits.clear();
        out.push(c);
    }
    out.pop();
    out
}

/// A hash, its values without the clock's digits, and its TTL.
type Snapshot = (BTreeMap<String, String>, i64);

/// The hash at `key`, values without the clock's digits, and its TTL.
async fn snapshot(node: &Client, key: &str) -> Snapshot {
    let fields: std::collections::HashMap<String, String> = node.hgetall(key).await.unwrap();
    let ttl: i64 = node.pttl(key).await.unwrap();
    let fields = fields
        .into_iter()
        .map(|(f, v)| (f, clockless(&v)))
        .collect();
    (fields, ttl)
}

/// Both script sets on one master: the fast paths' on `fast_key`, the general path's
/// alone on `general_key`, two keys of one slot.
struct TwoPaths {
    fast: Scripts,
    general: Scripts,
    fast_key: String,
    general_key: String,
    node: Client,
    counters: Counters,
    lane: Lane,
}

impl TwoPaths {
    /// On the shared cluster, under keys of a fresh prefix `t-<tag>-…` in `{<tag>}`'s slot.
    async fn new(tag: &str) -> TwoPaths {
        let cluster = TestCluster::shared().await.expect("test cluster");
        let prefix = format!(
            "t-{tag}-{}",
            &uuid::Uuid::new_v4().simple().to_string()[..8]
        );
        let (fast_key, general_key) = (
            format!("{prefix}:{{{tag}}}:fast"),
            format!("{prefix}:{{{tag}}}:general"),
        );
        let (fast, general) = (Scripts::new(), Scripts::general_only());
        let node = node_for(cluster, &fast_key, &fast).await;
        general.load_all(&node, "the test master").await.unwrap();
        let lane = Lane::new(node.clone(), Default::default());
        TwoPaths {
            fast,
            general,
            fast_key,
            general_key,
            node,
            counters: Counters::default(),
            lane,
        }
    }

    /// A call on `key`, through the lane, without confirmation.
    fn on<'a>(&'a self, key: &'a str) -> On<'a> {
        On {
            client: &self.node,
            lane: &self.lane,
            direct: false,
            asking: false,
            counters: &self.counters,
            target: Target { key, confirm: None },
            gather: None,
            vouch: None,
        }
    }

    /// A grant of `mode` to `owner` on `key` by `scripts`, an attempt of `intent`, which
    /// must be granted: who else it says was there.
    async fn others(
        &self,
        scripts: &Scripts,
        key: &str,
        mode: Mode,
        owner: &str,
        hold: u64,
        intent: Intent,
    ) -> Others {
        let a = scripts
            .acquire(self.on(key), mode, owner, hold, LEASE_MS, intent)
            .await
            .unwrap();
        match a {
            AttemptReply::Granted { others, .. } => others,
            other => panic!("{owner} on {key}: {other:?}"),
        }
    }

    /// The two hashes (values without the clock's digits) and their TTLs: fast, general.
    async fn snapshots(&self) -> (Snapshot, Snapshot) {
        (
            snapshot(&self.node, &self.fast_key).await,
            snapshot(&self.node, &self.general_key).await,
        )
    }

    /// The release of `owner`'s hold `hold` on each key by its own scripts, told
    /// `others`: given back on both.
    async fn release_on_both(&self, owner: &str, hold: u64, others: Others) {
        for (scripts, key) in [
            (&self.fast, &self.fast_key),
            (&self.general, &self.general_key),
        ] {
            let released = scripts.release(self.on(key), owner, hold, others).await;
            assert_eq!(released.unwrap(), super::Released::Now, "{key}");
        }
    }

    /// Removes both keys and closes the connection.
    async fn remove(self) {
        let _: i64 = self
            .node
            .del(vec![self.fast_key.clone(), self.general_key.clone()])
            .await
            .unwrap();
        let _ = self.node.quit().await;
    }
}

/// Runs the same steps with both script sets on two keys of one slot and compares the
/// hashes after each step.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fast_and_general_paths_leave_the_same_hash() {
    let t = TwoPaths::new("paths").await;
    let mut hold = 0;
    for (step, mode) in [Mode::Write, Mode::Read, Mode::Upgradable, Mode::Write]
        .into_iter()
        .enumerate()
    {
        hold += 1;
        // a grant on a free lock (no hash at first, then the tombstone of the release)
        for (scripts, key) in [(&t.fast, &t.fast_key), (&t.general, &t.general_key)] {
            let a = scripts
                .acquire(t.on(key), mode, "owner-1", hold, LEASE_MS, Intent::Wait)
                .await
                .unwrap();
            assert!(matches!(a, AttemptReply::Granted { .. }), "{key}: {a:?}");
        }
        let (f, g) = t.snapshots().await;
        eprintln!("paths: step {step}, {mode:?} granted: fast {f:?}, general {g:?}");
        assert_eq!(f.0, g.0, "step {step}: the grant's hash");
        assert!(
            (f.1 - g.1).abs() < 1_000,
            "step {step}: TTLs {} and {}",
            f.1,
            g.1
        );

        // the release of the only hold: the tombstone
        t.release_on_both("owner-1", hold, Others::Nobody).await;
        let (f, g) = t.snapshots().await;
        eprintln!("paths: step {step}, released: fast {f:?}, general {g:?}");
        assert_eq!(f.0, g.0, "step {step}: the tombstone");
        assert_eq!(f.0.len(), 1, "step {step}: the summary alone: {f:?}");
        // both keep the expiry the first grant set (FENCE_MEMORY past its deadline, and
        // FENCE_MEMORY more so that the next grants need none): no grant or release
        // since needed more
        assert!(
            (f.1 - g.1).abs() < 1_000,
            "step {step}: TTLs {} and {}",
            f.1,
            g.1
        );
        let first = 2 * FENCE_MEMORY_MS + LEASE_MS as i64;
        assert!(
            f.1 > first - 10_000 && f.1 <= first,
            "step {step}: tombstone TTL {} (the first grant's expiry)",
            f.1
        );
    }
    t.remove().await;
}

/// A waiter whose last attempt found the lock busy (`Intent::WaitBusy`) skips the fast
/// path: on a free lock it is granted all the same, and leaves the general path's hash.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_that_found_the_lock_busy_is_granted_a_free_lock_by_the_general_path() {
    let t = TwoPaths::new("busy").await;
    // the fast scripts with intent 3 on one key, the general path alone on the other
    for (scripts, key, intent) in [
        (&t.fast, &t.fast_key, Intent::WaitBusy),
        (&t.general, &t.general_key, Intent::Wait),
    ] {
        let a = scripts
            .acquire(t.on(key), Mode::Write, "owner-1", 1, LEASE_MS, intent)
            .await
            .unwrap();
        assert!(matches!(a, AttemptReply::Granted { .. }), "{key}: {a:?}");
    }
    let (b, g) = t.snapshots().await;
    assert_eq!(b.0, g.0, "the grant's hash");
    assert!((b.1 - g.1).abs() < 1_000, "TTLs {} and {}", b.1, g.1);
    // busy for another owner: queued, not granted
    let a = t
        .fast
        .acquire(
            t.on(&t.fast_key),
            Mode::Write,
            "owner-2",
            1,
            LEASE_MS,
            Intent::WaitBusy,
        )
        .await
        .unwrap();
    assert!(matches!(a, AttemptReply::Busy { .. }), "{a:?}");
    t.remove().await;
}

/// A grant says whether another owner held or someone waited right after it (on both
/// paths), and a release told so skips the fast path: it leaves the general path's
/// tombstone, TTL included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_says_when_others_hold_and_its_release_then_takes_the_general_path() {
    let t = TwoPaths::new("hint").await;
    let both = [(&t.fast, &t.fast_key), (&t.general, &t.general_key)];
    // a lone writer: nobody else
    for (scripts, key) in both {
        assert_eq!(
            t.others(scripts, key, Mode::Write, "owner-1", 1, Intent::Wait)
                .await,
            Others::Nobody,
            "{key}"
        );
    }
    // its release, told that others held, on the fast scripts; plainly on the general
    for ((scripts, key), others) in both.into_iter().zip([Others::Present, Others::Nobody]) {
        let released = scripts
            .release(t.on(key), "owner-1", 1, others)
            .await
            .unwrap();
        assert_eq!(released, super::Released::Now, "{key}");
    }
    let (f, g) = t.snapshots().await;
    assert_eq!(f.0, g.0, "the tombstone");
    // both keep the grant's expiry
    assert!((f.1 - g.1).abs() < 1_000, "TTLs {} and {}", f.1, g.1);
    let first = 2 * FENCE_MEMORY_MS + LEASE_MS as i64;
    assert!(f.1 > first - 10_000 && f.1 <= first, "TTL {}", f.1);
    // two readers: the second shares the lock
    for (scripts, key) in both {
        assert_eq!(
            t.others(scripts, key, Mode::Read, "reader-1", 2, Intent::Wait)
                .await,
            Others::Nobody,
            "{key}"
        );
        assert_eq!(
            t.others(scripts, key, Mode::Read, "reader-2", 3, Intent::Wait)
                .await,
            Others::Present,
            "{key}"
        );
    }
    t.remove().await;
}

/// A node client for the master of `key`'s slot, with the scripts loaded.
async fn node_for(cluster: &TestCluster, key: &str, scripts: &Scripts) -> Client {
    let slot = crate::slot::key_slot(key.as_bytes());
    let master = cluster.master_for_slot(slot).await.unwrap();
    let node = Builder::from_config(Config::from_url(&master.url).unwrap())
        .build()
        .unwrap();
    node.init().await.unwrap();
    scripts.load_all(&node, "the test master").await.unwrap();
    node
}

/// An upgrade left pending is granted by the release of the last other reader just as
/// its caller gives up: the withdrawal turns the write hold back into the upgradable
/// hold it came from, instead of leaving the caller with nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgrade_granted_as_it_gives_up_keeps_the_upgradable_hold() {
    let cluster = TestCluster::shared().await.expect("test cluster");
    let key = format!(
        "t-withdraw-{}:{{w}}",
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    );
    let scripts = Scripts::new();
    let node = node_for(cluster, &key, &scripts).await;
    let counters = Counters::default();
    let lane = Lane::new(node.clone(), Default::default());
    let on = On {
        client: &node,
        lane: &lane,
        direct: false,
        asking: false,
        counters: &counters,
        gather: None,
        vouch: None,
        target: Target {
            key: &key,
            confirm: None,
        },
    };
    let acquire = |mode, owner: &'static str, hold| {
        let scripts = &scripts;
        async move {
            scripts
                .acquire(on, mode, owner, hold, LEASE_MS, Intent::Try)
                .await
                .unwrap()
        }
    };
    assert!(matches!(
        acquire(Mode::Upgradable, "up", 1).await,
        AttemptReply::Granted { .. }
    ));
    assert!(matches!(
        acquire(Mode::Read, "reader", 1).await,
        AttemptReply::Granted { .. }
    ));
    // the upgrade (hold 1 into write hold 2) waits for the reader: pending
    let a = scripts
        .upgrade(on, "up", 1, 2, LEASE_MS, true)
        .await
        .unwrap();
    assert!(matches!(a, AttemptReply::Busy { .. }), "{a:?}");
    // the reader leaves: the pending upgrade becomes write hold 2
    assert_eq!(
        scripts
            .release(on, "reader", 1, Others::Nobody)
            .await
            .unwrap(),
        super::Released::Now
    );
    let (entry, _, _) = entry_of(&node, &key, "up").await;
    assert!(
        entry.as_deref().is_some_and(|e| e.starts_with("w2:")),
        "{entry:?}"
    );
    // ... just as the caller gave up
    scripts.withdraw(on, "up", 2, Some(1)).await.unwrap();
    let (entry, writer, upgrader) = entry_of(&node, &key, "up").await;
    eprintln!("withdraw: entry {entry:?}, w {writer:?}, u {upgrader:?}");
    assert!(
        entry.as_deref().is_some_and(|e| e.starts_with("u1:")),
        "the upgradable hold is kept: {entry:?}"
    );
    assert_eq!((writer, upgrader.as_deref()), (None, Some("up")));
    // it is an upgradable hold like any: readers enter, another upgrader does not
    assert!(matches!(
        acquire(Mode::Read, "reader", 3).await,
        AttemptReply::Granted { .. }
    ));
    assert!(matches!(
        acquire(Mode::Upgradable, "other", 4).await,
        AttemptReply::Busy { .. }
    ));
    let _: i64 = node.del(&key).await.unwrap();
    let _ = node.quit().await;
}

/// The entry of `owner` on `key` (its field, or the summary's lone hold when it is that
/// owner's), and the owners that hold write and upgradable read ('w' and 'u', or the
/// lone hold's mode).
async fn entry_of(
    node: &Client,
    key: &str,
    owner: &str,
) -> (Option<String>, Option<String>, Option<String>) {
    let summary: String = node.hget(key, "s").await.unwrap();
    let words: Vec<&str> = summary.split(' ').collect();
    if let [_, _, _, _, _, _, _, _, _, hold, lone] = words[..] {
        let of = |m: &str| hold.starts_with(m).then(|| lone.to_string());
        return ((lone == owner).then(|| hold.to_string()), of("w"), of("u"));
    }
    (
        node.hget(key, format!("o:{owner}")).await.unwrap(),
        node.hget(key, "w").await.unwrap(),
        node.hget(key, "u").await.unwrap(),
    )
}

#[test]
fn clock_digits_are_masked() {
    assert_eq!(
        clockless("4 1764000000123456 1 1764000030123 1764000030123 0 0 - 1764000150123"),
        "4 # 1 # # 0 0 - #"
    );
    assert_eq!(
        clockless("w12:1764000000123456:1764000030123:30000"),
        "w12:#:#:30000"
    );
    assert_eq!(clockless("owner-1"), "owner-1");
}

/// A renewal pipeline sent to a node that no longer serves the slot (a master demoted
/// under the client: it answers `MOVED` to each script, and its `WAIT` fails) gives each
/// item its own error, which the renewal sends again on its own, routed afresh; it is
/// not taken for a renewal the replicas did not confirm (which is not sent again).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewal_pipeline_refused_by_a_demoted_node_is_not_taken_for_unconfirmed() {
    let cluster = TestCluster::shared().await.expect("test cluster");
    let key = format!(
        "t-demoted-{}:{{d}}",
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    );
    let scripts = Scripts::new();
    let slot = crate::slot::key_slot(key.as_bytes());
    let master = cluster.master_for_slot(slot).await.unwrap();
    let replica = cluster.replica_of(master.index).await.unwrap();
    // the library reaches the replica from its master
    let _ = node_for(cluster, &key, &scripts).await.quit().await;
    let node = Builder::from_config(Config::from_url(&replica.url).unwrap())
        .build()
        .unwrap();
    node.init().await.unwrap();
    scripts.load_all(&node, "the test master").await.unwrap();
    let counters = Counters::default();
    let items = vec![RenewItem {
        key: key.clone(),
        lease_ms: LEASE_MS,
        owners: vec![("o".into(), vec![1])],
    }];
    let confirm = Some(Confirm {
        wanted: 1,
        timeout_ms: 100,
        every_attached: true,
    });
    let out = scripts
        .renew_pipeline(
            &Lane::new(node.clone(), Default::default()),
            &counters,
            &items,
            confirm,
            None,
        )
        .await;
    assert_eq!(out.len(), 1);
    match &out[0] {
        Err(e) => assert!(e.server().is_some_and(|s| s.code() == "MOVED"), "{e:?}"),
        other => panic!("a refused renewal taken for {other:?}"),
    }
}

/// `guarded.lua` refuses, by itself, any command that names the lock's own hash or its
/// channel (declared as a key or written as a word): the client refuses every lock's keys
/// before sending, and this is the second line for a client that did not. Called here
/// below the client's check, on a write hold: nothing runs, the hold and fence stay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_guarded_script_never_touches_its_own_lock() {
    let t = TwoPaths::new("own-lock").await;
    let key = t.general_key.clone();
    let a = t
        .general
        .acquire(
            t.on(&key),
            Mode::Write,
            "owner-1",
            1,
            LEASE_MS,
            Intent::Wait,
        )
        .await
        .unwrap();
    assert!(matches!(a, AttemptReply::Granted { .. }), "{a:?}");
    let before = snapshot(&t.node, &key).await;
    let channel = format!("{key}:released");
    let data = format!("{key}:data");
    let w = |s: &str| s.as_bytes().to_vec();
    // each: the keys declared, and the commands (each its words)
    type Words = Vec<Vec<u8>>;
    let attacks: Vec<(Words, Vec<Words>)> = vec![
        (vec![w(&key)], vec![vec![w("DEL"), w(&key)]]),
        (vec![w(&key)], vec![vec![w("HDEL"), w(&key), w("w")]]),
        (
            vec![w(&key)],
            vec![vec![w("HSET"), w(&key), w("s"), w("x")]],
        ),
        (vec![w(&key)], vec![vec![w("PEXPIRE"), w(&key), w("1")]]),
        (vec![w(&key)], vec![vec![w("PERSIST"), w(&key)]]),
        (vec![w(&channel)], vec![vec![w("SET"), w(&channel), w("x")]]),
        // declared as another key, named in the command: refused all the same
        (vec![w(&data)], vec![vec![w("DEL"), w(&data), w(&key)]]),
        // a harmless first command does not run either
        (
            vec![w(&data)],
            vec![vec![w("SET"), w(&data), w("1")], vec![w("DEL"), w(&key)]],
        ),
    ];
    // the words as the function takes them: each command led by its count and a check
    // that asks nothing
    let encoded = |commands: &[Words]| -> Words {
        let mut out = Vec::new();
        for words in commands {
            out.push(w(&words.len().to_string()));
            out.push(w("*.-1"));
            out.extend(words.iter().cloned());
        }
        out
    };
    fn call<'a>(
        keys: &'a [Vec<u8>],
        words: &'a [Vec<u8>],
        then: u32,
        conditions: u32,
    ) -> super::GuardedCall<'a> {
        super::GuardedCall {
            writes: true,
            conditions,
            then,
            keys,
            words,
        }
    }
    for (keys, commands) in attacks {
        let words = encoded(&commands);
        let then = u32::try_from(commands.len()).unwrap();
        let e = t
            .general
            .guarded(t.on(&key), "owner-1", 1, &call(&keys, &words, then, 0))
            .await
            .unwrap_err();
        assert!(
            matches!(e, crate::error::Error::LockKey { .. }),
            "{commands:?}: {e}"
        );
        assert_eq!(snapshot(&t.node, &key).await.0, before.0, "{commands:?}");
        let exists: i64 = t
            .node
            .exists(vec![data.clone(), channel.clone()])
            .await
            .unwrap();
        assert_eq!(exists, 0, "{commands:?}");
    }
    // a condition that reads the lock's hash is refused as well
    let words = vec![w("3"), w("e"), w(&key), w("exists")];
    let e = t
        .general
        .guarded(t.on(&key), "owner-1", 1, &call(&[w(&key)], &words, 0, 1))
        .await
        .unwrap_err();
    assert!(matches!(e, crate::error::Error::LockKey { .. }), "{e}");
    // the same script runs what does not touch the lock
    let words = encoded(&[vec![w("SET"), w(&data), w("1")]]);
    let ran = t
        .general
        .guarded(t.on(&key), "owner-1", 1, &call(&[w(&data)], &words, 1, 0))
        .await
        .unwrap();
    assert!(
        matches!(&ran, super::GuardedReply::Ran { held: true, replies, .. } if replies.len() == 1),
        "{ran:?}"
    );
    let _: i64 = t.node.del(data).await.unwrap();
    t.remove().await;
}
