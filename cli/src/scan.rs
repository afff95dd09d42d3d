//! The lock keys under a prefix, on every master (`SCAN` of hashes): what `list`,
//! `break --all` and `top` read.

use cluster_rwlock::LockClient;
use fred::prelude::*;
use fred::types::scan::{ScanType, Scanner};
use futures_util::StreamExt;

/// Every lock key under the prefix, on every master.
pub async fn lock_keys(client: &LockClient, prefix: &str) -> Result<Vec<String>, Error> {
    let redis = client.redis();
    redis.wait_for_connect().await?;
    let pattern = format!("{prefix}:*");
    let mut pages = if redis.is_clustered() {
        redis
            .scan_cluster(pattern, Some(1000), Some(ScanType::Hash))
            .boxed()
    } else {
        redis
            .scan(pattern, Some(1000), Some(ScanType::Hash))
            .boxed()
    };
    let mut keys = Vec::new();
    while let Some(page) = pages.next().await {
        let mut page = page?;
        for k in page.take_results().unwrap_or_default() {
            if let Some(k) = k.as_str() {
                keys.push(k.to_string());
            }
        }
        page.next();
    }
    keys.sort();
    keys.dedup();
    Ok(keys)
}
