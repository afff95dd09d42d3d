//! The short windows in which a holder could believe a hold that the server no longer
//! gives it, one test each: a downgrade, a hand-off message, a writer that died while
//! queued, a slot half migrated, a waiting upgradable reader, a release resent after no
//! answer, a pending upgrade among several upgradable holds, a queued writer whose
//! refresh was not confirmed. Tests with faults start a cluster of their own.

mod common;

use std::time::{Duration, Instant};

use cluster_rwlock::{Error, LockClient};
use cluster_rwlock_testkit::TestCluster;
use common::{assert_no_keys, client_with, cluster, prefix};
use fred::prelude::*;

/// A downgrade is not confirmed by the replicas, so the hold it makes is believed no
/// longer than the hold it came from: while the replica is cut off (renewals not
/// confirmed), the read hold made from a write hold is lost when the write hold would
/// have been, not a lease after the downgrade.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_downgrade_is_believed_no_longer_than_the_hold_it_came_from() {
    let cluster = TestCluster::start().await.expect("cluster");
    let p = prefix("downgrade-belief");
    // long enough that the cut is in place well before the first renewal (lease/3)
    let lease = Duration::from_secs(8);
    let client = client_with(&cluster, |c| c.prefix(&p).lease(lease)).await;
    let lock = client.rwlock("doc").unwrap();
    let master = cluster.master_for_slot(lock.slot()).await.unwrap();
    let sent = Instant::now();
    let write = lock.write().await.unwrap();
    // the belief: a lease less the default margin (a quarter) from the send time
    let believed_until = sent + lease * 3 / 4;
    cluster
        .cut_replication(master.index)
        .await
        .expect("cut_replication (needs iptables and root)");
    let cut_after = sent.elapsed();
    assert!(cut_after < lease / 3, "the cut took {cut_after:?}");
    // late in the belief, after a renewal the replica did not confirm
    tokio::time::sleep_until((sent + Duration::from_millis(5_000)).into()).await;
    assert!(!write.is_lost());
    let read = write.downgrade().await.expect("downgrade");
    let lost = tokio::time::timeout(Duration::from_secs(12), read.lost()).await;
    let at = sent.elapsed();
    cluster.restore_replication(master.index).await.unwrap();
    assert!(lost.is_ok(), "the read hold was never told lost");
    assert!(
        sent + at <= believed_until + Duration::from_millis(500),
        "the read hold was believed until {at:?}, past the write hold's belief ({:?})",
        believed_until - sent
    );
    drop(read);
    client.close().await;
}

/// A release message that names a waiter's hold is not believed alone, in either
/// durability mode: a message forged (or published by a master that lost the slot)
/// while another owner holds grants nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_off_message_alone_grants_nothing() {
    let cluster = cluster().await;
    let p = prefix("forged-hand-off");
    for master_only in [true, false] {
        let client = client_with(cluster, |c| {
            let c = c.prefix(&p);
            if master_only {
                c.durability(cluster_rwlock::Durability::MasterOnly)
            } else {
                c
            }
        })
        .await;
        let name = format!("handed-{master_only}");
        let holder = client.rwlock(&name).unwrap().with_owner("holder").unwrap();
        let waiter = client.rwlock(&name).unwrap().with_owner("waiter").unwrap();
        let held = holder.write().await.unwrap();
        let wait = tokio::spawn(async move { waiter.write_timeout(Duration::from_secs(2)).await });
        // the waiter's place in the queue names the hold it would be handed
        let redis = client.redis().clone();
        let mut entry: Option<String> = None;
        for _ in 0..100 {
            entry = redis.hget(holder.key(), "q:waiter").await.unwrap();
            if entry.is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let entry = entry.expect("the waiter queued");
        let id = entry.split(' ').nth(2).expect("hold id");
        // every server of the test bed has sharded pub/sub (Redis 7, Valkey)
        let cmd = fred::types::CustomCommand::new_static(
            "SPUBLISH",
            fred::types::ClusterHash::FirstKey,
            false,
        );
        let _: i64 = redis
            .custom(
                cmd,
                vec![holder.channel().to_string(), format!("g waiter {id} 1")],
            )
            .await
            .unwrap();
        let got = wait.await.unwrap();
        assert!(
            matches!(got, Err(Error::Timeout(_))),
            "master_only {master_only}: a message alone made a second writer: {got:?}"
        );
        assert!(!held.is_lost());
        held.release().await.unwrap();
        client.close().await;
    }
    assert_no_keys(cluster, &p).await;
}

/// A writer whose process died while it was queued is handed the lock with the deadline
/// its queue entry had, not a fresh lease: the lock is free again within a lease of its
/// last attempt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_that_died_while_queued_blocks_no_longer_than_its_queue_entry() {
    let cluster = cluster().await;
    let p = prefix("ghost-writer");
    let lease = Duration::from_secs(3);
    let config = common::config(cluster).prefix(&p).lease(lease);
    let client = LockClient::connect(config.clone()).await.unwrap();
    let t0 = Instant::now();
    let holder = client.rwlock("ghost").unwrap().write().await.unwrap();
    // the ghost: a writer in a runtime of its own, queued, then the runtime is gone (no
    // task of it runs again: no withdrawal, no refresh)
    let ghost_config = config;
    let (queued_tx, queued_rx) = std::sync::mpsc::channel();
    let ghost = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let c = LockClient::connect(ghost_config).await.unwrap();
            let lock = c.rwlock("ghost").unwrap();
            let w = tokio::spawn(async move { lock.write().await });
            tokio::time::sleep(Duration::from_millis(300)).await;
            queued_tx.send(Instant::now()).unwrap();
            std::mem::forget(w);
            std::mem::forget(c);
        });
        rt.shutdown_background();
    });
    let last_attempt = queued_rx.recv().unwrap() - Duration::from_millis(300);
    ghost.join().unwrap();
    // the holder keeps it most of a lease, then gives it back: it is handed to the ghost
    tokio::time::sleep_until((t0 + lease * 8 / 10).into()).await;
    holder.release().await.unwrap();
    let next = client
        .rwlock("ghost")
        .unwrap()
        .write_timeout(lease * 3)
        .await
        .expect("the lock comes free");
    let free_at = Instant::now();
    eprintln!(
        "ghost: queued {:?}, released {:?}, next writer {:?}",
        last_attempt - t0,
        lease * 8 / 10,
        free_at - t0
    );
    assert!(
        free_at <= last_attempt + lease + Duration::from_millis(1_200),
        "the ghost's hold lasted past its queue entry: free {:?} after its last attempt",
        free_at - last_attempt
    );
    next.release().await.unwrap();
    client.close().await;
}

/// Grants, renewals and releases of a lock whose slot is half migrated follow `ASK` to
/// the importing node (`ASKING` right before the script, in the confirmed pipeline).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_follow_ask_while_the_slot_migrates() {
    let cluster = TestCluster::start().await.expect("cluster");
    let p = prefix("ask");
    let lease = Duration::from_secs(3);
    let client = client_with(&cluster, |c| c.prefix(&p).lease(lease)).await;
    let other = client_with(&cluster, |c| c.prefix(&p).lease(lease)).await;
    let lock = client.rwlock("moving").unwrap();
    let held = lock.read().await.unwrap();
    let from = cluster.master_for_slot(lock.slot()).await.unwrap();
    let mut to = None;
    for s in [0u16, 5_461, 10_923] {
        let m = cluster.master_for_slot(s).await.unwrap();
        if m.port != from.port {
            to = Some(m);
            break;
        }
    }
    let to = to.expect("another master");
    let migration = cluster
        .start_migration(lock.slot(), to.index)
        .await
        .unwrap();
    // the lock's hash moves: the source now answers ASK for it
    assert!(cluster.migrate_keys(&migration, usize::MAX).await.unwrap() >= 1);
    // a grant (confirmed), a refusal, renewals over two periods, a release
    let began = Instant::now();
    let second = other
        .rwlock("moving")
        .unwrap()
        .read_timeout(Duration::from_secs(3))
        .await
        .expect("a read grant through ASK");
    eprintln!("ask: read granted through ASK in {:?}", began.elapsed());
    assert!(
        other
            .rwlock("moving")
            .unwrap()
            .try_write()
            .await
            .unwrap()
            .is_none(),
        "readers hold"
    );
    tokio::time::sleep(lease * 3 / 4).await;
    assert!(!held.is_lost(), "a renewal through ASK failed");
    assert!(!second.is_lost());
    second.release().await.expect("a release through ASK");
    held.release().await.expect("a release through ASK");
    let w = lock
        .write_timeout(Duration::from_secs(3))
        .await
        .expect("a write grant through ASK");
    cluster.finish_migration(&migration).await.unwrap();
    w.release().await.unwrap();
    client.close().await;
    other.close().await;
}

/// An upgradable reader that waits behind another owner's upgradable hold sleeps until
/// that hold is given back: its own attempts wake no one (they used to wake it at once,
/// over and over), and the holder's release wakes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgradable_waiter_sleeps_until_the_upgradable_hold_is_released() {
    let cluster = cluster().await;
    let p = prefix("upgradable-spin");
    let client = client_with(cluster, |c| c.prefix(&p).lease(Duration::from_secs(3))).await;
    let waiter_client = client_with(cluster, |c| c.prefix(&p).lease(Duration::from_secs(3))).await;
    let held = client.rwlock("u").unwrap().upgradable_read().await.unwrap();
    let lock = waiter_client.rwlock("u").unwrap();
    let before = waiter_client.stats().attempts;
    let r = lock
        .upgradable_read_timeout(Duration::from_millis(1_500))
        .await;
    assert!(matches!(r, Err(Error::Timeout(_))), "{r:?}");
    let attempts = waiter_client.stats().attempts - before;
    assert!(
        attempts <= 4,
        "{attempts} attempts in 1.5 s: the waiter spun"
    );
    // woken by the release
    let wait = tokio::spawn(async move {
        let g = lock.upgradable_read_timeout(Duration::from_secs(5)).await;
        (g, Instant::now())
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let released = Instant::now();
    held.release().await.unwrap();
    let (g, at) = wait.await.unwrap();
    let g = g.expect("granted after the release");
    assert!(
        at - released < Duration::from_millis(400),
        "woken {:?} after the release",
        at - released
    );
    g.release().await.unwrap();
    client.close().await;
    waiter_client.close().await;
    assert_no_keys(cluster, &p).await;
}

/// A release whose first sending got no answer is sent again; when the second finds
/// nothing, the first may have released the hold, or the hold was already gone (here:
/// removed by a forced release): the holder is told it may have lost it, never `Ok`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resent_release_that_finds_nothing_is_not_reported_as_released() {
    let cluster = TestCluster::start().await.expect("cluster");
    let p = prefix("resent-release");
    let client = client_with(&cluster, |c| {
        c.prefix(&p)
            .lease(Duration::from_secs(20))
            .command_timeout(Duration::from_millis(300))
    })
    .await;
    let admin = client_with(&cluster, |c| c.prefix(&p)).await;
    let lock = client.rwlock("gone").unwrap();
    let held = lock.write().await.unwrap();
    let master = cluster.master_for_slot(lock.slot()).await.unwrap();
    // removed behind the holder's back (it learns at its next renewal, seconds away)
    let removed = admin.force_release("gone", None).await.unwrap();
    assert_eq!(removed.holds_removed, 1);
    // the first sending of the release gets no answer in time: the node hangs
    cluster.pause(master.index).await.unwrap();
    let release = tokio::spawn(held.release());
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    cluster.unpause(master.index).await.unwrap();
    let r = release.await.unwrap();
    assert!(matches!(r, Err(Error::LockLost)), "{r:?}");
    client.close().await;
    admin.close().await;
}

/// An owner with two upgradable holds (an explicit owner token) upgrades one of them
/// while a reader holds: when the reader leaves, that hold becomes the write hold, and
/// the other stays as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pending_upgrade_converts_the_upgradable_hold_that_asked() {
    let cluster = cluster().await;
    let p = prefix("pending-upgrade");
    let lease = Duration::from_secs(3);
    let client = client_with(cluster, |c| c.prefix(&p).lease(lease)).await;
    let lock = client.rwlock("two-u").unwrap().with_owner("twice").unwrap();
    let first = lock.upgradable_read().await.unwrap();
    let second = lock.upgradable_read().await.unwrap();
    let reader = client.rwlock("two-u").unwrap().read().await.unwrap();
    let upgrade = tokio::spawn(second.upgrade());
    tokio::time::sleep(Duration::from_millis(300)).await;
    reader.release().await.unwrap();
    let write = upgrade.await.unwrap().expect("upgraded");
    // renewals over a period: the first upgradable hold is still there
    tokio::time::sleep(lease / 2).await;
    assert!(!first.is_lost(), "the other upgradable hold was taken");
    assert!(!write.is_lost());
    let state = client.rwlock("two-u").unwrap().state().await.unwrap();
    let holder = &state.holders[0];
    assert_eq!((holder.write_holds, holder.count), (1, 2), "{state:?}");
    write.release().await.unwrap();
    first.release().await.unwrap();
    client.close().await;
    assert_no_keys(cluster, &p).await;
}

/// A queued writer whose refresh the replica did not confirm keeps its place: it made
/// no grant, only its place, which it keeps on the master (first come, first served).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_writer_keeps_its_place_when_its_refresh_is_not_confirmed() {
    let cluster = TestCluster::start().await.expect("cluster");
    let p = prefix("fifo-under-lag");
    let lease = Duration::from_secs(6);
    let client = client_with(&cluster, |c| c.prefix(&p).lease(lease)).await;
    let lock = client.rwlock("fifo").unwrap();
    let master = cluster.master_for_slot(lock.slot()).await.unwrap();
    let t0 = Instant::now();
    let holder = lock.write().await.unwrap();
    let at = |ms: u64| tokio::time::sleep_until((t0 + Duration::from_millis(ms)).into());
    let order = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let writer = |who: &'static str| {
        // owners of their own: one owner has one place in the queue
        let (lock, order) = (
            client.rwlock("fifo").unwrap().with_owner(who).unwrap(),
            order.clone(),
        );
        async move {
            let g = lock.write_timeout(Duration::from_secs(20)).await;
            eprintln!("fifo: {who} {:?}", g.as_ref().map(|g| g.fence()));
            order.lock().unwrap().push(who);
            if let Ok(g) = g {
                tokio::time::sleep(Duration::from_millis(50)).await;
                let _ = g.release().await;
            }
        }
    };
    at(200).await;
    let first = tokio::spawn(writer("first"));
    at(1_000).await;
    let second = tokio::spawn(writer("second"));
    // the first writer's refresh (a period after it queued) falls in the cut; the
    // second's (a period after it queued) after it
    at(1_800).await;
    cluster
        .cut_replication(master.index)
        .await
        .expect("cut_replication (needs iptables and root)");
    eprintln!("fifo: cut at {:?}", t0.elapsed());
    at(2_900).await;
    cluster.restore_replication(master.index).await.unwrap();
    eprintln!("fifo: restored at {:?}", t0.elapsed());
    at(3_800).await;
    holder.release().await.unwrap();
    first.await.unwrap();
    second.await.unwrap();
    assert_eq!(*order.lock().unwrap(), ["first", "second"]);
    client.close().await;
}

/// An upgrade whose grant the replica did not confirm is undone (the write hold turns
/// back into the upgradable hold) before it is tried again, so that the next attempt
/// finds its upgradable hold: once the replica is back, the upgrade is granted and the
/// guard was never lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unconfirmed_upgrade_is_undone_before_it_is_tried_again() {
    let cluster = TestCluster::start().await.expect("cluster");
    let p = prefix("upgrade-undo");
    let client = client_with(&cluster, |c| c.prefix(&p).lease(Duration::from_secs(10))).await;
    let lock = client.rwlock("up").unwrap();
    let master = cluster.master_for_slot(lock.slot()).await.unwrap();
    let up = lock.upgradable_read().await.unwrap();
    cluster
        .cut_replication(master.index)
        .await
        .expect("cut_replication (needs iptables and root)");
    let upgrade = tokio::spawn(up.upgrade_timeout(Duration::from_secs(6)));
    // a few attempts granted and undone
    tokio::time::sleep(Duration::from_millis(1_800)).await;
    cluster.restore_replication(master.index).await.unwrap();
    let write = match upgrade.await.unwrap() {
        Ok(Ok(write)) => write,
        Ok(Err(_)) => panic!("the upgrade timed out"),
        Err(e) => panic!("the upgrade failed: {e:?}"),
    };
    assert!(!write.is_lost());
    let state = lock.state().await.unwrap();
    assert_eq!(state.holders.len(), 1, "{state:?}");
    assert_eq!(
        (state.holders[0].write_holds, state.holders[0].count),
        (1, 1),
        "{state:?}"
    );
    write.release().await.unwrap();
    client.close().await;
}

/// A client paused past its command timeout (a stopped process, a blocked runtime) is
/// not a silent node: the reply that most likely came meanwhile is taken, where the
/// timer alone would have called the node unavailable. Here the whole client is one
/// current-thread runtime, blocked for 600 ms right after a call with a 100 ms timeout
/// was made.
#[test]
fn a_client_paused_past_its_timeout_takes_the_reply_that_came() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let cluster = cluster().await;
        let p = prefix("stalled-client");
        let client = client_with(cluster, |c| {
            c.prefix(&p).command_timeout(Duration::from_millis(100))
        })
        .await;
        let lock = client.rwlock("doc").unwrap();
        for round in 0..3 {
            let call = {
                let lock = lock.clone();
                tokio::spawn(async move { lock.state().await })
            };
            // the call starts (and its timer with it), then the client stops
            tokio::task::yield_now().await;
            std::thread::sleep(Duration::from_millis(600));
            let state = call.await.unwrap();
            assert!(state.is_ok(), "round {round}: {state:?}");
        }
        client.close().await;
    });
}
