//! TLS (cargo feature `tls`) against a real TLS-only six-node cluster (3 masters, 3
//! replicas; `tls-cluster yes`, `tls-replication yes`, a password), started here as local
//! `redis-server` processes with a CA and node certificates made by `openssl`: the lock
//! over TLS on every master and after a failover, certificates verified, `rediss://`
//! never plaintext, and no password in any output.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use cluster_rwlock::fred::interfaces::ClientLike;
use cluster_rwlock::{Error, LockClient, LockConfig};
use tokio::process::{Child, Command};

const PASSWORD: &str = "tls-s3cret-pw";

/// Six TLS-only nodes, killed (and their files removed) when dropped.
struct TlsCluster {
    dir: PathBuf,
    ports: Vec<u16>,
    nodes: Vec<Option<Child>>,
}

impl Drop for TlsCluster {
    fn drop(&mut self) {
        for node in self.nodes.iter_mut().flatten() {
            let _ = node.start_kill();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn run(cmd: &mut std::process::Command) -> String {
    let out = cmd.output().expect("runs");
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A CA, and one certificate for every node (IP SAN 127.0.0.1: the cluster announces IPs).
fn certificates(dir: &Path) {
    let ssl = |args: &[&str]| {
        run(std::process::Command::new("openssl")
            .args(args)
            .current_dir(dir));
    };
    ssl(&[
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
    ]);
    ssl(&[
        "req", "-newkey", "rsa:2048", "-nodes", "-keyout", "node.key", "-out", "node.csr", "-subj",
        "/CN=node",
    ]);
    std::fs::write(
        dir.join("ext.cnf"),
        "subjectAltName=IP:127.0.0.1,DNS:localhost\n",
    )
    .unwrap();
    ssl(&[
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
    ]);
}

/// A block of six ports whose cluster bus ports (+10000) are free too.
fn free_ports() -> Vec<u16> {
    let seed = std::process::id() as u16;
    for attempt in 0..200u16 {
        let base = 21000 + (seed.wrapping_add(attempt * 37) % 800) * 10;
        let ports: Vec<u16> = (base..base + 6).collect();
        let free = ports.iter().all(|&p| {
            std::net::TcpListener::bind(("127.0.0.1", p)).is_ok()
                && std::net::TcpListener::bind(("127.0.0.1", p + 10000)).is_ok()
        });
        if free {
            return ports;
        }
    }
    panic!("no free block of ports");
}

fn cli(dir: &Path, port: u16) -> std::process::Command {
    let mut cmd = std::process::Command::new("redis-cli");
    cmd.current_dir(dir)
        .args([
            "--tls",
            "--cacert",
            "ca.pem",
            "--no-auth-warning",
            "-a",
            PASSWORD,
        ])
        .args(["-h", "127.0.0.1", "-p", &port.to_string()]);
    cmd
}

impl TlsCluster {
    async fn start() -> TlsCluster {
        let dir = std::env::temp_dir().join(format!(
            "cluster-rwlock-tls-{}-{}",
            std::process::id(),
            &uuid::Uuid::new_v4().simple().to_string()[..8]
        ));
        std::fs::create_dir_all(&dir).unwrap();
        certificates(&dir);
        let ports = free_ports();
        let mut nodes = Vec::new();
        for &port in &ports {
            let node_dir = dir.join(port.to_string());
            std::fs::create_dir_all(&node_dir).unwrap();
            let child = Command::new("redis-server")
                .current_dir(&node_dir)
                .args(["--port", "0", "--tls-port", &port.to_string()])
                .args([
                    "--tls-cert-file",
                    "../node.pem",
                    "--tls-key-file",
                    "../node.key",
                ])
                .args([
                    "--tls-ca-cert-file",
                    "../ca.pem",
                    "--tls-auth-clients",
                    "optional",
                ])
                .args(["--tls-cluster", "yes", "--tls-replication", "yes"])
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
        let cluster = TlsCluster { dir, ports, nodes };
        for &port in &cluster.ports {
            cluster.wait_for(port, "PING", "PONG").await;
        }
        let addrs: Vec<String> = cluster
            .ports
            .iter()
            .map(|p| format!("127.0.0.1:{p}"))
            .collect();
        run(cli(&cluster.dir, cluster.ports[0])
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
            let role = run(cli(&cluster.dir, port).args(["ROLE"]));
            if role.starts_with("slave") {
                cluster
                    .wait_for(port, "INFO replication", "master_link_status:up")
                    .await;
            }
        }
        cluster
    }

    /// Waits (30 s at most) until `command` on `port` answers with `expect` in it.
    async fn wait_for(&self, port: u16, command: &str, expect: &str) {
        let began = Instant::now();
        loop {
            let out = cli(&self.dir, port).args(command.split(' ')).output();
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

    fn ca(&self) -> Vec<u8> {
        std::fs::read(self.dir.join("ca.pem")).unwrap()
    }

    fn url(&self, scheme: &str, password: &str) -> String {
        format!("{scheme}://:{password}@127.0.0.1:{}", self.ports[0])
    }

    /// The port of the master that serves `slot`, from the first node that answers.
    fn master_of(&self, slot: u16) -> u16 {
        for &port in &self.ports {
            let Ok(out) = cli(&self.dir, port).args(["CLUSTER", "SLOTS"]).output() else {
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

    fn kill(&mut self, port: u16) {
        let i = self.ports.iter().position(|&p| p == port).unwrap();
        if let Some(mut node) = self.nodes[i].take() {
            let _ = node.start_kill();
        }
    }
}

async fn tls_client(cluster: &TlsCluster, prefix: &str) -> LockClient {
    let config = LockConfig::from_url(&cluster.url("rediss", PASSWORD))
        .unwrap()
        .tls_ca_pem(cluster.ca())
        .prefix(prefix)
        .command_timeout(Duration::from_secs(2));
    LockClient::connect(config)
        .await
        .expect("a client over TLS")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lock_works_over_tls_on_every_master_and_after_a_failover() {
    let mut cluster = TlsCluster::start().await;
    let client = tls_client(&cluster, "tls").await;
    assert!(client.redis().is_clustered());
    let other = tls_client(&cluster, "tls").await;

    // a lock on each master: exclusion, a hand-off to a waiting writer, readers
    let mut by_master = std::collections::BTreeMap::new();
    for i in 0.. {
        let lock = client.rwlock(&format!("res-{i}")).unwrap();
        by_master
            .entry(cluster.master_of(lock.slot()))
            .or_insert(lock);
        if by_master.len() == 3 {
            break;
        }
    }
    for lock in by_master.values() {
        let theirs = other.rwlock(lock.name()).unwrap();
        let w = lock.write().await.unwrap();
        assert!(
            theirs.try_read().await.unwrap().is_none(),
            "excluded over TLS"
        );
        let waiting = tokio::spawn(async move {
            let w2 = theirs.write_timeout(Duration::from_secs(5)).await?;
            let fence = w2.fence();
            w2.release().await?;
            Ok::<_, Error>(fence)
        });
        tokio::time::sleep(Duration::from_millis(200)).await;
        let fence = w.fence();
        w.release().await.unwrap();
        let handed = waiting.await.unwrap().expect("handed over");
        assert!(handed > fence);
        let r = lock.read().await.unwrap();
        r.release().await.unwrap();
    }

    // kill the master of one lock: the client follows the failover, over TLS, to the
    // promoted replica
    let (&master, lock) = by_master.iter().next().unwrap();
    let lock = lock.clone();
    cluster.kill(master);
    let began = Instant::now();
    loop {
        match lock.write_timeout(Duration::from_secs(2)).await {
            Ok(w) => {
                w.release().await.unwrap();
                break;
            }
            Err(e) => assert!(
                began.elapsed() < Duration::from_secs(30),
                "not writable 30 s after its master died: {e}"
            ),
        }
    }
    let node = client.node_for_slot(lock.slot()).unwrap();
    assert!(
        !node.ends_with(&format!(":{master}")),
        "routed to the dead master: {node}"
    );
    other.close().await;
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rediss_is_verified_never_plaintext_and_passwords_never_show() {
    let cluster = TlsCluster::start().await;
    let quick = |c: LockConfig| c.command_timeout(Duration::from_secs(2));

    // the CA given: connects (above); the system's roots do not know the test CA
    let unknown = LockClient::connect(quick(
        LockConfig::from_url(&cluster.url("rediss", PASSWORD)).unwrap(),
    ))
    .await;
    match &unknown {
        Err(e @ Error::Connect { .. }) => {
            let text = e.to_string();
            assert!(text.to_lowercase().contains("certificate"), "{text}");
        }
        other => panic!("an unknown CA: {other:?}"),
    }
    // skipping verification (tests only) connects
    let skipped = LockClient::connect(quick(
        LockConfig::from_url(&cluster.url("rediss", PASSWORD))
            .unwrap()
            .tls_skip_verification_for_tests_only()
            .prefix("tls-skip"),
    ))
    .await
    .expect("connects without verification");
    skipped.close().await;
    // plaintext to a TLS port: an error, not a client
    let plain = LockClient::connect(quick(
        LockConfig::from_url(&cluster.url("redis", PASSWORD)).unwrap(),
    ))
    .await;
    assert!(
        plain.is_err(),
        "plaintext to a TLS-only node: {:?}",
        plain.map(|_| ())
    );
    // TLS settings with a plaintext URL: refused, so nobody believes the link encrypted
    let mixed = LockConfig::from_url(&cluster.url("redis", PASSWORD))
        .unwrap()
        .tls_ca_pem(cluster.ca());
    assert!(matches!(
        LockClient::connect(mixed).await,
        Err(Error::InvalidConfig(_))
    ));

    // a wrong password, and the right one: never in Display, Debug or the CLI's output
    let wrong_url = cluster.url("rediss", "wrong-pw-zz");
    let wrong = LockClient::connect(quick(
        LockConfig::from_url(&wrong_url)
            .unwrap()
            .tls_ca_pem(cluster.ca()),
    ))
    .await;
    let Err(e) = wrong else {
        panic!("a wrong password connected");
    };
    for shown in [e.to_string(), format!("{e:?}")] {
        assert!(!shown.contains("wrong-pw-zz"), "{shown}");
    }
    let config = LockConfig::from_url(&cluster.url("rediss", PASSWORD))
        .unwrap()
        .tls_ca_pem(cluster.ca());
    assert!(!format!("{config:?}").contains(PASSWORD));
    assert!(!format!("{config:?}").contains("BEGIN CERTIFICATE"));
}
