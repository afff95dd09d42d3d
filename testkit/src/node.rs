//! A node of the cluster: what is public about it, what runs it, its logs and its
//! removal.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use testcontainers::{ContainerAsync, GenericImage};

use super::engine::docker_env;
use super::native::stop_child;
use super::runtime;

/// One node of the cluster.
///
/// ```no_run
/// # async fn demo(cluster: &cluster_rwlock_testkit::TestCluster) -> Result<(), cluster_rwlock_testkit::TestkitError> {
/// let node = cluster.nodes()[0].clone();
/// cluster.kill(node.index).await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeInfo {
    /// Index 0 to 5; nodes 0-2 start as masters, 3-5 as their replicas.
    pub index: usize,
    /// Port on 127.0.0.1 (the cluster bus uses port + 10000). On a TLS cluster, the plain
    /// port that only the test bed's own commands use.
    pub port: u16,
    /// The TLS port on 127.0.0.1 (`port + 20000`), on a TLS cluster.
    pub tls_port: Option<u16>,
    /// What a client connects to: `redis://127.0.0.1:<port>`, or on a TLS cluster
    /// `rediss://127.0.0.1:<tls_port>`.
    pub url: String,
}

/// What runs a node, and how to reach it.
pub(super) enum Handle {
    Container {
        id: String,
        container: Option<Box<ContainerAsync<GenericImage>>>,
    },
    Process {
        child: Option<std::process::Child>,
        dir: PathBuf,
    },
    External,
}

/// A node of a [`TestCluster`](super::TestCluster) and what the test did to it.
pub(super) struct Node {
    pub(super) info: NodeInfo,
    pub(super) handle: Mutex<Handle>,
    /// Killed or paused by the test: excluded from readiness checks.
    pub(super) down: Mutex<bool>,
    /// The file (on this machine) that libfaketime reads the node's clock offset from,
    /// when the cluster was started with skewable clocks.
    pub(super) clock: Option<PathBuf>,
}

/// The last lines that `node` logged.
pub(super) async fn node_logs(node: &Node) -> String {
    let source = {
        let handle = node.handle.lock().unwrap_or_else(|e| e.into_inner());
        match &*handle {
            Handle::Container { id, .. } => Ok(id.clone()),
            Handle::Process { dir, .. } => Err(Some(dir.join("redis.log"))),
            Handle::External => Err(None),
        }
    };
    let text = match source {
        Ok(id) => {
            let out = tokio::task::spawn_blocking(move || {
                docker_env(Command::new("docker"))
                    .args(["logs", "--tail", "8", &id])
                    .output()
            })
            .await;
            match out {
                Ok(Ok(o)) => format!(
                    "{}{}",
                    String::from_utf8_lossy(&o.stdout),
                    String::from_utf8_lossy(&o.stderr)
                ),
                _ => "(no logs)".into(),
            }
        }
        Err(Some(path)) => tokio::fs::read_to_string(path).await.unwrap_or_default(),
        Err(None) => "(external node)".into(),
    };
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(8)..].join("\n")
}

/// Removes nodes synchronously: containers through testcontainers (on the test bed's
/// runtime, which its async drop needs), processes by SIGKILL.
pub(super) fn remove_nodes(nodes: Vec<Node>) {
    let mut containers = Vec::new();
    let mut clock_dirs = Vec::new();
    for node in nodes {
        match node.handle.into_inner().unwrap_or_else(|e| e.into_inner()) {
            Handle::Container { id, container } => {
                // a container's clock file is in a host directory of its own
                clock_dirs.extend(
                    node.clock
                        .as_deref()
                        .and_then(|f| f.parent())
                        .map(PathBuf::from),
                );
                // a paused container cannot be removed gracefully; unpause it first
                let _ = docker_env(Command::new("docker"))
                    .args(["unpause", &id])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status();
                containers.extend(container.map(|c| *c));
            }
            Handle::Process { child, dir } => {
                if let Some(mut c) = child {
                    stop_child(&mut c);
                }
                let _ = std::fs::remove_dir_all(dir);
            }
            Handle::External => {}
        }
    }
    remove_containers(containers);
    for dir in clock_dirs {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// Removes containers through testcontainers, on the test bed's runtime.
fn remove_containers(containers: Vec<ContainerAsync<GenericImage>>) {
    if containers.is_empty() {
        return;
    }
    let (tx, rx) = std::sync::mpsc::channel();
    runtime().spawn(async move {
        let mut set = tokio::task::JoinSet::new();
        for c in containers {
            set.spawn(async move {
                let _ = c.rm().await;
            });
        }
        while set.join_next().await.is_some() {}
        let _ = tx.send(());
    });
    let _ = rx.recv_timeout(Duration::from_secs(60));
}
