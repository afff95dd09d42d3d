//! The lock's rules, one test each, against the six-node cluster.

mod common;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use cluster_rwlock::{AnyGuard, Error, LockClient, LockConfig, Mode};
use common::{assert_no_keys, client, client_with, cluster, prefix};
use fred::prelude::*;
use fred::types::{ClusterHash, CustomCommand};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slot_agrees_with_cluster_keyslot_for_odd_names() {
    let cluster = cluster().await;
    let p = prefix("slot");
    let client = client(cluster, &p).await;
    let long = "x".repeat(1024);
    let names = [
        "orders:42",
        "{inner}.x",
        "x{y}z",
        "{}",
        "a{}b",
        "ünïcødé:ключ:鍵",
        "🔒",
        " spaced name ",
        long.as_str(),
    ];
    // braces that cannot be what was meant are refused before any slot is computed
    for typo in ["a}b", "{{}}x", "a{b"] {
        assert!(
            matches!(client.rwlock(typo), Err(Error::InvalidName(_))),
            "{typo}"
        );
    }
    for name in names {
        let lock = client.rwlock(name).expect("valid name");
        let cmd = CustomCommand::new_static("CLUSTER", ClusterHash::Random, false);
        let server: u16 = client
            .redis()
            .custom(cmd, vec!["KEYSLOT", lock.key()])
            .await
            .expect("KEYSLOT");
        assert_eq!(lock.slot(), server, "slot of {:?}", lock.key());
        let cmd = CustomCommand::new_static("CLUSTER", ClusterHash::Random, false);
        let channel: u16 = client
            .redis()
            .custom(cmd, vec!["KEYSLOT", lock.channel()])
            .await
            .expect("KEYSLOT");
        assert_eq!(channel, server, "channel of {name:?} in the key's slot");
        // and the lock works there
        lock.write()
            .await
            .expect("write")
            .release()
            .await
            .expect("release");
    }
    assert_no_keys(cluster, &p).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_spread_over_all_three_masters() {
    let cluster = cluster().await;
    let p = prefix("spread");
    let client = client(cluster, &p).await;
    let mut masters = HashSet::new();
    let mut guards = Vec::new();
    for i in 0..30 {
        let lock = client.rwlock(&format!("job-{i}")).unwrap();
        masters.insert(cluster.master_for_slot(lock.slot()).await.unwrap().port);
        guards.push(lock.write().await.expect("write"));
    }
    assert_eq!(masters.len(), 3, "30 names on all three masters");
    for g in guards {
        g.release().await.expect("release");
    }
    assert_no_keys(cluster, &p).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_names_and_config_are_typed_errors() {
    let cluster = cluster().await;
    let p = prefix("bad");
    let client = client(cluster, &p).await;
    assert!(matches!(client.rwlock(""), Err(Error::InvalidName(_))));
    assert!(matches!(
        client.rwlock(&"n".repeat(1025)),
        Err(Error::InvalidName(_))
    ));
    assert!(matches!(client.rwlock("}x"), Err(Error::InvalidName(_))));
    let bad_prefix = LockClient::connect(common::config(cluster).prefix("a{b}")).await;
    assert!(matches!(bad_prefix, Err(Error::InvalidConfig(_))));
    let zero_lease = LockClient::connect(common::config(cluster).lease(Duration::ZERO)).await;
    assert!(matches!(zero_lease, Err(Error::InvalidConfig(_))));
    let lock = client.rwlock("owner-check").unwrap();
    assert!(matches!(
        lock.with_owner("").try_write().await,
        Err(Error::InvalidOwner(_))
    ));
    assert_no_keys(cluster, &p).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_share_and_writers_exclude() {
    let cluster = cluster().await;
    let p = prefix("share");
    let client = client(cluster, &p).await;
    let a = client.rwlock("res").unwrap();
    let b = client.rwlock("res").unwrap();
    let c = client.rwlock("res").unwrap();
    assert_ne!(a.owner(), b.owner());

    let ra = a.read().await.unwrap();
    let rb = b.try_read().await.unwrap().expect("readers share");
    assert!(
        c.try_write().await.unwrap().is_none(),
        "no writer while read"
    );
    let state = a.state().await.unwrap();
    assert_eq!(state.mode, Some(Mode::Read));
    assert_eq!(state.holders.len(), 2);
    assert!(rb.fence() > ra.fence());
    ra.release().await.unwrap();
    rb.release().await.unwrap();

    let wc = c.try_write().await.unwrap().expect("free");
    assert!(
        a.try_read().await.unwrap().is_none(),
        "no reader while written"
    );
    assert!(b.try_write().await.unwrap().is_none(), "no second writer");
    assert_eq!(a.state().await.unwrap().mode, Some(Mode::Write));
    wc.release().await.unwrap();
    assert_no_keys(cluster, &p).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reentrancy_rules() {
    let cluster = cluster().await;
    let p = prefix("reent");
    let client = client(cluster, &p).await;
    // holds of one explicit owner are reentrant
    let lock = client.rwlock("res").unwrap().with_owner("owner-a");
    let same_owner = client.rwlock("res").unwrap().with_owner("owner-a");
    let other = client.rwlock("res").unwrap();

    // write twice, then read, by one owner
    let w1 = lock.write().await.unwrap();
    let w2 = same_owner
        .try_write()
        .await
        .unwrap()
        .expect("reentrant write");
    let r1 = lock.try_read().await.unwrap().expect("a writer may read");
    let state = lock.state().await.unwrap();
    assert_eq!(state.holders.len(), 1);
    assert_eq!(
        (state.holders[0].write_holds, state.holders[0].read_holds),
        (2, 1)
    );
    assert!(w1.fence() < w2.fence() && w2.fence() < r1.fence());

    // each guard gives back exactly its own hold
    w1.release().await.unwrap();
    assert!(
        other.try_read().await.unwrap().is_none(),
        "still written by w2"
    );
    w2.release().await.unwrap();
    // only the read hold is left: another reader may join, a writer may not
    let ro = other.try_read().await.unwrap().expect("read mode now");
    assert!(client
        .rwlock("res")
        .unwrap()
        .try_write()
        .await
        .unwrap()
        .is_none());

    // an owner that holds only read gets UpgradeDeadlock at once
    let began = Instant::now();
    assert!(matches!(lock.write().await, Err(Error::UpgradeDeadlock)));
    assert!(matches!(
        lock.try_write().await,
        Err(Error::UpgradeDeadlock)
    ));
    assert!(began.elapsed() < Duration::from_secs(1));
    // reentrant read while holding read
    let r2 = lock.read().await.unwrap();
    r1.release().await.unwrap();
    r2.release().await.unwrap();
    ro.release().await.unwrap();
    // a released guard's hold is gone: releasing twice is impossible by type, and a
    // hold that is gone reports LockLost
    let w = lock.write().await.unwrap();
    client.redis().del::<i64, _>(lock.key()).await.unwrap();
    assert!(matches!(w.release().await, Err(Error::LockLost)));
    assert_no_keys(cluster, &p).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn downgrade_lets_readers_in_but_no_writer() {
    let cluster = cluster().await;
    let p = prefix("down");
    let client = client(cluster, &p).await;
    let lock = client.rwlock("res").unwrap();
    let writer = client.rwlock("res").unwrap();
    let reader = client.rwlock("res").unwrap();

    let w = lock.write().await.unwrap();
    let fence = w.fence();
    // a writer is waiting the whole time
    let waiting = tokio::spawn({
        let writer = writer.clone();
        async move { writer.write().await.map(|g| g.fence()) }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let r = w.downgrade().await.unwrap();
    assert!(r.fence() > fence);
    assert_eq!(lock.state().await.unwrap().mode, Some(Mode::Read));
    assert!(!waiting.is_finished(), "no writer between write and read");
    // the queued writer keeps new readers out (writer preference)...
    assert!(reader.try_read().await.unwrap().is_none());
    // ...and gets the lock once the downgraded read is released
    r.release().await.unwrap();
    let wf = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(wf > fence);
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_no_keys_after_release(&client, &writer).await;
    assert_no_keys(cluster, &p).await;
}

/// The spawned writer's guard was dropped when its task ended: wait for that release.
async fn assert_no_keys_after_release(_client: &LockClient, lock: &cluster_rwlock::RwLock) {
    for _ in 0..60 {
        if lock.state().await.unwrap().holders.is_empty() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("holds left: {:?}", lock.state().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writer_is_not_starved_by_overlapping_readers() {
    let cluster = cluster().await;
    let p = prefix("starve");
    let client = client(cluster, &p).await;
    let writer_client = client_with(cluster, |c| c.prefix(&p)).await;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let hold = Duration::from_millis(40);
    let mut readers = Vec::new();
    for i in 0..4 {
        let lock = client.rwlock("res").unwrap();
        let stop = stop.clone();
        readers.push(tokio::spawn(async move {
            tokio::time::sleep(hold * i / 4).await;
            let mut n = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let g = lock.read().await.unwrap();
                tokio::time::sleep(hold).await;
                g.release().await.unwrap();
                n += 1;
            }
            n
        }));
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let writer = writer_client.rwlock("res").unwrap();
    let mut waits = Vec::new();
    for _ in 0..10 {
        let began = Instant::now();
        let g = writer
            .write_timeout(Duration::from_secs(2))
            .await
            .expect("writer served under reads");
        waits.push(began.elapsed());
        g.release().await.unwrap();
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut reads = 0;
    for r in readers {
        reads += r.await.unwrap();
    }
    let max = waits.iter().max().unwrap();
    eprintln!("writer waits under 4 overlapping readers: {waits:?}; reads {reads}");
    // bound: the longest read hold in progress (40 ms) plus hand-off slack
    assert!(*max < Duration::from_millis(400), "writer waited {max:?}");
    assert!(reads > 10, "readers made progress too");
    assert_no_keys(cluster, &p).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fences_strictly_increase_across_release_and_recreation() {
    let cluster = cluster().await;
    let p = prefix("fence");
    let client = client(cluster, &p).await;
    let lock = client.rwlock("res").unwrap();
    let mut last = 0;
    for i in 0..50 {
        let g = if i % 3 == 0 {
            lock.read().await.unwrap().fence()
        } else {
            let w = lock.write().await.unwrap();
            let f = w.fence();
            w.release().await.unwrap();
            f
        };
        assert!(g > last, "fence {g} after {last}");
        last = g;
        if i % 3 == 0 {
            // the read guard was dropped: its release runs in the background
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        if i % 10 == 5 {
            // the hash disappears and comes back
            client.redis().del::<i64, _>(lock.key()).await.unwrap();
        }
    }
    // another client (another connection) continues above
    let other = client_with(cluster, |c| c.prefix(&p)).await;
    let g = other.rwlock("res").unwrap().write().await.unwrap();
    assert!(g.fence() > last);
    g.release().await.unwrap();
    assert_no_keys(cluster, &p).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeouts_are_accurate_to_100ms() {
    let cluster = cluster().await;
    let p = prefix("timeout");
    let client = client(cluster, &p).await;
    let holder = client.rwlock("res").unwrap().write().await.unwrap();
    let lock = client.rwlock("res").unwrap();
    for ms in [50u64, 200, 700] {
        let began = Instant::now();
        let res = lock.write_timeout(Duration::from_millis(ms)).await;
        let took = began.elapsed();
        assert!(matches!(res, Err(Error::Timeout(d)) if d == Duration::from_millis(ms)));
        assert!(
            took >= Duration::from_millis(ms) && took < Duration::from_millis(ms + 100),
            "write_timeout({ms} ms) took {took:?}"
        );
        let began = Instant::now();
        let res = lock.read_timeout(Duration::from_millis(ms)).await;
        let took = began.elapsed();
        assert!(matches!(res, Err(Error::Timeout(_))));
        assert!(
            took >= Duration::from_millis(ms) && took < Duration::from_millis(ms + 100),
            "read_timeout({ms} ms) took {took:?}"
        );
    }
    // the timed-out writer left the queue: once the holder is gone the key is gone
    holder.release().await.unwrap();
    assert_no_keys(cluster, &p).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_acquires_leave_nothing_behind() {
    let cluster = cluster().await;
    let p = prefix("cancel");
    let client = client(cluster, &p).await;
    let holder = client.rwlock("res").unwrap().write().await.unwrap();
    // waiters cancelled while waiting, at various points
    for i in 0..20u64 {
        let lock = client.rwlock("res").unwrap();
        let task = tokio::spawn(async move {
            if i % 2 == 0 {
                lock.write().await.map(|_| ())
            } else {
                lock.read().await.map(|_| ())
            }
        });
        tokio::time::sleep(Duration::from_millis(i * 3)).await;
        task.abort();
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let state = client.rwlock("res").unwrap().state().await.unwrap();
    assert_eq!(state.holders.len(), 1, "{state:?}");
    assert!(
        state.waiting_writers.is_empty(),
        "cancelled writers left the queue: {state:?}"
    );
    holder.release().await.unwrap();

    // acquires on a free lock cancelled at any point, also right after the grant landed
    for i in 0..40u64 {
        let lock = client.rwlock("free").unwrap();
        let task = tokio::spawn(async move {
            let g = lock.write().await;
            std::future::pending::<()>().await;
            drop(g);
        });
        tokio::time::sleep(Duration::from_micros(i * 150)).await;
        task.abort();
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let state = client.rwlock("free").unwrap().state().await.unwrap();
    assert!(
        state.holders.is_empty() && state.waiting_writers.is_empty(),
        "{state:?}"
    );
    assert_no_keys(cluster, &p).await;
}

/// A waiter dropped while its channel's first subscribe is still under way must leave
/// the channel: the subscription is then dropped after its linger, not kept forever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_dropped_while_subscribing_leaves_no_subscription() {
    let cluster = cluster().await;
    let p = prefix("subleak");
    let client = client(cluster, &p).await;
    let mut dropped = 0;
    for i in 0..10 {
        let lock = client.rwlock(&format!("res{i}")).unwrap();
        // polled once: it joins the channel, starts the subscribe and waits for it
        match tokio::time::timeout(Duration::ZERO, lock.write()).await {
            Ok(g) => g.unwrap().release().await.unwrap(),
            Err(_) => dropped += 1,
        }
    }
    assert!(dropped > 0, "no acquire was dropped while subscribing");
    let began = Instant::now();
    while client.stats().subscriptions > 0 {
        assert!(
            began.elapsed() < Duration::from_secs(6),
            "{} channel(s) still subscribed {:?} after {dropped} dropped waiters left",
            client.stats().subscriptions,
            began.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_no_keys(cluster, &p).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watchdog_keeps_a_short_lease_alive() {
    let cluster = cluster().await;
    let p = prefix("watchdog");
    let client = client_with(cluster, |c| c.prefix(&p).lease(Duration::from_secs(2))).await;
    let other = client.rwlock("res").unwrap();
    let g = client.rwlock("res").unwrap().write().await.unwrap();
    let began = Instant::now();
    while began.elapsed() < Duration::from_secs(8) {
        assert!(
            other.try_write().await.unwrap().is_none(),
            "still held at {:?}",
            began.elapsed()
        );
        let holder = other.state().await.unwrap().holders[0].clone();
        assert!(holder.lease_left <= Duration::from_secs(2));
        // held since the grant, by the server's clock, across the renewals
        let held = holder.held_for.as_secs_f64();
        let since = began.elapsed().as_secs_f64();
        assert!(
            held >= since - 0.1 && held <= since + 1.0,
            "{held} s, {since} s"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(!g.is_lost());
    assert!(client.stats().renewal_rounds >= 8, "{:?}", client.stats());
    g.release().await.expect("still ours after 8 s");
    assert_no_keys(cluster, &p).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owned_lost_signal_tells_a_spawned_task() {
    let cluster = cluster().await;
    let p = prefix("lostsig");
    let client = client_with(cluster, |c| c.prefix(&p).lease(Duration::from_millis(900))).await;
    let lock = client.rwlock("res").unwrap();
    let g = lock.write().await.unwrap();
    // a task of its own owns the signal (and a 'static lost() future) while the guard
    // stays here
    let signal = g.lost_signal();
    let lost_future = g.lost();
    let watcher = tokio::spawn(async move {
        signal.lost().await;
        Instant::now()
    });
    let second = tokio::spawn(lost_future);
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(!watcher.is_finished(), "told lost while held");
    client.redis().del::<i64, _>(lock.key()).await.unwrap();
    let deleted = Instant::now();
    let told = tokio::time::timeout(Duration::from_secs(2), watcher)
        .await
        .expect("the task is told")
        .unwrap();
    tokio::time::timeout(Duration::from_secs(1), second)
        .await
        .expect("the moved lost() future resolves too")
        .unwrap();
    assert!(told.duration_since(deleted) <= Duration::from_millis(500));
    assert!(g.is_lost() && g.lost_signal().is_lost());
    assert!(matches!(g.release().await, Err(Error::LockLost)));
    assert_no_keys(cluster, &p).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_fires_when_the_hash_is_deleted() {
    let cluster = cluster().await;
    let p = prefix("lost");
    let client = client_with(cluster, |c| c.prefix(&p).lease(Duration::from_millis(900))).await;
    let lock = client.rwlock("res").unwrap();
    let g = lock.write().await.unwrap();
    let r = client.rwlock("other").unwrap().read().await.unwrap();
    client.redis().del::<i64, _>(lock.key()).await.unwrap();
    let deleted = Instant::now();
    tokio::time::timeout(Duration::from_secs(2), g.lost())
        .await
        .expect("lost() resolves");
    let told = deleted.elapsed();
    assert!(g.is_lost());
    assert!(
        told <= Duration::from_millis(300 + 200),
        "told after {told:?} (renewal every 300 ms)"
    );
    assert!(matches!(g.release().await, Err(Error::LockLost)));
    // an unrelated hold is untouched
    assert!(!r.is_lost());
    r.release().await.unwrap();
    assert_no_keys(cluster, &p).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notifications_off_still_waits_and_wakes() {
    let cluster = cluster().await;
    let p = prefix("nonotify");
    let client = client_with(cluster, |c| {
        c.prefix(&p)
            .notifications(false)
            .lease(Duration::from_secs(3))
    })
    .await;
    let g = client.rwlock("res").unwrap().write().await.unwrap();
    let lock = client.rwlock("res").unwrap();
    let waiter = tokio::spawn(async move {
        lock.write_timeout(Duration::from_secs(5))
            .await
            .map(|g| g.fence())
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let f = g.fence();
    g.release().await.unwrap();
    let wf = waiter.await.unwrap().expect("woken by its timer");
    assert!(wf > f);
    assert_no_keys(cluster, &p).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tagged_names_land_in_their_tags_slot() {
    let cluster = cluster().await;
    let p = prefix("tagged");
    let client = client(cluster, &p).await;
    for (name, user_key) in [
        ("orders:{42}", "orders:{42}:items"),
        ("{user:7}:profile", "{user:7}:sessions"),
        ("x{a}y{b}", "{a}"),
        ("queue-{jobs}", "stats:{jobs}"),
    ] {
        let lock = client.rwlock(name).unwrap();
        assert_eq!(lock.key(), format!("{p}:{name}"));
        let cmd = CustomCommand::new_static("CLUSTER", ClusterHash::Random, false);
        let server: u16 = client
            .redis()
            .custom(cmd, vec!["KEYSLOT", user_key])
            .await
            .expect("KEYSLOT");
        assert_eq!(lock.slot(), server, "{name} lands with {user_key}");
        let cmd = CustomCommand::new_static("CLUSTER", ClusterHash::Random, false);
        let key_slot: u16 = client
            .redis()
            .custom(cmd, vec!["KEYSLOT", lock.key()])
            .await
            .expect("KEYSLOT");
        assert_eq!(lock.slot(), key_slot);
        let g = lock.write().await.expect("write");
        let other = client.rwlock(name).unwrap();
        assert!(other.try_read().await.unwrap().is_none(), "{name} excludes");
        g.release().await.unwrap();
    }
    assert_no_keys(cluster, &p).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_with_two_upgradable_holds_stays_the_only_upgrader() {
    let cluster = cluster().await;
    let p = prefix("upg2");
    let client = client(cluster, &p).await;
    let job = client.rwlock("u").unwrap().with_owner("job-17");
    let other = client.rwlock("u").unwrap();
    let a = job.upgradable_read().await.unwrap();
    let b = job.upgradable_read().await.unwrap();
    a.release().await.unwrap();
    // job-17 still holds an upgradable read: nobody else may take one
    assert!(other.try_upgradable_read().await.unwrap().is_none());
    let w = tokio::time::timeout(Duration::from_secs(5), b.upgrade())
        .await
        .expect("the upgrade is granted at once")
        .unwrap();
    assert!(other.try_read().await.unwrap().is_none());
    w.release().await.unwrap();
    let u = other
        .try_upgradable_read()
        .await
        .unwrap()
        .expect("free now");
    u.release().await.unwrap();
    assert_no_keys(cluster, &p).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_cancelled_half_way_still_releases() {
    let cluster = cluster().await;
    let p = prefix("cancelrel");
    // a lease far longer than the test: only a real release frees the lock in time
    let client = client_with(cluster, |c| c.prefix(&p).lease(Duration::from_secs(60))).await;
    let lock = client.rwlock("c").unwrap();
    let mut freed_in = Vec::new();
    for _ in 0..5 {
        let g = lock.write().await.unwrap();
        let mut release = Box::pin(g.release());
        // polled once (a timeout polls its future before its timer), then dropped
        let _ = tokio::time::timeout(Duration::ZERO, &mut release).await;
        drop(release);
        let began = Instant::now();
        loop {
            if let Some(g) = lock.try_write().await.unwrap() {
                g.release().await.unwrap();
                break;
            }
            assert!(began.elapsed() < Duration::from_secs(5), "the hold leaked");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        freed_in.push(began.elapsed());
    }
    eprintln!("cancelled releases: freed after {freed_in:?}");
    assert_no_keys(cluster, &p).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgrade_that_times_out_keeps_the_upgradable_hold() {
    let cluster = cluster().await;
    let p = prefix("upgradetimeout");
    let client = client(cluster, &p).await;
    let lock = client.rwlock("report").unwrap();
    let up = lock.upgradable_read().await.unwrap();
    let reader = lock.read().await.unwrap();
    let began = Instant::now();
    let up = match up
        .upgrade_timeout(Duration::from_millis(300))
        .await
        .unwrap()
    {
        Ok(w) => panic!("upgraded while a reader holds: {w:?}"),
        Err(up) => up,
    };
    let took = began.elapsed();
    eprintln!("upgradetimeout: gave up after {took:?}");
    assert!(took >= Duration::from_millis(300), "{took:?}");
    assert!(took < Duration::from_millis(1_300), "{took:?}");
    // the guard still holds its upgradable read: no other owner gets one, readers enter
    // again (the pending upgrade was withdrawn)
    assert!(!up.is_lost());
    assert!(lock.try_upgradable_read().await.unwrap().is_none());
    let r2 = lock.try_read().await.unwrap().expect("readers enter again");
    let s = lock.state().await.unwrap();
    assert_eq!(s.holders.len(), 3, "{s:?}");
    r2.release().await.unwrap();
    reader.release().await.unwrap();
    // no reader left: the same guard upgrades
    let read_fence = up.fence();
    let w = match up.upgrade_timeout(Duration::from_secs(2)).await.unwrap() {
        Ok(w) => w,
        Err(_) => panic!("not upgraded with no reader left"),
    };
    assert!(w.fence() > read_fence);
    w.release().await.unwrap();
    assert_no_keys(cluster, &p).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_url_of_a_cluster_node_means_the_cluster() {
    let cluster = cluster().await;
    let p = prefix("url");
    let seed = cluster.seed_urls().remove(0);
    let seed_port = common::client_port(&cluster.nodes()[0]);
    let client = LockClient::connect(common::with_tls(
        cluster,
        LockConfig::from_url(&seed).unwrap().prefix(&p),
    ))
    .await
    .expect("a client from redis://");
    assert!(
        client.redis().is_clustered(),
        "the node said it is a cluster"
    );
    // a lock on each master: routed to its own master, granted without a redirect
    let mut foreign = None;
    for slot in [0, 8000, 16000] {
        let master = cluster.master_for_slot(slot).await.unwrap();
        let lock = common::locks_on(cluster, &client, &master, 1, "m-")
            .await
            .remove(0);
        let node = client.node_for_slot(lock.slot()).expect("routed");
        assert!(
            node.ends_with(&format!(":{}", common::client_port(&master))),
            "{node} for {master:?}"
        );
        let began = Instant::now();
        lock.write().await.unwrap().release().await.unwrap();
        assert!(
            began.elapsed() < Duration::from_millis(500),
            "{:?}",
            began.elapsed()
        );
        if common::client_port(&master) != seed_port {
            foreign = Some(lock.name().to_string());
        }
    }
    client.close().await;

    // one node on purpose: the other masters' MOVED is a typed error that says what to do,
    // at once (not a redirect followed in silence)
    let single = LockClient::connect(common::with_tls(
        cluster,
        LockConfig::single_node(&seed).unwrap().prefix(&p),
    ))
    .await
    .expect("a single-node client");
    let lock = single
        .rwlock(&foreign.expect("a master other than the seed"))
        .unwrap();
    let began = Instant::now();
    match lock.try_write().await {
        Err(Error::InvalidConfig(text)) => {
            assert!(text.contains("cluster node"), "{text}");
            assert!(text.contains("LockConfig::cluster"), "{text}");
            assert!(
                text.contains(&format!(":{seed_port}")),
                "names the node: {text}"
            );
        }
        other => panic!("a single-node client on another master's slot: {other:?}"),
    }
    assert!(
        began.elapsed() < Duration::from_secs(1),
        "{:?}",
        began.elapsed()
    );
    single.close().await;
    assert_no_keys(cluster, &p).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holders_carry_a_readable_client_name() {
    let cluster = cluster().await;
    let p = prefix("name");
    let named = client_with(cluster, |c| {
        c.prefix(&p).client_name("publisher@host-a").unwrap()
    })
    .await;
    let plain = client(cluster, &p).await;
    let a = named.rwlock("res").unwrap();
    let b = plain.rwlock("res").unwrap();
    let r1 = a.read().await.unwrap();
    let r2 = b.read().await.unwrap();
    let job = a.with_owner("job-17").read().await.unwrap();
    let state = a.state().await.unwrap();
    let mut names: Vec<Option<&str>> = state.holders.iter().map(|h| h.client_name()).collect();
    names.sort();
    let default = format!("{}@", std::process::id());
    assert_eq!(names.len(), 3, "{state:?}");
    assert_eq!(names[0], None, "the explicit owner has no client name");
    assert!(names[1].unwrap().starts_with(&default), "{names:?}");
    assert_eq!(names[2], Some("publisher@host-a"));
    assert!(
        r1.owner().starts_with("publisher@host-a/"),
        "{}",
        r1.owner()
    );
    // a name changes nothing about ownership: two handles of one name still exclude
    let other = named.rwlock("res").unwrap();
    let w = other.try_write().await.unwrap();
    assert!(w.is_none(), "readers of the same client name hold");
    for g in [r1, r2, job] {
        g.release().await.unwrap();
    }
    let w1 = a.write().await.unwrap();
    assert!(
        other.try_write().await.unwrap().is_none(),
        "one name, two writers"
    );
    w1.release().await.unwrap();
    named.close().await;
    plain.close().await;
    assert_no_keys(cluster, &p).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_write_releases_after_success_error_and_panic() {
    let cluster = cluster().await;
    let p = prefix("with");
    let client = client(cluster, &p).await;
    let lock = client.rwlock("res").unwrap();
    let other = client.rwlock("res").unwrap();
    let timeout = Duration::from_secs(5);

    let before = lock.state().await.unwrap().fence.unwrap_or(0);
    let (fence, held) = lock
        .with_write(timeout, |fence, lost| {
            let other = other.clone();
            async move {
                assert!(!lost.is_lost());
                (fence, other.try_read().await.unwrap().is_none())
            }
        })
        .await
        .unwrap()
        .held()
        .unwrap();
    assert!(fence > before && held, "held under fence {fence}");
    assert!(
        other.try_write().await.unwrap().is_some(),
        "released after success"
    );

    let failed: Result<(), &str> = lock
        .with_write(timeout, |_, _| async { Err("the work failed") })
        .await
        .unwrap()
        .held()
        .unwrap();
    assert_eq!(failed, Err("the work failed"));
    assert!(
        other.try_write().await.unwrap().is_some(),
        "released after an error"
    );

    let panicking = lock.clone();
    let task = tokio::spawn(async move {
        panicking
            .with_read(timeout, |_, _| async { panic!("the work panicked") })
            .await
    });
    assert!(task.await.unwrap_err().is_panic());
    // released in the background by the dropped guard, not after a lease (30 s)
    let began = Instant::now();
    let w = other.write_timeout(Duration::from_secs(3)).await.unwrap();
    assert!(
        began.elapsed() < Duration::from_secs(1),
        "{:?}",
        began.elapsed()
    );
    w.release().await.unwrap();

    // a hold lost while the work ran: LockLost, not the work's result
    let quick = client_with(cluster, |c| c.prefix(&p).lease(Duration::from_millis(900))).await;
    let lock = quick.rwlock("res").unwrap();
    let lost = lock
        .with_write(timeout, |_, lost| {
            let (redis, key) = (quick.redis().clone(), lock.key().to_string());
            async move {
                redis.del::<i64, _>(key).await.unwrap();
                tokio::time::timeout(Duration::from_secs(2), lost.lost())
                    .await
                    .expect("told");
                "done"
            }
        })
        .await
        .expect("the work ran");
    // the loss is told, and what the work returned is kept (a commit refused by its
    // fence, say, is the caller's to see)
    assert!(lost.was_lost());
    assert_eq!(lost.value(), &"done");
    assert!(matches!(lost.held(), Err(Error::LockLost)));
    quick.close().await;
    client.close().await;
    assert_no_keys(cluster, &p).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_release_wakes_a_waiter_raises_the_fence_and_the_holder_learns_it() {
    let cluster = cluster().await;
    let p = prefix("break");
    // the stuck holder renews every 300 ms
    let stuck = client_with(cluster, |c| c.prefix(&p).lease(Duration::from_millis(900))).await;
    let next = client(cluster, &p).await;
    let operator = client(cluster, &p).await;
    let w = stuck.rwlock("res").unwrap().write().await.unwrap();
    // a fenced resource: it refuses fences below the highest it accepted
    let mut highest = w.fence();
    let waiter = {
        let lock = next.rwlock("res").unwrap();
        tokio::spawn(async move {
            let g = lock.write().await.unwrap();
            (Instant::now(), g)
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiter.is_finished());

    let began = Instant::now();
    let broken = operator.force_release("res", None).await.unwrap();
    assert_eq!(broken.holds_removed, 1);
    assert!(broken.fence.unwrap() > w.fence(), "the fence was raised");
    let (granted, g) = waiter.await.unwrap();
    let woke = granted.duration_since(began);
    eprintln!("the waiter woke {woke:?} after force_release was called");
    assert!(
        woke < Duration::from_millis(100),
        "the waiter woke after {woke:?}"
    );
    assert!(g.fence() > broken.fence.unwrap());
    // the next holder writes; the broken holder's late write is refused by its fence
    assert!(g.fence() >= highest);
    highest = g.fence();
    assert!(
        w.fence() < highest,
        "a late write under the old fence is refused"
    );
    // and the broken holder is told at its next renewal
    tokio::time::timeout(Duration::from_secs(2), w.lost())
        .await
        .expect("told lost");
    assert!(matches!(w.release().await, Err(Error::LockLost)));
    g.release().await.unwrap();

    // one owner's holds only
    let job = stuck.rwlock("shared").unwrap().with_owner("job-17");
    let r1 = job.read().await.unwrap();
    let r2 = job.read().await.unwrap();
    let other = next.rwlock("shared").unwrap().read().await.unwrap();
    let broken = operator
        .force_release("shared", Some("job-17"))
        .await
        .unwrap();
    assert_eq!(broken.holds_removed, 2);
    let s = next.rwlock("shared").unwrap().state().await.unwrap();
    assert_eq!(s.holders.len(), 1);
    assert_eq!(s.holders[0].owner, other.owner());
    drop((r1, r2));
    other.release().await.unwrap();
    // nothing held: nothing to remove; bad input: typed errors
    assert_eq!(
        operator
            .force_release("shared", None)
            .await
            .unwrap()
            .holds_removed,
        0
    );
    assert!(matches!(
        operator.force_release("", None).await,
        Err(Error::InvalidName(_))
    ));
    assert!(matches!(
        operator.force_release("x", Some("a b")).await,
        Err(Error::InvalidOwner(_))
    ));
    for c in [stuck, next, operator] {
        c.close().await;
    }
    assert_no_keys(cluster, &p).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mode_chosen_at_run_time_gets_the_guard_of_that_mode() {
    let cluster = cluster().await;
    let p = prefix("any-mode");
    let client = client(cluster, &p).await;
    let lock = client.rwlock("res").unwrap();
    let other = client.rwlock("res").unwrap();
    for mode in [Mode::Read, Mode::Upgradable, Mode::Write] {
        let g = lock.acquire(mode).await.unwrap();
        assert_eq!(g.mode(), mode);
        // as the mode's own guard: a writer is excluded by any, a reader only by write
        assert!(other.try_write().await.unwrap().is_none(), "{mode:?}");
        let reader = other.try_acquire(Mode::Read).await.unwrap();
        assert_eq!(reader.is_some(), mode != Mode::Write, "{mode:?}");
        if let Some(r) = reader {
            r.release().await.unwrap();
        }
        let busy = other
            .acquire_timeout(Mode::Write, Duration::ZERO)
            .await
            .unwrap_err();
        assert!(matches!(busy, Error::Timeout(_)), "{busy:?}");
        g.release().await.unwrap();
    }
    let g = lock
        .acquire_timeout(Mode::Write, Duration::ZERO)
        .await
        .expect("a free lock is granted within a zero timeout");
    assert!(matches!(g, AnyGuard::Write(_)));
    g.release().await.unwrap();
    client.close().await;
}
