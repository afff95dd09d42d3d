//! Who owns a hold, and the upgradable read: one test per rule, against the six-node
//! cluster.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use cluster_rwlock::{Error, LockConfig, Mode};
use common::{assert_no_keys, client, client_with, cluster, prefix};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_tasks_sharing_one_handle_never_write_together() {
    let cluster = cluster().await;
    let p = prefix("shared");
    let client = client(cluster, &p).await;
    let lock = Arc::new(client.rwlock("res").unwrap());
    let inside = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for t in 0..8 {
        // half share the Arc, half hold clones of the handle
        let lock = if t % 2 == 0 {
            lock.clone()
        } else {
            Arc::new((*lock).clone())
        };
        let (inside, most) = (inside.clone(), most.clone());
        tasks.push(tokio::spawn(async move {
            let mut fences = Vec::new();
            for _ in 0..5 {
                let g = lock.write().await.expect("write");
                let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(5)).await;
                inside.fetch_sub(1, Ordering::SeqCst);
                fences.push(g.fence());
                g.release().await.expect("release");
            }
            fences
        }));
    }
    let mut fences = Vec::new();
    for t in tasks {
        fences.extend(t.await.unwrap());
    }
    assert_eq!(most.load(Ordering::SeqCst), 1, "two writers at once");
    fences.sort_unstable();
    fences.dedup();
    assert_eq!(fences.len(), 40, "every grant has its own fence");

    // through one handle: a write excludes a read and a second write...
    let w = lock.write().await.unwrap();
    assert!(lock.try_read().await.unwrap().is_none());
    assert!(lock.clone().try_write().await.unwrap().is_none());
    w.release().await.unwrap();
    // ...and a read through one clone makes a write through another wait, not fail
    let r = lock.read().await.unwrap();
    let other = (*lock).clone();
    match other.write_timeout(Duration::from_millis(300)).await {
        Err(Error::Timeout(_)) => {}
        other => panic!("expected a timeout, got {other:?}"),
    }
    r.release().await.unwrap();
    assert_no_keys(cluster, &p).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explicit_owners_are_reentrant_and_exclude_others() {
    let cluster = cluster().await;
    let p = prefix("explicit");
    let client = client(cluster, &p).await;
    let job = client.rwlock("res").unwrap().with_owner("job-17").unwrap();
    // the same token through another handle (another task, another process)
    let same = client.rwlock("res").unwrap().with_owner("job-17").unwrap();
    let rival = client.rwlock("res").unwrap().with_owner("job-18").unwrap();

    let w1 = job.write().await.unwrap();
    let w2 = same.try_write().await.unwrap().expect("reentrant write");
    assert_eq!(w1.owner(), "job-17");
    assert!(w2.fence() > w1.fence());
    assert!(rival.try_read().await.unwrap().is_none());
    assert!(client
        .rwlock("res")
        .unwrap()
        .try_write()
        .await
        .unwrap()
        .is_none());
    let s = job.state().await.unwrap();
    assert_eq!(s.holders.len(), 1);
    assert_eq!(s.holders[0].owner, "job-17");
    assert_eq!(s.holders[0].write_holds, 2);
    w1.release().await.unwrap();
    assert!(rival.try_read().await.unwrap().is_none(), "w2 still holds");
    w2.release().await.unwrap();
    let r = rival.try_write().await.unwrap().expect("free again");
    r.release().await.unwrap();
    assert_no_keys(cluster, &p).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holds_of_a_dead_process_run_out_though_a_sibling_renews_the_same_owner() {
    let cluster = cluster().await;
    let p = prefix("sibling");
    let short = |c: LockConfig| c.prefix(&p).lease(Duration::from_secs(2));
    let dead = client_with(cluster, short).await;
    let alive = client_with(cluster, short).await;
    let name = "nightly";
    // a process of job-9 takes a read hold and dies: no release, no renewal
    let g = dead
        .rwlock(name)
        .unwrap()
        .with_owner("job-9")
        .unwrap()
        .read()
        .await
        .unwrap();
    std::mem::forget(g);
    dead.close().await;
    // another process of job-9 holds, and renews, all along
    let job = alive.rwlock(name).unwrap().with_owner("job-9").unwrap();
    let held = job.read().await.unwrap();
    tokio::time::sleep(Duration::from_secs(6)).await;
    let s = job.state().await.unwrap();
    eprintln!("sibling: after three leases: {:?}", s.holders);
    assert_eq!(s.holders.len(), 1, "{s:?}");
    assert_eq!(
        s.holders[0].read_holds, 1,
        "the dead process's hold ran out: {s:?}"
    );
    assert!(!held.is_lost());
    held.release().await.unwrap();
    // nothing of job-9 is left: another owner takes write at once
    let w = alive
        .rwlock(name)
        .unwrap()
        .try_write()
        .await
        .unwrap()
        .expect("free once the live process released");
    w.release().await.unwrap();
    assert_no_keys(cluster, &p).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guards_take_reentrant_holds_on_purpose() {
    let cluster = cluster().await;
    let p = prefix("again");
    let client = client(cluster, &p).await;
    let lock = client.rwlock("res").unwrap();
    let writer = client.rwlock("res").unwrap();

    let r = lock.read().await.unwrap();
    // a writer queues: new readers wait, but the holder's own guard is granted at once
    let queued = tokio::spawn({
        let writer = writer.clone();
        async move { writer.write().await.map(|g| g.fence()) }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        lock.try_read().await.unwrap().is_none(),
        "behind the writer"
    );
    let r2 = r.read_again().await.unwrap();
    assert_eq!(r2.owner(), r.owner());
    assert!(r2.fence() > r.fence());
    r.release().await.unwrap();
    assert!(!queued.is_finished(), "r2 still holds");
    r2.release().await.unwrap();
    let wf = tokio::time::timeout(Duration::from_secs(5), queued)
        .await
        .unwrap()
        .unwrap()
        .unwrap();

    // write_again and read_again from a write guard
    let w = lock.write().await.unwrap();
    assert!(w.fence() > wf);
    let w2 = w.write_again().await.unwrap();
    let r3 = w.read_again().await.unwrap();
    let s = lock.state().await.unwrap();
    assert_eq!(s.holders.len(), 1);
    assert_eq!((s.holders[0].write_holds, s.holders[0].read_holds), (2, 1));
    w.release().await.unwrap();
    w2.release().await.unwrap();
    assert!(
        writer.try_write().await.unwrap().is_none(),
        "r3 still holds"
    );
    r3.release().await.unwrap();
    // a guard whose hold is gone cannot take another
    let w = lock.write().await.unwrap();
    use fred::interfaces::KeysInterface;
    client.redis().del::<i64, _>(lock.key()).await.unwrap();
    assert!(matches!(w.read_again().await, Err(Error::LockLost)));
    drop(w);
    assert_no_keys(cluster, &p).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upgrade_waits_for_readers_and_new_readers_wait_behind_it() {
    let cluster = cluster().await;
    let p = prefix("upgrade");
    let client = client(cluster, &p).await;
    let lock = client.rwlock("res").unwrap();

    let up = lock.upgradable_read().await.unwrap();
    let r1 = lock.read().await.unwrap(); // plain readers share with it
    assert!(
        lock.try_upgradable_read().await.unwrap().is_none(),
        "one upgradable owner at a time"
    );
    assert!(lock.try_write().await.unwrap().is_none(), "no writer");
    let s = lock.state().await.unwrap();
    assert_eq!(s.mode, Some(Mode::Read));
    assert!(s
        .holders
        .iter()
        .any(|h| h.mode == Mode::Upgradable && h.upgradable_holds == 1));

    let up_fence = up.fence();
    let upgrading = tokio::spawn(async move { up.upgrade().await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!upgrading.is_finished(), "r1 still reads");
    assert!(
        lock.try_read().await.unwrap().is_none(),
        "new readers wait behind the upgrade"
    );
    let r1_fence = r1.fence();
    r1.release().await.unwrap();
    let w = tokio::time::timeout(Duration::from_secs(5), upgrading)
        .await
        .expect("upgraded once the reader left")
        .unwrap()
        .unwrap();
    assert!(w.fence() > up_fence && w.fence() > r1_fence);
    let s = lock.state().await.unwrap();
    assert_eq!(s.mode, Some(Mode::Write));
    assert_eq!(s.holders.len(), 1);
    assert_eq!(s.holders[0].upgradable_holds, 0);
    assert!(lock.try_read().await.unwrap().is_none());

    // back down: write -> upgradable (readers join) -> upgrade at once when alone
    let up = w.downgrade_to_upgradable().await.unwrap();
    let r = lock.try_read().await.unwrap().expect("readers join");
    let up = match up.try_upgrade().await.unwrap() {
        Ok(_) => panic!("a reader holds: no upgrade"),
        Err(up) => up,
    };
    r.release().await.unwrap();
    let w = match up.try_upgrade().await.unwrap() {
        Ok(w) => w,
        Err(_) => panic!("alone: upgrade at once"),
    };
    // upgradable -> read lets another upgradable reader in
    let read = w
        .downgrade_to_upgradable()
        .await
        .unwrap()
        .downgrade()
        .await
        .unwrap();
    let other = lock.try_upgradable_read().await.unwrap().expect("free");
    other.release().await.unwrap();
    read.release().await.unwrap();
    assert_no_keys(cluster, &p).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upgrade_goes_before_a_queued_writer() {
    let cluster = cluster().await;
    let p = prefix("upq");
    let client = client(cluster, &p).await;
    let lock = client.rwlock("res").unwrap();

    let up = lock.upgradable_read().await.unwrap();
    let r = lock.read().await.unwrap();
    // a writer queues first
    let inside = Arc::new(AtomicUsize::new(0));
    let queued = tokio::spawn({
        let (lock, inside) = (lock.clone(), inside.clone());
        async move {
            let g = lock.write().await.unwrap();
            assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "writers overlap");
            let f = g.fence();
            inside.fetch_sub(1, Ordering::SeqCst);
            g.release().await.unwrap();
            f
        }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(lock.state().await.unwrap().waiting_writers.len(), 1);
    // then the upgrade is asked; the reader leaves
    let upgrading = tokio::spawn(async move { up.upgrade().await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    r.release().await.unwrap();
    let w = tokio::time::timeout(Duration::from_secs(5), upgrading)
        .await
        .expect("upgraded")
        .unwrap()
        .unwrap();
    assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "writers overlap");
    assert!(!queued.is_finished(), "no writer in between");
    let s = lock.state().await.unwrap();
    assert_eq!(s.mode, Some(Mode::Write));
    assert_eq!(s.waiting_writers.len(), 1, "the writer still waits");
    tokio::time::sleep(Duration::from_millis(100)).await;
    inside.fetch_sub(1, Ordering::SeqCst);
    let upgraded_fence = w.fence();
    w.release().await.unwrap();
    let writer_fence = tokio::time::timeout(Duration::from_secs(5), queued)
        .await
        .expect("the writer is served next")
        .unwrap();
    assert!(writer_fence > upgraded_fence);
    assert_no_keys(cluster, &p).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_upgrade_leaves_nothing_behind() {
    let cluster = cluster().await;
    let p = prefix("upcancel");
    let client = client(cluster, &p).await;
    let lock = client.rwlock("res").unwrap();

    let up = lock.upgradable_read().await.unwrap();
    let r = lock.read().await.unwrap();
    let gave_up = tokio::time::timeout(Duration::from_millis(300), up.upgrade()).await;
    assert!(gave_up.is_err(), "the reader still holds");
    // the pending upgrade and the upgradable hold are gone: readers and another
    // upgradable reader enter again
    let mut entered = None;
    for _ in 0..40 {
        if let Some(g) = lock.try_upgradable_read().await.unwrap() {
            entered = Some(g);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let other = entered.expect("the cancelled upgrader's hold was released");
    let r2 = lock
        .try_read()
        .await
        .unwrap()
        .expect("no pending upgrade left");
    let s = lock.state().await.unwrap();
    assert_eq!(s.holders.len(), 3);
    r2.release().await.unwrap();
    r.release().await.unwrap();
    // the new upgradable reader upgrades at once, now alone
    let w = other.upgrade().await.unwrap();
    w.release().await.unwrap();
    // a cancel that races the grant: whatever it left is given back
    for _ in 0..10 {
        let up = lock.upgradable_read().await.unwrap();
        let r = lock.read().await.unwrap();
        let release = tokio::spawn(async move { r.release().await });
        let _ = tokio::time::timeout(Duration::from_millis(2), up.upgrade()).await;
        release.await.unwrap().unwrap();
    }
    assert_no_keys(cluster, &p).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewal_that_drops_a_sibling_hold_still_extends_its_own() {
    let cluster = cluster().await;
    let p = prefix("prunerenew");
    let dead = client_with(cluster, |c| c.prefix(&p).lease(Duration::from_secs(1))).await;
    let alive = client_with(cluster, |c| c.prefix(&p).lease(Duration::from_secs(6))).await;
    let name = "nightly";
    // a process of job-r takes a 1 s read hold and dies: its hold runs out first, and the
    // live sibling's next renewal is the call that drops it from the owner's entry
    let g = dead
        .rwlock(name)
        .unwrap()
        .with_owner("job-r")
        .unwrap()
        .read()
        .await
        .unwrap();
    std::mem::forget(g);
    dead.close().await;
    let job = alive.rwlock(name).unwrap().with_owner("job-r").unwrap();
    let held = job.read().await.unwrap();
    let began = std::time::Instant::now();
    let wall_ms = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64
    };
    // the entry is read with HGET, not a script (a script would drop the expired hold
    // itself); renewals every 2 s keep the live hold's deadline 4-6 s ahead
    let mut least = i64::MAX;
    while began.elapsed() < Duration::from_secs(7) {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let entry = common::entry_of(alive.redis(), job.key(), "job-r").await;
        let entry = entry.expect("the live hold's entry");
        let latest = entry
            .split_whitespace()
            .filter_map(common::deadline_of)
            .max()
            .expect("a deadline");
        if began.elapsed() > Duration::from_millis(1_500) {
            least = least.min(latest - wall_ms());
        }
    }
    eprintln!("prunerenew: least lease left of the live hold after 1.5 s: {least} ms");
    assert!(
        least > 3_000,
        "a renewal that dropped the dead hold did not extend the live one: {least} ms left"
    );
    assert!(!held.is_lost());
    held.release().await.unwrap();
    assert_no_keys(cluster, &p).await;
}
