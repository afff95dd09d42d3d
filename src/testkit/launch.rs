//! Starting the six nodes, as containers or as local processes.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use testcontainers::core::WaitFor;
use testcontainers::runners::AsyncRunner;
use testcontainers::{GenericImage, ImageExt};

use super::native::spawn_native;
use super::node::{node_logs, remove_nodes, Handle, Node};
use super::reaper::{session_id, tell_reaper};
use super::{admin, blocking, partition, Backend, NodeInfo, Server, TestCluster, TestkitError};
use super::{SESSION_LABEL, TESTBED_LABEL};

/// The server's command line for the node on `port`, with its files in `dir`.
pub(super) fn node_args(port: u16, dir: &str) -> Vec<String> {
    let conf = format!("nodes-{port}.conf");
    [
        "--port",
        &port.to_string(),
        "--bind",
        "127.0.0.1",
        "--protected-mode",
        "no",
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        &conf,
        "--cluster-require-full-coverage",
        "no",
        "--cluster-node-timeout",
        "2000",
        "--cluster-replica-validity-factor",
        "0",
        "--cluster-announce-ip",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--repl-diskless-sync-delay",
        "0",
        "--dir",
        dir,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

impl TestCluster {
    /// Starts the six nodes (not yet a cluster).
    pub(super) async fn launch(
        backend: Backend,
        server: Server,
        base: u16,
    ) -> Result<Vec<Node>, TestkitError> {
        let mut set = tokio::task::JoinSet::new();
        for index in 0..6 {
            let port = base + index as u16;
            set.spawn(async move { (index, Self::launch_node(backend, server, port).await) });
        }
        let mut nodes: Vec<Option<Node>> = (0..6).map(|_| None).collect();
        let mut failure = None;
        while let Some(joined) = set.join_next().await {
            let (index, res) = joined.map_err(|e| TestkitError::Command(e.to_string()))?;
            match res {
                Ok(handle) => {
                    let port = base + index as u16;
                    nodes[index] = Some(Node {
                        info: NodeInfo {
                            index,
                            port,
                            url: format!("redis://127.0.0.1:{port}"),
                        },
                        handle: Mutex::new(handle),
                        down: Mutex::new(false),
                    });
                }
                Err(e) => failure = Some(e),
            }
        }
        let nodes: Vec<Node> = nodes.into_iter().flatten().collect();
        // every node must answer; one that exited at once usually lost its port
        if failure.is_none() {
            for node in &nodes {
                let deadline = Instant::now() + Duration::from_secs(10);
                while admin::text(node.info.port, "PING", &[]).await.is_err() {
                    if Instant::now() > deadline {
                        let logs = node_logs(node).await;
                        failure = Some(if logs.contains("Address already in use") {
                            TestkitError::PortsTaken(format!(
                                "port {} or {}: {logs}",
                                node.info.port,
                                node.info.port + 10000
                            ))
                        } else {
                            TestkitError::NotReady {
                                after: Duration::from_secs(10),
                                what: format!("node {} does not answer PING", node.info.port),
                                logs,
                            }
                        });
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                if failure.is_some() {
                    break;
                }
            }
        }
        match failure {
            None => Ok(nodes),
            Some(e) => {
                // removing them waits for the containers and processes: not on this worker
                let _ = blocking(move || remove_nodes(nodes)).await;
                Err(e)
            }
        }
    }

    async fn launch_node(
        backend: Backend,
        server: Server,
        port: u16,
    ) -> Result<Handle, TestkitError> {
        match backend {
            Backend::Docker => {
                let image = server.image();
                let (name, tag) = image.rsplit_once(':').unwrap_or((&image, "latest"));
                let request = GenericImage::new(name, tag)
                    .with_wait_for(WaitFor::Nothing)
                    .with_network("host")
                    .with_label(TESTBED_LABEL, "testkit")
                    .with_label(SESSION_LABEL, session_id())
                    .with_container_name(format!("cluster-rwlock-{}-{port}", session_id()))
                    .with_cmd(node_args(port, "/data"));
                // a group of the node's own, so that a partition can drop what it sends
                let request = match partition::node_gid(port) {
                    Some(gid) => request.with_user(format!("0:{gid}")),
                    None => request,
                };
                let container = request.start().await.map_err(|e| {
                    let text = e.to_string();
                    if text.contains("connect") || text.contains("socket") {
                        TestkitError::DockerUnavailable(text)
                    } else {
                        TestkitError::Command(format!("starting the node on port {port}: {text}"))
                    }
                })?;
                Ok(Handle::Container {
                    id: container.id().to_string(),
                    container: Some(Box::new(container)),
                })
            }
            Backend::Native => {
                let dir =
                    std::env::temp_dir().join(format!("cluster-rwlock-{}-{port}", session_id()));
                std::fs::create_dir_all(&dir).map_err(|e| TestkitError::Command(e.to_string()))?;
                tell_reaper(&format!("dir:{}", dir.display()));
                let child = spawn_native(server, port, &dir)?;
                Ok(Handle::Process {
                    child: Some(child),
                    dir,
                })
            }
            Backend::External => Ok(Handle::External),
        }
    }
}
