//! The metrics a known sequence of operations leaves, read back through a recorder
//! installed for this test binary (one test: the recorder is global).

mod common;

use std::collections::HashMap;
use std::time::Duration;

use cluster_rwlock::Error;
use common::{client, cluster, prefix};
use fred::interfaces::KeysInterface;
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use metrics_util::MetricKind;

type Metrics = HashMap<(MetricKind, String, Vec<String>), f64>;

/// (kind, name, labels) -> value: gauges as they are, counters and histograms (number of
/// samples) since the start (a snapshot drains them: `seen` adds them up).
fn read(snapshotter: &Snapshotter, seen: &mut Metrics) -> Metrics {
    let now: Metrics = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(key, _, _, value)| {
            let (kind, key) = key.into_parts();
            let labels = key
                .labels()
                .map(|l| format!("{}={}", l.key(), l.value()))
                .collect();
            let v = match value {
                DebugValue::Counter(c) => c as f64,
                DebugValue::Gauge(g) => g.into_inner(),
                DebugValue::Histogram(h) => h.len() as f64,
            };
            ((kind, key.name().to_string(), labels), v)
        })
        .collect();
    for (k, v) in now {
        if k.0 != MetricKind::Gauge {
            *seen.entry(k).or_default() += v;
        } else {
            seen.insert(k, v);
        }
    }
    seen.clone()
}

fn get(
    m: &HashMap<(MetricKind, String, Vec<String>), f64>,
    kind: MetricKind,
    name: &str,
    labels: &[&str],
) -> f64 {
    let labels = labels.iter().map(|s| s.to_string()).collect();
    m.get(&(kind, name.to_string(), labels))
        .copied()
        .unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_known_sequence_leaves_known_counts() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder
        .install()
        .expect("the only recorder of this binary");
    let mut seen = Metrics::new();

    let cluster = cluster().await;
    let p = prefix("metrics");
    let client = client(cluster, &p).await;
    let lock = client.rwlock("res").unwrap();

    // 2 read grants, 1 busy write attempt, 1 write timeout
    let r1 = lock.read().await.unwrap();
    let r2 = lock.try_read().await.unwrap().expect("readers share");
    assert!(lock.try_write().await.unwrap().is_none());
    assert!(matches!(
        lock.write_timeout(Duration::from_millis(200)).await,
        Err(Error::Timeout(_))
    ));
    let m = read(&snapshotter, &mut seen);
    assert_eq!(get(&m, MetricKind::Gauge, "cluster_rwlock_held", &[]), 2.0);
    r1.release().await.unwrap();
    r2.release().await.unwrap();

    // a writer waits and is handed the lock by the reader's release
    let r = lock.read().await.unwrap();
    let waiting = tokio::spawn({
        let lock = lock.clone();
        async move { lock.write().await.map(|g| g.fence()) }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let m = read(&snapshotter, &mut seen);
    assert_eq!(
        get(&m, MetricKind::Gauge, "cluster_rwlock_waiting", &[]),
        1.0
    );
    r.release().await.unwrap();
    waiting.await.unwrap().unwrap(); // its guard is dropped: released in the background

    // a lost lease: the hash deleted behind a holder
    let short =
        common::client_with(cluster, |c| c.prefix(&p).lease(Duration::from_millis(900))).await;
    let held = short.rwlock("gone").unwrap().write().await.unwrap();
    client
        .redis()
        .del::<i64, _>(held.lock().key())
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(5), held.lost())
        .await
        .expect("told");
    drop(held);
    tokio::time::sleep(Duration::from_millis(300)).await;

    let m = read(&snapshotter, &mut seen);
    let c = |name, labels: &[&str]| get(&m, MetricKind::Counter, name, labels);
    assert_eq!(c("cluster_rwlock_grants_total", &["mode=read"]), 3.0);
    assert_eq!(c("cluster_rwlock_grants_total", &["mode=write"]), 2.0);
    assert_eq!(c("cluster_rwlock_timeouts_total", &["mode=write"]), 1.0);
    assert_eq!(c("cluster_rwlock_handoffs_total", &[]), 1.0);
    assert_eq!(c("cluster_rwlock_lost_total", &[]), 1.0);
    assert!(
        c("cluster_rwlock_renewals_total", &[]) >= 1.0,
        "the short lease was renewed"
    );
    let h = |name, labels: &[&str]| get(&m, MetricKind::Histogram, name, labels);
    assert_eq!(
        h("cluster_rwlock_acquire_wait_seconds", &["mode=read"]),
        3.0
    );
    assert_eq!(h("cluster_rwlock_hold_seconds", &["mode=read"]), 3.0);
    assert_eq!(h("cluster_rwlock_hold_seconds", &["mode=write"]), 2.0);
    assert_eq!(get(&m, MetricKind::Gauge, "cluster_rwlock_held", &[]), 0.0);
    assert_eq!(
        get(&m, MetricKind::Gauge, "cluster_rwlock_waiting", &[]),
        0.0
    );
    // no series carries the lock name unless asked
    assert!(m
        .keys()
        .all(|(_, _, labels)| labels.iter().all(|l| !l.starts_with("lock="))));
}
