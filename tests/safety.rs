//! Safety by default, one fault each, on a cluster of its own: grants and renewals count
//! only once the replicas that could be promoted have them; the holder is told its hold
//! may be lost before the server's lease can end; fences grow across a free lock, clock
//! steps and slot moves; a slot move checks the holds at once; deadlines are kept while
//! a node hangs.

mod common;

use std::time::{Duration, Instant};

use cluster_rwlock::{Durability, Error, LockClient, LockConfig};
use cluster_rwlock_testkit::{StartOptions, TestCluster};
use common::{assert_no_keys, prefix};
use fred::prelude::*;

async fn connect(
    cluster: &TestCluster,
    prefix: &str,
    config: impl FnOnce(LockConfig) -> LockConfig,
) -> LockClient {
    LockClient::connect(config(
        LockConfig::cluster(cluster.seed_urls()).prefix(prefix),
    ))
    .await
    .expect("lock client")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_the_replica_did_not_get_is_undone_by_default() {
    let cluster = TestCluster::start().await.expect("cluster");
    let p = prefix("unconfirmed");
    let safe = connect(&cluster, &p, |c| c).await;
    let fast = connect(&cluster, &p, |c| c.durability(Durability::MasterOnly)).await;
    let lock = safe.rwlock("cut").unwrap();
    let master = cluster.master_for_slot(lock.slot()).await.unwrap();
    // a grant before the cut is confirmed: the replica is in sync
    lock.write().await.unwrap().release().await.unwrap();
    cluster
        .cut_replication(master.index)
        .await
        .expect("cut_replication (needs iptables and root)");
    let began = Instant::now();
    let r = lock.try_write().await;
    let took = began.elapsed();
    eprintln!("unconfirmed: default try_write during the cut: {r:?} after {took:?}");
    assert!(
        matches!(
            r,
            Err(Error::NotReplicated {
                wanted: 1,
                acked: 0,
                ..
            })
        ),
        "{r:?}"
    );
    assert!(took < Duration::from_millis(1_500), "{took:?}");
    // a call with a timeout tries again until it runs out (and says the replicas are
    // why), and leaves nothing
    let began = Instant::now();
    let r = lock.write_timeout(Duration::from_secs(1)).await;
    let took = began.elapsed();
    assert!(matches!(r, Err(Error::NotReplicated { .. })), "{r:?}");
    assert!(took < Duration::from_millis(1_200), "{took:?}");
    // the undone grant left nothing: the weaker mode, chosen by name, is granted
    let mut granted = None;
    for _ in 0..20 {
        if let Some(g) = fast.rwlock("cut").unwrap().try_write().await.unwrap() {
            granted = Some(g);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let g = granted.expect("master-only grant while the replica is cut off");
    g.release().await.unwrap();
    cluster.restore_replication(master.index).await.unwrap();
    // confirmed again once the replica has caught up (tried again meanwhile)
    let g = lock.write_timeout(Duration::from_secs(20)).await.unwrap();
    g.release().await.unwrap();
    assert_no_keys(&cluster, &p).await;
}

/// A renewal the replica did not get counts only on the other masters' word (the crate
/// docs, "A silent replica"): with the master's replication cut, they vouch that its
/// replica cannot be promoted before they have gone their node timeout without the
/// master, and the hold is renewed on that word for as long as the cut lasts, each time
/// believed no further than that moment less the margin.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewal_the_replica_did_not_get_counts_on_the_other_masters_word() {
    let cluster = TestCluster::start().await.expect("cluster");
    let p = prefix("renewvouched");
    let lease = Duration::from_secs(3);
    let margin = Duration::from_millis(500);
    let client = connect(&cluster, &p, |c| c.lease(lease).clock_margin(margin)).await;
    let lock = client.rwlock("held").unwrap();
    let master = cluster.master_for_slot(lock.slot()).await.unwrap();
    let g = lock.write().await.unwrap();
    cluster
        .cut_replication(master.index)
        .await
        .expect("cut_replication (needs iptables and root)");
    // twice the belief a confirmed renewal gives: only vouched renewals keep it
    tokio::time::sleep(2 * (lease - margin)).await;
    let kept = !g.is_lost();
    let stats = client.stats();
    eprintln!(
        "renewvouched: kept {kept}, vouches asked {}, vouched {}",
        stats.vouches_asked, stats.vouched
    );
    cluster.restore_replication(master.index).await.unwrap();
    assert!(
        kept,
        "the hold was lost while the other masters heard its master"
    );
    assert!(stats.vouched > 0, "{stats:?}");
    g.release().await.unwrap();
}

/// With the master's replication cut AND the other masters silent (frozen), nothing
/// vouches for it: a renewal the replica did not get does not count, and the holder is
/// told at the end of its last confirmed belief, `sent + lease - margin`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewal_the_replica_did_not_get_does_not_count_when_nobody_vouches() {
    let cluster = TestCluster::start().await.expect("cluster");
    let p = prefix("renewcut");
    let lease = Duration::from_secs(3);
    let margin = Duration::from_millis(750);
    let client = connect(&cluster, &p, |c| c.lease(lease).clock_margin(margin)).await;
    let lock = client.rwlock("held").unwrap();
    let master = cluster.master_for_slot(lock.slot()).await.unwrap();
    let sent = Instant::now();
    let g = lock.write().await.unwrap();
    cluster
        .cut_replication(master.index)
        .await
        .expect("cut_replication (needs iptables and root)");
    // nodes 0-2 are the masters of a new test bed
    let others: Vec<usize> = (0..3).filter(|i| *i != master.index).collect();
    for i in &others {
        cluster.pause(*i).await.unwrap();
    }
    // the master renews the hold; its replica, which could be promoted, never hears of
    // it, and no other master answers for it
    let told = tokio::time::timeout(lease * 2, g.lost()).await;
    let at = sent.elapsed();
    eprintln!("renewcut: told lost {at:?} after the grant was sent");
    for i in &others {
        cluster.unpause(*i).await.unwrap();
    }
    assert!(told.is_ok(), "the holder is told");
    assert!(at <= lease - margin + Duration::from_millis(150), "{at:?}");
    // the master still has it, renewed: only the replica's copy ran out
    let entry = common::entry_of(client.redis(), lock.key(), g.owner()).await;
    assert!(entry.is_some(), "the master's entry");
    cluster.restore_replication(master.index).await.unwrap();
    assert!(matches!(g.release().await, Err(Error::LockLost)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_whose_renewals_hang_is_told_at_sent_plus_lease_minus_margin() {
    let cluster = TestCluster::start().await.expect("cluster");
    let p = prefix("hung");
    let lease = Duration::from_secs(3);
    let margin = Duration::from_millis(500);
    let client = connect(&cluster, &p, |c| {
        c.lease(lease)
            .clock_margin(margin)
            .command_timeout(Duration::from_millis(500))
    })
    .await;
    let lock = client.rwlock("frozen").unwrap();
    let master = cluster.master_for_slot(lock.slot()).await.unwrap();
    let sent = Instant::now();
    let g = lock.write().await.unwrap();
    cluster.pause(master.index).await.unwrap();
    tokio::time::timeout(lease * 2, g.lost())
        .await
        .expect("the holder is told");
    let at = sent.elapsed();
    eprintln!("hung: told lost {at:?} after the grant was sent");
    // not at the end of a renewal round (up to lease/3 later), nor at the server's end
    assert!(at <= lease - margin + Duration::from_millis(100), "{at:?}");
    cluster.unpause(master.index).await.unwrap();
    cluster
        .wait_ready(Duration::from_secs(30))
        .await
        .expect("ready again");
    drop(g);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fences_grow_across_a_free_lock_and_a_clock_step_back() {
    let cluster = TestCluster::start_with(StartOptions::default().skewable_clocks(true))
        .await
        .expect("cluster with skewable clocks");
    let p = prefix("fencestep");
    let client = connect(&cluster, &p, |c| c).await;
    let lock = client.rwlock("f").unwrap();
    let master = cluster.master_for_slot(lock.slot()).await.unwrap();
    let g = lock.write().await.unwrap();
    let f1 = g.fence();
    g.release().await.unwrap();
    // the lock is free (nobody holds or waits); the master's clock steps back 5 s
    cluster.skew_clock(master.index, -5_000).await.unwrap();
    let node = Builder::from_config(Config::from_url(&master.url).unwrap())
        .build()
        .unwrap();
    node.init().await.unwrap();
    let began = Instant::now();
    while clock_offset_ms(&node).await > -4_800 {
        assert!(began.elapsed() < Duration::from_secs(5), "the step is seen");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let g = lock.write().await.unwrap();
    let f2 = g.fence();
    g.release().await.unwrap();
    let r = lock.read().await.unwrap();
    let f3 = r.fence();
    r.release().await.unwrap();
    cluster.skew_clock(master.index, 0).await.unwrap();
    eprintln!("fencestep: {f1} then {f2}, {f3} after the clock stepped back 5 s");
    assert!(f2 > f1 && f3 > f2, "{f1} {f2} {f3}");
    assert_no_keys(&cluster, &p).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_missing_after_a_slot_move_is_reported_at_once() {
    let cluster = TestCluster::start().await.expect("cluster");
    let p = prefix("moved");
    // renewals every 10 s: the check after the move must not wait for one
    let client = connect(&cluster, &p, |c| c.lease(Duration::from_secs(30))).await;
    let lock = client.rwlock("m").unwrap();
    let from = cluster.master_for_slot(lock.slot()).await.unwrap();
    let g = lock.write().await.unwrap();
    let fence = g.fence();
    // the hold does not reach the slot's new owner (as a migration that lost it would)
    let _: i64 = client.redis().del(lock.key()).await.unwrap();
    let mut to = None;
    for slot in [0, 8_000, 16_000] {
        let m = cluster.master_for_slot(slot).await.unwrap();
        if m.index != from.index {
            to = Some(m);
            break;
        }
    }
    let to = to.expect("another master");
    cluster.move_slot(lock.slot(), to.index).await.unwrap();
    let moved = Instant::now();
    tokio::time::timeout(Duration::from_secs(8), g.lost())
        .await
        .expect("the holder is told before its next renewal");
    let took = moved.elapsed();
    eprintln!("moved: told lost {took:?} after the slot moved");
    assert!(took < Duration::from_secs(2), "{took:?}");
    // the next grant is above the lost one, on the new owner
    let again = lock.write().await.unwrap();
    assert!(again.fence() > fence);
    again.release().await.unwrap();
    assert!(matches!(g.release().await, Err(Error::LockLost)));
    cluster.move_slot(lock.slot(), from.index).await.unwrap();
    assert_no_keys(&cluster, &p).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_timeout_is_kept_while_the_slot_master_hangs() {
    let cluster = TestCluster::start().await.expect("cluster");
    let p = prefix("hangdeadline");
    let client = connect(&cluster, &p, |c| c).await;
    let lock = client.rwlock("h").unwrap();
    let master = cluster.master_for_slot(lock.slot()).await.unwrap();
    cluster.pause(master.index).await.unwrap();
    let mut took = Vec::new();
    for _ in 0..3 {
        let began = Instant::now();
        let r = lock.write_timeout(Duration::from_millis(200)).await;
        took.push(began.elapsed());
        assert!(matches!(r, Err(Error::Timeout(_))), "{r:?}");
    }
    cluster.unpause(master.index).await.unwrap();
    eprintln!("hangdeadline: write_timeout(200 ms) returned after {took:?}");
    for t in &took {
        assert!(*t < Duration::from_millis(300), "{took:?}");
    }
    cluster
        .wait_ready(Duration::from_secs(30))
        .await
        .expect("ready again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_sent_again_after_handing_the_lock_on_says_released() {
    let cluster = TestCluster::start().await.expect("cluster");
    let p = prefix("resenthandoff");
    let client = connect(&cluster, &p, |c| {
        c.command_timeout(Duration::from_millis(300))
    })
    .await;
    let other = connect(&cluster, &p, |c| c).await;
    let lock = client.rwlock("r").unwrap();
    let g = lock.write().await.unwrap();
    let fence = g.fence();
    // a writer queues behind the holder: the release hands the lock to it, and the
    // fence moves on in the same step
    let queued = other.rwlock("r").unwrap();
    let waiter = tokio::spawn(async move { queued.write_timeout(Duration::from_secs(30)).await });
    let until = Instant::now() + Duration::from_secs(5);
    while lock.state().await.unwrap().waiting_writers.is_empty() {
        assert!(Instant::now() < until, "the writer never queued");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // the master runs the release (and the hand-off) and its reply is lost: the sending
    // after the timeout finds the hold gone and the fence moved, by this very release
    let r = release_with_replies_lost(&cluster, &lock, g).await;
    eprintln!("resenthandoff: release {r:?}");
    assert!(
        r.is_ok(),
        "a release that handed the lock on is not a lost hold: {r:?}"
    );
    let next = waiter.await.unwrap().expect("the queued writer is granted");
    assert!(next.fence() > fence);
    next.release().await.unwrap();
    assert_no_keys(&cluster, &p).await;
}

/// Releases `g`, a hold of `lock`, while the replies of the lock's master are dropped
/// (the release runs there, its answer is lost) for 1.5 s: what the release returned,
/// once no rule of this cluster's master is left (another test of this process may
/// drop its own meanwhile).
async fn release_with_replies_lost(
    cluster: &TestCluster,
    lock: &cluster_rwlock::RwLock,
    g: cluster_rwlock::WriteGuard,
) -> cluster_rwlock::Result<()> {
    let master = cluster.master_for_slot(lock.slot()).await.unwrap();
    cluster
        .drop_replies(master.index)
        .await
        .expect("drop_replies (needs iptables and root)");
    let restore = async {
        tokio::time::sleep(Duration::from_millis(1_500)).await;
        cluster.restore_replies(master.index).await.unwrap();
    };
    let (r, ()) = tokio::join!(g.release(), restore);
    let port = format!("-{}", master.port);
    let rules = cluster.replication_rules().await.unwrap();
    let ours = |r: &String| {
        r.split(|c: char| c.is_whitespace() || c == '"')
            .any(|word| word.ends_with(&port))
    };
    assert!(!rules.iter().any(ours), "{rules:?}");
    r
}

/// A downgrade whose reply is lost (it ran on the master; the client gave up within its
/// command timeout): the read hold it made is given back once the node answers again,
/// not left held by nobody for a lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_downgrade_whose_reply_was_lost_leaves_no_hold() {
    let cluster = TestCluster::start().await.expect("cluster");
    let p = prefix("downgrade-lost");
    let client = connect(&cluster, &p, |c| {
        c.command_timeout(Duration::from_millis(300))
            .lease(Duration::from_secs(30))
    })
    .await;
    let lock = client.rwlock("r").unwrap();
    let g = lock.write().await.unwrap();
    let master = cluster.master_for_slot(lock.slot()).await.unwrap();
    cluster
        .drop_replies(master.index)
        .await
        .expect("drop_replies (needs iptables and root)");
    let r = g.downgrade().await;
    // replies stay lost for more than a command timeout after the downgrade gave up:
    // the give-back of the hold it made, which runs in the background from then, must
    // be sent again until it is answered, not give up after one timeout and leave the
    // hold to its lease
    tokio::time::sleep(Duration::from_secs(1)).await;
    cluster.restore_replies(master.index).await.unwrap();
    assert!(r.is_err(), "the downgrade's reply came through: {r:?}");
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        match lock.state().await {
            Ok(s) if s.holders.is_empty() => break,
            other => assert!(
                Instant::now() < until,
                "a hold nobody renews is left: {other:?}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    client.close().await;
}

/// How far the node's wall clock (`TIME`) is from this machine's, in milliseconds.
async fn clock_offset_ms(node: &Client) -> i64 {
    let now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64
    };
    let before = now();
    let cmd =
        fred::types::CustomCommand::new_static("TIME", fred::types::ClusterHash::Random, false);
    let t: Vec<String> = node.custom(cmd, Vec::<String>::new()).await.unwrap();
    let after = now();
    t[0].parse::<i64>().unwrap() * 1000 + t[1].parse::<i64>().unwrap() / 1000 - (before + after) / 2
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_sent_again_after_its_reply_was_lost_says_released() {
    let cluster = TestCluster::start().await.expect("cluster");
    let p = prefix("resent");
    let client = connect(&cluster, &p, |c| {
        c.command_timeout(Duration::from_millis(300))
    })
    .await;
    let lock = client.rwlock("r").unwrap();
    let g = lock.write().await.unwrap();
    // the master runs the release, and its reply is lost: the client times out and
    // sends it again on a new connection once replies flow again
    let began = Instant::now();
    let r = release_with_replies_lost(&cluster, &lock, g).await;
    eprintln!("resent: release {r:?} after {:?}", began.elapsed());
    assert!(r.is_ok(), "{r:?}");
    // free now: granted at once, but for the replica, whose stream the cut held up too
    // and which may confirm a grant late for a while (NotReplicated, undone: try again)
    let mut tries = 0;
    let w = loop {
        match lock.try_write().await {
            Err(Error::NotReplicated { .. }) if tries < 30 => {
                tries += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            other => break other.unwrap().expect("released"),
        }
    };
    w.release().await.unwrap();
    assert_no_keys(&cluster, &p).await;
}
