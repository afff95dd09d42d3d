//! Names, slots and connecting: a name's slot agrees with the cluster's, names spread
//! over the masters, bad names and settings are typed errors, a `redis://` URL of one
//! node means the cluster, and holders carry a readable client name.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use cluster_rwlock::{Error, LockClient, LockConfig};
use fred::prelude::*;
use fred::types::{ClusterHash, CustomCommand};

use crate::common::{self, assert_no_keys, client, client_with, cluster, prefix};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slot_agrees_with_cluster_keyslot_for_odd_names() {
    let cluster = cluster().await;
    let p = prefix("slot");
    let client = client(cluster, &p).await;
    let long = "x".repeat(1024);
    let names = [
        "orders:42",
        "{inner}.x",
        "x{y}z",
        "a{b}{}",
        "ünïcødé:ключ:鍵",
        "🔒",
        " spaced name ",
        long.as_str(),
    ];
    // braces that cannot be what was meant are refused before any slot is computed
    for typo in ["a}b", "{{}}x", "a{b", "{}", "a{}b", "product:{}"] {
        assert!(
            matches!(client.rwlock(typo), Err(Error::InvalidName(_))),
            "{typo}"
        );
    }
    for name in names {
        let lock = client.rwlock(name).expect("valid name");
        let cmd = CustomCommand::new_static("CLUSTER", ClusterHash::Random, false);
        let server: u16 = client
            .redis()
            .custom(cmd, vec!["KEYSLOT", lock.key()])
            .await
            .expect("KEYSLOT");
        assert_eq!(lock.slot(), server, "slot of {:?}", lock.key());
        let cmd = CustomCommand::new_static("CLUSTER", ClusterHash::Random, false);
        let channel: u16 = client
            .redis()
            .custom(cmd, vec!["KEYSLOT", lock.channel()])
            .await
            .expect("KEYSLOT");
        assert_eq!(channel, server, "channel of {name:?} in the key's slot");
        // and the lock works there
        lock.write()
            .await
            .expect("write")
            .release()
            .await
            .expect("release");
    }
    assert_no_keys(cluster, &p).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_spread_over_all_three_masters() {
    let cluster = cluster().await;
    let p = prefix("spread");
    let client = client(cluster, &p).await;
    let mut masters = HashSet::new();
    let mut guards = Vec::new();
    for i in 0..30 {
        let lock = client.rwlock(&format!("job-{i}")).unwrap();
        masters.insert(cluster.master_for_slot(lock.slot()).await.unwrap().port);
        guards.push(lock.write().await.expect("write"));
    }
    assert_eq!(masters.len(), 3, "30 names on all three masters");
    for g in guards {
        g.release().await.expect("release");
    }
    assert_no_keys(cluster, &p).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_names_and_config_are_typed_errors() {
    let cluster = cluster().await;
    let p = prefix("bad");
    let client = client(cluster, &p).await;
    assert!(matches!(client.rwlock(""), Err(Error::InvalidName(_))));
    assert!(matches!(
        client.rwlock(&"n".repeat(1025)),
        Err(Error::InvalidName(_))
    ));
    assert!(matches!(client.rwlock("}x"), Err(Error::InvalidName(_))));
    let bad_prefix = LockClient::connect(common::config(cluster).prefix("a{b}")).await;
    assert!(matches!(bad_prefix, Err(Error::InvalidConfig(_))));
    let zero_lease = LockClient::connect(common::config(cluster).lease(Duration::ZERO)).await;
    assert!(matches!(zero_lease, Err(Error::InvalidConfig(_))));
    let lock = client.rwlock("owner-check").unwrap();
    assert!(matches!(lock.with_owner(""), Err(Error::InvalidOwner(_))));
    assert!(matches!(
        lock.with_owner("a b"),
        Err(Error::InvalidOwner(_))
    ));
    assert_no_keys(cluster, &p).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tagged_names_land_in_their_tags_slot() {
    let cluster = cluster().await;
    let p = prefix("tagged");
    let client = client(cluster, &p).await;
    for (name, user_key) in [
        ("orders:{42}", "orders:{42}:items"),
        ("{user:7}:profile", "{user:7}:sessions"),
        ("x{a}y{b}", "{a}"),
        ("queue-{jobs}", "stats:{jobs}"),
    ] {
        let lock = client.rwlock(name).unwrap();
        assert_eq!(lock.key(), format!("{p}:{name}"));
        let cmd = CustomCommand::new_static("CLUSTER", ClusterHash::Random, false);
        let server: u16 = client
            .redis()
            .custom(cmd, vec!["KEYSLOT", user_key])
            .await
            .expect("KEYSLOT");
        assert_eq!(lock.slot(), server, "{name} lands with {user_key}");
        let cmd = CustomCommand::new_static("CLUSTER", ClusterHash::Random, false);
        let key_slot: u16 = client
            .redis()
            .custom(cmd, vec!["KEYSLOT", lock.key()])
            .await
            .expect("KEYSLOT");
        assert_eq!(lock.slot(), key_slot);
        let g = lock.write().await.expect("write");
        let other = client.rwlock(name).unwrap();
        assert!(other.try_read().await.unwrap().is_none(), "{name} excludes");
        g.release().await.unwrap();
    }
    assert_no_keys(cluster, &p).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_url_of_a_cluster_node_means_the_cluster() {
    let cluster = cluster().await;
    let p = prefix("url");
    let seed = cluster.seed_urls().remove(0);
    let seed_port = common::client_port(&cluster.nodes()[0]);
    let client = LockClient::connect(common::with_tls(
        cluster,
        LockConfig::from_url(&seed).unwrap().prefix(&p),
    ))
    .await
    .expect("a client from redis://");
    assert!(
        client.redis().is_clustered(),
        "the node said it is a cluster"
    );
    // a lock on each master: routed to its own master, granted without a redirect
    let mut foreign = None;
    for slot in [0, 8000, 16000] {
        let master = cluster.master_for_slot(slot).await.unwrap();
        let lock = common::locks_on(cluster, &client, &master, 1, "m-")
            .await
            .remove(0);
        let node = client.node_for_slot(lock.slot()).expect("routed");
        assert!(
            node.ends_with(&format!(":{}", common::client_port(&master))),
            "{node} for {master:?}"
        );
        let began = Instant::now();
        lock.write().await.unwrap().release().await.unwrap();
        assert!(
            began.elapsed() < Duration::from_millis(500),
            "{:?}",
            began.elapsed()
        );
        if common::client_port(&master) != seed_port {
            foreign = Some(lock.name().to_string());
        }
    }
    client.close().await;

    // one node on purpose: the other masters' MOVED is a typed error that says what to do,
    // at once (not a redirect followed in silence)
    let single = LockClient::connect(common::with_tls(
        cluster,
        LockConfig::single_node(&seed).unwrap().prefix(&p),
    ))
    .await
    .expect("a single-node client");
    let lock = single
        .rwlock(&foreign.expect("a master other than the seed"))
        .unwrap();
    let began = Instant::now();
    match lock.try_write().await {
        Err(Error::InvalidConfig(text)) => {
            assert!(text.contains("cluster node"), "{text}");
            assert!(text.contains("LockConfig::cluster"), "{text}");
            assert!(
                text.contains(&format!(":{seed_port}")),
                "names the node: {text}"
            );
        }
        other => panic!("a single-node client on another master's slot: {other:?}"),
    }
    assert!(
        began.elapsed() < Duration::from_secs(1),
        "{:?}",
        began.elapsed()
    );
    single.close().await;
    assert_no_keys(cluster, &p).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holders_carry_a_readable_client_name() {
    let cluster = cluster().await;
    let p = prefix("name");
    let named = client_with(cluster, |c| c.prefix(&p).client_name("publisher@host-a")).await;
    let plain = client(cluster, &p).await;
    let a = named.rwlock("res").unwrap();
    let b = plain.rwlock("res").unwrap();
    let r1 = a.read().await.unwrap();
    let r2 = b.read().await.unwrap();
    let job = a.with_owner("job-17").unwrap().read().await.unwrap();
    let state = a.state().await.unwrap();
    let mut names: Vec<Option<&str>> = state.holders.iter().map(|h| h.client_name()).collect();
    names.sort();
    let default = format!("{}@", std::process::id());
    assert_eq!(names.len(), 3, "{state:?}");
    assert_eq!(names[0], None, "the explicit owner has no client name");
    assert!(names[1].unwrap().starts_with(&default), "{names:?}");
    assert_eq!(names[2], Some("publisher@host-a"));
    assert!(
        r1.owner().starts_with("publisher@host-a/"),
        "{}",
        r1.owner()
    );
    // a name changes nothing about ownership: two handles of one name still exclude
    let other = named.rwlock("res").unwrap();
    let w = other.try_write().await.unwrap();
    assert!(w.is_none(), "readers of the same client name hold");
    for g in [r1, r2, job] {
        g.release().await.unwrap();
    }
    let w1 = a.write().await.unwrap();
    assert!(
        other.try_write().await.unwrap().is_none(),
        "one name, two writers"
    );
    w1.release().await.unwrap();
    named.close().await;
    plain.close().await;
    assert_no_keys(cluster, &p).await;
}
