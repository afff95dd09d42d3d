//! The helpers of these tests that need the lock's client (the library's tests have the
//! same ones); those that need only the test bed are its
//! [`helpers`](cluster_rwlock_testkit::helpers), re-exported here.

use cluster_rwlock::{LockClient, LockConfig, RwLock};
pub use cluster_rwlock_testkit::helpers::{app_acl_rule, cluster, prefix};
use cluster_rwlock_testkit::{NodeInfo, TestCluster};

/// A config seeded with every node (with the cluster's CA on a TLS cluster).
fn config(cluster: &TestCluster) -> LockConfig {
    let config = LockConfig::cluster(cluster.seed_urls());
    match cluster.tls() {
        None => config,
        Some(tls) => config.tls_ca_pem(tls.ca_pem()),
    }
}

/// A client of the cluster, its config tuned by `tune`.
pub async fn client_with(
    cluster: &TestCluster,
    tune: impl FnOnce(LockConfig) -> LockConfig,
) -> LockClient {
    LockClient::connect(tune(config(cluster)))
        .await
        .expect("lock client")
}

/// A client of the cluster with the key prefix `prefix`.
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
