//! The test bed's own faults do what they say: replication lag, isolation from the other
//! nodes, a manual failover. Each test starts a cluster of its own.

use std::time::{Duration, Instant};

use cluster_rwlock::testkit::TestCluster;
use fred::prelude::*;

/// A fred client on the single node at `port` (a replica answers reads after READONLY).
async fn node_client(port: u16) -> Client {
    let config = Config::from_url(&format!("redis://127.0.0.1:{port}")).unwrap();
    let client = Builder::from_config(config)
        .with_performance_config(|p| p.default_command_timeout = Duration::from_secs(2))
        .build()
        .unwrap();
    client.init().await.unwrap();
    client
}

/// A key whose slot node `master` serves, named `<tag><n>`.
async fn key_on(cluster: &TestCluster, master: u16, tag: &str) -> String {
    for n in 0.. {
        let key = format!("{tag}{n}");
        let slot = cluster_rwlock::slot::key_slot(key.as_bytes());
        if cluster.master_for_slot(slot).await.unwrap().port == master {
            return key;
        }
    }
    unreachable!()
}

async fn replica_get(replica: &Client, key: &str) -> Option<String> {
    let _: () = replica
        .custom(
            fred::types::CustomCommand::new_static(
                "READONLY",
                fred::types::ClusterHash::Random,
                false,
            ),
            Vec::<String>::new(),
        )
        .await
        .unwrap();
    replica.get(key).await.unwrap()
}

async fn assert_no_rules(cluster: &TestCluster) {
    let rules = cluster.partition_rules().await.unwrap();
    assert!(rules.is_empty(), "rules left: {rules:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_replication_stream_leaves_the_replica_behind_until_restored() {
    let cluster = TestCluster::start().await.unwrap();
    let master = cluster.nodes()[0].clone();
    let replica = cluster.replica_of(0).await.unwrap();
    let (m, r) = (
        node_client(master.port).await,
        node_client(replica.port).await,
    );
    let before = key_on(&cluster, master.port, "before").await;
    let during = key_on(&cluster, master.port, "during").await;
    let _: () = m.set(&before, "1", None, None, false).await.unwrap();
    let began = Instant::now();
    while replica_get(&r, &before).await.is_none() {
        assert!(
            began.elapsed() < Duration::from_secs(5),
            "replication never worked"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    cluster.cut_replication(0).await.unwrap();
    assert_eq!(
        cluster.partition_rules().await.unwrap().len(),
        2,
        "one link, both ways"
    );
    let _: () = m.set(&during, "1", None, None, false).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        replica_get(&r, &during).await,
        None,
        "the cut replica got the write"
    );
    assert!(
        r.ping::<String>(None).await.is_ok(),
        "the replica itself stays up"
    );

    cluster.restore_replication(0).await.unwrap();
    assert_no_rules(&cluster).await;
    let began = Instant::now();
    while replica_get(&r, &during).await.is_none() {
        assert!(
            began.elapsed() < Duration::from_secs(90),
            "the replica never caught up"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eprintln!("caught up {:?} after the restore", began.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_isolated_master_is_failed_over_while_its_clients_still_reach_it() {
    let cluster = TestCluster::start().await.unwrap();
    let master = cluster.nodes()[1].clone();
    let client = node_client(master.port).await;
    cluster.isolate(1).await.unwrap();
    let took = cluster
        .wait_for_failover(Duration::from_secs(30))
        .await
        .unwrap();
    eprintln!("isolated master failed over in {took:?}");
    // it still answers its own clients, and still believes it is a master
    let role: Vec<Value> = client
        .custom(
            fred::types::CustomCommand::new_static("ROLE", fred::types::ClusterHash::Random, false),
            Vec::<String>::new(),
        )
        .await
        .unwrap();
    assert_eq!(role[0].as_str().as_deref(), Some("master"));
    cluster.heal(1).await.unwrap();
    assert_no_rules(&cluster).await;
    cluster.wait_ready(Duration::from_secs(30)).await.unwrap();
    let now_master = cluster.master_for_slot(6000).await.unwrap();
    assert_ne!(
        now_master.port, master.port,
        "a replica took the slots over"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manual_failover_swaps_master_and_replica() {
    let cluster = TestCluster::start().await.unwrap();
    let replica = cluster.replica_of(2).await.unwrap();
    cluster.failover(replica.index).await.unwrap();
    let slot = 16000;
    let began = Instant::now();
    while cluster.master_for_slot(slot).await.unwrap().port != replica.port {
        assert!(
            began.elapsed() < Duration::from_secs(10),
            "the slots did not follow"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    cluster.wait_ready(Duration::from_secs(30)).await.unwrap();
}
