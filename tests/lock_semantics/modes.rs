//! Who may hold with whom: readers share and writers exclude, one owner's holds are
//! reentrant, a writer is not starved by overlapping readers, and a mode chosen at run
//! time gets the guard of that mode.

use std::time::{Duration, Instant};

use cluster_rwlock::{AnyGuard, Error, Mode};
use fred::prelude::*;

use crate::common::{assert_no_keys, client, client_with, cluster, prefix};

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
    let lock = client.rwlock("res").unwrap().with_owner("owner-a").unwrap();
    let same_owner = client.rwlock("res").unwrap().with_owner("owner-a").unwrap();
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
