//! Confirmation counts the replicas the master itself reports attached (`INFO
//! replication`, read in the same pipeline as the batch's `WAIT`), not the slot map's
//! guess: a dead replica stops no grant for longer than one `WAIT`, and a frozen replica
//! whose link is still up is waited for, even once the cluster flags it failing (it may
//! thaw and be promoted). Each test has a cluster of its own.

mod common;

use std::time::{Duration, Instant};

use cluster_rwlock::{Error, LockClient, RwLock};
use cluster_rwlock_testkit::{NodeInfo, TestCluster};
use common::{client_with, locks_on, prefix};

/// A cluster of the test's own, a client, a lock of node 0 (a master) and that master's
/// replica.
struct OneMaster {
    cluster: TestCluster,
    client: LockClient,
    lock: RwLock,
    replica: NodeInfo,
}

impl OneMaster {
    async fn start(test: &str) -> OneMaster {
        OneMaster::start_with(test, |c| c).await
    }

    async fn start_with(
        test: &str,
        tune: impl FnOnce(cluster_rwlock::LockConfig) -> cluster_rwlock::LockConfig,
    ) -> OneMaster {
        let cluster = TestCluster::start().await.expect("cluster");
        let p = prefix(test);
        let client = client_with(&cluster, |c| {
            tune(c.prefix(&p).command_timeout(Duration::from_secs(1)))
        })
        .await;
        let master = cluster.nodes()[0].clone();
        let lock = locks_on(&cluster, &client, &master, 1, "k")
            .await
            .pop()
            .unwrap();
        let replica = cluster.replica_of(master.index).await.unwrap();
        OneMaster {
            cluster,
            client,
            lock,
            replica,
        }
    }
}

/// One master's only replica killed while a lock of that master is taken and released
/// in a loop: grants go on within about one `WAIT` (its timeout, 500 ms by default),
/// not after the cluster has flagged the replica failed (the node timeout, 2 s here, 15 s
/// by Redis's default) and the map was read again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_replica_stops_grants_for_one_wait_at_most() {
    let OneMaster {
        cluster,
        client,
        lock,
        replica,
    } = OneMaster::start("dead-replica").await;
    let began = Instant::now();
    let kill_at = Duration::from_secs(2);
    let end = Duration::from_secs(6);
    let mut grants: Vec<Duration> = Vec::new();
    let mut killed = false;
    while began.elapsed() < end {
        if !killed && began.elapsed() >= kill_at {
            cluster.kill(replica.index).await.unwrap();
            killed = true;
        }
        match lock.write_timeout(Duration::from_secs(1)).await {
            Ok(g) => {
                grants.push(began.elapsed());
                g.release().await.unwrap();
            }
            Err(e) => assert!(e.is_retryable(), "{e}"),
        }
    }
    // grants per half second around the kill (at 2 s)
    let per_half: Vec<usize> = (0..12)
        .map(|i| {
            let (a, b) = (
                Duration::from_millis(500 * i),
                Duration::from_millis(500 * (i + 1)),
            );
            grants.iter().filter(|t| **t >= a && **t < b).count()
        })
        .collect();
    eprintln!("dead replica: grants per 500 ms, the replica killed at 2.0 s: {per_half:?}");
    let longest_gap = grants
        .windows(2)
        .filter(|w| w[1] >= kill_at)
        .map(|w| w[1] - w[0])
        .max()
        .unwrap_or(end);
    eprintln!("dead replica: the longest wait for a grant after the kill: {longest_gap:?}");
    assert!(
        grants
            .last()
            .is_some_and(|t| *t > end - Duration::from_millis(500)),
        "grants stopped: {per_half:?}"
    );
    assert!(
        longest_gap < Duration::from_millis(1_500),
        "grants stopped for {longest_gap:?} after the replica died: {per_half:?}"
    );
    client.close().await;
}

/// A replica frozen past the node timeout is flagged failing by every node, but its
/// master still lists it attached (its link is up until `repl-timeout`): it may thaw and
/// be promoted, so grants wait for it (they are not confirmed without it), and flow again
/// once it thaws.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_replica_is_waited_for_even_once_flagged_failing() {
    let OneMaster {
        cluster,
        client,
        lock,
        replica,
    } = OneMaster::start("frozen-replica").await;
    lock.write().await.unwrap().release().await.unwrap();
    cluster.pause(replica.index).await.unwrap();
    // past the node timeout (2 s): the cluster flags it failing, the map drops it
    tokio::time::sleep(Duration::from_millis(4_500)).await;
    let mut refused = 0;
    for _ in 0..3 {
        match lock.try_write().await {
            Err(Error::NotReplicated { wanted, acked, .. }) => {
                assert_eq!((wanted, acked), (1, 0));
                refused += 1;
            }
            // the last refused grant not given back yet
            Ok(None) => {}
            other => panic!("a grant without the frozen replica: {other:?}"),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(refused > 0);
    cluster.unpause(replica.index).await.unwrap();
    let thawed = Instant::now();
    let w = loop {
        match lock.try_write().await {
            Ok(Some(w)) => break w,
            Ok(None) => panic!("the lock is held by nobody"),
            Err(e) => assert!(e.is_retryable(), "{e}"),
        }
        assert!(
            thawed.elapsed() < Duration::from_secs(10),
            "no grant after the thaw"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    eprintln!(
        "frozen replica: granted {:?} after the thaw",
        thawed.elapsed()
    );
    w.release().await.unwrap();
    client.close().await;
}

/// One master's only replica frozen (SIGSTOP), with a clock margin (500 ms) that the
/// test bed's node timeout (2 s) leaves room for: every `WAIT` there falls short, and
/// the other masters vouch that the master cannot be replaced before its node timeout
/// and the election delay from when they last heard it (docs/PROTOCOL.md, "A silent
/// replica"), so grants go on, each believed until then less the margin, and a hold
/// taken before the freeze is renewed on the same word for as long as the freeze lasts.
/// Prints the longest wait for a grant on that master.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_replica_stops_grants_for_a_wait_when_the_masters_vouch() {
    let OneMaster {
        cluster,
        client,
        lock,
        replica,
    } = OneMaster::start_with("vouched-replica", |c| {
        // renewed every second: the hold's confirmed belief (2.5 s) ends within the
        // freeze, and only renewals vouched for keep it
        c.lease(Duration::from_secs(3))
            .clock_margin(Duration::from_millis(500))
    })
    .await;
    let master = cluster.nodes()[0].clone();
    let held_lock = locks_on(&cluster, &client, &master, 1, "held")
        .await
        .pop()
        .unwrap();
    let held = held_lock.write().await.unwrap();
    lock.write().await.unwrap().release().await.unwrap();
    let frozen_for = frozen_for();
    let began = Instant::now();
    cluster.pause(replica.index).await.unwrap();
    let mut grants: Vec<Duration> = Vec::new();
    let mut refusals = Vec::new();
    while began.elapsed() < frozen_for {
        match lock.write_timeout(Duration::from_secs(1)).await {
            Ok(g) => {
                grants.push(began.elapsed());
                let _ = g.release().await;
            }
            Err(e) => refusals.push((began.elapsed(), e)),
        }
    }
    let kept = !held.is_lost();
    cluster.unpause(replica.index).await.unwrap();
    let mut marks = vec![Duration::ZERO];
    marks.extend(grants.iter().copied());
    marks.push(frozen_for);
    let longest = marks
        .windows(2)
        .map(|w| w[1].saturating_sub(w[0]))
        .max()
        .unwrap();
    eprintln!(
        "vouched replica: frozen {frozen_for:?}: {} grants, {} waits refused, the longest wait for a grant {longest:?}, the hold taken before the freeze {}",
        grants.len(),
        refusals.len(),
        if kept { "kept" } else { "LOST" }
    );
    // the node timeout (2 s) + 2 s: the bound; about one WAIT (500 ms) is usual
    assert!(
        longest < Duration::from_secs(4),
        "{longest:?} without a grant; refused: {refusals:?}"
    );
    assert!(grants.len() > 3, "{grants:?}");
    assert!(kept, "the hold was lost while its master stayed healthy");
    held.release().await.unwrap();
    client.close().await;
}

/// How long the replica stays frozen (`FROZEN_SECONDS`, default 6 s; the outage on a
/// 20 s freeze: `FROZEN_SECONDS=20`).
fn frozen_for() -> Duration {
    let secs = std::env::var("FROZEN_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(6);
    Duration::from_secs(secs)
}

/// One master's only replica frozen (SIGSTOP): the master lists it `online` until
/// `repl-timeout` (60 s), so every grant there waits for it and none is confirmed. A
/// wait whose time runs out on those refusals says so (`NotReplicated`, not `Timeout`)
/// and names the replica, by the address its master lists; grants resume once it
/// thaws. Prints how long the master went without a grant.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_replica_is_named_by_the_waits_it_stops() {
    let OneMaster {
        cluster,
        client,
        lock,
        replica,
    } = OneMaster::start("named-replica").await;
    lock.write().await.unwrap().release().await.unwrap();
    let frozen_for = frozen_for();
    let began = Instant::now();
    cluster.pause(replica.index).await.unwrap();
    let frozen_at = began.elapsed();
    let mut thawed_at = None;
    let mut grants: Vec<Duration> = Vec::new();
    let mut refusals: Vec<(Duration, Error)> = Vec::new();
    while began.elapsed() < frozen_for + Duration::from_secs(4) {
        if thawed_at.is_none() && began.elapsed() >= frozen_for {
            cluster.unpause(replica.index).await.unwrap();
            thawed_at = Some(began.elapsed());
        }
        match lock.write_timeout(Duration::from_secs(1)).await {
            Ok(g) => {
                grants.push(began.elapsed());
                let _ = g.release().await;
            }
            Err(e) => refusals.push((began.elapsed(), e)),
        }
    }
    let thawed_at = thawed_at.expect("thawed");
    let first_after = grants.first().copied();
    eprintln!(
        "frozen replica: frozen {frozen_at:?}..{thawed_at:?}, {} waits refused, first grant at {first_after:?}: {:?} without a grant on its master",
        refusals.len(),
        first_after.map(|t| t - frozen_at)
    );
    let port = format!(":{} (", replica.port);
    for (at, e) in &refusals {
        if *at <= thawed_at {
            assert!(
                matches!(e, Error::NotReplicated { .. }) && e.to_string().contains(&port),
                "at {at:?}: {e}"
            );
        }
    }
    if let Some((_, e)) = refusals.first() {
        eprintln!("frozen replica: {e}");
    }
    assert!(!refusals.is_empty(), "no wait was refused");
    assert!(
        grants.iter().all(|t| *t > thawed_at),
        "a grant without the frozen replica: {grants:?}"
    );
    assert!(!grants.is_empty(), "no grant after the thaw");
    client.close().await;
}

/// A replica attached to the lock's master since the client last read it (the old
/// master rejoining under a promoted one that the slot map still shows with no replica
/// is one such case): the master's own count says 1, so a grant waits for that replica,
/// and one it did not get is refused, never confirmed by the master alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_attached_since_the_last_look_is_waited_for() {
    let OneMaster {
        cluster,
        client,
        lock,
        replica,
    } = OneMaster::start("attached-replica").await;
    let master = 0;
    // the master's only replica goes to another master: grants here are confirmed by
    // the master alone (it reports no replica), once the client has seen that
    let other = cluster.nodes()[1].index;
    cluster.replicate(replica.index, other).await.unwrap();
    let alone = Instant::now();
    loop {
        match lock.try_write().await {
            Ok(Some(w)) => {
                w.release().await.unwrap();
                break;
            }
            Ok(None) => {}
            Err(e) => assert!(e.is_retryable(), "{e}"),
        }
        assert!(alone.elapsed() < Duration::from_secs(10), "no grant alone");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // it comes back, and at once its stream is cut: it acknowledges nothing
    cluster.replicate(replica.index, master).await.unwrap();
    // (the cut finds the master's replicas in the cluster's view, which follows the
    // master's own in a moment; the client makes no call meanwhile)
    let attached = Instant::now();
    while let Err(e) = cluster.cut_replication(master).await {
        assert!(attached.elapsed() < Duration::from_secs(10), "{e}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut refused = 0;
    for _ in 0..5 {
        match lock.try_write().await {
            Err(Error::NotReplicated { wanted, acked, .. }) => {
                assert_eq!((wanted, acked), (1, 0));
                refused += 1;
            }
            // the last refused grant not given back yet
            Ok(None) => {}
            other => panic!("a grant confirmed without the attached replica: {other:?}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(refused > 0);
    cluster.restore_replication(master).await.unwrap();
    let restored = Instant::now();
    let w = loop {
        match lock.try_write().await {
            Ok(Some(w)) => break w,
            Ok(None) => {}
            Err(e) => assert!(e.is_retryable(), "{e}"),
        }
        assert!(
            restored.elapsed() < Duration::from_secs(20),
            "no grant once the replica has the stream again"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    w.release().await.unwrap();
    client.close().await;
}

/// The batch's `WAIT` confirms its scripts only because the Redis client never writes a
/// command twice and writes a pipeline to one connection (see `cluster::lane`): a `WAIT`
/// sent again on a new connection would count none of the old one's writes and return
/// at once. Here no replica can acknowledge anything (the master's replication stream is
/// cut), so no grant may ever be believed; meanwhile the master's command connections
/// are killed (`CLIENT KILL`) again and again, at random points of the batches (mostly
/// while their `WAIT` blocks). A single grant believed would be a `WAIT` answered on a
/// connection its script did not run on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_grant_is_believed_without_its_wait_when_connections_die() {
    use fred::prelude::{Builder, ClientLike, Config};
    let cluster = TestCluster::start().await.expect("cluster");
    let p = prefix("wait-kill");
    let client = client_with(&cluster, |c| {
        c.prefix(&p)
            .command_timeout(Duration::from_secs(1))
            .durability(cluster_rwlock::Durability::AllReplicas {
                timeout: Duration::from_millis(40),
            })
    })
    .await;
    let master = cluster.nodes()[0].clone();
    let locks = locks_on(&cluster, &client, &master, 4, "w").await;
    // one grant each first, confirmed: the locks are known to work here
    for l in &locks {
        l.write().await.unwrap().release().await.unwrap();
    }
    cluster
        .cut_replication(master.index)
        .await
        .expect("cut_replication (needs iptables and root)");
    let admin = Builder::from_config(Config::from_url(&master.url).unwrap())
        .build()
        .unwrap();
    admin.init().await.unwrap();
    let stop = Instant::now() + Duration::from_secs(6);
    let killer = {
        let admin = admin.clone();
        tokio::spawn(async move {
            let mut kills = 0u64;
            let mut i = 0u64;
            while Instant::now() < stop {
                let killed: Result<i64, _> = admin
                    .custom(
                        fred::types::CustomCommand::new_static(
                            "CLIENT",
                            fred::types::ClusterHash::Random,
                            false,
                        ),
                        vec!["KILL", "TYPE", "normal", "SKIPME", "yes"],
                    )
                    .await;
                kills += u64::try_from(killed.unwrap_or(0)).unwrap_or(0);
                i += 1;
                // 10-160 ms apart: the WAIT blocks 40 ms, so a kill lands before, in or
                // after the WAIT of a batch, and some batches end in between
                tokio::time::sleep(Duration::from_millis(10 + (i * 7_919) % 151)).await;
            }
            kills
        })
    };
    let mut tasks = Vec::new();
    for l in locks {
        tasks.push(tokio::spawn(async move {
            let (mut believed, mut refused, mut failed) = (0, 0, 0);
            while Instant::now() < stop {
                match l.try_write().await {
                    Ok(Some(g)) => {
                        believed += 1;
                        drop(g);
                    }
                    Ok(None) => {}
                    Err(cluster_rwlock::Error::NotReplicated { .. }) => refused += 1,
                    Err(e) => {
                        assert!(e.is_retryable(), "{e}");
                        failed += 1;
                    }
                }
            }
            (believed, refused, failed)
        }));
    }
    let (mut believed, mut refused, mut failed) = (0, 0, 0);
    for t in tasks {
        let (b, r, f) = t.await.unwrap();
        believed += b;
        refused += r;
        failed += f;
    }
    let kills = killer.await.unwrap();
    eprintln!(
        "connections killed: {kills}; attempts: {believed} believed, {refused} not confirmed, {failed} failed with the connection"
    );
    cluster.restore_replication(master.index).await.unwrap();
    assert_eq!(
        believed, 0,
        "a grant believed without a replica's acknowledgement"
    );
    assert!(kills > 20, "too few connections killed: {kills}");
    assert!(refused > 0, "no attempt was refused: {failed} failed");
    let _ = admin.quit().await;
    client.close().await;
}
