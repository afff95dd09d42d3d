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
    const S: &str = "4 5 1 1 99999999999999 0 0 - 99999999999999";
    let cases: Vec<(&str, Vec<(&str, &str)>)> = vec![
        ("no-summary", vec![("hello", "world")]),
        ("no-version", vec![("s", "x 5 0 - 0 0 0 - 5")]),
        ("fence-with-a-dash", vec![("s", "4 1-2 0 - 0 0 0 - 5")]),
        ("deadline-with-a-dash", vec![("s", "4 5 0 3-4 0 0 0 - 5")]),
        ("no-expiry", vec![("s", "4 5 0 - 0 0 0 -")]),
        (
            "lone-hold-garbage",
            vec![("s", "4 5 1 1 99999999999999 0 0 - 5 r1:2 someone")],
        ),
        (
            "lone-hold-and-fields",
            vec![
                (
                    "s",
                    "4 5 1 1 99999999999999 0 0 - 5 w1:5:99999999999999:30000 someone",
                ),
                ("w", "someone"),
            ],
        ),
        (
            "bad-deadline",
            vec![("s", S), ("o:someone", "r1:2:soon:30000")],
        ),
        (
            "bad-hold",
            vec![("s", S), ("o:someone", "x1:2:99999999999999:30000")],
        ),
        ("no-holds", vec![("s", S), ("o:someone", " ")]),
        (
            "layout-3-hold",
            vec![("s", S), ("o:someone", "r1:2:99999999999999")],
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

/// A hash written by a client of another layout (3, the one before; 9, a later one) is
/// refused with an error that names its layout, and left as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hash_of_another_layout_is_refused_with_its_version() {
    let cluster = cluster().await;
    let p = prefix("layout");
    let client = client(cluster, &p).await;
    let redis = client.redis().clone();
    for (name, summary, version) in [
        ("v3", "3 5 1 99999999999999 99999999999999 0 0 -", "3"),
        ("v9", "9 5 0 - 0 0 0 - 5 and more", "9"),
    ] {
        let lock = client.rwlock(name).unwrap();
        let _: () = redis.hset(lock.key(), ("s", summary)).await.unwrap();
        for e in [
            lock.write().await.unwrap_err(),
            lock.try_read().await.unwrap_err(),
        ] {
            match &e {
                Error::OtherLayout { key, found } => {
                    assert_eq!((key.as_str(), found.as_str()), (lock.key(), version));
                    assert!(
                        e.to_string().contains(&format!("is of layout {version}")),
                        "{e}"
                    );
                }
                other => panic!("{name}: {other:?}"),
            }
        }
        let kept: Option<String> = redis.hget(lock.key(), "s").await.unwrap();
        assert_eq!(kept.as_deref(), Some(summary), "{name}: untouched");
        let _: i64 = redis.del(lock.key()).await.unwrap();
    }
    assert_no_keys(cluster, &p).await;
}

/// Deletes the lock's function library on every master (a master restarted empty, as
/// far as the library goes).
/// Held by the test that deletes the library, and by those whose user may not load it.
static LIBRARY_DELETES: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn delete_library(cluster: &cluster_rwlock_testkit::TestCluster) {
    // (an error: it was not there)
    let _ = cluster
        .command_on_masters("FUNCTION", &["DELETE", "cluster_rwlock_4"])
        .await
        .unwrap();
}

/// A master without the lock's function library: a live client's next call loads it
/// again and goes on; a least-privilege user (it may call the functions, not load them)
/// is told at connect to run `cluster-rwlock setup`; after the setup it connects and locks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_without_the_library_gets_it_again_or_the_user_is_told_to_set_it_up() {
    let cluster = cluster().await;
    let _library = LIBRARY_DELETES.lock().await;
    let p = prefix("setup");
    let app = format!("app{}", &p[p.len() - 8..]);
    let mut args: Vec<String> = vec!["SETUSER".into(), app.clone(), "on".into(), ">app-pw".into()];
    args.extend(app_acl_rule(&p));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    cluster.command_on_all("ACL", &args).await.unwrap();
    let port = cluster.nodes()[0].port;
    let app_config = LockConfig::from_url(&format!("redis://{app}:app-pw@127.0.0.1:{port}"))
        .unwrap()
        .prefix(&p);

    // a live client (a user that may load it): its calls go on
    let client = client(cluster, &p).await;
    let lock = client.rwlock("job").unwrap();
    lock.write().await.unwrap().release().await.unwrap();
    delete_library(cluster).await;
    lock.write().await.unwrap().release().await.unwrap();
    assert!(client.stats().library_reloads >= 1, "{:?}", client.stats());

    // the least-privilege user, on masters without the library (another test of this
    // file, with a user that may, may load it again meanwhile: then it is deleted again)
    let mut told = None;
    for _ in 0..5 {
        delete_library(cluster).await;
        match LockClient::connect(app_config.clone()).await {
            Err(e @ Error::NotSetUp { .. }) => {
                told = Some(e);
                break;
            }
            Ok(c) => {
                c.close().await;
            }
            Err(other) => panic!("{other:?}"),
        }
    }
    let told = told.expect("the user is told to run the setup");
    assert!(told.is_permission_denied());
    assert!(told.to_string().contains("cluster-rwlock setup"), "{told}");

    // the operator's setup: every master has it; the user connects and locks
    let found = LockClient::setup(&common::config(cluster)).await.unwrap();
    assert_eq!(found.len(), 3, "{found:?}");
    let again = LockClient::setup(&common::config(cluster)).await.unwrap();
    assert!(
        again
            .iter()
            .all(|(_, s)| matches!(s, cluster_rwlock::operator::Setup::Current { .. })),
        "{again:?}"
    );
    let user = LockClient::connect(app_config)
        .await
        .expect("after the setup");
    user.rwlock("job")
        .unwrap()
        .write()
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
    cluster
        .command_on_all("ACL", &["DELUSER", &app])
        .await
        .unwrap();
    assert_no_keys(cluster, &p).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_name_that_is_not_utf8_still_holds() {
    let cluster = cluster().await;
    let p = prefix("utf8");
    let client = client(cluster, &p).await;
    let lock = client.rwlock("bytes").unwrap();
    // a well-formed write hold (layout 4: summary and entry) of an owner whose name is not
    // UTF-8, far in the future
    let owner = vec![0xff, 0xfe, 0x80];
    let mut field = b"o:".to_vec();
    field.extend_from_slice(&owner);
    let fields: Vec<(Value, Value)> = vec![
        (
            "s".into(),
            "4 5 1 99999999999999 99999999999999 0 0 - 99999999999999".into(),
        ),
        ("w".into(), Value::Bytes(owner.into())),
        (
            Value::Bytes(field.into()),
            "w1:5:99999999999999:30000".into(),
        ),
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

/// docs/SECURITY.md's ACL rule for an application user, as `ACL SETUSER` arguments.
fn app_acl_rule(prefix: &str) -> Vec<String> {
    common::app_acl_rule(prefix)
        .split(' ')
        .map(str::to_string)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_least_privilege_user_can_lock_and_one_without_key_writes_is_told_why() {
    let cluster = cluster().await;
    // the user may call the library, not load it: loaded here, and not deleted meanwhile
    let _library = LIBRARY_DELETES.lock().await;
    LockClient::setup(&common::config(cluster)).await.unwrap();
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
