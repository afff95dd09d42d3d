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
