//! Helpers shared by the lock tests: those that need the lock (the rest, re-exported here,
//! are the test bed's [`helpers`](cluster_rwlock_testkit::helpers)).
#![allow(dead_code)]

pub mod hung;

use cluster_rwlock::{LockClient, LockConfig, RwLock};
// (each test uses some of them)
#[allow(unused_imports)]
pub use cluster_rwlock_testkit::helpers::{
    app_acl_rule, assert_no_keys, client_port, cluster, prefix,
};
use cluster_rwlock_testkit::{NodeInfo, TestCluster};

/// A config seeded with every node (over TLS, with the cluster's CA, on a TLS cluster:
/// `CLUSTER_TLS=1`).
pub fn config(cluster: &TestCluster) -> LockConfig {
    with_tls(cluster, LockConfig::cluster(cluster.seed_urls()))
}

/// `config` with the cluster's CA when it is a TLS cluster.
pub fn with_tls(cluster: &TestCluster, config: LockConfig) -> LockConfig {
    match cluster.tls() {
        None => config,
        #[cfg(feature = "tls")]
        Some(tls) => config.tls_ca_pem(tls.ca_pem()),
        #[cfg(not(feature = "tls"))]
        Some(_) => {
            panic!("CLUSTER_TLS=1 needs the library's tls feature: --features cluster-tests,tls")
        }
    }
}

pub async fn client_with(
    cluster: &TestCluster,
    tune: impl FnOnce(LockConfig) -> LockConfig,
) -> LockClient {
    LockClient::connect(tune(config(cluster)))
        .await
        .expect("lock client")
}

pub async fn client(cluster: &TestCluster, prefix: &str) -> LockClient {
    client_with(cluster, |c| c.prefix(prefix)).await
}

/// `n` locks of `client` named `<tag><i>` whose slot is served by `master`.
pub async fn locks_on(
    cluster: &TestCluster,
    client: &LockClient,
    master: &NodeInfo,
    n: usize,
    tag: &str,
) -> Vec<RwLock> {
    let mut out = Vec::new();
    for i in 0.. {
        let lock = client.rwlock(&format!("{tag}{i}")).unwrap();
        if cluster.master_for_slot(lock.slot()).await.unwrap().port == master.port {
            out.push(lock);
            if out.len() == n {
                return out;
            }
        }
    }
    unreachable!()
}

/// The entry of `owner` in the lock hash at `key`, read with plain commands (no function
/// of the lock, which would drop an expired hold itself): its field `o:<owner>`, or the
/// summary's lone hold when it is that owner's (layout 4, docs/PROTOCOL.md). Both are
/// read in one `HMGET`: a call between two reads may move the hold from its field into
/// the summary (a renewal that drops a sibling hold leaves one), and two reads would then
/// find it in neither.
pub async fn entry_of(redis: &fred::prelude::Client, key: &str, owner: &str) -> Option<String> {
    use fred::prelude::*;
    let (summary, field): (Option<String>, Option<String>) = redis
        .hmget(key, vec!["s".to_string(), format!("o:{owner}")])
        .await
        .unwrap();
    if let Some((hold, lone)) = summary.as_deref().and_then(lone_hold) {
        return (lone == owner).then(|| hold.to_string());
    }
    field
}

/// Rewrites the entry of `owner` (see [`entry_of`]) where it is kept.
pub async fn set_entry_of(redis: &fred::prelude::Client, key: &str, owner: &str, entry: &str) {
    use fred::prelude::*;
    let summary: Option<String> = redis.hget(key, "s").await.unwrap();
    let summary = summary.unwrap_or_default();
    if let Some((hold, lone)) = lone_hold(&summary).filter(|(_, lone)| *lone == owner) {
        let head = &summary[..summary.len() - hold.len() - lone.len() - 1];
        let _: () = redis
            .hset(key, ("s", format!("{head}{entry} {lone}")))
            .await
            .unwrap();
    } else {
        let _: () = redis
            .hset(key, (format!("o:{owner}"), entry))
            .await
            .unwrap();
    }
}

/// The lone hold a summary carries, and its owner.
fn lone_hold(summary: &str) -> Option<(&str, &str)> {
    let words: Vec<&str> = summary.split(' ').collect();
    match words[..] {
        [_, _, _, _, _, _, _, _, _, hold, lone] => Some((hold, lone)),
        _ => None,
    }
}

/// The deadline (ms, server time) of a hold `<m><id>:<fence>:<deadline>:<lease>`.
pub fn deadline_of(hold: &str) -> Option<i64> {
    hold.split(':').nth(2)?.parse().ok()
}
