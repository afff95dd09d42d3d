//! The server's command line: the options every node of the test bed starts with, in
//! both backends. A leaf, used by the node launchers.

use super::secure::SecureConf;

/// The server's command line for the node on `port`, with its files in `dir`, and the
/// cluster's TLS and ACL options when `conf` gives them (with the path at which the node
/// sees the configuration directory).
pub(super) fn node_args(port: u16, dir: &str, conf: Option<(&SecureConf, &str)>) -> Vec<String> {
    let cluster_conf = format!("nodes-{port}.conf");
    let node_timeout = node_timeout_ms().to_string();
    let mut args: Vec<String> = [
        "--port",
        &port.to_string(),
        "--bind",
        "127.0.0.1",
        "--protected-mode",
        "no",
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        &cluster_conf,
        "--cluster-require-full-coverage",
        "no",
        "--cluster-node-timeout",
        &node_timeout,
        "--cluster-replica-validity-factor",
        "0",
        "--cluster-announce-ip",
        "127.0.0.1",
        "--save",
        "",
        // a killed master that restarts before its failover must not come back empty
        // (and have its replica resync to nothing): the lock's holds survive a restart
        // only with the append-only file (written before each reply; everysec fsyncs
        // matter only for a machine that crashes)
        "--appendonly",
        "yes",
        "--appendfsync",
        "everysec",
        "--repl-diskless-sync-delay",
        "0",
        "--dir",
        dir,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if let Some((conf, inside)) = conf {
        args.extend(conf.args(port, inside));
    }
    args
}

/// The nodes' `cluster-node-timeout` (ms): 2000, or `CLUSTER_NODE_TIMEOUT_MS` when set to
/// a number (a longer one leaves a grant made without a silent replica a longer belief:
/// the nemesis runs with 5000 for that).
pub(super) fn node_timeout_ms() -> u64 {
    std::env::var("CLUSTER_NODE_TIMEOUT_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000)
}
