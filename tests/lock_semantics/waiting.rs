//! Waiting and cancelling: timeouts accurate to 100 ms, cancelled acquires and releases
//! leave nothing behind, a waiter dropped while subscribing leaves no subscription, and
//! waiters wake without notifications too.

use std::time::{Duration, Instant};

use cluster_rwlock::Error;

use crate::common::{assert_no_keys, client, client_with, cluster, prefix};

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

/// Writers back to back cannot starve a reader: it waits only for the writers that came
/// before it (phase-fair), never for those that come while it waits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writers_back_to_back_do_not_starve_a_reader() {
    let cluster = cluster().await;
    let p = prefix("phase-fair");
    let client = client(cluster, &p).await;
    let until = Instant::now() + Duration::from_secs(3);
    let mut writers = Vec::new();
    for _ in 0..3 {
        let lock = client.rwlock("res").unwrap();
        writers.push(tokio::spawn(async move {
            let mut writes = 0u32;
            while Instant::now() < until {
                let w = lock.write().await.unwrap();
                tokio::time::sleep(Duration::from_millis(5)).await;
                w.release().await.unwrap();
                writes += 1;
            }
            writes
        }));
    }
    // the writers are under way: the queue is never empty from now on
    tokio::time::sleep(Duration::from_millis(200)).await;
    let lock = client.rwlock("res").unwrap();
    let (mut reads, mut longest) = (0u32, Duration::ZERO);
    while Instant::now() < until {
        let began = Instant::now();
        let r = lock.read_timeout(Duration::from_secs(2)).await;
        let waited = began.elapsed();
        let r = r.unwrap_or_else(|e| panic!("read {reads} after {waited:?}: {e}"));
        longest = longest.max(waited);
        r.release().await.unwrap();
        reads += 1;
    }
    let mut writes = 0;
    for w in writers {
        writes += w.await.unwrap();
    }
    eprintln!("{reads} reads (longest wait {longest:?}), {writes} writes");
    assert!(reads >= 10, "{reads} reads in 2.8 s");
    assert!(writes >= 30, "{writes} writes in 3 s");
    // at most the three writers ahead of it, each ~5 ms, plus round trips and noise
    assert!(
        longest < Duration::from_secs(1),
        "a read waited {longest:?}"
    );
    assert_no_keys(cluster, &p).await;
}

/// A first attempt is always made: a fresh client (no subscription yet, not even a
/// subscriber connection) asking with a zero or 1 ms timeout for free locks whose
/// channels it never subscribed is granted each of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zero_timeout_on_a_free_lock_never_subscribed_is_granted() {
    let cluster = cluster().await;
    let p = prefix("first-attempt");
    for round in 0..3 {
        let fresh = client(cluster, &p).await;
        for i in 0..8 {
            let lock = fresh.rwlock(&format!("free-{round}-{i}")).unwrap();
            let timeout = if i % 2 == 0 {
                Duration::ZERO
            } else {
                Duration::from_millis(1)
            };
            let g = lock
                .write_timeout(timeout)
                .await
                .unwrap_or_else(|e| panic!("round {round}, lock {i}: {e}"));
            g.release().await.unwrap();
        }
        fresh.close().await;
    }
    assert_no_keys(cluster, &p).await;
}
