//! Multi-locks against the six-node cluster: no deadlock and no overlap whatever order
//! callers list their names in, mixed with single locks; nothing left behind by timeouts,
//! failed tries and cancellations.

mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cluster_rwlock::{Error, LockClient, Mode};
use common::{assert_no_keys, client, cluster, locks_on, prefix};

/// xorshift: reproducible randomness without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Five names: two on each of two masters, one on the third.
async fn five_names(client: &LockClient) -> Vec<String> {
    let cluster = cluster().await;
    let mut names = Vec::new();
    for (slot, n) in [(0u16, 2usize), (8000, 2), (16000, 1)] {
        let master = cluster.master_for_slot(slot).await.unwrap();
        for lock in locks_on(cluster, client, &master, n, &format!("m{slot}-")).await {
            names.push(lock.name().to_string());
        }
    }
    names
}

/// Who holds each name, as the test's tasks believe: readers count up, a writer is -1.
type Book = Arc<Mutex<HashMap<String, i64>>>;

fn enter(book: &Book, name: &str, mode: Mode) {
    let mut b = book.lock().unwrap();
    let n = b.entry(name.to_string()).or_insert(0);
    match mode {
        Mode::Write => {
            assert_eq!(*n, 0, "a writer entered {name} while held ({n})");
            *n = -1;
        }
        _ => {
            assert!(*n >= 0, "a reader entered {name} while written");
            *n += 1;
        }
    }
}

fn leave(book: &Book, name: &str, mode: Mode) {
    let mut b = book.lock().unwrap();
    let n = b.get_mut(name).unwrap();
    match mode {
        Mode::Write => *n = 0,
        _ => *n -= 1,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_subsets_in_random_orders_never_deadlock_or_overlap() {
    let cluster = cluster().await;
    let p = prefix("multi");
    let names = Arc::new(five_names(&client(cluster, &p).await).await);
    let book: Book = Arc::default();
    let until = Instant::now() + Duration::from_secs(30);
    let mut tasks = Vec::new();
    for t in 0..8u64 {
        let (names, book) = (names.clone(), book.clone());
        let client = client(cluster, &p).await;
        tasks.push(tokio::spawn(async move {
            let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ ((t + 1) * 0x1000_0001));
            let (mut multis, mut singles) = (0u32, 0u32);
            while Instant::now() < until {
                // a random subset of 1 to 5 names, in a random order, random modes
                let mut picked: Vec<(String, Mode)> = Vec::new();
                let mut pool: Vec<String> = names.to_vec();
                let size = 1 + rng.below(5) as usize;
                for _ in 0..size {
                    let name = pool.remove(rng.below(pool.len() as u64) as usize);
                    let mode = if rng.below(3) == 0 {
                        Mode::Read
                    } else {
                        Mode::Write
                    };
                    picked.push((name, mode));
                }
                if rng.below(4) == 0 {
                    // a single lock among the multi-locks
                    let (name, mode) = &picked[0];
                    let lock = client.rwlock(name).unwrap();
                    let g: cluster_rwlock::AnyGuard = match mode {
                        Mode::Write => lock.write_timeout(Duration::from_secs(20)).await?.into(),
                        _ => lock.read_timeout(Duration::from_secs(20)).await?.into(),
                    };
                    enter(&book, name, *mode);
                    tokio::time::sleep(Duration::from_millis(rng.below(3))).await;
                    leave(&book, name, *mode);
                    g.release().await?;
                    singles += 1;
                    continue;
                }
                let multi = client
                    .multi(picked.iter().map(|(n, m)| (n.as_str(), *m)))
                    .unwrap();
                // a deadlock would show as this timeout
                let g = multi.lock_timeout(Duration::from_secs(20)).await?;
                assert_eq!(g.fences().len(), picked.len());
                for (name, mode) in &picked {
                    enter(&book, name, *mode);
                }
                tokio::time::sleep(Duration::from_millis(rng.below(3))).await;
                for (name, mode) in &picked {
                    leave(&book, name, *mode);
                }
                g.release().await?;
                multis += 1;
            }
            client.close().await;
            Ok::<_, Error>((multis, singles))
        }));
    }
    let mut total = 0;
    for (i, t) in tasks.into_iter().enumerate() {
        let (multis, singles) = t
            .await
            .unwrap()
            .expect("no deadlock: every call returned in time");
        eprintln!("task {i}: {multis} multi-locks, {singles} single locks");
        assert!(
            multis >= 5,
            "task {i} made little progress: {multis} multi-locks"
        );
        total += multis + singles;
    }
    eprintln!("{total} grants in 30 s by 8 tasks");
    assert_no_keys(cluster, &p).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeouts_failed_tries_and_cancellations_leave_nothing_behind() {
    let cluster = cluster().await;
    let p = prefix("multi-cancel");
    let client = client(cluster, &p).await;
    let names = five_names(&client).await;
    let all = || names.iter().map(|n| (n.as_str(), Mode::Write));
    // the fourth name in the global order is held elsewhere
    let multi = client.multi(all()).unwrap();
    let blocked = multi.members().nth(3).unwrap().0.name().to_string();
    let other = common::client(cluster, &p).await;
    let blocker = other.rwlock(&blocked).unwrap().write().await.unwrap();

    assert!(multi.try_lock().await.unwrap().is_none());
    match multi.lock_timeout(Duration::from_millis(300)).await {
        Err(Error::Timeout(t)) => assert_eq!(t, Duration::from_millis(300)),
        other => panic!("{other:?}"),
    }
    // cancelled at many points: while taking the first names, while waiting
    let mut rng = Rng(42);
    for _ in 0..20 {
        let wait = Duration::from_millis(rng.below(60));
        assert!(tokio::time::timeout(wait, multi.lock()).await.is_err());
    }
    // nothing held but the blocker, nobody queued
    tokio::time::sleep(Duration::from_millis(300)).await;
    for name in &names {
        let s = client.rwlock(name).unwrap().state().await.unwrap();
        assert!(s.waiting_writers.is_empty(), "{name}: {s:?}");
        let expected = usize::from(name == &blocked);
        assert_eq!(s.holders.len(), expected, "{name}: {s:?}");
    }
    // the blocker gone: the multi-lock is granted, with every fence
    blocker.release().await.unwrap();
    let g = multi.lock_timeout(Duration::from_secs(5)).await.unwrap();
    assert_eq!(g.fences().len(), 5);
    g.release().await.unwrap();

    // a name given twice, or none: typed errors
    assert!(matches!(
        client.multi([("x", Mode::Read), ("x", Mode::Write)]),
        Err(Error::InvalidName(_))
    ));
    assert!(matches!(
        client.multi(Vec::<(&str, Mode)>::new()),
        Err(Error::InvalidName(_))
    ));
    other.close().await;
    client.close().await;
    assert_no_keys(cluster, &p).await;
}

/// A multi-lock of free members sends one attempt per member at once: the lanes send
/// the attempts to each master in one batch, so it takes one confirmed round (`WAIT`)
/// per master, not one per member; a busy member takes the rest in order, and nothing
/// is left behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn free_members_take_one_confirmed_round_per_master() {
    let cluster = cluster().await;
    let p = prefix("multi-rounds");
    // a long lease: no renewal round (whose WAITs count too) during the test
    let client =
        common::client_with(cluster, |c| c.prefix(&p).lease(Duration::from_secs(60))).await;
    // four names on three masters: two on the first, two on the second, and the third
    // name of five_names is skipped so that the four cover all three masters
    let five = five_names(&client).await;
    let names: Vec<String> = [0, 1, 2, 4].iter().map(|&i| five[i].clone()).collect();
    let multi = client
        .multi(names.iter().map(|n| (n.as_str(), Mode::Write)))
        .unwrap();
    for _ in 0..5 {
        let before = client.stats().confirmations;
        let g = multi.lock().await.unwrap();
        assert_eq!(
            client.stats().confirmations - before,
            3,
            "one WAIT per master"
        );
        assert_eq!(g.fences().len(), 4);
        g.release().await.unwrap();
        let before = client.stats().confirmations;
        let g = multi.try_lock().await.unwrap().expect("free");
        assert_eq!(
            client.stats().confirmations - before,
            3,
            "one WAIT per master"
        );
        g.release().await.unwrap();
    }
    // one member busy: the multi-lock waits for it, and gets every member after it
    let busy = multi.members().nth(1).unwrap().0.name().to_string();
    let other = common::client(cluster, &p).await;
    let blocker = other.rwlock(&busy).unwrap().write().await.unwrap();
    let waiter = tokio::spawn({
        let multi = multi.clone();
        async move { multi.lock_timeout(Duration::from_secs(10)).await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!waiter.is_finished());
    blocker.release().await.unwrap();
    let g = waiter.await.unwrap().unwrap();
    assert_eq!(g.fences().len(), 4);
    g.release().await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    for name in &names {
        let state = client.rwlock(name).unwrap().state().await.unwrap();
        assert!(
            state.holders.is_empty() && state.waiting_writers.is_empty(),
            "{name}: {state:?}"
        );
    }
    client.close().await;
    other.close().await;
}
