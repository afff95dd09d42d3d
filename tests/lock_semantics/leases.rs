//! Leases and fences: fences only grow, the watchdog keeps a short lease alive, a lost
//! hold is told (to the guard and to a spawned task), and `force_release` wakes a waiter,
//! raises the fence and tells the holder.

use std::time::{Duration, Instant};

use cluster_rwlock::Error;
use fred::prelude::*;

use crate::common::{assert_no_keys, client, client_with, cluster, prefix};

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

/// A lease four times shorter than the test is renewed all along. The lease is 3 s: its
/// renewals come every second, and it lapses only if no renewal is served for 2 s, the
/// test bed's `cluster-node-timeout`: a node (or this process) stalled that long is a
/// fault, which this test is not about (a 2 s lease, whose renewals had 1.3 s to spare,
/// was once found lapsed on a loaded machine). Should it lapse all the same, the failure
/// says whether the holder was told, and what the renewals did.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watchdog_keeps_a_short_lease_alive() {
    let cluster = cluster().await;
    let p = prefix("watchdog");
    let lease = Duration::from_secs(3);
    let client = client_with(cluster, |c| c.prefix(&p).lease(lease)).await;
    let other = client.rwlock("res").unwrap();
    let g = client.rwlock("res").unwrap().write().await.unwrap();
    let began = Instant::now();
    while began.elapsed() < lease * 4 {
        assert!(
            other.try_write().await.unwrap().is_none(),
            "still held at {:?}",
            began.elapsed()
        );
        let state = other.state().await.unwrap();
        let Some(holder) = state.holders.first() else {
            panic!(
                "no holder at {:?} (the guard told lost: {}; {:?})",
                began.elapsed(),
                g.is_lost(),
                client.stats()
            );
        };
        assert!(holder.lease_left <= lease);
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
    g.release().await.expect("still ours after four leases");
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
    let job = stuck
        .rwlock("shared")
        .unwrap()
        .with_owner("job-17")
        .unwrap();
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

/// A lock handle with a lease of its own: its holds carry that lease on the server, are
/// renewed at its pace (a hold of the client's longer lease is not), and a lost hold is
/// told within a renewal period of ITS lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_handle_with_its_own_lease_is_renewed_and_told_at_its_pace() {
    let cluster = cluster().await;
    let p = prefix("lease-per-lock");
    let client = client(cluster, &p).await;
    let operator = client_with(cluster, |c| c.prefix(&p)).await;
    let default = client.config().get_lease();
    assert_eq!(default, Duration::from_secs(30));
    let long = client.rwlock("long").unwrap();
    let short = client
        .rwlock("short")
        .unwrap()
        .with_lease(Duration::from_millis(600))
        .unwrap();
    assert_eq!(
        (long.lease(), short.lease()),
        (default, Duration::from_millis(600))
    );
    let l = long.write().await.unwrap();
    let began = Instant::now();
    let g = short.write().await.unwrap();
    // several short leases go by: renewed every 200 ms, the hold stays
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(!g.is_lost() && !l.is_lost());
    let s = short.state().await.unwrap();
    assert_eq!(s.holders[0].lease, Duration::from_millis(600));
    assert!(
        s.holders[0].renewed_ago < Duration::from_millis(450),
        "{:?}",
        s.holders[0]
    );
    // the client's lease is renewed at its own pace, not the short one's
    let s = long.state().await.unwrap();
    assert_eq!(s.holders[0].lease, default);
    assert!(
        s.holders[0].renewed_ago + Duration::from_millis(100) >= began.elapsed(),
        "{:?}",
        s.holders[0]
    );
    // broken: told within a period of the short lease, not of the client's (10 s)
    operator.force_release("short", None).await.unwrap();
    tokio::time::timeout(Duration::from_millis(900), g.lost())
        .await
        .expect("told at the short lease's pace");
    assert!(matches!(g.release().await, Err(Error::LockLost)));
    // a lease the configuration would refuse is refused here too
    for bad in [Duration::from_millis(10), Duration::from_secs(100_000)] {
        assert!(matches!(long.with_lease(bad), Err(Error::InvalidConfig(_))));
    }
    l.release().await.unwrap();
    for c in [client, operator] {
        c.close().await;
    }
    assert_no_keys(cluster, &p).await;
}

/// Breaking a whole client (etcd's lease revoke): its hold AND its other task's place in
/// the queue go, so the lock is handed to another client's waiter instead of back to the
/// stuck process; the fence is raised; another client's holds stay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn breaking_a_client_removes_its_holds_and_its_places_in_the_queue() {
    let cluster = cluster().await;
    let p = prefix("break-client");
    let stuck = client_with(cluster, |c| {
        c.prefix(&p)
            .client_name("stuck@host-a")
            .lease(Duration::from_secs(3))
    })
    .await;
    let other = client_with(cluster, |c| c.prefix(&p).client_name("fine@host-b")).await;
    let operator = client(cluster, &p).await;
    let w = stuck.rwlock("orders").unwrap().write().await.unwrap();
    let stuck_waiter = {
        let lock = stuck.rwlock("orders").unwrap();
        tokio::spawn(async move { lock.write_timeout(Duration::from_secs(20)).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let other_waiter = {
        let lock = other.rwlock("orders").unwrap();
        tokio::spawn(async move { lock.write().await.unwrap() })
    };
    let lock = operator.rwlock("orders").unwrap();
    let mut seen = lock.state().await.unwrap();
    for _ in 0..50 {
        if seen.waiting_writers.len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        seen = lock.state().await.unwrap();
    }
    assert_eq!(seen.waiting_writers.len(), 2, "{seen:?}");
    // the dry run's question: who goes, and who would be next
    let next = seen
        .waiting_writers
        .iter()
        .find(|o| !o.starts_with("stuck@host-a/"))
        .cloned();
    let broken = operator
        .break_client("orders", "stuck@host-a")
        .await
        .unwrap();
    assert_eq!((broken.holds_removed, broken.places_removed), (1, 1));
    assert!(broken.fence.unwrap() > w.fence());
    // the stuck client's waiter lost its place: it stops, told it was broken, rather
    // than take a new place at the tail
    let late = tokio::time::timeout(Duration::from_secs(1), stuck_waiter)
        .await
        .expect("the broken client's waiter stops at once")
        .unwrap();
    match late {
        Err(Error::Broken { client }) => assert_eq!(client, "stuck@host-a"),
        other => panic!("the broken client's waiter: {other:?}"),
    }
    let g = tokio::time::timeout(Duration::from_secs(2), other_waiter)
        .await
        .expect("the other client's waiter is granted at once")
        .unwrap();
    assert_eq!(Some(g.owner().to_string()), next);
    assert!(g.fence() > broken.fence.unwrap());
    tokio::time::timeout(Duration::from_secs(3), w.lost())
        .await
        .expect("the broken holder is told");
    g.release().await.unwrap();
    drop(w);
    // a name no client may have is refused; nothing of this client: nothing removed
    assert!(matches!(
        operator.break_client("orders", "a/b").await,
        Err(Error::InvalidConfig(_))
    ));
    let none = operator.break_client("orders", "nobody").await.unwrap();
    assert_eq!((none.holds_removed, none.places_removed), (0, 0));
    for c in [stuck, other, operator] {
        c.close().await;
    }
    assert_no_keys(cluster, &p).await;
}

/// What a program does right before it exits: a guard dropped (given back in the
/// background), or an acquire that failed with a grant that was not confirmed (undone in
/// the background), then `close()`. `close` sends those give-backs before it closes:
/// another client is granted the lock at once, every time, and nothing is left held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_sends_what_is_still_to_be_given_back() {
    use cluster_rwlock::{Durability, Mode};
    let cluster = cluster().await;
    let p = prefix("close-flush");
    let other = client(cluster, &p).await;
    for i in 0..5 {
        // a dropped guard
        let client = client(cluster, &p).await;
        let w = client.rwlock("job").unwrap().write().await.unwrap();
        drop(w);
        assert_eq!(client.close().await, 0, "try {i}: give-backs left unsent");
        let got = other.rwlock("job").unwrap().try_write().await.unwrap();
        got.unwrap_or_else(|| panic!("try {i}: the dropped guard's hold is still there"))
            .release()
            .await
            .unwrap();
    }
    // a grant the replicas cannot confirm (more replicas asked for than there are):
    // NotReplicated, the grant undone in the background, then close at once
    let strict = client_with(cluster, |c| {
        c.prefix(&p).durability(Durability::AtLeast {
            replicas: 5,
            timeout: Duration::from_millis(50),
        })
    })
    .await;
    // a lock each: the first one's undo may not have run when the second tries
    for (name, mode) in [("job", Mode::Write), ("report", Mode::Read)] {
        let e = strict
            .rwlock(name)
            .unwrap()
            .try_acquire(mode)
            .await
            .unwrap_err();
        assert!(matches!(e, Error::NotReplicated { .. }), "{e}");
    }
    assert_eq!(strict.close().await, 0);
    assert_no_keys(cluster, &p).await;
    let w = other.rwlock("job").unwrap().try_write().await.unwrap();
    w.expect("the unconfirmed grants were undone")
        .release()
        .await
        .unwrap();
    other.close().await;
}
