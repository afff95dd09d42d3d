//! Faults injected for real through the test bed: a master killed, a master paused longer
//! than the lease, the whole cluster restarted, a slot moved while writers wait, and a
//! fenced resource hammered through two failovers, a master that hangs (frozen, or cut
//! off by a partition) for long after its failover. Each test has a cluster of its own.

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cluster_rwlock::{Durability, Error, LockClient, LockConfig};
use cluster_rwlock_testkit::TestCluster;
use common::hung::{hung_master, Hang};
use common::{assert_no_keys, locks_on, prefix};

async fn connect(
    cluster: &TestCluster,
    p: &str,
    tune: impl FnOnce(LockConfig) -> LockConfig,
) -> LockClient {
    let config = common::config(cluster)
        .prefix(p)
        .command_timeout(Duration::from_millis(1000));
    LockClient::connect(tune(config))
        .await
        .expect("lock client")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn master_killed_with_holders_and_waiters() {
    let cluster = TestCluster::start().await.expect("cluster");
    let p = prefix("kill");
    // longer than a failover (about 4 s): replicated holds survive it
    let lease = Duration::from_secs(8);
    let holders = connect(&cluster, &p, |c| c.lease(lease)).await;
    let waiters = connect(&cluster, &p, |c| c.lease(lease)).await;
    let master = cluster.nodes()[0].clone();
    let locks = locks_on(&cluster, &holders, &master, 4, "k").await;
    let mut guards = Vec::new();
    for l in &locks {
        guards.push(l.write().await.unwrap());
    }
    // a hold that the failover will lose (see below)
    let vanishing_lock = locks_on(&cluster, &holders, &master, 5, "k")
        .await
        .pop()
        .unwrap();
    let vanishing = vanishing_lock.write().await.unwrap();

    let mut tasks = Vec::new();
    for (i, l) in locks.iter().enumerate() {
        for _ in 0..2 {
            let lock = waiters.rwlock(l.name()).unwrap();
            tasks.push(tokio::spawn(async move {
                let r = lock.write_timeout(Duration::from_secs(40)).await;
                (i, Instant::now(), r.map(|g| g.fence()))
            }));
        }
    }
    tokio::time::sleep(Duration::from_millis(300)).await;

    cluster.kill(master.index).await.unwrap();
    let killed = Instant::now();
    let failover = cluster
        .wait_for_failover(Duration::from_secs(30))
        .await
        .expect("failover");
    eprintln!(
        "kill: cluster served every slot again {:?} after the kill",
        killed.elapsed()
    );

    // Replication usually carries every hold over (the grant reached the replica before
    // the kill), so the write that a failover loses is made here by hand: the hold is gone
    // from the promoted master. Its holder is told within one renewal interval (lease/3),
    // plus the renewal's own timeout.
    let fresh = connect(&cluster, &p, |c| c).await;
    let _: i64 = fred::prelude::KeysInterface::del(fresh.redis(), vanishing_lock.key())
        .await
        .unwrap();
    let back = Instant::now();
    tokio::time::timeout(lease / 3 + Duration::from_secs(2), vanishing.lost())
        .await
        .expect("the holder of the vanished hold is told");
    eprintln!(
        "kill: lost hold reported {:?} after it was removed",
        back.elapsed()
    );
    assert!(matches!(vanishing.release().await, Err(Error::LockLost)));

    // the replicated holds survived; their holders keep or lose them knowingly
    tokio::time::sleep(lease / 3 + Duration::from_millis(300)).await;
    let mut kept = 0;
    let released = Instant::now();
    // for each lock whose hold survived: when its release began
    let mut release_began = Vec::new();
    for g in guards {
        let lost = g.is_lost();
        let began = Instant::now();
        match g.release().await {
            Ok(()) => {
                kept += 1;
                release_began.push(Some(began));
            }
            Err(Error::LockLost) => {
                eprintln!("kill: a replicated hold was lost (told: {lost})");
                release_began.push(None);
            }
            Err(e) => panic!("release after failover: {e}"),
        }
    }
    // every waiter returns: granted, none hangs, and none while the holder still held
    let mut first_grant = None;
    for t in tasks {
        let (i, at, r) = tokio::time::timeout(Duration::from_secs(45), t)
            .await
            .expect("no waiter hangs")
            .unwrap();
        r.expect("every waiter is granted");
        if let Some(began) = release_began[i] {
            assert!(
                at >= began,
                "a waiter was granted before the holder released"
            );
        }
        first_grant = Some(first_grant.map_or(at, |f: Instant| f.min(at)));
    }
    let first = first_grant.unwrap();
    eprintln!(
        "kill: failover {failover:?}; {kept}/4 replicated holds kept; first waiter granted {:?} after the kill ({:?} after release); library reloads {}",
        first - killed,
        first.saturating_duration_since(released),
        holders.stats().library_reloads + waiters.stats().library_reloads
    );
    assert_no_keys(&cluster, &p).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn master_paused_longer_than_the_lease() {
    let cluster = TestCluster::start().await.expect("cluster");
    let p = prefix("pause");
    let lease = Duration::from_secs(2);
    let a = connect(&cluster, &p, |c| {
        c.lease(lease).command_timeout(Duration::from_millis(500))
    })
    .await;
    let b = connect(&cluster, &p, |c| c.lease(lease)).await;
    let lock_a = a.rwlock("paused").unwrap();
    let master = cluster.master_for_slot(lock_a.slot()).await.unwrap();
    // a client that talks to the old master only, as a client with a stale view would:
    // it still believes the master has its replica
    let stale = LockClient::connect(common::with_tls(
        &cluster,
        LockConfig::from_url(&master.url)
            .unwrap()
            .prefix(&p)
            .notifications(false)
            .durability(Durability::AtLeast {
                replicas: 1,
                timeout: Duration::from_millis(500),
            }),
    ))
    .await
    .expect("stale client");
    let ga = lock_a.write().await.unwrap();
    let fence_a = ga.fence();

    cluster.pause(master.index).await.unwrap();
    let paused = Instant::now();
    let lock_b = b.rwlock("paused").unwrap();
    let waiter = tokio::spawn(async move {
        let g = lock_b.write_timeout(Duration::from_secs(30)).await;
        (Instant::now(), g)
    });
    tokio::time::timeout(lease + Duration::from_secs(2), ga.lost())
        .await
        .expect("A is told its lease is lost");
    let a_told = Instant::now();
    let (b_granted, gb) = waiter.await.unwrap();
    let gb = gb.expect("B is granted after the failover");
    eprintln!(
        "pause: A told lost {:?} after the pause; B granted {:?} after the pause (fence {} > {})",
        a_told - paused,
        b_granted - paused,
        gb.fence(),
        fence_a
    );
    assert!(
        a_told <= b_granted,
        "A knew it had lost the lock before B got it"
    );
    assert!(gb.fence() > fence_a);

    // the old master wakes up: does it grant before it learns it was demoted?
    cluster.unpause(master.index).await.unwrap();
    let second = stale.rwlock("paused").unwrap().try_write().await;
    match &second {
        Ok(Some(gc)) => panic!(
            "the woken old master granted a second writer, fence {} (B has {})",
            gc.fence(),
            gb.fence()
        ),
        // it could not have its grant confirmed: its replica is the master now
        Ok(None) => eprintln!("pause: the woken old master refused (it still saw a hold)"),
        Err(e) => eprintln!("pause: the woken old master's grant did not count: {e}"),
    }
    drop(second);
    gb.release().await.unwrap();
    assert!(matches!(ga.release().await, Err(Error::LockLost)));
    cluster
        .wait_ready(Duration::from_secs(30))
        .await
        .expect("old master rejoins as a replica");
    assert_no_keys(&cluster, &p).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn whole_cluster_restarted() {
    let cluster = TestCluster::start().await.expect("cluster");
    let p = prefix("restart");
    let lease = Duration::from_secs(3);
    let client = connect(&cluster, &p, |c| c.lease(lease)).await;
    let w = client.rwlock("r1").unwrap().write().await.unwrap();
    let r = client.rwlock("r2").unwrap().read().await.unwrap();
    let old_fence = r.fence();
    for i in 0..6 {
        cluster.kill(i).await.unwrap();
    }
    // while every node is down no renewal is confirmed: each holder is told at its
    // belief deadline (within a lease), before the cluster could grant the lock again
    let told = async {
        w.lost().await;
        r.lost().await;
    };
    tokio::time::timeout(lease + Duration::from_secs(1), told)
        .await
        .expect("holders told while the cluster is down");
    // the nodes keep their data (append-only file): the holds come back with them, and
    // their server deadlines, which have passed by now
    for i in 0..6 {
        cluster.restart(i).await.unwrap();
    }
    let began = Instant::now();
    cluster
        .wait_ready(Duration::from_secs(60))
        .await
        .expect("cluster back");
    eprintln!(
        "restart: cluster ready {:?} after the restart",
        began.elapsed()
    );
    // the same client works again, without a restart of the application
    let again = client
        .rwlock("r1")
        .unwrap()
        .write_timeout(Duration::from_secs(10))
        .await
        .expect("lock again");
    assert!(again.fence() > old_fence);
    again.release().await.unwrap();
    // the library came back with the data (functions are kept in the append-only file)
    assert_eq!(client.stats().library_reloads, 0);
    drop(w);
    drop(r);
    assert_no_keys(&cluster, &p).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_are_woken_by_message_after_their_slot_moved() {
    let cluster = TestCluster::start().await.expect("cluster");
    let p = prefix("move");
    // default lease (30 s): a waiter's timer would fire only 10 s from now
    let holder = connect(&cluster, &p, |c| c).await;
    let waiters = connect(&cluster, &p, |c| c).await;
    let lock = holder.rwlock("moving").unwrap();
    let g = lock.write().await.unwrap();
    let mut tasks = Vec::new();
    for _ in 0..3 {
        let w = waiters.rwlock("moving").unwrap();
        tasks.push(tokio::spawn(async move {
            let g = w
                .write_timeout(Duration::from_secs(30))
                .await
                .expect("granted");
            let at = Instant::now();
            g.release().await.unwrap();
            at
        }));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let from = cluster.master_for_slot(lock.slot()).await.unwrap();
    let to = cluster.nodes()[..3]
        .iter()
        .find(|n| n.port != from.port)
        .unwrap()
        .index;
    cluster
        .move_slot(lock.slot(), to)
        .await
        .expect("slot moved");
    assert_eq!(
        cluster.master_for_slot(lock.slot()).await.unwrap().index,
        to
    );
    // the waiters' client notices within its slot watch interval and resubscribes
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let released = Instant::now();
    g.release().await.unwrap();
    let mut firsts = Vec::new();
    for t in tasks {
        firsts.push(t.await.unwrap());
    }
    let first = firsts.iter().min().unwrap().duration_since(released);
    eprintln!(
        "move: slot {} moved; first waiter granted {first:?} after the release",
        lock.slot()
    );
    assert!(
        first < Duration::from_secs(2),
        "woken by the release message, not the 10 s timer: {first:?}"
    );
    assert_no_keys(&cluster, &p).await;
}

#[derive(Default)]
struct Fenced {
    highest: u64,
    accepted: Vec<u64>,
    stale: u64,
    active: u32,
    overlaps: u64,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fenced_resource_through_two_failovers() {
    for safe in [false, true] {
        let cluster = TestCluster::start().await.expect("cluster");
        let p = prefix("fenced");
        let resource = Arc::new(Mutex::new(Fenced::default()));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let errors = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let mut writers = Vec::new();
        let mut clients = Vec::new();
        for _ in 0..8 {
            let client = connect(&cluster, &p, |c| {
                let c = c.lease(Duration::from_secs(2));
                if safe {
                    c
                } else {
                    c.durability(cluster_rwlock::Durability::MasterOnly)
                }
            })
            .await;
            let lock = client.rwlock("fenced").unwrap();
            clients.push(client);
            let (resource, stop, errors) = (resource.clone(), stop.clone(), errors.clone());
            writers.push(tokio::spawn(async move {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    match lock.write_timeout(Duration::from_secs(5)).await {
                        Ok(g) => {
                            {
                                let mut r = resource.lock().unwrap();
                                r.active += 1;
                                if r.active > 1 {
                                    r.overlaps += 1;
                                }
                                if g.fence() > r.highest {
                                    r.highest = g.fence();
                                    r.accepted.push(g.fence());
                                } else {
                                    r.stale += 1;
                                }
                            }
                            tokio::time::sleep(Duration::from_millis(3)).await;
                            resource.lock().unwrap().active -= 1;
                            let _ = g.release().await;
                        }
                        Err(_) => {
                            errors.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            tokio::time::sleep(Duration::from_millis(50)).await;
                        }
                    }
                }
            }));
        }
        let slot = clients[0].rwlock("fenced").unwrap().slot();
        let began = Instant::now();
        for _ in 0..2 {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let m = cluster.master_for_slot(slot).await.unwrap();
            cluster.kill(m.index).await.unwrap();
            cluster
                .wait_for_failover(Duration::from_secs(30))
                .await
                .expect("failover");
            cluster.restart(m.index).await.unwrap();
            cluster
                .wait_ready(Duration::from_secs(30))
                .await
                .expect("old master back as a replica");
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for w in writers {
            tokio::time::timeout(Duration::from_secs(15), w)
                .await
                .expect("writer ends")
                .unwrap();
        }
        let r = std::mem::take(&mut *resource.lock().unwrap());
        let out_of_order = r.accepted.windows(2).filter(|w| w[1] <= w[0]).count();
        eprintln!(
            "fenced ({}): {:?}: {} writes accepted, {} out of fence order, {} stale fences refused, {} overlapping holds, {} failed acquires",
            if safe { "default" } else { "master-only" },
            began.elapsed(),
            r.accepted.len(),
            out_of_order,
            r.stale,
            r.overlaps,
            errors.load(std::sync::atomic::Ordering::Relaxed)
        );
        assert!(r.accepted.len() > 50, "the writers made progress");
        assert_eq!(out_of_order, 0);
        if safe {
            assert_eq!(
                r.overlaps, 0,
                "with the default confirmation no two holds overlap"
            );
        }
        for c in &clients {
            c.close().await;
        }
        // leases of holds given up during the faults run out by themselves
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_no_keys(&cluster, &p).await;
    }
}

/// How long the hung master stays hung (`HUNG_SECONDS`, default 20 s; for minutes:
/// `HUNG_SECONDS=300`).
fn hung_for() -> Duration {
    let secs = std::env::var("HUNG_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    Duration::from_secs(secs)
}

/// A master frozen (SIGSTOP / docker pause) that stays frozen well past its failover:
/// locks of the other masters keep their latency, the slot is routed to the promoted
/// replica within 1 s, the holder's release lands there, the waiters are handed the lock
/// by message, and the old master, thawed, is never routed to again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn master_frozen_for_long() {
    hung_master(Hang::Freeze, hung_for()).await;
}

/// The same with the node's packets dropped (client and bus ports), then the path healed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn master_cut_off_by_a_partition() {
    hung_master(Hang::Partition, hung_for()).await;
}
