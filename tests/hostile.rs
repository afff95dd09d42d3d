//! Bad input and hostile state: every case is a typed error, never a panic, and never a
//! grant that should not be.

mod common;

use std::time::{Duration, Instant};

use cluster_rwlock::{Error, LockClient, LockConfig};
use common::{assert_no_keys, client, cluster, prefix};
use fred::prelude::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_of_another_type_is_refused_and_kept() {
    let cluster = cluster().await;
    let p = prefix("type");
    let client = client(cluster, &p).await;
    let redis = client.redis().clone();
    let s = client.rwlock("a-string").unwrap();
    let _: () = redis
        .set(s.key(), "someone else's", None, None, false)
        .await
        .unwrap();
    let l = client.rwlock("a-list").unwrap();
    let _: i64 = redis.rpush(l.key(), vec!["x", "y"]).await.unwrap();
    for lock in [&s, &l] {
        assert!(matches!(lock.write().await, Err(Error::WrongType { .. })));
        assert!(matches!(
            lock.try_read().await,
            Err(Error::WrongType { .. })
        ));
        assert!(matches!(
            lock.read_timeout(Duration::from_millis(100)).await,
            Err(Error::WrongType { .. })
        ));
        assert!(matches!(lock.state().await, Err(Error::WrongType { .. })));
    }
    let kept: String = redis.get(s.key()).await.unwrap();
    assert_eq!(kept, "someone else's");
    let kept: Vec<String> = redis.lrange(l.key(), 0, -1).await.unwrap();
    assert_eq!(kept, vec!["x", "y"]);
    for lock in [&s, &l] {
        let _: i64 = redis.del(lock.key()).await.unwrap();
    }
    assert_no_keys(cluster, &p).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hash_with_garbage_is_refused_and_kept() {
    let cluster = cluster().await;
    let p = prefix("garbage");
    let client = client(cluster, &p).await;
    let redis = client.redis().clone();
    // a summary whose earliest deadline has passed: every entry is read (and checked)
    // before anything is written
    const S: &str = "3 5 1 1 99999999999999 0 0 -";
    let cases: Vec<(&str, Vec<(&str, &str)>)> = vec![
        ("no-summary", vec![("hello", "world")]),
        ("other-layout", vec![("s", "9 5 0 - 0 0 0 -")]),
        ("fence-with-a-dash", vec![("s", "3 1-2 0 - 0 0 0 -")]),
        ("deadline-with-a-dash", vec![("s", "3 5 0 3-4 0 0 0 -")]),
        ("bad-deadline", vec![("s", S), ("o:someone", "r1:2:soon")]),
        (
            "bad-hold",
            vec![("s", S), ("o:someone", "x1:2:99999999999999")],
        ),
        ("no-holds", vec![("s", S), ("o:someone", " ")]),
        (
            "old-layout-hold",
            vec![("s", S), ("o:someone", "99999999999999 r1:2")],
        ),
        ("bad-queue", vec![("s", S), ("q:someone", "first")]),
    ];
    for (name, fields) in &cases {
        let lock = client.rwlock(name).unwrap();
        let _: () = redis.hset(lock.key(), fields.clone()).await.unwrap();
        assert!(
            matches!(lock.write().await, Err(Error::Corrupt { .. })),
            "{name}"
        );
        assert!(
            matches!(lock.try_read().await, Err(Error::Corrupt { .. })),
            "{name}"
        );
        let kept: std::collections::HashMap<String, String> =
            redis.hgetall(lock.key()).await.unwrap();
        assert_eq!(kept.len(), fields.len(), "{name}: the hash is untouched");
        let _: i64 = redis.del(lock.key()).await.unwrap();
    }
    assert_no_keys(cluster, &p).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_name_that_is_not_utf8_still_holds() {
    let cluster = cluster().await;
    let p = prefix("utf8");
    let client = client(cluster, &p).await;
    let lock = client.rwlock("bytes").unwrap();
    // a well-formed write hold (layout 3: summary and entry) of an owner whose name is not
    // UTF-8, far in the future
    let owner = vec![0xff, 0xfe, 0x80];
    let mut field = b"o:".to_vec();
    field.extend_from_slice(&owner);
    let fields: Vec<(Value, Value)> = vec![
        (
            "s".into(),
            "3 5 1 99999999999999 99999999999999 0 0 -".into(),
        ),
        ("w".into(), Value::Bytes(owner.into())),
        (Value::Bytes(field.into()), "w1:5:99999999999999".into()),
    ];
    let _: () = client.redis().hset(lock.key(), fields).await.unwrap();
    // never granted against it, and the state is a typed error, not a panic
    assert!(lock.try_write().await.unwrap().is_none());
    assert!(lock.try_read().await.unwrap().is_none());
    assert!(matches!(
        lock.write_timeout(Duration::from_millis(100)).await,
        Err(Error::Timeout(_))
    ));
    assert!(matches!(lock.state().await, Err(Error::Protocol(_))));
    let _: i64 = client.redis().del(lock.key()).await.unwrap();
    assert_no_keys(cluster, &p).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_names_leases_and_urls() {
    let cluster = cluster().await;
    let p = prefix("input");
    let client = client(cluster, &p).await;
    assert!(matches!(
        client.rwlock(&"x".repeat(1 << 20)),
        Err(Error::InvalidName(_))
    ));
    assert!(matches!(client.rwlock(""), Err(Error::InvalidName(_))));
    for lease in [Duration::ZERO, Duration::from_millis(10)] {
        let r = LockClient::connect(LockConfig::cluster(cluster.seed_urls()).lease(lease)).await;
        assert!(matches!(r, Err(Error::InvalidConfig(_))), "lease {lease:?}");
    }
    assert!(matches!(
        LockConfig::from_url("not a url"),
        Err(Error::InvalidConfig(_))
    ));
    assert!(matches!(
        LockClient::connect(LockConfig::cluster(["http://127.0.0.1:1"])).await,
        Err(Error::InvalidConfig(_))
    ));
    // nothing listens on port 1: a prompt, typed error
    let began = Instant::now();
    let r = LockClient::connect(
        LockConfig::cluster(["redis://127.0.0.1:1"]).command_timeout(Duration::from_secs(1)),
    )
    .await;
    // which node, and why, in a sentence
    match &r {
        Err(e @ Error::Connect { .. }) => assert_eq!(
            e.to_string(),
            "could not connect to 127.0.0.1:1: connection refused"
        ),
        other => panic!("{other:?}"),
    }
    assert!(
        began.elapsed() < Duration::from_secs(5),
        "took {:?}",
        began.elapsed()
    );
    assert_no_keys(cluster, &p).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_password_and_a_user_without_scripts() {
    let cluster = cluster().await;
    let p = prefix("acl");
    let user = format!("locker{}", &p[p.len() - 8..]);
    let plain = format!("plain{}", &p[p.len() - 8..]);
    cluster
        .command_on_all(
            "ACL",
            &["SETUSER", &user, "on", ">right", "~*", "&*", "+@all"],
        )
        .await
        .unwrap();
    cluster
        .command_on_all(
            "ACL",
            &[
                "SETUSER",
                &plain,
                "on",
                ">pw",
                "~*",
                "&*",
                "+@all",
                "-@scripting",
            ],
        )
        .await
        .unwrap();
    let port = cluster.nodes()[0].port;
    let url = |u: &str, pw: &str| format!("redis://{u}:{pw}@127.0.0.1:{port}");

    let wrong = LockClient::connect(LockConfig::cluster([url(&user, "wrong")]).prefix(&p)).await;
    match &wrong {
        // which node, and why; never the password
        Err(e @ Error::Connect { addr, .. }) => {
            assert_eq!(addr, &format!("127.0.0.1:{port}"));
            let text = e.to_string();
            assert!(
                text.starts_with(&format!("could not connect to 127.0.0.1:{port}: ")),
                "{text}"
            );
            assert!(
                !text.contains(":wrong@") && !format!("{e:?}").contains(":wrong@"),
                "{text}"
            );
        }
        other => panic!("a wrong password: {other:?}"),
    }

    let no_scripts = LockClient::connect(LockConfig::cluster([url(&plain, "pw")]).prefix(&p)).await;
    match &no_scripts {
        Err(Error::Server(e)) => assert_eq!(e.code(), "NOPERM", "{e}"),
        other => panic!("a user without EVAL/EVALSHA: {other:?}"),
    }

    let right = LockClient::connect(LockConfig::cluster([url(&user, "right")]).prefix(&p))
        .await
        .expect("right password");
    right
        .rwlock("acl")
        .unwrap()
        .write()
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
    right.close().await;
    cluster
        .command_on_all("ACL", &["DELUSER", &user, &plain])
        .await
        .unwrap();
    assert_no_keys(cluster, &p).await;
}

/// README's ACL rule for an application user, as `ACL SETUSER` arguments.
fn app_acl_rule(prefix: &str) -> Vec<String> {
    common::app_acl_rule(prefix)
        .split(' ')
        .map(str::to_string)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_least_privilege_user_can_lock_and_one_without_key_writes_is_told_why() {
    let cluster = cluster().await;
    let p = prefix("acl-app");
    let app = format!("app{}", &p[p.len() - 8..]);
    let reader = format!("ro{}", &p[p.len() - 8..]);
    let mut args: Vec<String> = vec!["SETUSER".into(), app.clone(), "on".into(), ">app-pw".into()];
    args.extend(app_acl_rule(&p));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    cluster.command_on_all("ACL", &args).await.unwrap();
    let mut ro: Vec<String> = vec![
        "SETUSER".into(),
        reader.clone(),
        "on".into(),
        ">ro-pw".into(),
    ];
    ro.extend(app_acl_rule(&p));
    // keys readable, not writable
    ro.push("resetkeys".into());
    ro.push(format!("%R~{p}:*"));
    let ro: Vec<&str> = ro.iter().map(String::as_str).collect();
    cluster.command_on_all("ACL", &ro).await.unwrap();
    let port = cluster.nodes()[0].port;
    let url = |u: &str, pw: &str| format!("redis://{u}:{pw}@127.0.0.1:{port}");

    // the application user: every call the lock makes, a hand-off by release message
    let a = LockClient::connect(
        LockConfig::from_url(&url(&app, "app-pw"))
            .unwrap()
            .prefix(&p),
    )
    .await
    .expect("the least-privilege user connects");
    let b = LockClient::connect(
        LockConfig::from_url(&url(&app, "app-pw"))
            .unwrap()
            .prefix(&p),
    )
    .await
    .unwrap();
    for i in 0..3 {
        let name = format!("res-{i}");
        let w = a.rwlock(&name).unwrap().write().await.unwrap();
        let theirs = b.rwlock(&name).unwrap();
        let waiting = tokio::spawn(async move {
            let w2 = theirs.write_timeout(Duration::from_secs(5)).await?;
            w2.release().await
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(
            a.rwlock(&name)
                .unwrap()
                .state()
                .await
                .unwrap()
                .holders
                .len(),
            1
        );
        w.release().await.unwrap();
        waiting
            .await
            .unwrap()
            .expect("handed over under the ACL rule");
        let r = a.rwlock(&name).unwrap().read().await.unwrap();
        r.release().await.unwrap();
    }
    a.close().await;
    b.close().await;

    // keys it may read but not write: a typed error that names the missing permission
    let ro_client = LockClient::connect(
        LockConfig::from_url(&url(&reader, "ro-pw"))
            .unwrap()
            .prefix(&p),
    )
    .await
    .expect("connects: reading is allowed");
    match ro_client.rwlock("res-0").unwrap().try_write().await {
        Err(e) => {
            assert!(e.is_permission_denied(), "{e:?}");
            assert!(!e.is_retryable(), "{e:?}");
            let text = e.to_string();
            assert!(text.contains("NOPERM") && text.contains("key"), "{text}");
        }
        Ok(g) => panic!(
            "a user without key writes was granted: {:?}",
            g.map(|g| g.fence())
        ),
    }
    ro_client.close().await;
    cluster
        .command_on_all("ACL", &["DELUSER", &app, &reader])
        .await
        .unwrap();
    assert_no_keys(cluster, &p).await;
}
