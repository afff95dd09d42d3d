//! Starting the six nodes, as containers or as local processes.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use testcontainers::core::{Mount, WaitFor};
use testcontainers::runners::AsyncRunner;
use testcontainers::{GenericImage, ImageExt};

use super::native::spawn_native;
use super::node::{node_logs, remove_nodes, Handle, Node};
use super::reaper::tell_reaper;
use super::secure::{SecureConf, CONF_MOUNT, TLS_PORT_OFFSET};
use super::server_args::node_args;
use super::session::node_gid;
use super::session::session_id;
use super::TestkitError;
use super::{admin, blocking, skew, Backend, NodeInfo, Server, TestCluster};
use super::{SESSION_LABEL, TESTBED_LABEL};

impl TestCluster {
    /// Starts the six nodes (not yet a cluster).
    pub(super) async fn launch(
        backend: Backend,
        server: Server,
        base: u16,
        skewable: bool,
        conf: Option<SecureConf>,
    ) -> Result<Vec<Node>, TestkitError> {
        let tls = conf.as_ref().is_some_and(|c| c.tls.is_some());
        let mut set = tokio::task::JoinSet::new();
        for index in 0..6 {
            let port = base + index as u16;
            let conf = conf.clone();
            set.spawn(async move {
                let launched =
                    Self::launch_node(backend, server, port, skewable, conf.as_ref()).await;
                (index, launched)
            });
        }
        let mut nodes: Vec<Option<Node>> = (0..6).map(|_| None).collect();
        let mut failure = None;
        while let Some(joined) = set.join_next().await {
            let (index, res) = joined.map_err(|e| TestkitError::Command(e.to_string()))?;
            match res {
                Ok((handle, clock)) => {
                    let port = base + index as u16;
                    let tls_port = tls.then_some(port + TLS_PORT_OFFSET);
                    nodes[index] = Some(Node {
                        info: NodeInfo {
                            index,
                            port,
                            tls_port,
                            url: match tls_port {
                                Some(p) => format!("rediss://127.0.0.1:{p}"),
                                None => format!("redis://127.0.0.1:{port}"),
                            },
                        },
                        handle: Mutex::new(handle),
                        down: Mutex::new(false),
                        clock,
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
                        failure = Some(if logs.contains("connection type tls") {
                            TestkitError::NoTls(format!(
                                "the {server} on port {} was built without TLS (name one built with it: VALKEY_SERVER or VALKEY_IMAGE, REDIS_IMAGE); its last lines: {logs}",
                                node.info.port
                            ))
                        } else if logs.contains("Address already in use") {
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

    /// Starts the node on `port`; with a skewable clock, also returns its clock file.
    async fn launch_node(
        backend: Backend,
        server: Server,
        port: u16,
        skewable: bool,
        conf: Option<&SecureConf>,
    ) -> Result<(Handle, Option<PathBuf>), TestkitError> {
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
                    .with_cmd(node_args(port, "/data", conf.map(|c| (c, CONF_MOUNT))));
                // a group of the node's own, so that a partition can drop what it sends
                let mut request = match node_gid(port) {
                    Some(gid) => request.with_user(format!("0:{gid}")),
                    None => request,
                };
                // the clock file lives in a host directory of its own, mounted whole: a
                // file replaced by a rename shows through a directory mount, not a file's
                if let Some(conf) = conf {
                    request = request.with_mount(Mount::bind_mount(
                        conf.dir.display().to_string(),
                        CONF_MOUNT,
                    ));
                }
                let clock = if skewable {
                    let dir = std::env::temp_dir()
                        .join(format!("cluster-rwlock-{}-{port}-clock", session_id()));
                    let file = new_clock(&dir)?;
                    request = request.with_mount(Mount::bind_mount(
                        dir.display().to_string(),
                        skew::CLOCK_MOUNT,
                    ));
                    let inside = format!("{}/{}", skew::CLOCK_MOUNT, skew::CLOCK_FILE);
                    for (name, value) in skew::faketime_env(skew::IMAGE_FAKETIME, &inside) {
                        request = request.with_env_var(name, value);
                    }
                    Some(file)
                } else {
                    None
                };
                let container = request.start().await.map_err(|e| {
                    let text = e.to_string();
                    if text.contains("connect") || text.contains("socket") {
                        TestkitError::DockerUnavailable(text)
                    } else {
                        TestkitError::Command(format!("starting the node on port {port}: {text}"))
                    }
                })?;
                let handle = Handle::Container {
                    id: container.id().to_string(),
                    container: Some(Box::new(container)),
                };
                Ok((handle, clock))
            }
            Backend::Native => {
                let dir =
                    std::env::temp_dir().join(format!("cluster-rwlock-{}-{port}", session_id()));
                std::fs::create_dir_all(&dir).map_err(|e| TestkitError::Command(e.to_string()))?;
                tell_reaper(&format!("dir:{}", dir.display()));
                let clock = if skewable {
                    Some(new_clock(&dir)?)
                } else {
                    None
                };
                let child = spawn_native(server, port, &dir, clock.as_deref(), conf)?;
                let handle = Handle::Process {
                    child: Some(child),
                    dir,
                };
                Ok((handle, clock))
            }
            Backend::External => Ok((Handle::External, None)),
        }
    }
}

/// A clock file with no offset in `dir` (made if missing, and told to the reaper).
fn new_clock(dir: &Path) -> Result<PathBuf, TestkitError> {
    std::fs::create_dir_all(dir).map_err(|e| TestkitError::Command(e.to_string()))?;
    tell_reaper(&format!("dir:{}", dir.display()));
    let file = dir.join(skew::CLOCK_FILE);
    skew::write_offset(&file, 0)?;
    Ok(file)
}
