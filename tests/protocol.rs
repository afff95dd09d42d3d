//! `docs/PROTOCOL.md` taken at its word: the lock's main transitions driven with plain
//! `FCALL`s and `SSUBSCRIBE` from a bare Redis client, with none of this library's logic,
//! as a client in another language would; every reply checked against the document.

mod common;

use std::time::Duration;

use cluster_rwlock::LockClient;
use common::{cluster, prefix};
use fred::prelude::*;

/// A bare cluster client of the test bed (fred, no lock logic).
async fn bare(cluster: &cluster_rwlock_testkit::TestCluster) -> Client {
    let c = Builder::from_config(cluster.client_config())
        .build()
        .unwrap();
    c.init().await.unwrap();
    c
}

/// `FCALL function 1 key args...`, the reply as fred gives it.
async fn fcall(c: &Client, function: &str, key: &str, args: &[&str]) -> Value {
    c.fcall(function, vec![key], args.to_vec()).await.unwrap()
}

fn parts(v: Value) -> Vec<Value> {
    match v {
        Value::Array(p) => p,
        other => panic!("a list: {other:?}"),
    }
}

fn int(v: &Value) -> i64 {
    v.as_i64().unwrap_or_else(|| panic!("an integer: {v:?}"))
}

fn text(v: &Value) -> String {
    v.as_string().unwrap_or_else(|| panic!("a string: {v:?}"))
}

/// The tests of this file take turns: one counts the commands a master ran.
static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// How every test of this file starts: its turn (held until the returned guard drops),
/// the test bed with the library on every master (the operator's step), and a bare
/// client.
async fn start() -> (
    tokio::sync::MutexGuard<'static, ()>,
    &'static cluster_rwlock_testkit::TestCluster,
    Client,
) {
    let turn = TURN.lock().await;
    let cluster = cluster().await;
    LockClient::setup(&common::config(cluster)).await.unwrap();
    let c = bare(cluster).await;
    (turn, cluster, c)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_documented_functions_take_the_lock_through_its_main_transitions() {
    let (_turn, cluster, c) = start().await;
    let p = prefix("protocol");
    let key = format!("{p}:{{doc}}");
    let channel = format!("{key}:released");

    // the version: {layout, revision}
    let v = parts(
        c.fcall(
            "rwlock4_version",
            Vec::<String>::new(),
            Vec::<String>::new(),
        )
        .await
        .unwrap(),
    );
    assert_eq!(text(&v[0]), "4");
    assert!(int(&v[1]) >= 1);

    // a writer on a free lock: {1, fence, others}; its hold is the summary's lone hold
    let g = parts(fcall(&c, "rwlock4_acquire", &key, &["w", "o1", "1", "30000", "1"]).await);
    assert_eq!(int(&g[0]), 1, "{g:?}");
    let f1: u64 = text(&g[1]).parse().unwrap();
    let s: String = c.hget(&key, "s").await.unwrap();
    let words: Vec<&str> = s.split(' ').collect();
    assert_eq!(words.len(), 11, "{s}");
    assert_eq!((words[0], words[2], words[10]), ("4", "1", "o1"));
    assert!(
        words[9].starts_with(&format!("w1:{f1}:")) && words[9].ends_with(":30000"),
        "{s}"
    );

    // a reader that tries once: {0, wait_ms}; a writer that waits: queued (q:, t:)
    let r = parts(fcall(&c, "rwlock4_acquire", &key, &["r", "o2", "7", "30000", "0"]).await);
    assert_eq!(int(&r[0]), 0, "{r:?}");
    let q = parts(fcall(&c, "rwlock4_acquire", &key, &["w", "o3", "9", "30000", "1"]).await);
    assert_eq!(int(&q[0]), 0, "{q:?}");
    let queued: String = c.hget(&key, "q:o3").await.unwrap();
    assert!(queued.starts_with("0 "), "the first ticket: {queued}");
    // its ticket names it with its place's numbers: `<owner> <deadline> <hold id> <lease>`
    let ticket: String = c.hget(&key, "t:0").await.unwrap();
    assert_eq!(ticket, format!("o3{}", &queued[1..]));
    assert!(ticket.ends_with(" 9 30000"), "{ticket}");

    // the release hands the lock to the queued writer: `g o3 9 <fence>` on the channel
    let sub = Builder::from_config(cluster.client_config())
        .build_subscriber_client()
        .unwrap();
    sub.init().await.unwrap();
    let mut messages = sub.message_rx();
    sub.ssubscribe(channel.as_str()).await.unwrap();
    let rel = parts(fcall(&c, "rwlock4_release", &key, &["o1", "1"]).await);
    assert_eq!(int(&rel[0]), 1, "{rel:?}");
    let m = tokio::time::timeout(Duration::from_secs(5), messages.recv())
        .await
        .expect("a release message")
        .unwrap();
    let said = m.value.as_string().unwrap();
    let handed: Vec<&str> = said.split(' ').collect();
    assert_eq!(handed[..3], ["g", "o3", "9"], "{said}");
    let f2: u64 = handed[3].parse().unwrap();
    assert!(f2 > f1);
    // the writer's place stays until its own call takes the hold: the head moved past it,
    // and the state lists it as the holder, not as waiting
    assert!(c
        .hget::<Option<String>, _, _>(&key, "q:o3")
        .await
        .unwrap()
        .is_some());
    let st = parts(fcall(&c, "rwlock4_state", &key, &[]).await);
    assert_eq!(text(&parts(st[2].clone())[0]), "o3");
    assert!(parts(st[3].clone()).is_empty(), "{st:?}");
    // the message is not a grant: the writer's next attempt under the same hold id is.
    // It takes the hold with the lease its place had left (a fourth element: ms left,
    // at most the lease), and removes its place: the write its WAIT covers
    let slot = cluster_rwlock::slot::key_slot(key.as_bytes());
    let before = master_offset(cluster, slot).await;
    let g2 = parts(
        fcall(
            &c,
            "rwlock4_acquire",
            &key,
            &["w", "o3", "9", "30000", "3", "1"],
        )
        .await,
    );
    assert_eq!((int(&g2[0]), text(&g2[1])), (1, f2.to_string()), "{g2:?}");
    let left = int(&g2[3]);
    assert!(left > 20_000 && left <= 30_000, "{g2:?}");
    assert!(
        master_offset(cluster, slot).await > before,
        "the take writes"
    );
    for field in ["q:o3", "t:0"] {
        let v: Option<String> = c.hget(&key, field).await.unwrap();
        assert_eq!(v, None, "{field}");
    }
    // sent again, it finds no place: the hold is written back, a whole lease from now
    let g3 = parts(fcall(&c, "rwlock4_acquire", &key, &["w", "o3", "9", "30000", "3"]).await);
    assert_eq!((int(&g3[0]), g3.len()), (1, 3), "{g3:?}");

    // a renewal names the holds still held; an unknown owner's are gone
    let n = parts(fcall(&c, "rwlock4_renew", &key, &["20000", "o3 9", "o1 1"]).await);
    assert_eq!(int(&n[0]), 1);
    let ids = parts(n[1].clone());
    assert_eq!(
        (text(&ids[0]), text(&ids[1])),
        ("9".to_string(), String::new())
    );

    // the state: one holder, its eight numbers, renewed just now with a 20 s lease
    let st = parts(fcall(&c, "rwlock4_state", &key, &[]).await);
    assert_eq!((int(&st[0]), text(&st[1])), (1, f2.to_string()));
    let holder = parts(st[2].clone());
    assert_eq!(holder.len(), 8, "{holder:?}");
    assert_eq!(text(&holder[0]), "o3");
    assert_eq!((int(&holder[2]), int(&holder[7])), (1, 20_000));
    assert!(int(&holder[6]) < 5_000, "renewed ago: {holder:?}");

    // guarded commands under the write hold: each reply, in order
    let data = format!("{p}:{{doc}}:data");
    let gd: Value = c
        .fcall(
            "rwlock4_guarded",
            vec![key.as_str(), data.as_str()],
            vec!["o3", "9", "1", "3", "SET", data.as_str(), "v"],
        )
        .await
        .unwrap();
    let gd = parts(gd);
    assert_eq!(int(&gd[0]), 1, "{gd:?}");
    let first = parts(parts(gd[1].clone())[0].clone());
    assert_eq!((int(&first[0]), text(&first[1])), (0, "OK".to_string()));

    // revision 3's form: `<writes> <conditions> <then>`, the conditions, the commands
    // each with its check. A condition that holds: the then-branch, {1, 1, 0, replies}
    let guarded = |args: Vec<&str>| {
        let (c, keys) = (c.clone(), vec![key.clone(), data.clone()]);
        let args: Vec<String> = args.into_iter().map(String::from).collect();
        async move { parts(c.fcall("rwlock4_guarded", keys, args).await.unwrap()) }
    };
    let (then, otherwise) = (
        ["3", "*s-1", "SET", data.as_str(), "w"],
        ["2", "s.-1", "GET", data.as_str()],
    );
    // if the data is "v": SET it to "w"; else GET it. Sent twice: the first finds "v"
    let mut args = vec!["o3", "9", "1 1 1", "4", "k", data.as_str(), "eq", "v"];
    args.extend(then);
    args.extend(otherwise);
    let ran = guarded(args.clone()).await;
    assert_eq!(
        (int(&ran[0]), int(&ran[1]), int(&ran[2])),
        (1, 1, 0),
        "{ran:?}"
    );
    // the second finds "w": the else-branch, {1, 0, 1, replies}
    let ran = guarded(args).await;
    assert_eq!(
        (int(&ran[0]), int(&ran[1]), int(&ran[2])),
        (1, 0, 1),
        "{ran:?}"
    );
    let reply = parts(parts(ran[3].clone())[0].clone());
    assert_eq!(text(&reply[1]), "w");
    // a command that would fail (a list command on a string): {-8, "then", 2, message},
    // and the SET before it did not run
    let refused = guarded(vec![
        "o3",
        "9",
        "1 0 2",
        "3",
        "*s-1",
        "SET",
        data.as_str(),
        "x",
        "3",
        "l=-1",
        "LPUSH",
        data.as_str(),
        "y",
    ])
    .await;
    assert_eq!(
        (int(&refused[0]), text(&refused[1]), int(&refused[2])),
        (-8, "then".to_string(), 2),
        "{refused:?}"
    );
    assert!(text(&refused[3]).starts_with("WRONGTYPE"));
    let still: String = c.get(&data).await.unwrap();
    assert_eq!(still, "w");

    // a forced release raises the fence and remembers it in `x`; the holder's release
    // then finds nothing: {0, last fence, fence of the break}
    let fr = parts(fcall(&c, "rwlock4_force_release", &key, &[""]).await);
    assert_eq!(int(&fr[0]), 1);
    assert_eq!(int(&fr[1]), 1);
    let raised: u64 = text(&fr[2]).parse().unwrap();
    assert!(raised > f2);
    let gone = parts(fcall(&c, "rwlock4_release", &key, &["o3", "9"]).await);
    assert_eq!(int(&gone[0]), 0);
    assert_eq!(
        (text(&gone[1]), text(&gone[2])),
        (raised.to_string(), raised.to_string())
    );
    // the tombstone: the summary (and `x`) alone, nobody holds
    let s: String = c.hget(&key, "s").await.unwrap();
    assert_eq!(s.split(' ').nth(2), Some("0"), "{s}");

    // the fenced store: a lower fence is refused
    let store = format!("{p}:{{doc}}:store");
    let w = parts(
        fcall(
            &c,
            "rwlock4_fenced_set",
            &store,
            &[&raised.to_string(), "new"],
        )
        .await,
    );
    assert_eq!(int(&w[0]), 1);
    let late = parts(fcall(&c, "rwlock4_fenced_set", &store, &[&f1.to_string(), "old"]).await);
    assert_eq!((int(&late[0]), text(&late[1])), (0, raised.to_string()));

    // a hash of the layout before: {-7, "3"}, untouched
    let old = format!("{p}:{{doc}}:v3");
    let _: () = c.hset(&old, ("s", "3 5 0 - 0 0 0 -")).await.unwrap();
    let refused = parts(fcall(&c, "rwlock4_acquire", &old, &["w", "o1", "1", "30000", "0"]).await);
    assert_eq!((int(&refused[0]), text(&refused[1])), (-7, "3".to_string()));

    let _: i64 = c.del(vec![key.clone(), data, store, old]).await.unwrap();
    let _ = sub.quit().await;
    let _ = c.quit().await;
}

/// The queue of the protocol's revision 2: readers and writers in the order they came,
/// the readers that came one after another in one group (`t:<ticket>` = `r <count>`,
/// their places `q:<owner>` = `r<ticket> ...`), the group first in line let in by
/// `*`, and the writer behind it handed the lock by the release of its last reader.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_and_writers_wait_in_one_queue_in_the_order_they_came() {
    let (_turn, cluster, c) = start().await;
    let p = prefix("protocol-queue");
    let key = format!("{p}:{{q}}");
    let acquire = |mode: &'static str, owner: &'static str, wait: &'static str| {
        let (c, key) = (c.clone(), key.clone());
        async move {
            parts(
                fcall(
                    &c,
                    "rwlock4_acquire",
                    &key,
                    &[mode, owner, "1", "30000", wait],
                )
                .await,
            )
        }
    };
    let field = |f: String| {
        let (c, key) = (c.clone(), key.clone());
        async move { c.hget::<Option<String>, _, _>(&key, f).await.unwrap() }
    };

    // w1 holds; r1 waits (a group of its own); w2 waits behind it; r2 and r3 wait behind
    // w2, together
    assert_eq!(int(&acquire("w", "w1", "1").await[0]), 1);
    assert_eq!(int(&acquire("r", "r1", "1").await[0]), 0);
    assert_eq!(int(&acquire("w", "w2", "1").await[0]), 0);
    assert_eq!(int(&acquire("r", "r2", "1").await[0]), 0);
    assert_eq!(int(&acquire("r", "r3", "1").await[0]), 0);
    assert_eq!(field("t:0".into()).await.as_deref(), Some("r 1"));
    let ticket = field("t:1".into()).await.unwrap();
    assert!(
        ticket.starts_with("w2 ") && ticket.ends_with(" 1 30000"),
        "{ticket}"
    );
    assert_eq!(field("t:2".into()).await.as_deref(), Some("r 2"));
    assert!(field("q:r3".into())
        .await
        .is_some_and(|q| q.starts_with("r2 ")));
    let st = parts(fcall(&c, "rwlock4_state", &key, &[]).await);
    let names = |v: &Value| parts(v.clone()).iter().map(text).collect::<Vec<_>>();
    assert_eq!(names(&st[3]), ["w2"]);
    assert_eq!(names(&st[4]), ["r1", "r2", "r3"]);

    // w1 gives back: r1's group is first, the lock is free: `*`, and w2 is not handed it
    let sub = Builder::from_config(cluster.client_config())
        .build_subscriber_client()
        .unwrap();
    sub.init().await.unwrap();
    let mut messages = sub.message_rx();
    sub.ssubscribe(format!("{key}:released")).await.unwrap();
    macro_rules! next {
        () => {
            tokio::time::timeout(Duration::from_secs(5), messages.recv())
                .await
                .expect("a release message")
                .unwrap()
                .value
                .as_string()
                .unwrap()
        };
    }
    assert_eq!(
        int(&parts(fcall(&c, "rwlock4_release", &key, &["w1", "1"]).await)[0]),
        1
    );
    assert_eq!(next!(), "*");
    assert_eq!(int(&acquire("w", "w2", "3").await[0]), 0, "r1 came first");
    // r2 and r3 came after w2: they wait for it
    assert_eq!(int(&acquire("r", "r2", "3").await[0]), 0);
    assert_eq!(
        int(&acquire("r", "r1", "3").await[0]),
        1,
        "r1's group goes in"
    );
    assert_eq!(field("t:0".into()).await, None, "its group is gone with it");

    // r1 gives back: w2 is handed the lock, then r2 and r3 go in together after it.
    // w2's ticket is made a bare owner token first, as revision 4 wrote it: it is read
    // through w2's place
    let _: i64 = c.hset(&key, ("t:1", "w2")).await.unwrap();
    assert_eq!(
        int(&parts(fcall(&c, "rwlock4_release", &key, &["r1", "1"]).await)[0]),
        1
    );
    let handed = next!();
    assert!(handed.starts_with("g w2 1 "), "{handed}");
    // (a client that does not say it counts the lease left: renewed for a whole lease,
    // and told nothing more)
    let took = acquire("w", "w2", "3").await;
    assert_eq!((int(&took[0]), took.len()), (1, 3), "{took:?}");
    assert_eq!(field("q:w2".into()).await, None);
    assert_eq!(
        int(&parts(fcall(&c, "rwlock4_release", &key, &["w2", "1"]).await)[0]),
        1
    );
    assert_eq!(next!(), "*");
    assert_eq!(int(&acquire("r", "r3", "3").await[0]), 1);
    assert_eq!(int(&acquire("r", "r2", "3").await[0]), 1);
    // a reader that gives up leaves its place: withdraw
    assert_eq!(int(&acquire("w", "w3", "1").await[0]), 0);
    assert_eq!(int(&acquire("r", "r4", "1").await[0]), 0);
    assert_eq!(field("t:4".into()).await.as_deref(), Some("r 1"));
    let wd = parts(fcall(&c, "rwlock4_withdraw", &key, &["r4", "1"]).await);
    assert_eq!(int(&wd[0]), 1);
    assert_eq!(field("q:r4".into()).await, None);
    assert_eq!(field("t:4".into()).await, None);

    let _: i64 = c.del(vec![key.clone()]).await.unwrap();
    let _ = sub.quit().await;
    let _ = c.quit().await;
}

/// A section of `INFO` from the master that serves `slot` now.
async fn master_info(
    cluster: &cluster_rwlock_testkit::TestCluster,
    slot: u16,
    section: &str,
) -> String {
    let master = cluster.master_for_slot(slot).await.unwrap();
    let replies = cluster
        .command_on_masters("INFO", &[section])
        .await
        .unwrap();
    let (_, info) = replies
        .into_iter()
        .find(|(port, _)| *port == master.port)
        .expect("the slot's master among the masters");
    text(&info.unwrap())
}

/// The replication offset of the master that serves `slot` now (`master_repl_offset`).
async fn master_offset(cluster: &cluster_rwlock_testkit::TestCluster, slot: u16) -> u64 {
    let info = master_info(cluster, slot, "replication").await;
    info.lines()
        .find_map(|l| l.trim().strip_prefix("master_repl_offset:"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("an offset in {info}"))
}

/// How many `TIME` commands the master that serves `slot` has run (its functions' calls
/// among them).
async fn time_calls(cluster: &cluster_rwlock_testkit::TestCluster, slot: u16) -> u64 {
    let info = master_info(cluster, slot, "commandstats").await;
    info.lines()
        .find_map(|l| l.trim().strip_prefix("cmdstat_time:calls="))
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// A writer the lock was handed to that counts its lease from its first attempt under
/// the hold id (`ARGV[6]` `2`) takes the hold without the server's clock: the reply's
/// fourth element is `-`, its place goes (a write, for its `WAIT`), and the master runs
/// no `TIME` for it. Sent again, it finds no place and is granted as any call sent
/// again is: with the clock, a whole lease from the call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_off_is_taken_without_the_clock_by_a_caller_counting_from_its_first_attempt() {
    let (_turn, cluster, c) = start().await;
    let key = format!("{}:{{take}}", prefix("protocol-take"));
    let slot = cluster_rwlock::slot::key_slot(key.as_bytes());
    let acquire = |owner: &'static str, wait: &'static str| {
        let (c, key) = (c.clone(), key.clone());
        async move {
            parts(
                fcall(
                    &c,
                    "rwlock4_acquire",
                    &key,
                    &["w", owner, "4", "30000", wait, "2"],
                )
                .await,
            )
        }
    };
    assert_eq!(int(&acquire("o1", "1").await[0]), 1);
    assert_eq!(int(&acquire("o2", "1").await[0]), 0, "queued");
    let rel = parts(fcall(&c, "rwlock4_release", &key, &["o1", "4"]).await);
    assert_eq!(int(&rel[0]), 1, "{rel:?}");
    let fence = text(&parts(fcall(&c, "rwlock4_state", &key, &[]).await)[1]);

    let times = time_calls(cluster, slot).await;
    let offset = master_offset(cluster, slot).await;
    let took = acquire("o2", "3").await;
    assert_eq!(
        (int(&took[0]), text(&took[1]), int(&took[2]), text(&took[3])),
        (1, fence.clone(), 0, "-".to_string()),
        "{took:?}"
    );
    assert_eq!(time_calls(cluster, slot).await, times, "no TIME");
    assert!(
        master_offset(cluster, slot).await > offset,
        "the take writes"
    );
    for field in ["q:o2", "t:0"] {
        let v: Option<String> = c.hget(&key, field).await.unwrap();
        assert_eq!(v, None, "{field}");
    }
    // sent again: no place to take, the clock read, a whole lease from this call
    let again = acquire("o2", "3").await;
    assert_eq!(
        (int(&again[0]), text(&again[1]), again.len()),
        (1, fence, 3),
        "{again:?}"
    );
    assert!(time_calls(cluster, slot).await > times);
    let _: i64 = c.del(vec![key.clone()]).await.unwrap();
    let _ = c.quit().await;
}

/// A grant sent again (the same owner and hold id: a retry, or a waiter that finds the
/// hold a release handed it) writes the hold back even when nothing changed (a lease
/// that moves no deadline, the hold kept in the summary): a call that writes nothing
/// moves its connection's replication offset nowhere, and the `WAIT` after it would
/// confirm only what that connection wrote before, not a grant another client's
/// release (or a lost connection) made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_sent_again_writes_so_that_the_wait_after_it_covers_it() {
    let (_turn, cluster, c) = start().await;
    let key = format!("{}:{{again}}", prefix("protocol-again"));
    let slot = cluster_rwlock::slot::key_slot(key.as_bytes());
    let g = parts(fcall(&c, "rwlock4_acquire", &key, &["w", "o1", "1", "60000", "1"]).await);
    assert_eq!(int(&g[0]), 1, "{g:?}");
    let s: String = c.hget(&key, "s").await.unwrap();
    // a lease of 1 s moves no deadline of a hold granted for 60 s
    let before = master_offset(cluster, slot).await;
    let again = parts(fcall(&c, "rwlock4_acquire", &key, &["w", "o1", "1", "1000", "1"]).await);
    let after = master_offset(cluster, slot).await;
    assert_eq!((int(&again[0]), text(&again[1])), (1, text(&g[1])));
    assert_eq!(c.hget::<String, _, _>(&key, "s").await.unwrap(), s);
    assert!(after > before, "the grant sent again wrote nothing");
    let _: i64 = c.del(vec![key.clone()]).await.unwrap();
    let _ = c.quit().await;
}

/// `rwlock4_guarded` decides itself whether a call writes, by each command's name and
/// check: a client that sends `writes` 0 (or a check that says "reads") with a write
/// under a read hold is refused, `{-5}`, and the key is unchanged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_under_a_read_hold_is_refused_whatever_the_writes_flag_says() {
    let (_turn, _cluster, c) = start().await;
    let p = prefix("proto-writes");
    let key = format!("{p}:{{doc}}");
    let data = format!("{p}:{{doc}}:data");
    let _: () = c.set(&data, "before", None, None, false).await.unwrap();
    let granted = parts(fcall(&c, "rwlock4_acquire", &key, &["r", "o1", "1", "30000", "0"]).await);
    assert_eq!(int(&granted[0]), 1, "{granted:?}");
    let guarded = |args: Vec<&str>| {
        let (c, keys) = (c.clone(), vec![key.clone(), data.clone()]);
        let args: Vec<String> = args.into_iter().map(String::from).collect();
        async move { parts(c.fcall("rwlock4_guarded", keys, args).await.unwrap()) }
    };
    for args in [
        // the check as the client library sends it, the flag 0
        vec!["o1", "1", "0 0 1", "3", "*s-1", "SET", data.as_str(), "x"],
        // a check that says the command reads
        vec!["o1", "1", "0 0 1", "3", "*.-1", "SET", data.as_str(), "x"],
        // in lower case, in the else-branch of a condition that does not hold
        vec![
            "o1",
            "1",
            "0 1 0",
            "3",
            "e",
            data.as_str(),
            "missing",
            "3",
            "s.-1",
            "append",
            data.as_str(),
            "x",
        ],
        // the old form of revision 1 and 2 clients
        vec!["o1", "1", "0", "3", "SET", data.as_str(), "x"],
    ] {
        let refused = guarded(args.clone()).await;
        assert_eq!(int(&refused[0]), -5, "{args:?}: {refused:?}");
        let still: String = c.get(&data).await.unwrap();
        assert_eq!(still, "before", "{args:?}");
    }
    // a malformed check is refused before anything runs
    let malformed = guarded(vec!["o1", "1", "0 0 1", "2", "x.-1", "GET", data.as_str()]).await;
    assert_eq!(int(&malformed[0]), -8, "{malformed:?}");
    // a read runs
    let read = guarded(vec!["o1", "1", "0 0 1", "2", "s.-1", "GET", data.as_str()]).await;
    assert_eq!(int(&read[0]), 1, "{read:?}");
    let _ = fcall(&c, "rwlock4_release", &key, &["o1", "1"]).await;
    let _: i64 = c.del(&data).await.unwrap();
}
