//! A six-node cluster (3 masters, 3 replicas) of local `redis-server` processes, with or
//! without TLS (`tls-cluster yes`, `tls-replication yes`, a CA and node certificates made
//! by `openssl`) and a password: for the TLS tests and the TLS cost benchmark, which
//! need what the test bed's images do not have (a client certificate for mutual TLS, a
//! plain and a TLS cluster side by side).
//!
//! Apart from [`TestCluster`](crate::TestCluster): no Docker, no faults but
//! [`kill`](NativeCluster::kill), and nothing left once the [`NativeCluster`] is dropped
//! (its processes killed, its files removed). Debian's `redis-server`, `redis-tools` and
//! `openssl` are installed when one of them is missing.
//! Its functions panic when something fails: they are for tests.
//!
//! ```no_run
//! # async fn demo() {
//! use cluster_rwlock_testkit::native_cluster::{NativeCluster, PASSWORD};
//!
//! let cluster = NativeCluster::start(true).await;
//! let url = cluster.url("rediss", PASSWORD);
//! let ca_pem = cluster.ca();
//! # let _ = (url, ca_pem);
//! # }
//! ```

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::process::{Child, Command};

/// The password of every node (`requirepass`, `masterauth`).
pub const PASSWORD: &str = "tls-s3cret-pw";

/// Six nodes, killed (and their files removed) when dropped.
pub struct NativeCluster {
    tls: bool,
    dir: PathBuf,
    /// The nodes' ports (their TLS ports on a TLS cluster), in start order.
    pub ports: Vec<u16>,
    nodes: Vec<Option<Child>>,
    /// Held while the cluster lives: no other cluster takes its block of ports.
    _ports_lock: std::fs::File,
}

impl Drop for NativeCluster {
    fn drop(&mut self) {
        for node in self.nodes.iter_mut().flatten() {
            let _ = node.start_kill();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Runs `cmd`, which must succeed: its standard output.
fn run(cmd: &mut std::process::Command) -> String {
    let out = cmd.output().expect("runs");
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs `openssl` with `args` in `dir`.
fn openssl(dir: &Path, args: &[&str]) {
    run(std::process::Command::new("openssl")
        .args(args)
        .current_dir(dir));
}

/// A CA, and one certificate for every node (IP SAN 127.0.0.1: the cluster announces IPs).
fn certificates(dir: &Path) {
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
            "-days",
            "2",
            "-subj",
            "/CN=cluster-rwlock test CA",
        ],
    );
    openssl(
        dir,
        &[
            "req", "-newkey", "rsa:2048", "-nodes", "-keyout", "node.key", "-out", "node.csr",
            "-subj", "/CN=node",
        ],
    );
    std::fs::write(
        dir.join("ext.cnf"),
        "subjectAltName=IP:127.0.0.1,DNS:localhost\n",
    )
    .unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "node.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "node.pem",
            "-days",
            "2",
            "-extfile",
            "ext.cnf",
        ],
    );
}

/// A client certificate signed by the same CA (for mutual TLS).
fn client_certificate(dir: &Path) {
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "client.key",
            "-out",
            "client.csr",
            "-subj",
            "/CN=lock client",
        ],
    );
    // an X.509 v3 certificate (rustls takes no other): with extensions
    std::fs::write(
        dir.join("client.cnf"),
        "basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n",
    )
    .unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "client.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "client.pem",
            "-days",
            "2",
            "-extfile",
            "client.cnf",
        ],
    );
}

/// `redis-cli` to the node on `port`, over TLS when `tls`, with the password.
fn cli(dir: &Path, port: u16, tls: bool) -> std::process::Command {
    let mut cmd = std::process::Command::new("redis-cli");
    cmd.current_dir(dir);
    if tls {
        // the node's certificate doubles as redis-cli's client certificate (mutual TLS)
        cmd.args([
            "--tls", "--cacert", "ca.pem", "--cert", "node.pem", "--key", "node.key",
        ]);
    }
    cmd.args(["--no-auth-warning", "-a", PASSWORD]).args([
        "-h",
        "127.0.0.1",
        "-p",
        &port.to_string(),
    ]);
    cmd
}

impl NativeCluster {
    /// Starts six nodes, TLS-only when `tls`, and makes them a cluster in sync.
    pub async fn start(tls: bool) -> NativeCluster {
        NativeCluster::start_with(tls, false).await
    }

    /// Installs Debian's `redis-server`, `redis-tools` and `openssl` when one of them is
    /// missing (as the test bed's set-up does, under its machine-wide lock).
    fn ensure_binaries() {
        let missing = ["redis-server", "redis-cli", "openssl"].iter().any(|b| {
            std::process::Command::new("sh")
                .args(["-c", &format!("command -v {b}")])
                .output()
                .map(|o| !o.status.success())
                .unwrap_or(true)
        });
        if !missing {
            return;
        }
        let lock = std::env::temp_dir().join("cluster-rwlock-setup.lock");
        let script = "export DEBIAN_FRONTEND=noninteractive; \
            command -v redis-server >/dev/null && command -v redis-cli >/dev/null && command -v openssl >/dev/null || \
            { apt-get update -qq && apt-get install -y -qq --no-install-recommends redis-server redis-tools openssl >/dev/null; }";
        run(std::process::Command::new("flock")
            .arg(&lock)
            .args(["sh", "-c", script]));
    }

    /// As [`start`](Self::start); with `client_certs`, the nodes require a client
    /// certificate signed by the CA (`tls-auth-clients yes`): `client.pem`/`client.key`.
    pub async fn start_with(tls: bool, client_certs: bool) -> NativeCluster {
        if let Err(e) = crate::form::forbidden_here() {
            panic!("{e}");
        }
        NativeCluster::ensure_binaries();
        let dir = std::env::temp_dir().join(format!(
            "cluster-rwlock-native-{}-{}",
            std::process::id(),
            &uuid::Uuid::new_v4().simple().to_string()[..8]
        ));
        std::fs::create_dir_all(&dir).unwrap();
        certificates(&dir);
        client_certificate(&dir);
        // the test bed's blocks (below the ephemeral range, locked while in use)
        let (base, ports_lock) = crate::ports::pick_ports().expect("a free block of ports");
        let ports: Vec<u16> = (base..base + 6).collect();
        let mut nodes = Vec::new();
        for &port in &ports {
            let node_dir = dir.join(port.to_string());
            std::fs::create_dir_all(&node_dir).unwrap();
            let mut server = Command::new("redis-server");
            server.current_dir(&node_dir);
            if tls {
                server
                    .args(["--port", "0", "--tls-port", &port.to_string()])
                    .args([
                        "--tls-cert-file",
                        "../node.pem",
                        "--tls-key-file",
                        "../node.key",
                    ])
                    .args(["--tls-ca-cert-file", "../ca.pem"])
                    .args([
                        "--tls-auth-clients",
                        if client_certs { "yes" } else { "optional" },
                    ])
                    .args(["--tls-cluster", "yes", "--tls-replication", "yes"]);
            } else {
                server.args(["--port", &port.to_string()]);
            }
            let child = server
                .args(["--cluster-enabled", "yes", "--cluster-node-timeout", "2000"])
                .args(["--cluster-require-full-coverage", "no"])
                .args(["--appendonly", "yes", "--save", ""])
                .args(["--requirepass", PASSWORD, "--masterauth", PASSWORD])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .kill_on_drop(true)
                .spawn()
                .expect("redis-server (Debian's redis-server, built with TLS)");
            nodes.push(Some(child));
        }
        let cluster = NativeCluster {
            tls,
            dir,
            ports,
            nodes,
            _ports_lock: ports_lock,
        };
        for &port in &cluster.ports {
            cluster.wait_for(port, "PING", "PONG").await;
        }
        let addrs: Vec<String> = cluster
            .ports
            .iter()
            .map(|p| format!("127.0.0.1:{p}"))
            .collect();
        run(cli(&cluster.dir, cluster.ports[0], cluster.tls)
            .args(["--cluster", "create"])
            .args(&addrs)
            .args(["--cluster-replicas", "1", "--cluster-yes"]));
        for &port in &cluster.ports {
            cluster
                .wait_for(port, "CLUSTER INFO", "cluster_state:ok")
                .await;
        }
        // every replica in sync with its master, so that grants are confirmed from the start
        for &port in &cluster.ports {
            let role = run(cli(&cluster.dir, port, cluster.tls).args(["ROLE"]));
            if role.starts_with("slave") {
                cluster
                    .wait_for(port, "INFO replication", "master_link_status:up")
                    .await;
            }
        }
        cluster
    }

    /// Waits (30 s at most) until `command` on `port` answers with `expect` in it.
    pub async fn wait_for(&self, port: u16, command: &str, expect: &str) {
        let began = Instant::now();
        loop {
            let out = cli(&self.dir, port, self.tls)
                .args(command.split(' '))
                .output();
            if let Ok(out) = out {
                if String::from_utf8_lossy(&out.stdout).contains(expect) {
                    return;
                }
            }
            assert!(
                began.elapsed() < Duration::from_secs(30),
                "{command} on {port}: no {expect}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The client certificate and key (PEM) signed by the CA.
    pub fn client_cert(&self) -> (Vec<u8>, Vec<u8>) {
        (
            std::fs::read(self.dir.join("client.pem")).unwrap(),
            std::fs::read(self.dir.join("client.key")).unwrap(),
        )
    }

    /// The CA's certificate (PEM), which signed the nodes' and the client's.
    pub fn ca(&self) -> Vec<u8> {
        std::fs::read(self.dir.join("ca.pem")).unwrap()
    }

    /// `<scheme>://:<password>@127.0.0.1:<port>` of the first node (`scheme`: `redis` or
    /// `rediss`).
    pub fn url(&self, scheme: &str, password: &str) -> String {
        format!("{scheme}://:{password}@127.0.0.1:{}", self.ports[0])
    }

    /// The port of the master that serves `slot`, from the first node that answers.
    pub fn master_of(&self, slot: u16) -> u16 {
        for &port in &self.ports {
            let Ok(out) = cli(&self.dir, port, self.tls)
                .args(["CLUSTER", "SLOTS"])
                .output()
            else {
                continue;
            };
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            let lines: Vec<&str> = text.lines().map(str::trim).collect();
            // each range: start, end, master ip, master port, master id, replicas...
            let mut i = 0;
            while i + 3 < lines.len() {
                if let (Ok(start), Ok(end)) = (lines[i].parse::<u16>(), lines[i + 1].parse::<u16>())
                {
                    if lines[i + 2] == "127.0.0.1" && (start..=end).contains(&slot) {
                        if let Ok(master) = lines[i + 3].parse() {
                            return master;
                        }
                    }
                }
                i += 1;
            }
        }
        panic!("no node told the master of slot {slot}");
    }

    /// Kills the node on `port` (SIGKILL); its files stay until the cluster is dropped.
    pub fn kill(&mut self, port: u16) {
        let i = self.ports.iter().position(|&p| p == port).unwrap();
        if let Some(mut node) = self.nodes[i].take() {
            let _ = node.start_kill();
        }
    }
}
