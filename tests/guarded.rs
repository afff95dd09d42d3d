//! Guarded commands: writes to keys of the lock's slot that land only while the hold is
//! on the server. A hold broken by `force_release`, or whose lease ran out by the
//! server's clock, or that a failover lost, writes nothing; a key of another slot, a
//! write under a read hold and a command that may not run are refused before anything is
//! sent.

mod common;

use cluster_rwlock::guarded::Reply;
use std::time::Duration;

use cluster_rwlock::{Durability, Error, LockClient, Mode};
use cluster_rwlock_testkit::TestCluster;
use common::{client, client_with, cluster, prefix};
use fred::prelude::*;

/// A hashtag no other test uses: the lock `order:{tag}` and its data share its slot.
fn tag() -> String {
    uuid::Uuid::new_v4().simple().to_string()[..10].to_string()
}

async fn value(client: &LockClient, key: &str) -> Option<Vec<u8>> {
    let v: Option<Vec<u8>> = client.redis().get(key).await.unwrap();
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_run_under_the_hold_with_their_replies_and_binary_values() {
    let cluster = cluster().await;
    let p = prefix("guarded");
    let client = client(cluster, &p).await;
    let t = tag();
    let lock = client.rwlock(&format!("order:{{{t}}}")).unwrap();
    let (status, stock, blob) = (
        format!("order:{{{t}}}:status"),
        format!("stock:{{{t}}}"),
        format!("blob:{{{t}}}"),
    );
    assert!(lock.same_slot_as(&status) && lock.same_slot_as(&stock));
    let bytes: Vec<u8> = (0..=255).collect();
    let w = lock.write().await.unwrap();
    let fence = w.fence().to_string();
    let replies = w
        .guarded()
        .set(&status, "paid")
        .command("HSET", [stock.as_str(), "n", "10", "fence", fence.as_str()])
        .command("hincrby", [stock.as_str(), "n", "-1"])
        .command("SET", [blob.as_bytes(), bytes.as_slice()])
        .get(&blob)
        .command("HGET", [stock.as_str(), "fence"])
        .get(&format!("missing:{{{t}}}"))
        .run()
        .await
        .expect("guarded commands");
    assert_eq!(replies[0].as_str(), Some("OK"));
    assert_eq!(replies[1].as_i64(), Some(2));
    assert_eq!(replies[2].as_i64(), Some(9));
    assert_eq!(replies[4], Reply::Bytes(bytes.clone()));
    assert_eq!(replies[5].as_str(), Some(fence.as_str()));
    assert_eq!(replies[6], Reply::Nil);
    assert_eq!(value(&client, &status).await.as_deref(), Some(&b"paid"[..]));
    assert_eq!(value(&client, &blob).await, Some(bytes));

    // refused before anything is sent
    let other = format!("order:{{{}}}:status", tag());
    let wrong_slot = w.guarded().set(&other, "x").run().await.unwrap_err();
    assert!(
        matches!(wrong_slot, Error::WrongSlot { .. }),
        "{wrong_slot}"
    );
    assert!(wrong_slot.to_string().contains(&other), "{wrong_slot}");
    assert_eq!(value(&client, &other).await, None);
    for bad in ["EVAL", "BLPOP", "PUBLISH", "FLUSHALL", "CLUSTER"] {
        let e = w
            .guarded()
            .command(bad, [status.as_str()])
            .run()
            .await
            .unwrap_err();
        assert!(matches!(e, Error::InvalidCommand(_)), "{bad}: {e}");
    }
    w.release().await.unwrap();

    // reads under a read hold; writes need a write hold
    let r = lock.acquire(Mode::Read).await.unwrap();
    let read = r.guarded().get(&status).run().await.unwrap();
    assert_eq!(read[0].as_str(), Some("paid"));
    let e = r
        .guarded()
        .set(&status, "refunded")
        .run()
        .await
        .unwrap_err();
    assert!(matches!(e, Error::InvalidCommand(_)), "{e}");
    assert_eq!(value(&client, &status).await.as_deref(), Some(&b"paid"[..]));
    r.release().await.unwrap();
    client.close().await;
}

/// All or nothing: a command that would fail (a key of another type, a value that is not
/// an integer) is found before any runs, and the call writes nothing; one that fails only
/// while running (an overflow) stops the call there, and what ran before it is undone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_that_would_fail_stops_the_call_before_anything_runs() {
    let cluster = cluster().await;
    let p = prefix("guarded-all-or-nothing");
    let client = client(cluster, &p).await;
    let t = tag();
    let lock = client.rwlock(&format!("order:{{{t}}}")).unwrap();
    let (status, stock, orders) = (
        format!("order:{{{t}}}:status"),
        format!("stock:{{{t}}}"),
        format!("orders:{{{t}}}"),
    );
    let w = lock.write().await.unwrap();
    w.guarded()
        .set(&status, "new")
        .command("HSET", [stock.as_str(), "n", "ten"])
        .run()
        .await
        .unwrap();
    for (what, call) in [
        // INCR of a word, after a write that would have landed
        (
            "INCR",
            w.guarded()
                .command("RPUSH", [orders.as_str(), "o-1"])
                .command("INCR", [status.as_str()]),
        ),
        // HINCRBY of a field that is not a number
        (
            "HINCRBY",
            w.guarded()
                .command("RPUSH", [orders.as_str(), "o-1"])
                .command("HINCRBY", [stock.as_str(), "n", "-1"]),
        ),
        // a list command on a string
        (
            "LPUSH",
            w.guarded()
                .command("RPUSH", [orders.as_str(), "o-1"])
                .command("LPUSH", [status.as_str(), "x"]),
        ),
    ] {
        let e = call.run().await.unwrap_err();
        match &e {
            Error::CommandFailed {
                index,
                command,
                nothing_ran,
                ..
            } => {
                assert_eq!(
                    (*index, command.as_str(), *nothing_ran),
                    (1, what, true),
                    "{e}"
                );
            }
            other => panic!("{what}: {other}"),
        }
        let pushed: i64 = client.redis().llen(&orders).await.unwrap();
        assert_eq!(pushed, 0, "{what}: the command before it did not run");
    }
    // what the commands before it leave is taken into account: DEL then LPUSH is fine
    let replies = w
        .guarded()
        .del(&status)
        .command("LPUSH", [status.as_str(), "x"])
        .run()
        .await
        .unwrap();
    assert_eq!(replies[1].as_i64(), Some(1));
    // the number of arguments is checked before sending, with the command named
    let e = w
        .guarded()
        .command("HINCRBY", [stock.as_str(), "n"])
        .run()
        .await
        .unwrap_err();
    assert!(
        matches!(&e, Error::InvalidCommand(m) if m.contains("HINCRBY") && m.contains("takes 3")),
        "{e}"
    );
    // an overflow is found only while running: the call stops there, and the SET before
    // it is undone (the key was missing: it is again)
    let big = format!("big:{{{t}}}");
    let e = w
        .guarded()
        .set(&big, i64::MAX.to_string())
        .command("INCR", [big.as_str()])
        .command("RPUSH", [orders.as_str(), "o-2"])
        .run()
        .await
        .unwrap_err();
    assert!(
        matches!(
            &e,
            Error::CommandFailed {
                index: 1,
                nothing_ran: true,
                undone: true,
                message,
                ..
            } if message.contains("overflow")
        ),
        "{e}"
    );
    assert_eq!(value(&client, &big).await, None, "the SET was undone");
    let pushed: i64 = client.redis().llen(&orders).await.unwrap();
    assert_eq!(pushed, 0, "nothing after the failed command ran");
    let _: () = client
        .redis()
        .set(&big, i64::MAX.to_string(), None, None, false)
        .await
        .unwrap();
    let e = w
        .guarded()
        .command("INCR", [big.as_str()])
        .run_checked()
        .await
        .unwrap_err();
    assert!(
        matches!(
            &e,
            Error::CommandFailed {
                index: 0,
                nothing_ran: true,
                undone: false,
                ..
            }
        ),
        "{e}"
    );
    w.release().await.unwrap();
    client.close().await;
}

/// Conditions, checked in the same call before any command: "decrement if > 0" in one
/// call, an else-branch, exact 64-bit comparisons, and a batch built and checked before
/// the lock is taken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conditions_choose_the_branch_that_runs() {
    use cluster_rwlock::guarded::{Condition, Guarded};
    let cluster = cluster().await;
    let p = prefix("guarded-conditions");
    let client = client(cluster, &p).await;
    let t = tag();
    let lock = client.rwlock(&format!("product:{{{t}}}")).unwrap();
    let (stock, orders) = (format!("stock:{{{t}}}"), format!("orders:{{{t}}}"));
    let w = lock.write().await.unwrap();
    w.guarded()
        .command("HSET", [stock.as_str(), "n", "2"])
        .run()
        .await
        .unwrap();
    let mut sold = 0;
    for i in 0..4 {
        let id = format!("o-{i}");
        let out = w
            .guarded()
            .when(Condition::field(&stock, "n").gt(0))
            .command("HINCRBY", [stock.as_str(), "n", "-1"])
            .command("RPUSH", [orders.as_str(), id.as_str()])
            .otherwise()
            .command("HGET", [stock.as_str(), "n"])
            .commit()
            .await
            .unwrap();
        if out.succeeded {
            sold += 1;
            assert_eq!(out.replies.len(), 2);
            assert_eq!(out.failed_condition, None);
        } else {
            assert_eq!(out.failed_condition, Some(0));
            assert_eq!(out.replies[0].as_i64(), Some(0), "the else-branch ran");
        }
    }
    assert_eq!(sold, 2);
    let left: Vec<String> = client.redis().lrange(&orders, 0, -1).await.unwrap();
    assert_eq!(left, ["o-0", "o-1"]);
    // `run` says a condition failed; several conditions: the first that fails is named
    let e = w
        .guarded()
        .when(Condition::exists(&stock))
        .when(Condition::field(&stock, "n").ge(1))
        .command("HINCRBY", [stock.as_str(), "n", "-1"])
        .run()
        .await
        .unwrap_err();
    assert!(matches!(e, Error::ConditionFailed { index: 1 }), "{e}");
    // comparisons are exact beyond 2^53, and bytes compare as bytes
    let big = format!("big:{{{t}}}");
    w.guarded()
        .set(&big, "9007199254740993")
        .run()
        .await
        .unwrap();
    for (condition, holds) in [
        (Condition::value(&big).gt(9_007_199_254_740_992), true),
        (Condition::value(&big).gt(9_007_199_254_740_993), false),
        (Condition::value(&big).le(9_007_199_254_740_993), true),
        (Condition::value(&big).lt(i64::MIN), false),
        (Condition::value(&big).eq("9007199254740993"), true),
        (Condition::value(&big).ne("9007199254740993"), false),
        (Condition::value(format!("none:{{{t}}}")).missing(), true),
        (
            Condition::value(format!("none:{{{t}}}")).ge(i64::MIN),
            false,
        ),
        (Condition::missing(&stock), false),
    ] {
        let out = w.guarded().when(condition.clone()).commit().await.unwrap();
        assert_eq!(out.succeeded, holds, "{condition:?}");
    }
    // a condition on a key of another type fails the call before anything runs
    let e = w
        .guarded()
        .when(Condition::value(&stock).eq("x"))
        .set(&big, "0")
        .run()
        .await
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::CommandFailed {
                nothing_ran: true,
                ..
            }
        ),
        "{e}"
    );
    // a condition's key is checked as a command's: the slot, no lock's key
    let elsewhere = format!("stock:{{{}}}", tag());
    let e = w
        .guarded()
        .when(Condition::exists(&elsewhere))
        .run()
        .await
        .unwrap_err();
    assert!(matches!(e, Error::WrongSlot { .. }), "{e}");
    let e = w
        .guarded()
        .when(Condition::exists(lock.key()))
        .run()
        .await
        .unwrap_err();
    assert!(matches!(e, Error::LockKey { .. }), "{e}");
    w.release().await.unwrap();

    // a call is checked before the lock is asked for, and run under a guard later
    let bad = Guarded::new(&lock)
        .command("HINCRBY", [stock.as_str(), "n", "x"])
        .check()
        .unwrap_err();
    assert!(matches!(bad, Error::InvalidCommand(_)), "{bad}");
    let restock = Guarded::new(&lock)
        .when(Condition::field(&stock, "n").lt(1))
        .command("HINCRBY", [stock.as_str(), "n", "5"])
        .check()
        .unwrap();
    assert!(restock.writes());
    let r = lock.read().await.unwrap();
    let e = Guarded::new(&lock)
        .command("HINCRBY", [stock.as_str(), "n", "5"])
        .run_under(&r)
        .await
        .unwrap_err();
    assert!(
        matches!(e, Error::InvalidCommand(_)),
        "a write under a read guard: {e}"
    );
    r.release().await.unwrap();
    let other = client.rwlock(&format!("other:{{{t}}}")).unwrap();
    let g = other.write().await.unwrap();
    let e = Guarded::new(&lock)
        .get(&stock)
        .run_under(&g)
        .await
        .unwrap_err();
    assert!(
        matches!(e, Error::InvalidCommand(_)),
        "another lock's guard: {e}"
    );
    g.release().await.unwrap();
    let w = lock.write().await.unwrap();
    let replies = restock.run_under(&w).await.unwrap();
    assert_eq!(replies[0].as_i64(), Some(5));
    w.release().await.unwrap();
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_broken_by_force_release_writes_nothing() {
    let cluster = cluster().await;
    let p = prefix("guarded-broken");
    let client = client(cluster, &p).await;
    let t = tag();
    let name = format!("order:{{{t}}}");
    let status = format!("order:{{{t}}}:status");
    let w = client.rwlock(&name).unwrap().write().await.unwrap();
    let broken = client.force_release(&name, None).await.unwrap();
    assert_eq!(broken.holds_removed, 1);
    // the holder does not know yet (its next renewal would tell it): the write is
    // refused by the server all the same
    assert!(!w.is_lost());
    let e = w.guarded().set(&status, "late").run().await.unwrap_err();
    assert!(matches!(e, Error::LockLost), "{e}");
    assert_eq!(value(&client, &status).await, None);
    drop(w);
    client.close().await;
}

/// The server's word is final: a guarded call answered that the hold is gone marks the
/// guard lost at once (its signal fires, the renewal book lets it go), not a third of a
/// lease later when the next renewal would find the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guarded_call_that_finds_the_hold_gone_marks_the_guard_lost_at_once() {
    let cluster = cluster().await;
    let p = prefix("guarded-gone");
    let client = client_with(cluster, |c| c.prefix(&p).lease(Duration::from_secs(60))).await;
    let t = tag();
    let name = format!("order:{{{t}}}");
    let status = format!("order:{{{t}}}:status");
    let w = client.rwlock(&name).unwrap().write().await.unwrap();
    let signal = w.lost_signal();
    assert_eq!(client.stats().held, 1);
    let broken = client.force_release(&name, None).await.unwrap();
    assert_eq!(broken.holds_removed, 1);
    let e = w.guarded().set(&status, "late").run().await.unwrap_err();
    assert!(matches!(e, Error::LockLost), "{e}");
    assert!(
        w.is_lost(),
        "the guard believes it holds after the server said it does not"
    );
    tokio::time::timeout(Duration::from_millis(100), w.lost())
        .await
        .expect("lost() resolves at once");
    assert!(signal.is_lost());
    assert_eq!(client.stats().held, 0, "the renewal book still renews it");
    assert!(matches!(w.release().await, Err(Error::LockLost)));
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_whose_lease_ran_out_by_the_servers_clock_writes_nothing() {
    let cluster = cluster().await;
    let p = prefix("guarded-expired");
    let client = client(cluster, &p).await;
    let t = tag();
    let lock = client.rwlock(&format!("order:{{{t}}}")).unwrap();
    let status = format!("order:{{{t}}}:status");
    let w = lock.write().await.unwrap();
    // the holder's deadline on the server set in the past, as a holder frozen past its
    // lease would find it (its entry is still there: nothing has pruned it yet)
    let entry = common::entry_of(client.redis(), lock.key(), w.owner())
        .await
        .expect("the hold's entry");
    let parts: Vec<&str> = entry.split(':').collect();
    let past = format!("{}:{}:1:{}", parts[0], parts[1], parts[3]);
    common::set_entry_of(client.redis(), lock.key(), w.owner(), &past).await;
    let e = w.guarded().set(&status, "late").run().await.unwrap_err();
    assert!(matches!(e, Error::LockLost), "{e}");
    assert_eq!(value(&client, &status).await, None);
    drop(w);
    client.close().await;
}

/// A grant that never reached the replica (unconfirmed: `MasterOnly`, with the master's
/// replication stream cut) is lost when the replica is promoted; the holder may still
/// believe it (its next renewal tells it), but a guarded write checks the hold on the
/// node that serves the slot NOW, and writes nothing there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_that_a_failover_lost_writes_nothing() {
    let cluster = TestCluster::start().await.expect("cluster");
    let p = prefix("guarded-failover");
    let client = client_with(&cluster, |c| {
        c.prefix(&p)
            .durability(Durability::MasterOnly)
            .lease(Duration::from_secs(30))
    })
    .await;
    let t = tag();
    let lock = client.rwlock(&format!("order:{{{t}}}")).unwrap();
    let status = format!("order:{{{t}}}:status");
    let master = cluster.master_for_slot(lock.slot()).await.unwrap();
    cluster
        .cut_replication(master.index)
        .await
        .expect("cut_replication (needs iptables and root)");
    let w = lock.write().await.unwrap();
    cluster.kill(master.index).await.unwrap();
    cluster
        .wait_for_failover(Duration::from_secs(30))
        .await
        .expect("failover");
    let promoted = cluster.master_for_slot(lock.slot()).await.unwrap();
    assert_ne!(promoted.index, master.index);
    // the client learns the new master (a read the lock follows through the failover)
    let state = lock.state().await.expect("state after the failover");
    assert!(
        state.holders.is_empty(),
        "the grant reached the replica: {state:?}"
    );
    let e = w.guarded().set(&status, "late").run().await.unwrap_err();
    assert!(matches!(e, Error::LockLost), "{e}");
    assert_eq!(value(&client, &status).await, None);
    cluster.restore_replication(master.index).await.unwrap();
    drop(w);
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fenced_store_refuses_a_lower_fence() {
    let cluster = cluster().await;
    let p = prefix("fenced");
    let client = client(cluster, &p).await;
    let key = format!("{p}:report");
    assert_eq!(client.fenced_get(&key).await.unwrap(), None);
    let lock = client.rwlock("report").unwrap();
    let first = lock.write().await.unwrap();
    let old = first.fence();
    first.release().await.unwrap();
    let second = lock.write().await.unwrap();
    let new = second.fence();
    assert!(new > old);
    let w = client.fenced_set(&key, new, b"new \x00\xff").await.unwrap();
    assert!(w.written && w.fence == new, "{w:?}");
    // the first holder, late, with its old fence: refused, told the fence that won
    let late = client.fenced_set(&key, old, "late").await.unwrap();
    assert!(!late.written && late.fence == new, "{late:?}");
    // the same fence may write again
    assert!(client.fenced_set(&key, new, "again").await.unwrap().written);
    assert_eq!(
        client.fenced_get(&key).await.unwrap(),
        Some((new, b"again".to_vec()))
    );
    // a key of another type is left alone
    let other = format!("{p}:a-string");
    let _: () = client
        .redis()
        .set(&other, "x", None, None, false)
        .await
        .unwrap();
    let e = client.fenced_set(&other, new, "y").await.unwrap_err();
    assert!(matches!(e, Error::WrongType { .. }), "{e}");
    second.release().await.unwrap();
    client.close().await;
}

/// No guarded command, and no fenced write, may touch a lock: the hash or the release
/// channel of this lock or of ANY other lock under the client's prefix in the slot. Each
/// is refused before sending (`LockKey`), and the lock stays intact: a second writer is
/// refused, the holder is not told it lost, the fence does not move, the other lock's
/// hash is as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guarded_commands_never_touch_a_locks_own_keys() {
    let cluster = cluster().await;
    let p = prefix("guarded-own");
    let client = client(cluster, &p).await;
    let other_client = common::client(cluster, &p).await;
    let t = tag();
    let lock = client.rwlock(&format!("orders:{{{t}}}")).unwrap();
    let neighbour = client.rwlock(&format!("invoices:{{{t}}}")).unwrap();
    assert_eq!(lock.slot(), neighbour.slot());
    // the neighbour has a hash: a tombstone with its fence
    neighbour.write().await.unwrap().release().await.unwrap();
    let neighbour_before: std::collections::HashMap<String, String> =
        client.redis().hgetall(neighbour.key()).await.unwrap();
    assert!(!neighbour_before.is_empty());

    let w = lock.write().await.unwrap();
    let fence = w.fence();
    let targets = [
        lock.key().to_string(),
        neighbour.key().to_string(),
        lock.channel().to_string(),
        neighbour.channel().to_string(),
    ];
    let attacks: [(&str, &[&str]); 6] = [
        ("DEL", &[]),
        ("UNLINK", &[]),
        ("HDEL", &["w"]),
        ("HSET", &["s", "garbage"]),
        ("PEXPIRE", &["1"]),
        ("PERSIST", &[]),
    ];
    for target in &targets {
        for (name, rest) in attacks {
            let mut args = vec![target.as_str()];
            args.extend_from_slice(rest);
            let e = w.guarded().command(name, &args).run().await.unwrap_err();
            assert!(
                matches!(&e, Error::LockKey { key } if key == target),
                "{name} {target}: {e}"
            );
            assert!(!e.is_retryable());
            assert!(
                cluster_rwlock::guarded::check_command(&lock, Mode::Write, name, &args).is_err(),
                "{name} {target}"
            );
        }
        // a lock key hidden among the keys of a many-key command
        let data = format!("orders:{{{t}}}:data");
        let e = w
            .guarded()
            .set(&data, "1")
            .command("DEL", [data.as_str(), target.as_str()])
            .run()
            .await
            .unwrap_err();
        assert!(matches!(e, Error::LockKey { .. }), "{e}");
        assert_eq!(value(&client, &data).await, None, "nothing was sent");
        // the fenced store refuses them too
        let e = client.fenced_set(target, fence, "x").await.unwrap_err();
        assert!(
            matches!(e, Error::LockKey { .. }),
            "fenced_set {target}: {e}"
        );
    }
    // the lock is intact: a second writer refused, the holder not told, the fence the same
    assert!(other_client
        .rwlock(lock.name())
        .unwrap()
        .try_write()
        .await
        .unwrap()
        .is_none());
    assert!(!w.is_lost());
    let state = lock.state().await.unwrap();
    assert_eq!(state.fence, Some(fence));
    assert_eq!(state.holders.len(), 1);
    let neighbour_after: std::collections::HashMap<String, String> =
        client.redis().hgetall(neighbour.key()).await.unwrap();
    assert_eq!(neighbour_after, neighbour_before);
    let ttl: i64 = client.redis().pttl(lock.key()).await.unwrap();
    assert!(ttl > 0, "the lock's TTL: {ttl}");
    w.release().await.unwrap();
    client.close().await;
    other_client.close().await;
}

/// A command with more words than the script can pass to Redis at once is refused before
/// sending; one at the limit runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_too_long_for_the_script_is_refused_before_sending() {
    use cluster_rwlock::guarded::MAX_WORDS;
    let cluster = cluster().await;
    let p = prefix("guarded-long");
    let client = client(cluster, &p).await;
    let t = tag();
    let lock = client.rwlock(&format!("orders:{{{t}}}")).unwrap();
    let list = format!("orders:{{{t}}}:list");
    let w = lock.write().await.unwrap();
    let first = format!("orders:{{{t}}}:first");
    let mut args = vec![list.clone()];
    args.extend((0..MAX_WORDS - 1).map(|i| i.to_string()));
    let e = w
        .guarded()
        .set(&first, "1")
        .command("RPUSH", &args)
        .run()
        .await
        .unwrap_err();
    assert!(matches!(e, Error::InvalidCommand(_)), "{e}");
    assert_eq!(value(&client, &first).await, None, "nothing was sent");
    args.pop();
    let ran = w.guarded().command("RPUSH", &args).run().await.unwrap();
    assert_eq!(ran[0].as_i64(), Some(MAX_WORDS as i64 - 2));
    w.release().await.unwrap();
    client.close().await;
}

/// Each key's `DUMP` (none when missing) and `PEXPIRETIME`: what "unchanged" means.
async fn read_keys(client: &LockClient, keys: &[&str]) -> Vec<(Option<Vec<u8>>, i64)> {
    let script = "local r = {} for i, k in ipairs(KEYS) do \
        r[2 * i - 1] = redis.call('DUMP', k) or '' \
        r[2 * i] = redis.call('PEXPIRETIME', k) end return r";
    let v: Vec<Value> = client
        .redis()
        .eval(script, keys.to_vec(), Vec::<String>::new())
        .await
        .unwrap();
    v.chunks(2)
        .map(|p| {
            let dump = p[0]
                .as_bytes()
                .map(<[u8]>::to_vec)
                .filter(|d| !d.is_empty());
            (dump, p[1].as_i64().unwrap())
        })
        .collect()
}

/// The calls that wrote before failing (a command's failure found only while running,
/// or on a key a command before it wrote): each fails, and every key it names is as it
/// was, value and expiry. And a call the checks once refused though it would succeed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_that_fails_while_running_leaves_every_key_as_it_was() {
    let cluster = cluster().await;
    let p = prefix("guarded-undone");
    let client = client(cluster, &p).await;
    let t = tag();
    let lock = client.rwlock(&format!("order:{{{t}}}")).unwrap();
    let k = |name: &str| format!("{name}:{{{t}}}");
    let (mark, h, f, mx, status, stock, sp, missing) = (
        k("mark"),
        k("h"),
        k("f"),
        k("mx"),
        k("status"),
        k("stock"),
        k("sp"),
        k("missing"),
    );
    let redis = client.redis();
    // `mark` exists with an expiry (both must come back), `h` is a hash, `mx` a hash
    // whose `n` is not a number, `stock` a hash whose `n` is, `status` a string, `sp` a
    // number with a space
    let _: () = redis
        .set(&mark, "old", Some(Expiration::PX(600_000)), None, false)
        .await
        .unwrap();
    let _: i64 = redis.hset(&h, ("a", "1")).await.unwrap();
    let _: i64 = redis.hset(&mx, ("n", "abc")).await.unwrap();
    let _: i64 = redis.hset(&stock, ("n", "10")).await.unwrap();
    let _: () = redis.set(&status, "new", None, None, false).await.unwrap();
    let _: () = redis.set(&sp, "5 ", None, None, false).await.unwrap();
    let keys = [
        mark.as_str(),
        h.as_str(),
        f.as_str(),
        mx.as_str(),
        status.as_str(),
        stock.as_str(),
        sp.as_str(),
        missing.as_str(),
    ];
    let before = read_keys(&client, &keys).await;
    assert!(before[0].1 > 0, "mark expires: {:?}", before[0]);
    let w = lock.write().await.unwrap();
    let cases = [
        // SET ... GET of a hash: WRONGTYPE after `mark` was written
        (
            "SET h v GET",
            w.guarded()
                .set(&mark, "x")
                .command("SET", [h.as_str(), "v", "GET"]),
            1,
        ),
        // LSET of a missing key
        (
            "LSET missing",
            w.guarded()
                .set(&mark, "x")
                .command("LSET", [missing.as_str(), "0", "x"]),
            1,
        ),
        // INCRBYFLOAT's argument is not checked before sending
        (
            "INCRBYFLOAT f abc",
            w.guarded()
                .set(&mark, "x")
                .command("INCRBYFLOAT", [f.as_str(), "abc"]),
            1,
        ),
        // a key written earlier in the call has its value checked by no one but Redis
        (
            "HINCRBY of a touched hash",
            w.guarded()
                .set(&mark, "x")
                .command("HSET", [mx.as_str(), "status", "x"])
                .command("HINCRBY", [mx.as_str(), "n", "1"]),
            2,
        ),
        // the call's own SET made `status` text, two commands before its INCR
        (
            "INCR of a string the call made text",
            w.guarded()
                .set(&status, "text")
                .command("HINCRBY", [stock.as_str(), "n", "1"])
                .command("INCR", [status.as_str()]),
            2,
        ),
        // found before anything ran
        (
            "INCR of \"5 \"",
            w.guarded().set(&mark, "x").command("INCR", [sp.as_str()]),
            1,
        ),
    ];
    for (what, call, at) in cases {
        let e = call.run().await.unwrap_err();
        assert!(
            matches!(
                &e,
                Error::CommandFailed {
                    index,
                    nothing_ran: true,
                    ..
                } if *index == at
            ),
            "{what}: {e}"
        );
        assert_eq!(
            read_keys(&client, &keys).await,
            before,
            "{what}: a key changed ({e})"
        );
    }
    // SET NX on a hash writes nothing (the key exists): the HSET after it succeeds,
    // where the checks once took `h` for a string and refused the call
    let replies = w
        .guarded()
        .command("SET", [h.as_str(), "v", "NX"])
        .command("HSET", [h.as_str(), "b", "2"])
        .run()
        .await
        .expect("SET NX on an existing hash, then HSET");
    assert_eq!(replies[0], Reply::Nil);
    assert_eq!(replies[1].as_i64(), Some(1));
    w.release().await.unwrap();
    client.close().await;
}
