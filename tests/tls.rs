//! TLS (cargo feature `tls`) against a real TLS-only six-node cluster (3 masters, 3
//! replicas; `tls-cluster yes`, `tls-replication yes`, a password), started here as local
//! `redis-server` processes with a CA and node certificates made by `openssl`: the lock
//! over TLS on every master and after a failover, certificates verified, `rediss://`
//! never plaintext, and no password in any output. And the test bed's own TLS cluster
//! (`StartOptions::tls`, with an ACL file): the least-privilege user over TLS, only on
//! TLS ports, across a failover.

use std::time::{Duration, Instant};

use cluster_rwlock::fred::interfaces::ClientLike;
use cluster_rwlock::{Error, LockClient, LockConfig, RwLock};
use cluster_rwlock_testkit::native_cluster::{NativeCluster, PASSWORD};

mod common;

/// `theirs` waits to write while `lock` is held for write; the release hands it the lock
/// (by release message) with a higher fence.
async fn hand_off(lock: &RwLock, theirs: RwLock, wait_first: Duration) {
    let w = lock.write().await.unwrap();
    let waiting = tokio::spawn(async move {
        let w2 = theirs.write_timeout(Duration::from_secs(5)).await?;
        let fence = w2.fence();
        w2.release().await?;
        Ok::<_, Error>(fence)
    });
    tokio::time::sleep(wait_first).await;
    let fence = w.fence();
    w.release().await.unwrap();
    assert!(waiting.await.unwrap().expect("handed over") > fence);
}

/// Waits until `lock` can be written again after its master died (at most 30 s).
async fn writable_again(lock: &RwLock) {
    let began = Instant::now();
    loop {
        match lock.write_timeout(Duration::from_secs(2)).await {
            Ok(w) => {
                w.release().await.unwrap();
                return;
            }
            Err(e) => assert!(
                began.elapsed() < Duration::from_secs(30),
                "not writable 30 s after its master died: {e}"
            ),
        }
    }
}

async fn tls_client(cluster: &NativeCluster, prefix: &str) -> LockClient {
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
    let mut cluster = NativeCluster::start(true).await;
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
        // (with a time limit: the first grant on a freshly started cluster, whose replica
        // may not have acknowledged it in time on a busy machine, is tried again)
        let w = lock.write_timeout(Duration::from_secs(10)).await.unwrap();
        assert!(
            theirs.try_read().await.unwrap().is_none(),
            "excluded over TLS"
        );
        w.release().await.unwrap();
        hand_off(lock, theirs, Duration::from_millis(200)).await;
        let r = lock.read().await.unwrap();
        r.release().await.unwrap();
    }

    // kill the master of one lock: the client follows the failover, over TLS, to the
    // promoted replica
    let (&master, lock) = by_master.iter().next().unwrap();
    let lock = lock.clone();
    cluster.kill(master);
    writable_again(&lock).await;
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
    let cluster = NativeCluster::start(true).await;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_presents_the_client_certificate() {
    let cluster = NativeCluster::start_with(true, true).await;
    let base = || {
        LockConfig::from_url(&cluster.url("rediss", PASSWORD))
            .unwrap()
            .tls_ca_pem(cluster.ca())
            .prefix("mtls")
            .command_timeout(Duration::from_secs(2))
    };
    // no client certificate: the nodes refuse the handshake
    let refused = LockClient::connect(base()).await;
    assert!(refused.is_err(), "connected without a client certificate");
    let (cert, key) = cluster.client_cert();
    let client = LockClient::connect(base().tls_client_auth(cert, key))
        .await
        .expect("connects with the client certificate");
    // (with a time limit: a grant the replica did not acknowledge in time, on a machine
    // busy starting other clusters, is tried again rather than failing the test)
    let w = client
        .rwlock("res")
        .unwrap()
        .write_timeout(Duration::from_secs(10))
        .await
        .unwrap();
    assert!(w.fence() > 0);
    w.release().await.unwrap();
    // the key never shows
    let (cert, key) = cluster.client_cert();
    let config = base().tls_client_auth(cert, key.clone());
    let key_text = String::from_utf8_lossy(&key);
    let body = key_text.lines().nth(1).unwrap();
    assert!(!format!("{config:?}").contains(body));
    client.close().await;
}

/// docs/SECURITY.md's least-privilege ACL rule for the user `name` with password `pw`, as a line
/// of an ACL file.
fn acl_user(name: &str, pw: &str, prefix: &str) -> String {
    format!("user {name} on >{pw} {}", common::app_acl_rule(prefix))
}

/// `CLIENT LIST` of the node on the plain `port` (the test bed's own way in).
async fn client_list(port: u16) -> String {
    use cluster_rwlock::fred::prelude::{Builder, ClientLike as _, Config, Value};
    use cluster_rwlock::fred::types::{ClusterHash, CustomCommand};
    let admin =
        Builder::from_config(Config::from_url(&format!("redis://127.0.0.1:{port}")).unwrap())
            .build()
            .unwrap();
    admin.init().await.unwrap();
    let list: Value = admin
        .custom(
            CustomCommand::new_static("CLIENT", ClusterHash::Random, false),
            vec!["LIST"],
        )
        .await
        .unwrap();
    let _ = admin.quit().await;
    list.into_string().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_test_beds_tls_cluster_with_an_acl_file_serves_the_least_privilege_user() {
    use cluster_rwlock_testkit::{StartOptions, TestCluster};
    const PW: &str = "acl-tls-pw-q7";
    let cluster = TestCluster::start_with(
        StartOptions::default()
            .tls(true)
            .acl_file([acl_user("locker", PW, "tb")]),
    )
    .await
    .expect("a TLS cluster with an ACL file");
    let tls = cluster.tls().expect("TLS files");
    let nodes = cluster.nodes();
    let seeds: Vec<String> = nodes
        .iter()
        .map(|n| {
            let port = n.tls_port.expect("a TLS port");
            assert_eq!(n.url, format!("rediss://127.0.0.1:{port}"));
            format!("rediss://locker:{PW}@127.0.0.1:{port}")
        })
        .collect();
    let config = || {
        LockConfig::cluster(seeds.clone())
            .tls_ca_pem(tls.ca_pem())
            .prefix("tb")
            .command_timeout(Duration::from_secs(2))
    };
    // without the CA: the certificate is refused; plaintext to a TLS port: refused; the
    // client certificate (mutual TLS), when given, is accepted (the nodes verify it)
    let seed = seeds[0].clone();
    let quick = |c: LockConfig| c.command_timeout(Duration::from_secs(2));
    match LockClient::connect(quick(LockConfig::from_url(&seed).unwrap())).await {
        Err(e @ Error::Connect { .. }) => {
            let text = e.to_string();
            assert!(text.to_lowercase().contains("certificate"), "{text}");
            assert!(!text.contains(PW), "{text}");
        }
        other => panic!("an unknown CA: {:?}", other.map(|_| ())),
    }
    let plain = LockClient::connect(quick(
        LockConfig::from_url(&seed.replacen("rediss://", "redis://", 1)).unwrap(),
    ))
    .await;
    assert!(plain.is_err(), "plaintext to a TLS port connected");
    // the user may call the lock's functions, not load them: the operator's setup first,
    // as the default user, over TLS
    let loaded = LockClient::setup(&common::config(&cluster))
        .await
        .expect("setup over TLS");
    assert_eq!(loaded.len(), 3, "{loaded:?}");
    let mtls = LockClient::connect(config().tls_client_auth(
        tls.client_cert_pem().as_bytes().to_vec(),
        tls.client_key_pem().as_bytes().to_vec(),
    ))
    .await
    .expect("mutual TLS");
    let w = mtls
        .rwlock("m")
        .unwrap()
        .write_timeout(Duration::from_secs(10))
        .await
        .unwrap();
    w.release().await.unwrap();
    mtls.close().await;

    let a = LockClient::connect(config()).await.expect("user over TLS");
    let b = LockClient::connect(config()).await.expect("user over TLS");

    // a lock on every master, with a hand-off by release message
    let mut locks = Vec::new();
    for slot in [0u16, 8000, 16000] {
        let master = cluster.master_for_slot(slot).await.unwrap();
        let lock = common::locks_on(&cluster, &a, &master, 1, &format!("r{slot}-"))
            .await
            .remove(0);
        locks.push((master, lock));
    }
    for (_, lock) in &locks {
        hand_off(
            lock,
            b.rwlock(lock.name()).unwrap(),
            Duration::from_millis(100),
        )
        .await;
    }

    // every connection of the lock's user is on a TLS port: the plain ports the test bed
    // keeps for itself were never named to the client
    let mut seen = 0;
    for n in &nodes {
        let tls_port = n.tls_port.unwrap();
        for line in client_list(n.port).await.lines() {
            if line.contains(" user=locker ") {
                seen += 1;
                assert!(
                    line.contains(&format!("laddr=127.0.0.1:{tls_port} ")),
                    "a lock connection off the TLS port of node {}: {line}",
                    n.port
                );
            }
        }
    }
    assert!(seen >= 6, "the user's connections: {seen}");

    // the master of the first lock dies: its replica (which read the same ACL file) is
    // promoted, and the user locks there over TLS
    let (master, lock) = &locks[0];
    cluster.kill(master.index).await.unwrap();
    cluster
        .wait_for_failover(Duration::from_secs(30))
        .await
        .unwrap();
    writable_again(lock).await;
    let node = a.node_for_slot(lock.slot()).unwrap();
    assert!(
        !node.ends_with(&format!(":{}", master.tls_port.unwrap())),
        "routed to the dead master: {node}"
    );
    // outside its keys, the user is refused, by name
    let Err(e) = LockClient::connect(config().prefix("other"))
        .await
        .unwrap()
        .rwlock("x")
        .unwrap()
        .try_write()
        .await
    else {
        panic!("locked outside the user's keys");
    };
    assert!(e.is_permission_denied(), "{e}");
    b.close().await;
    a.close().await;
}
