//! Conversions: a downgrade lets readers in but no writer, an owner with two upgradable
//! holds stays the only upgrader, an upgrade that times out keeps the upgradable hold.

use std::time::{Duration, Instant};

use cluster_rwlock::{LockClient, Mode};

use crate::common::{assert_no_keys, client, cluster, prefix};

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
    // the queued writer keeps new readers out (they came after it)...
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
async fn an_owner_with_two_upgradable_holds_stays_the_only_upgrader() {
    let cluster = cluster().await;
    let p = prefix("upg2");
    let client = client(cluster, &p).await;
    let job = client.rwlock("u").unwrap().with_owner("job-17").unwrap();
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

/// An upgrade cancelled at any point (a timeout around `upgrade()` that fires while its
/// script or its confirmation is on the wire, or before it was sent) leaves no hold: the
/// upgradable hold and any write hold the upgrade was granted are both given back, and
/// another client is granted the lock within a moment, not after a lease (30 s here).
/// Half of the tries have a second reader, so that the upgrade is left pending and the
/// cancel has to withdraw it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_upgrade_leaves_no_hold() {
    let cluster = cluster().await;
    let p = prefix("up-cancel");
    let client = client(cluster, &p).await;
    let other = client_other(cluster, &p).await;
    let lock = client.rwlock("doc").unwrap();
    let theirs = other.rwlock("doc").unwrap();
    for i in 0..40u64 {
        // 0 to ~4 ms: from a timeout that fires before the first poll's send returns to
        // one that fires while the WAIT is on the wire
        let cancel_after = Duration::from_micros((i * 997) % 4_000);
        let up = lock.upgradable_read().await.unwrap();
        let reader = if i % 2 == 1 {
            Some(theirs.read().await.unwrap())
        } else {
            None
        };
        let _ = tokio::time::timeout(cancel_after, up.upgrade()).await;
        drop(reader);
        let started = Instant::now();
        let w = loop {
            if let Some(w) = theirs.try_write().await.unwrap() {
                break w;
            }
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "try {i} (cancelled after {cancel_after:?}): the lock is still held: {:?}",
                lock.state().await
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        w.release().await.unwrap();
    }
    client.close().await;
    other.close().await;
    assert_no_keys(cluster, &p).await;
}

/// A second client of the same prefix (another process, as far as the lock can tell).
async fn client_other(cluster: &cluster_rwlock_testkit::TestCluster, p: &str) -> LockClient {
    client(cluster, p).await
}
