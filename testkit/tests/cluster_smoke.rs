//! The test bed itself: a six-node cluster that routes keys, carries sharded pub/sub, fails
//! over when a master dies or is cut off by a partition, and takes the old master back as
//! a replica once the partition heals.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use cluster_rwlock_testkit::{Backend, NodeInfo, TestCluster};
use fred::prelude::*;
use fred::types::{ClusterHash, CustomCommand};

async fn client(cluster: &TestCluster) -> Client {
    let client = Builder::from_config(cluster.client_config())
        .with_connection_config(|c| c.connection_timeout = Duration::from_secs(2))
        .with_performance_config(|p| p.default_command_timeout = Duration::from_secs(5))
        .set_policy(ReconnectPolicy::new_exponential(0, 50, 1000, 2))
        .build()
        .expect("client config");
    client.init().await.expect("client connects");
    client
}

async fn keyslot(client: &Client, key: &str) -> u16 {
    let cmd = CustomCommand::new_static("CLUSTER", ClusterHash::Random, false);
    client
        .custom(cmd, vec!["KEYSLOT", key])
        .await
        .expect("CLUSTER KEYSLOT")
}

/// `(first, last, master port)` per slot range, from CLUSTER SLOTS through the client.
async fn slot_map(client: &Client) -> Vec<(u16, u16, u16)> {
    let cmd = CustomCommand::new_static("CLUSTER", ClusterHash::Random, false);
    let reply: Value = client
        .custom(cmd, vec!["SLOTS"])
        .await
        .expect("CLUSTER SLOTS");
    let Value::Array(ranges) = reply else {
        panic!("CLUSTER SLOTS: {reply:?}")
    };
    ranges
        .into_iter()
        .map(|r| {
            let Value::Array(p) = r else {
                panic!("range {r:?}")
            };
            let Value::Array(m) = &p[2] else {
                panic!("master {p:?}")
            };
            (
                p[0].as_i64().unwrap() as u16,
                p[1].as_i64().unwrap() as u16,
                m[1].as_i64().unwrap() as u16,
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousand_keys_land_on_all_three_masters() {
    let cluster = TestCluster::shared().await.expect("cluster");
    let client = client(cluster).await;
    let map = slot_map(&client).await;
    assert_eq!(
        map.iter().map(|r| r.2).collect::<HashSet<_>>().len(),
        3,
        "three masters: {map:?}"
    );

    let mut per_master: HashMap<u16, usize> = HashMap::new();
    for i in 0..1000 {
        let key = format!("smoke:key:{i}");
        let _: () = client.set(&key, i, None, None, false).await.expect("SET");
        let slot = keyslot(&client, &key).await;
        let master = map
            .iter()
            .find(|(a, b, _)| (*a..=*b).contains(&slot))
            .expect("slot served")
            .2;
        *per_master.entry(master).or_default() += 1;
    }
    for i in 0..1000 {
        let v: i64 = client.get(format!("smoke:key:{i}")).await.expect("GET");
        assert_eq!(v, i);
    }
    assert_eq!(per_master.len(), 3, "keys on every master: {per_master:?}");
    assert!(
        per_master.values().all(|&n| n > 200),
        "spread: {per_master:?}"
    );
    let keys: Vec<String> = (0..1000).map(|i| format!("smoke:key:{i}")).collect();
    for k in keys {
        let _: i64 = client.del(k).await.expect("DEL");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharded_pubsub_round_trip_on_every_master() {
    let cluster = TestCluster::shared().await.expect("cluster");
    let publisher = client(cluster).await;
    let map = slot_map(&publisher).await;

    // one channel per master
    let mut channels = Vec::new();
    let mut masters = HashSet::new();
    for i in 0..100 {
        let channel = format!("smoke:{{chan{i}}}:events");
        let slot = keyslot(&publisher, &channel).await;
        let master = map
            .iter()
            .find(|(a, b, _)| (*a..=*b).contains(&slot))
            .unwrap()
            .2;
        if masters.insert(master) {
            channels.push(channel);
        }
    }
    assert_eq!(channels.len(), 3);

    let subscriber = Builder::from_config(cluster.client_config())
        .set_policy(ReconnectPolicy::new_exponential(0, 50, 1000, 2))
        .build_subscriber_client()
        .expect("subscriber config");
    subscriber.init().await.expect("subscriber connects");
    let mut rx = subscriber.message_rx();
    for c in &channels {
        subscriber.ssubscribe(c.clone()).await.expect("SSUBSCRIBE");
    }
    for c in &channels {
        let receivers: i64 = publisher
            .spublish(c.clone(), format!("hello {c}"))
            .await
            .expect("SPUBLISH");
        assert_eq!(receivers, 1, "one subscriber on {c}");
    }
    let mut got = HashSet::new();
    while got.len() < channels.len() {
        let msg = tokio::time::timeout(Duration::from_secs(5), rx.recv())
            .await
            .expect("message in time")
            .expect("message");
        let body: String = msg.value.convert().unwrap();
        assert_eq!(body, format!("hello {}", msg.channel));
        got.insert(msg.channel.to_string());
    }
    assert_eq!(got, channels.iter().cloned().collect());
    subscriber.quit().await.ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failover_keeps_the_key_reachable_through_the_same_client() {
    let cluster = TestCluster::start().await.expect("cluster");
    let client = client(&cluster).await;
    let key = "smoke:{failover}:counter";
    let _: () = client.set(key, 41, None, None, false).await.expect("SET");
    let slot = keyslot(&client, key).await;
    let master = cluster.master_for_slot(slot).await.expect("master");
    // the replica must have the value before its master dies
    let wait = CustomCommand::new_static("WAIT", ClusterHash::Custom(slot), false);
    let acked: i64 = client.custom(wait, vec![1, 2000]).await.expect("WAIT");
    assert_eq!(acked, 1);

    cluster.kill(master.index).await.expect("kill");
    let killed = Instant::now();
    let took = cluster
        .wait_for_failover(Duration::from_secs(30))
        .await
        .expect("failover");
    let promoted = cluster.master_for_slot(slot).await.expect("new master");
    assert_ne!(
        promoted.port, master.port,
        "a replica took over slot {slot}"
    );
    eprintln!(
        "failover: slot {slot} moved from {} to {} in {took:?}",
        master.port, promoted.port
    );

    let v: i64 = client.incr(key).await.expect("INCR after failover");
    assert_eq!(v, 42);
    let read: i64 = client.get(key).await.expect("GET after failover");
    assert_eq!(read, 42);
    eprintln!(
        "failover: first write after kill served {:?} after the kill",
        killed.elapsed()
    );
}

/// A centralized client to one node.
async fn node_client(node: &NodeInfo) -> Client {
    let client = Builder::from_config(Config::from_url(&node.url).expect("url"))
        .with_connection_config(|c| c.connection_timeout = Duration::from_secs(2))
        .with_performance_config(|p| p.default_command_timeout = Duration::from_secs(5))
        .build()
        .expect("client config");
    client.init().await.expect("node client connects");
    client
}

/// Whether a new TCP connection to `port` is accepted within `within`.
async fn accepts(port: u16, within: Duration) -> bool {
    matches!(
        tokio::time::timeout(within, tokio::net::TcpStream::connect(("127.0.0.1", port))).await,
        Ok(Ok(_))
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitioned_master_fails_over_and_rejoins_as_a_replica_when_healed() {
    let cluster = TestCluster::start().await.expect("cluster");
    if cluster.backend() == Backend::External {
        return; // no partitions on a cluster we did not start
    }
    let client = client(&cluster).await;
    let key = "smoke:{partition}:counter";
    let _: () = client.set(key, 41, None, None, false).await.expect("SET");
    let slot = keyslot(&client, key).await;
    let master = cluster.master_for_slot(slot).await.expect("master");
    let replica = cluster.replica_of(master.index).await.expect("replica");
    let wait = CustomCommand::new_static("WAIT", ClusterHash::Custom(slot), false);
    let acked: i64 = client.custom(wait, vec![1, 2000]).await.expect("WAIT");
    assert_eq!(acked, 1);
    client.quit().await.ok();
    assert!(accepts(master.port, Duration::from_secs(1)).await);

    cluster
        .partition(master.index)
        .await
        .expect("partition (needs iptables and root)");
    let cut = Instant::now();
    let rules = cluster.partition_rules().await.expect("iptables -S");
    assert_eq!(rules.len(), 3, "three rules for one node: {rules:?}");
    for port in [master.port, master.port + 10000] {
        assert!(
            rules
                .iter()
                .any(|r| r.starts_with("-A INPUT -i lo") && r.contains(&format!("--dport {port} "))),
            "a rule drops what is sent to {port}: {rules:?}"
        );
    }
    assert!(
        !accepts(master.port, Duration::from_millis(500)).await,
        "a new connection to the partitioned node hangs"
    );

    let took = cluster
        .wait_for_failover(Duration::from_secs(30))
        .await
        .expect("failover");
    let promoted = cluster.master_for_slot(slot).await.expect("new master");
    assert_eq!(
        promoted.port, replica.port,
        "the old master's replica took over slot {slot}"
    );
    eprintln!(
        "partition: slot {slot} moved from {} to {} {:?} after the cut (waited {took:?})",
        master.port,
        promoted.port,
        cut.elapsed()
    );
    let v: i64 = node_client(&promoted)
        .await
        .incr(key)
        .await
        .expect("INCR on the promoted replica");
    assert_eq!(v, 42);

    cluster.heal(master.index).await.expect("heal");
    let healed = Instant::now();
    let left = cluster.partition_rules().await.expect("iptables -S");
    assert!(left.is_empty(), "heal removes the rules: {left:?}");
    assert!(accepts(master.port, Duration::from_secs(1)).await);

    // the old master learns it was replaced and follows the node that replaced it
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match cluster.replica_of(promoted.index).await {
            Ok(r) if r.port == master.port => break,
            other => assert!(
                Instant::now() < deadline,
                "the old master {} did not rejoin as a replica of {}: {other:?}",
                master.port,
                promoted.port
            ),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    cluster
        .wait_ready(Duration::from_secs(30))
        .await
        .expect("six healthy nodes again");
    let old = node_client(&master).await;
    let role: Value = old
        .custom(
            CustomCommand::new_static("ROLE", ClusterHash::Random, false),
            Vec::<String>::new(),
        )
        .await
        .expect("ROLE");
    let Value::Array(role) = role else {
        panic!("ROLE: {role:?}")
    };
    assert!(
        matches!(role[0].as_str().as_deref(), Some("slave" | "replica")),
        "the old master is a replica: ROLE {role:?}"
    );
    assert_eq!(
        role[2].as_i64(),
        Some(i64::from(promoted.port)),
        "of the promoted node: ROLE {role:?}"
    );
    old.quit().await.ok();
    eprintln!(
        "partition: {} follows {} {:?} after the heal",
        master.port,
        promoted.port,
        healed.elapsed()
    );
}
