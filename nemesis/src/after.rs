//! After the run, once every fault has healed and every worker has ended: can each name
//! be taken, and is anything left behind?

use std::time::Duration;

use cluster_rwlock::LockClient;
use cluster_rwlock_testkit::TestCluster;
use fred::interfaces::HashesInterface;

use crate::history::{now, Event};

/// After the run: how long a fresh client takes to get each name for write.
pub async fn probes(client: &LockClient, names: &[String]) -> Vec<Event> {
    let mut out = Vec::new();
    for name in names {
        let start = now();
        let began = std::time::Instant::now();
        let r = match client.rwlock(name) {
            Ok(lock) => lock.write_timeout(Duration::from_secs(20)).await,
            Err(e) => Err(e),
        };
        let took = began.elapsed().as_secs_f64();
        let (took_s, error) = match r {
            Ok(g) => {
                let _ = g.release().await;
                (Some(took), None)
            }
            Err(e) => (None, Some(e.to_string())),
        };
        out.push(Event::Probe {
            name: name.clone(),
            start,
            took_s,
            error,
        });
    }
    out
}

/// The key of a name's guarded log: in the lock's slot (the hashtag of its key), outside
/// the lock's prefix (so that it is not taken for a lock left behind).
pub fn guarded_log_key(lock_key: &str, name: &str) -> String {
    let tag = lock_key
        .find('{')
        .and_then(|i| lock_key[i..].find('}').map(|j| &lock_key[i..=i + j]))
        .unwrap_or("");
    format!("nemesis-glog:{tag}:{name}")
}

/// After the run: each name's guarded log, as the server has it. A log that cannot be
/// read (after a few tries, the cluster healed) fails the run: read as empty, every
/// guarded write to it would be reported lost.
pub async fn guarded_logs(client: &LockClient, names: &[String]) -> Result<Vec<Event>, String> {
    use fred::interfaces::ListInterface;
    let mut out = Vec::new();
    for name in names {
        let Ok(lock) = client.rwlock(name) else {
            continue;
        };
        let key = guarded_log_key(lock.key(), name);
        let mut tries = 0;
        let entries: Vec<String> = loop {
            match client.redis().lrange(key.as_str(), 0, -1).await {
                Ok(entries) => break entries,
                Err(e) if tries >= 10 => return Err(format!("reading {key}: {e}")),
                Err(_) => {
                    tries += 1;
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            }
        };
        out.push(Event::GuardedLog {
            name: name.clone(),
            entries,
        });
    }
    Ok(out)
}

/// After the run: lock keys left on the masters, and whether they outlive a lease.
pub async fn leftovers(
    cluster: &TestCluster,
    client: &LockClient,
    prefix: &str,
    lease: Duration,
) -> Vec<Event> {
    let pattern = format!("{prefix}:*");
    let first = lock_keys(cluster, &pattern).await;
    if first.is_empty() {
        return Vec::new();
    }
    let mut contents = Vec::new();
    for key in &first {
        let content: Result<std::collections::HashMap<String, String>, _> =
            client.redis().hgetall(key.as_str()).await;
        contents.push(match content {
            Ok(map) => format!("{map:?}"),
            Err(e) => format!("(HGETALL failed: {e})"),
        });
    }
    tokio::time::sleep(lease + Duration::from_secs(1)).await;
    let later = lock_keys(cluster, &pattern).await;
    first
        .into_iter()
        .zip(contents)
        .map(|(key, content)| Event::Leftover {
            persisted: later.contains(&key),
            key,
            content,
        })
        .collect()
}

/// Lock keys matching `pattern` on the masters that record a hold (tombstones aside).
async fn lock_keys(cluster: &TestCluster, pattern: &str) -> Vec<String> {
    cluster
        .held_keys_matching(pattern)
        .await
        .unwrap_or_default()
}
