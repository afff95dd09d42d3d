//! Starting a cluster (or attaching to an external one) and forming it.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::docker::{ensure_image, prepare_docker};
use super::node::{Handle, Node};
use super::ports::pick_ports;
use super::reaper::reaper;
use super::secure::{SecureConf, TLS_PORT_OFFSET};
use super::{admin, blocking, on_runtime, server, skew, Backend, NodeInfo, Server};
use super::{StartOptions, TestCluster, TestkitError};
use super::{READY_TIMEOUT, SLOTS};

impl TestCluster {
    /// Starts a new six-node cluster (or attaches to `REDIS_CLUSTER_URL`), forms it and
    /// waits until every node reports `cluster_state:ok` and every master has a synced
    /// replica. Prints how long that took.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), cluster_rwlock_testkit::TestkitError> {
    /// let cluster = cluster_rwlock_testkit::TestCluster::start().await?;
    /// println!("ready in {:?}", cluster.startup_time());
    /// # Ok(()) }
    /// ```
    pub async fn start() -> Result<TestCluster, TestkitError> {
        Self::start_with(StartOptions::default()).await
    }

    /// [`start`](Self::start) with options: skewable clocks, TLS, an ACL file (see
    /// [`StartOptions`]). An external cluster (`REDIS_CLUSTER_URL`) is attached to as it
    /// is, options aside.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), cluster_rwlock_testkit::TestkitError> {
    /// use cluster_rwlock_testkit::{StartOptions, TestCluster};
    ///
    /// let cluster = TestCluster::start_with(StartOptions::default().skewable_clocks(true)).await?;
    /// cluster.skew_clock(2, -1000).await?;
    /// # Ok(()) }
    /// ```
    pub async fn start_with(options: StartOptions) -> Result<TestCluster, TestkitError> {
        on_runtime(Self::start_here(options)).await
    }

    /// One cluster per process, started by the first caller and shared by all; it is
    /// removed when the process exits. Tests that kill or pause nodes should
    /// [`start`](Self::start) their own.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), cluster_rwlock_testkit::TestkitError> {
    /// let cluster = cluster_rwlock_testkit::TestCluster::shared().await?;
    /// # Ok(()) }
    /// ```
    pub async fn shared() -> Result<&'static TestCluster, TestkitError> {
        static SHARED: tokio::sync::OnceCell<TestCluster> = tokio::sync::OnceCell::const_new();
        SHARED.get_or_try_init(Self::start).await
    }

    async fn start_here(options: StartOptions) -> Result<TestCluster, TestkitError> {
        let began = Instant::now();
        forbidden_here()?;
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
        let skewable = options.skewable_clocks;
        let conf = SecureConf::make(options.wants_tls(), &options.acl)?;
        if backend == Backend::Native {
            server.binary()?; // fail at once, with how to get it, rather than six times
            if skewable {
                skew::host_faketime()?;
            }
        }
        let _ = reaper();
        if backend == Backend::Docker {
            prepare_docker().await?;
            ensure_image(server, skewable).await?;
        }
        let mut last = None;
        for _ in 0..3 {
            let (base, ports_lock) = blocking(pick_ports).await??;
            match Self::launch(backend, server, base, skewable, conf.clone()).await {
                Ok(nodes) => {
                    let mut cluster = TestCluster {
                        backend,
                        server,
                        version: String::new(),
                        nodes,
                        startup: Duration::ZERO,
                        _ports: Some(ports_lock),
                        conf: conf.clone(),
                    };
                    if let Err(e) = cluster.form().await {
                        // dropping it removes the nodes, which waits for them: not here
                        let _ = blocking(move || drop(cluster)).await;
                        return Err(e);
                    }
                    cluster.startup = began.elapsed();
                    cluster.version = admin::text(base, "INFO", &["server"])
                        .await
                        .map(|i| server::version_of(&i))
                        .unwrap_or_else(|_| "?".into());
                    eprintln!(
                        "testkit: six-node {server} {} Cluster ({backend}{}) ready in {:.2} s on 127.0.0.1:{}-{}",
                        cluster.version,
                        match cluster.tls() {
                            Some(_) => format!(", TLS on ports {}-{}", base + TLS_PORT_OFFSET, base + 5 + TLS_PORT_OFFSET),
                            None => String::new(),
                        },
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
                    tls_port: None,
                    url: format!("redis://127.0.0.1:{}", l.port),
                },
                handle: Mutex::new(Handle::External),
                down: Mutex::new(false),
                clock: None,
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
            conf: None,
        })
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
}

/// `TESTKIT_NO_CLUSTER=1` forbids starting (or attaching to) a cluster: CI runs a plain
/// `cargo test` so, to show that the tests it runs need none.
pub(crate) fn forbidden_here() -> Result<(), TestkitError> {
    if std::env::var_os("TESTKIT_NO_CLUSTER").is_some_and(|v| v == "1") {
        return Err(TestkitError::NoClusterHere);
    }
    Ok(())
}
