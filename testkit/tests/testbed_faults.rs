//! The test bed's own faults do what they say, checked on the nodes themselves: a cut
//! replication stream (the replica falls behind, then catches up), a node isolated from
//! the other nodes (failed over while its clients still reach it), a manual failover, and
//! skewed clocks. Each test starts a cluster of its own; they run one at a time, so that
//! the check that no iptables rule of the session is left sees only its own.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use cluster_rwlock_testkit::{StartOptions, TestCluster, TestkitError};
use fred::prelude::*;
use fred::types::{ClusterHash, CustomCommand};

static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A client of the single node at `port` (not cluster-aware).
async fn node_client(port: u16) -> Client {
    let config = Config::from_url(&format!("redis://127.0.0.1:{port}")).expect("url");
    let client = Builder::from_config(config)
        .with_connection_config(|c| c.connection_timeout = Duration::from_secs(2))
        .with_performance_config(|p| p.default_command_timeout = Duration::from_secs(3))
        .build()
        .expect("client config");
    client.init().await.expect("node client connects");
    client
}

async fn raw<T: FromValue>(client: &Client, cmd: &'static str, args: Vec<String>) -> T {
    client
        .custom(
            CustomCommand::new_static(cmd, ClusterHash::Random, false),
            args,
        )
        .await
        .unwrap_or_else(|e| panic!("{cmd}: {e}"))
}

/// GET on a replica (READONLY first, or it redirects).
async fn replica_get(replica: &Client, key: &str) -> Option<String> {
    let _: () = raw(replica, "READONLY", vec![]).await;
    replica.get(key).await.expect("GET on the replica")
}

/// How many replicas acknowledge the master's writes so far (`WAIT 1 <ms>`).
async fn acked(master: &Client, ms: u64) -> i64 {
    raw(master, "WAIT", vec!["1".into(), ms.to_string()]).await
}

/// The hash slot of `key`, as Redis computes it: CRC16 (XMODEM) modulo 16384 (the keys
/// of these tests have no hashtag).
fn key_slot(key: &str) -> u16 {
    crc16::State::<crc16::XMODEM>::calculate(key.as_bytes()) % 16384
}

/// A key whose slot the node at `port` serves, named `<tag><n>`.
async fn key_on(cluster: &TestCluster, port: u16, tag: &str) -> String {
    for n in 0.. {
        let key = format!("{tag}{n}");
        let slot = key_slot(&key);
        if cluster.master_for_slot(slot).await.expect("master").port == port {
            return key;
        }
    }
    unreachable!()
}

/// `ROLE`: the role, and for a replica its master's port.
async fn role(client: &Client) -> (String, Option<i64>) {
    let reply: Vec<Value> = raw(client, "ROLE", vec![]).await;
    let name = reply[0].as_str().expect("role name").to_string();
    (name, reply.get(2).and_then(|v| v.as_i64()))
}

async fn assert_no_rules(cluster: &TestCluster) {
    let mut left = cluster.partition_rules().await.expect("iptables -S");
    left.extend(cluster.replication_rules().await.expect("iptables -S"));
    assert!(left.is_empty(), "rules of this session left: {left:?}");
}

/// Waits (up to `within`) until `done`, polling every 50 ms; how long it took.
async fn until<F: std::future::Future<Output = bool>>(
    within: Duration,
    what: &str,
    mut done: impl FnMut() -> F,
) -> Duration {
    let began = Instant::now();
    while !done().await {
        assert!(began.elapsed() < within, "{what}: not within {within:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    began.elapsed()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_replication_stream_leaves_the_replica_behind_until_restored() {
    let _serial = SERIAL.lock().await;
    let cluster = TestCluster::start().await.expect("cluster");
    let master = cluster.nodes()[0].clone();
    let replica = cluster.replica_of(0).await.expect("replica");
    let (m, r) = (
        node_client(master.port).await,
        node_client(replica.port).await,
    );
    let before = key_on(&cluster, master.port, "before").await;
    let during = key_on(&cluster, master.port, "during").await;
    let _: () = m.set(&before, "1", None, None, false).await.unwrap();
    assert_eq!(
        acked(&m, 2000).await,
        1,
        "the replica follows before the cut"
    );
    assert_eq!(replica_get(&r, &before).await.as_deref(), Some("1"));

    cluster
        .cut_replication(0)
        .await
        .expect("cut_replication (needs iptables and root)");
    let rules = cluster.replication_rules().await.unwrap();
    assert_eq!(
        rules.len(),
        3,
        "the link both ways, and the replica's reconnection: {rules:?}"
    );
    assert!(cluster.partition_rules().await.unwrap().is_empty());
    let _: () = m.set(&during, "2", None, None, false).await.unwrap();
    assert_eq!(
        acked(&m, 1000).await,
        0,
        "no replica acknowledges the write"
    );
    assert_eq!(
        replica_get(&r, &during).await,
        None,
        "the write never arrived"
    );
    assert_eq!(replica_get(&r, &before).await.as_deref(), Some("1"));
    let info: String = raw(&r, "INFO", vec!["replication".into()]).await;
    assert!(
        info.contains("master_link_status:up"),
        "the replica believes itself connected: {info}"
    );
    cluster
        .wait_ready(Duration::from_secs(5))
        .await
        .expect("the cluster sees nothing wrong");
    cluster.heal(0).await.unwrap();
    assert_eq!(
        cluster.replication_rules().await.unwrap().len(),
        3,
        "heal leaves a replication cut alone"
    );

    cluster.restore_replication(0).await.unwrap();
    cluster
        .restore_replication(0)
        .await
        .expect("restoring twice is fine");
    assert_no_rules(&cluster).await;
    let (r, during) = (&r, &during);
    let took = until(
        Duration::from_secs(60),
        "the replica catches up",
        || async move { replica_get(r, during).await.as_deref() == Some("2") },
    )
    .await;
    eprintln!("cut_replication: the replica caught up {took:?} after the restore");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_isolated_master_is_failed_over_while_its_clients_still_reach_it() {
    let _serial = SERIAL.lock().await;
    let cluster = TestCluster::start().await.expect("cluster");
    let master = cluster.nodes()[0].clone();
    let replica = cluster.replica_of(0).await.expect("replica");
    let key = key_on(&cluster, master.port, "split").await;
    let slot = key_slot(&key);
    let m = node_client(master.port).await;
    let _: () = m.set(&key, "before", None, None, false).await.unwrap();
    assert_eq!(acked(&m, 2000).await, 1);

    cluster
        .isolate(0)
        .await
        .expect("isolate (needs iptables and root)");
    let cut = Instant::now();
    // the split-brain side: its client still writes to it, until it sees itself alone
    let _: () = m
        .set(&key, "split", None, None, false)
        .await
        .expect("the isolated master takes a write before its node timeout");
    let rules = cluster.partition_rules().await.unwrap();
    assert!(rules.len() >= 21, "one rule per path: {rules:?}");
    assert!(cluster.replication_rules().await.unwrap().is_empty());

    let took = cluster
        .wait_for_failover(Duration::from_secs(30))
        .await
        .expect("failover");
    assert_eq!(
        cluster.master_for_slot(slot).await.unwrap().port,
        replica.port,
        "its replica took over"
    );
    eprintln!(
        "isolate: {} rules; slot {slot} failed over to {} {:?} after the cut (waited {took:?})",
        rules.len(),
        replica.port,
        cut.elapsed()
    );
    // clients still reach it, on the old connection and on a new one
    assert_eq!(m.ping::<String>(None).await.unwrap(), "PONG");
    let fresh = node_client(master.port).await;
    assert_eq!(fresh.ping::<String>(None).await.unwrap(), "PONG");
    assert_eq!(
        role(&m).await.0,
        "master",
        "it still believes itself master"
    );
    // the write it took never reached the others
    let promoted = node_client(replica.port).await;
    let there: Option<String> = promoted.get(&key).await.unwrap();
    assert_eq!(there.as_deref(), Some("before"), "the split write is lost");

    cluster.heal(0).await.unwrap();
    let healed = Instant::now();
    assert_no_rules(&cluster).await;
    let (c, promoted_index, old_port) = (&cluster, replica.index, master.port);
    until(
        Duration::from_secs(30),
        "the old master follows",
        || async move { matches!(c.replica_of(promoted_index).await, Ok(r) if r.port == old_port) },
    )
    .await;
    cluster
        .wait_ready(Duration::from_secs(30))
        .await
        .expect("six healthy nodes again");
    eprintln!("isolate: ready again {:?} after the heal", healed.elapsed());
    let old = node_client(master.port).await;
    let (name, of) = role(&old).await;
    assert_eq!(
        (name.as_str(), of),
        ("slave", Some(i64::from(replica.port)))
    );
    assert_eq!(replica_get(&old, &key).await.as_deref(), Some("before"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manual_failover_swaps_master_and_replica() {
    let _serial = SERIAL.lock().await;
    let cluster = TestCluster::start().await.expect("cluster");
    let master = cluster.nodes()[2].clone();
    let replica = cluster.replica_of(2).await.expect("replica");
    let key = key_on(&cluster, master.port, "manual").await;
    let slot = key_slot(&key);
    let m = node_client(master.port).await;
    let _: () = m.set(&key, "kept", None, None, false).await.unwrap();

    let began = Instant::now();
    cluster.failover(replica.index).await.expect("failover");
    eprintln!(
        "failover: node {} is master {:?} after CLUSTER FAILOVER",
        replica.port,
        began.elapsed()
    );
    let (c, promoted_index, new_port, old_port) =
        (&cluster, replica.index, replica.port, master.port);
    until(Duration::from_secs(10), "the slot follows", || async move {
        c.master_for_slot(slot).await.map(|n| n.port).ok() == Some(new_port)
    })
    .await;
    let promoted = node_client(replica.port).await;
    let v: Option<String> = promoted.get(&key).await.unwrap();
    assert_eq!(v.as_deref(), Some("kept"), "nothing lost");
    until(
        Duration::from_secs(30),
        "the old master follows",
        || async move { matches!(c.replica_of(promoted_index).await, Ok(r) if r.port == old_port) },
    )
    .await;
    cluster
        .wait_ready(Duration::from_secs(30))
        .await
        .expect("healthy");
    assert!(
        cluster.failover(replica.index).await.is_err(),
        "a master refuses CLUSTER FAILOVER"
    );
    assert!(matches!(
        cluster.skew_clock(0, 1000).await,
        Err(TestkitError::Unsupported(_))
    ));
    assert_no_rules(&cluster).await;
}

/// How far the node's wall clock (`TIME`) is from this machine's, in milliseconds.
async fn clock_offset(client: &Client) -> i64 {
    let now_ms = || {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64
    };
    let before = now_ms();
    let time: Vec<String> = raw(client, "TIME", vec![]).await;
    let after = now_ms();
    let node = time[0].parse::<i64>().unwrap() * 1000 + time[1].parse::<i64>().unwrap() / 1000;
    node - (before + after) / 2
}

/// Waits until the node's clock is `want` ms off (within 100 ms); how long it took.
async fn settles(client: &Client, want: i64) -> Duration {
    until(
        Duration::from_millis(1500),
        &format!("a clock {want} ms off"),
        || async move { (clock_offset(client).await - want).abs() < 100 },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_skewed_clock_moves_time_and_expiry_on_its_node_only() {
    let _serial = SERIAL.lock().await;
    let cluster = TestCluster::start_with(StartOptions::default().skewable_clocks(true))
        .await
        .expect("cluster with skewable clocks");
    let nodes = cluster.nodes();
    let (a, b) = (
        node_client(nodes[0].port).await,
        node_client(nodes[1].port).await,
    );
    assert!(clock_offset(&a).await.abs() < 100, "no skew at start");
    let key = key_on(&cluster, nodes[0].port, "ttl").await;
    let _: () = a
        .set(&key, "1", Some(Expiration::PX(10_000)), None, false)
        .await
        .unwrap();

    cluster.skew_clock(0, 2000).await.unwrap();
    let took = settles(&a, 2000).await;
    let between = clock_offset(&a).await - clock_offset(&b).await;
    assert!(
        (between - 2000).abs() < 100,
        "node 0 is 2 s ahead of node 1: {between} ms"
    );
    let ttl: i64 = a.pttl(&key).await.unwrap();
    assert!(
        (0..8_100).contains(&ttl),
        "the key's time to live shrank with the step: {ttl} ms"
    );
    eprintln!("skew: +2000 ms seen after {took:?}; node 0 - node 1 = {between} ms; PTTL {ttl} ms");

    cluster.skew_clock(0, -1500).await.unwrap();
    let took = settles(&a, -1500).await;
    eprintln!("skew: -1500 ms seen after {took:?}");
    cluster.skew_clock(0, 0).await.unwrap();
    let took = settles(&a, 0).await;
    eprintln!("skew: reset seen after {took:?}");
    assert!(clock_offset(&b).await.abs() < 100, "node 1 never moved");
    assert_no_rules(&cluster).await;
}
