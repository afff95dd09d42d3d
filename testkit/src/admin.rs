//! Short-lived admin connections to single nodes, and the cluster views built from them.
//!
//! Every call opens its own connection and closes it, so that the helpers work from any
//! runtime and never hang on a paused node (each call has a deadline).

use std::time::Duration;

use fred::prelude::*;
use fred::types::{ClusterHash, CustomCommand};

use super::TestkitError;

const CALL_TIMEOUT: Duration = Duration::from_millis(1500);

/// Runs one command on the node at `port` and returns its reply.
pub(crate) async fn call(
    port: u16,
    cmd: &'static str,
    args: Vec<String>,
) -> Result<Value, TestkitError> {
    let work = async {
        let config = Config::from_url(&format!("redis://127.0.0.1:{port}"))?;
        let client = Builder::from_config(config)
            .with_connection_config(|c| {
                c.connection_timeout = CALL_TIMEOUT;
                c.internal_command_timeout = CALL_TIMEOUT;
            })
            .with_performance_config(|p| p.default_command_timeout = CALL_TIMEOUT)
            .build()?;
        client.init().await?;
        let reply: Result<Value, Error> = client
            .custom(
                CustomCommand::new_static(cmd, ClusterHash::Random, false),
                args,
            )
            .await;
        let _ = client.quit().await;
        reply
    };
    match tokio::time::timeout(CALL_TIMEOUT * 2, work).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(TestkitError::Command(format!("{cmd} on port {port}: {e}"))),
        Err(_) => Err(TestkitError::Command(format!(
            "{cmd} on port {port}: no reply in time"
        ))),
    }
}

/// `call` for commands that answer with text.
pub(crate) async fn text(
    port: u16,
    cmd: &'static str,
    args: &[&str],
) -> Result<String, TestkitError> {
    let v = call(port, cmd, args.iter().map(|s| s.to_string()).collect()).await?;
    v.into_string()
        .ok_or_else(|| TestkitError::Command(format!("{cmd} on port {port}: reply is not text")))
}

/// One line of CLUSTER NODES.
#[derive(Debug, Clone)]
pub(crate) struct NodeLine {
    pub id: String,
    pub port: u16,
    pub flags: String,
    pub master_id: String,
    pub has_slots: bool,
}

/// In one `CLUSTER NODES` view: each healthy master that serves slots, with its healthy
/// replicas.
pub(crate) fn masters_and_replicas(lines: &[NodeLine]) -> Vec<(&NodeLine, Vec<&NodeLine>)> {
    lines
        .iter()
        .filter(|l| l.is_master() && l.has_slots && !l.is_failed())
        .map(|m| {
            let replicas = lines
                .iter()
                .filter(|l| !l.is_master() && !l.is_failed() && l.master_id == m.id)
                .collect();
            (m, replicas)
        })
        .collect()
}

impl NodeLine {
    pub fn is_master(&self) -> bool {
        self.flags.contains("master")
    }
    pub fn is_failed(&self) -> bool {
        self.flags.contains("fail")
            || self.flags.contains("handshake")
            || self.flags.contains("noaddr")
    }
}

pub(crate) async fn cluster_nodes(port: u16) -> Result<Vec<NodeLine>, TestkitError> {
    let raw = text(port, "CLUSTER", &["NODES"]).await?;
    Ok(raw
        .lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 8 {
                return None;
            }
            let addr = f[1].split('@').next()?;
            let port = addr.rsplit(':').next()?.parse().ok()?;
            Some(NodeLine {
                id: f[0].to_string(),
                port,
                flags: f[2].to_string(),
                master_id: f[3].to_string(),
                has_slots: f.len() > 8,
            })
        })
        .collect())
}

pub(crate) async fn cluster_state_ok(port: u16) -> bool {
    matches!(text(port, "CLUSTER", &["INFO"]).await, Ok(info) if info.contains("cluster_state:ok"))
}

/// `(first slot, last slot, master port)` for every range, from CLUSTER SLOTS.
pub(crate) async fn slot_ranges(port: u16) -> Result<Vec<(u16, u16, u16)>, TestkitError> {
    let reply = call(port, "CLUSTER", vec!["SLOTS".into()]).await?;
    let ranges = parse_cluster_slots(reply).ok_or_else(|| {
        TestkitError::Command(format!("CLUSTER SLOTS on port {port}: unexpected reply"))
    })?;
    Ok(ranges.into_iter().map(|(a, b, _, p)| (a, b, p)).collect())
}

/// Whether the replica at `port` has finished its sync with its master.
pub(crate) async fn replica_synced(port: u16) -> bool {
    matches!(text(port, "INFO", &["replication"]).await, Ok(info) if info.contains("master_link_status:up"))
}

/// One range of a `CLUSTER SLOTS` reply: first slot, last slot, master host, master port.
pub(crate) type SlotRange = (u16, u16, String, u16);

/// The ranges of a `CLUSTER SLOTS` reply, sorted; `None` when the reply is not one.
pub(crate) fn parse_cluster_slots(reply: fred::prelude::Value) -> Option<Vec<SlotRange>> {
    use fred::prelude::Value;
    let int = |v: &Value| v.as_i64().and_then(|i| u16::try_from(i).ok());
    let Value::Array(ranges) = reply else {
        return None;
    };
    let mut out = Vec::with_capacity(ranges.len());
    for range in ranges {
        let Value::Array(parts) = range else {
            return None;
        };
        let Some(Value::Array(master)) = parts.get(2) else {
            return None;
        };
        out.push((
            int(parts.first()?)?,
            int(parts.get(1)?)?,
            master.first()?.as_string()?,
            int(master.get(1)?)?,
        ));
    }
    out.sort();
    Some(out)
}
