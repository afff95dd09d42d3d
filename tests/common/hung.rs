//! The hung-master scenario: one master stops answering (frozen, or cut off by a
//! partition) and stays so for a while, then comes back as a replica. Shared by the
//! freeze and partition tests in `faults.rs`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cluster_rwlock::{LockClient, RwLock};
use cluster_rwlock_testkit::{NodeInfo, TestCluster};

/// How a master is made to hang.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hang {
    /// SIGSTOP / `docker pause`: connections stay open, nothing answers.
    Freeze,
    /// Every packet to the node's client and bus ports is dropped.
    Partition,
}

impl Hang {
    async fn start(self, cluster: &TestCluster, index: usize) {
        match self {
            Hang::Freeze => cluster.pause(index).await.expect("pause"),
            Hang::Partition => cluster.partition(index).await.expect("partition"),
        }
    }

    async fn end(self, cluster: &TestCluster, index: usize) {
        match self {
            Hang::Freeze => cluster.unpause(index).await.expect("unpause"),
            Hang::Partition => cluster.heal(index).await.expect("heal"),
        }
    }
}

/// One acquire+release cycle: when it started, how long it took, whether it worked.
type Cycle = (Instant, Duration, bool);

/// Acquire+release cycles on `locks`, one after another, until `stop`.
fn cycle(locks: Vec<RwLock>, stop: Arc<AtomicBool>) -> tokio::task::JoinHandle<Vec<Cycle>> {
    tokio::spawn(async move {
        let mut out = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            for l in &locks {
                let t0 = Instant::now();
                let ok = match l.write_timeout(Duration::from_secs(30)).await {
                    Ok(g) => g.release().await.is_ok(),
                    Err(_) => false,
                };
                out.push((t0, t0.elapsed(), ok));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        out
    })
}

fn worst(cycles: &[Cycle], from: Instant, to: Instant) -> (usize, usize, Duration) {
    let inside: Vec<&Cycle> = cycles
        .iter()
        .filter(|(t, _, _)| *t >= from && *t < to)
        .collect();
    let failed = inside.iter().filter(|c| !c.2).count();
    let max = inside.iter().map(|c| c.1).max().unwrap_or_default();
    (inside.len(), failed, max)
}

/// Runs the scenario; `hung_for` is how long the master stays hung.
pub async fn hung_master(hang: Hang, hung_for: Duration) {
    let cluster = TestCluster::start().await.expect("cluster");
    let p = super::prefix(&format!("{hang:?}").to_lowercase());
    // longer than a failover: the replicated hold survives it, and its holder's belief
    // (the lease less a quarter) outlasts the failover and the release that follows it
    let lease = Duration::from_secs(16);
    let client = LockClient::connect(
        super::config(&cluster)
            .prefix(&p)
            .lease(lease)
            .command_timeout(Duration::from_secs(1)),
    )
    .await
    .expect("lock client");
    let masters: Vec<NodeInfo> = cluster
        .nodes()
        .into_iter()
        .filter(|n| n.index < 3)
        .collect();
    let a = masters[0].clone();
    let held = super::locks_on(&cluster, &client, &a, 1, "held")
        .await
        .remove(0);
    let slot = held.slot();
    let a_addr = format!("127.0.0.1:{}", super::client_port(&a));
    assert_eq!(client.node_for_slot(slot).as_deref(), Some(a_addr.as_str()));
    let mut healthy = Vec::new();
    for m in &masters[1..] {
        healthy.extend(super::locks_on(&cluster, &client, m, 1, "ok").await);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let guard = held.write().await.unwrap();
    let holder_fence = guard.fence();

    // five writers queue behind the holder
    let mut waiters = Vec::new();
    for _ in 0..5 {
        let lock = client.rwlock(held.name()).unwrap();
        waiters.push(tokio::spawn(async move {
            let g = lock.write_timeout(Duration::from_secs(60)).await;
            let at = Instant::now();
            let g = g.map_err(|e| e.to_string())?;
            let fence = g.fence();
            tokio::time::sleep(Duration::from_millis(50)).await;
            let released = Instant::now();
            g.release().await.map_err(|e| e.to_string())?;
            Ok::<_, String>((at, released, fence))
        }));
    }
    let cycles = cycle(healthy, stop.clone());
    // the client's route for the hung slot, sampled
    let routes = Arc::new(Mutex::new(Vec::<(Instant, Option<String>)>::new()));
    let sampler = {
        let (client, routes, stop) = (client.clone(), routes.clone(), stop.clone());
        tokio::spawn(async move {
            let mut last = None;
            while !stop.load(Ordering::Relaxed) {
                let now = client.node_for_slot(slot);
                if now != last {
                    routes.lock().unwrap().push((Instant::now(), now.clone()));
                    last = now;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    };
    tokio::time::sleep(Duration::from_millis(1500)).await;

    hang.start(&cluster, a.index).await;
    let hung = Instant::now();
    let release = tokio::spawn(async move {
        let r = guard.release().await;
        (Instant::now(), r.map_err(|e| e.to_string()))
    });
    // promotion, as the healthy nodes report it (the hung node is skipped)
    let promoted = loop {
        if let Ok(m) = cluster.master_for_slot(slot).await {
            if m.port != a.port {
                break (Instant::now(), m);
            }
        }
        assert!(hung.elapsed() < Duration::from_secs(30), "no failover");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let (promoted_at, new_master) = promoted;
    let new_addr = format!("127.0.0.1:{}", super::client_port(&new_master));
    let (released_at, released) = release.await.unwrap();
    let mut grants = Vec::new();
    for w in waiters {
        grants.push(w.await.unwrap());
    }
    let rest = hung_for.saturating_sub(hung.elapsed());
    tokio::time::sleep(rest).await;
    hang.end(&cluster, a.index).await;
    let back = Instant::now();
    cluster
        .wait_ready(Duration::from_secs(60))
        .await
        .expect("the old master rejoins as a replica");
    let rejoined = Instant::now();
    // the hung slot serves again through this client
    let mut after = Vec::new();
    for _ in 0..20 {
        let t0 = Instant::now();
        let g = held.write_timeout(Duration::from_secs(5)).await;
        let ok = match g {
            Ok(g) => g.release().await.is_ok(),
            Err(_) => false,
        };
        after.push((t0, t0.elapsed(), ok));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    stop.store(true, Ordering::Relaxed);
    let cycles = cycles.await.unwrap();
    sampler.await.unwrap();
    let routes = routes.lock().unwrap().clone();

    // figures
    let label = format!("{hang:?}").to_lowercase();
    let (n0, f0, m0) = worst(&cycles, hung - Duration::from_secs(60), hung);
    let (n1, f1, m1) = worst(&cycles, hung, promoted_at);
    let (n2, f2, m2) = worst(&cycles, promoted_at, back);
    let (n3, f3, m3) = worst(&cycles, back, Instant::now());
    eprintln!(
        "{label}: healthy-master cycles (count/failed/max): before {n0}/{f0}/{m0:?}, hung before promotion {n1}/{f1}/{m1:?}, after promotion {n2}/{f2}/{m2:?}, after the node came back {n3}/{f3}/{m3:?}"
    );
    let mut slow: Vec<&Cycle> = cycles
        .iter()
        .filter(|c| c.1 > Duration::from_millis(100))
        .collect();
    slow.sort_by_key(|c| std::cmp::Reverse(c.1));
    let slow: Vec<String> = slow
        .iter()
        .take(5)
        .map(|c| {
            format!(
                "{:?} at {:+.3}s",
                c.1,
                c.0.duration_since(hung.min(c.0)).as_secs_f64()
                    - hung.duration_since(c.0.min(hung)).as_secs_f64()
            )
        })
        .collect();
    eprintln!("{label}: healthy-master cycles over 100 ms: {slow:?}");
    let switched = routes
        .iter()
        .find(|(_, r)| r.as_deref() == Some(new_addr.as_str()))
        .map(|(t, _)| *t);
    eprintln!(
        "{label}: promotion seen {:?} after the hang; client routed the slot there {:?} after that",
        promoted_at - hung,
        switched.map(|s| s.saturating_duration_since(promoted_at))
    );
    let first_ok = after.iter().find(|c| c.2).map(|c| c.0 + c.1);
    eprintln!(
        "{label}: holder's release {:?} at +{:?} (fence {holder_fence}); node back at +{:?}, rejoined as a replica at +{:?}; slot cycles after: {} ok of {}, max {:?}, first ok +{:?}",
        released.as_ref().map(|_| "ok"),
        released_at - hung,
        back - hung,
        rejoined - hung,
        after.iter().filter(|c| c.2).count(),
        after.len(),
        after.iter().map(|c| c.1).max().unwrap_or_default(),
        first_ok.map(|f| f - hung)
    );
    // in the order they were granted
    let mut ordered: Vec<&Result<(Instant, Instant, u64), String>> = grants.iter().collect();
    ordered.sort_by_key(|g| g.as_ref().map(|g| g.0).ok());
    let mut previous = released_at;
    let mut lags = Vec::new();
    for g in ordered {
        match g {
            Ok((at, rel, fence)) => {
                lags.push(at.saturating_duration_since(previous));
                eprintln!(
                    "{label}: waiter granted at +{:?} (fence {fence}), {:?} after the previous release",
                    *at - hung,
                    at.saturating_duration_since(previous)
                );
                previous = *rel;
            }
            Err(e) => eprintln!("{label}: waiter failed: {e}"),
        }
    }

    // what must hold: the release goes through and says so (a release sent again after
    // a sending whose reply never came may find nothing: the first one released it)
    assert!(
        matches!(&released, Ok(())),
        "the holder's release goes through: {released:?}"
    );
    for g in &grants {
        let (at, _, fence) = g.as_ref().expect("every waiter is granted");
        assert!(*fence > holder_fence);
        assert!(
            *at > hung,
            "no waiter is granted before the holder releases"
        );
    }
    // in queue order, one after another, each woken by the release message: the timer
    // of a waiter is lease/3 (2.7 s) away
    let mut by_grant: Vec<_> = grants.iter().flatten().collect();
    by_grant.sort_by_key(|g| g.0);
    for w in by_grant.windows(2) {
        assert!(w[1].0 >= w[0].1, "no two waiters hold at once");
    }
    assert!(
        by_grant[0].0 + Duration::from_millis(500) >= released_at,
        "the first waiter was not granted long before the release returned"
    );
    for lag in &lags {
        assert!(
            *lag < Duration::from_millis(500),
            "woken by message: {lag:?}"
        );
    }
    assert_eq!(f0 + f1 + f2 + f3, 0, "no cycle on a healthy master fails");
    for m in [m0, m1, m2, m3] {
        assert!(
            m < Duration::from_secs(1),
            "healthy-master cycle took {m:?}"
        );
    }
    let switched = switched.expect("the client routes the slot to the promoted replica");
    assert!(
        switched < promoted_at + Duration::from_secs(1),
        "routed within 1 s of the promotion: {:?}",
        switched.saturating_duration_since(promoted_at)
    );
    // once moved, never back to the old master, also after it came back
    assert!(
        routes
            .iter()
            .filter(|(t, _)| *t > switched)
            .all(|(_, r)| r.as_deref() != Some(a_addr.as_str())),
        "routes after the switch: {routes:?}"
    );
    assert!(
        after.iter().all(|c| c.2),
        "the slot serves after the node came back"
    );
    client.close().await;
    super::assert_no_keys(&cluster, &p).await;
}
