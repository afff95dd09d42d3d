//! Helpers shared by the lock tests.
#![allow(dead_code)]

pub mod hung;

use std::time::Duration;

use cluster_rwlock::{LockClient, LockConfig, RwLock};
use cluster_rwlock_testkit::{NodeInfo, TestCluster};

pub async fn cluster() -> &'static TestCluster {
    TestCluster::shared().await.expect("test cluster")
}

/// README's least-privilege ACL rule for the lock's application user, for the key
/// prefix `prefix` (the rules after `ACL SETUSER <user> on ><password>`).
pub fn app_acl_rule(prefix: &str) -> String {
    "resetkeys resetchannels ~<prefix>:* &<prefix>:* -@all +evalsha +script|load +wait +client|id +info +cluster|nodes +ping +asking +ssubscribe +sunsubscribe +spublish +hget +hmget +hset +hdel +hgetall +exists +pexpire +time +type +quit"
        .replace("<prefix>", prefix)
}

/// A prefix no other test uses.
pub fn prefix(test: &str) -> String {
    format!(
        "t-{test}-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    )
}

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

/// The port a client reaches `node` on: its TLS port on a TLS cluster.
pub fn client_port(node: &NodeInfo) -> u16 {
    node.tls_port.unwrap_or(node.port)
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

/// Waits (up to 3 s, for background releases) until no key with `prefix` records a hold
/// (a free lock's tombstone, its summary alone, stays a minute to remember its fence).
pub async fn assert_no_keys(cluster: &TestCluster, prefix: &str) {
    let pattern = format!("{prefix}:*");
    let mut left = Vec::new();
    for _ in 0..60 {
        left = cluster.held_keys_matching(&pattern).await.expect("KEYS");
        if left.is_empty() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("keys left with prefix {prefix}: {left:?}");
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
