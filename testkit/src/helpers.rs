//! Small helpers for tests of a lock on the test bed, which need nothing but the test
//! bed: the shared cluster, a key prefix of the test's own, the port a client reaches a
//! node on, a check that no hold is left, and the least-privilege ACL rule (docs/SECURITY.md) for
//! cluster-rwlock's application user.
//!
//! They panic when something fails: they are for tests.
//!
//! ```no_run
//! # async fn demo() {
//! use cluster_rwlock_testkit::helpers::{assert_no_keys, cluster, prefix};
//!
//! let cluster = cluster().await;
//! let p = prefix("my-test");
//! // ... locks under the key prefix `p`, all released ...
//! assert_no_keys(cluster, &p).await;
//! # }
//! ```

use std::time::Duration;

use crate::{NodeInfo, TestCluster};

/// The process's shared cluster ([`TestCluster::shared`]); panics when it cannot start.
pub async fn cluster() -> &'static TestCluster {
    TestCluster::shared().await.expect("test cluster")
}

/// The least-privilege ACL rule of docs/SECURITY.md for the lock's application user, for the key
/// prefix `prefix` (the rules after `ACL SETUSER <user> on ><password>`). It may call
/// the lock's functions, not load them: the library is loaded by `cluster-rwlock setup`
/// (or any client whose user may run `FUNCTION LOAD`) before this user connects.
///
/// ```
/// let rule = cluster_rwlock_testkit::helpers::app_acl_rule("app");
/// assert!(rule.starts_with("resetkeys resetchannels ~app:* &app:* -@all"));
/// ```
pub fn app_acl_rule(prefix: &str) -> String {
    "resetkeys resetchannels ~<prefix>:* &<prefix>:* -@all +fcall +wait +client|id +info +cluster|nodes +ping +asking +ssubscribe +sunsubscribe +spublish +hget +hmget +hset +hdel +hgetall +exists +pexpireat +time +type +quit"
        .replace("<prefix>", prefix)
}

/// A prefix no other test uses: `t-<test>-<8 random hex digits>`.
///
/// ```
/// let p = cluster_rwlock_testkit::helpers::prefix("slot");
/// assert!(p.starts_with("t-slot-"));
/// assert_ne!(p, cluster_rwlock_testkit::helpers::prefix("slot"));
/// ```
pub fn prefix(test: &str) -> String {
    format!(
        "t-{test}-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    )
}

/// The port a client reaches `node` on: its TLS port on a TLS cluster.
pub fn client_port(node: &NodeInfo) -> u16 {
    node.tls_port.unwrap_or(node.port)
}

/// Waits (up to 3 s, for background releases) until no key with `prefix` records a hold
/// (a free lock's tombstone, its summary alone, stays a minute to remember its fence);
/// panics with the keys left when some are.
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
