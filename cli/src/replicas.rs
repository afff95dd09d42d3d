//! The replicas of a master that are not acknowledging (a state other than `online`,
//! or no ACK for over two seconds), as the master lists them (`INFO replication`): a
//! grant on that master waits for every replica it lists, so one of them frozen, cut
//! off or in a full sync stops every grant there (`docs/GUARANTEES.md`). `inspect`
//! and `top` show them. Best effort: a master that cannot be asked (`INFO` not allowed
//! to the user, no answer) shows none.

use std::time::Duration;

use cluster_rwlock::error::ReplicaStatus;
use cluster_rwlock::LockClient;
use fred::prelude::*;
use serde_json::{json, Value as Json};

/// How long a master is given to answer `INFO replication`.
const WITHIN: Duration = Duration::from_secs(2);

/// The replicas `master` (`host:port`) lists, or `None` when it could not be asked.
pub async fn of(client: &LockClient, master: &str) -> Option<Vec<ReplicaStatus>> {
    let server = fred::types::config::Server::try_from(master).ok()?;
    let node = client.redis().with_cluster_node(server);
    let asked = node.info::<String>(Some(fred::types::InfoKind::Replication));
    let info = tokio::time::timeout(WITHIN, asked).await.ok()?.ok()?;
    Some(ReplicaStatus::parse_info(&info))
}

/// Whether `r` is not acknowledging.
pub fn silent(r: &ReplicaStatus) -> bool {
    r.is_silent(ReplicaStatus::SILENT_AFTER)
}

/// One replica as JSON.
pub fn json(r: &ReplicaStatus) -> Json {
    json!({
        "addr": r.addr,
        "state": r.state,
        "lag_s": r.lag_secs,
        "behind": r.behind,
        "silent": silent(r),
    })
}

/// The warning for a replica of `master` that is not acknowledging.
pub fn warning(master: &str, r: &ReplicaStatus) -> String {
    format!("replica {r} of {master} NOT ACKNOWLEDGING: grants on that master wait for it")
}
