//! Looking at locks and breaking them: `inspect` (and `--json`) and `list` show the
//! holders on every master; `break` says what it would remove, then removes it.

use std::collections::HashSet;
use std::time::Duration;

use serde_json::Value as Json;

use crate::common::{client, client_with, cluster, locks_on, prefix};
use crate::{cli, output, text};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_and_list_show_the_holders_on_every_master() {
    let cluster = cluster().await;
    let prefix = prefix("cli-look");
    let client = client(cluster, &prefix).await;
    let held = client
        .rwlock("inspected")
        .unwrap()
        .with_owner("job-17")
        .unwrap();
    let w = held.write().await.unwrap();

    let mut cmd = cli(cluster, &prefix);
    cmd.args(["inspect", "inspected", "--json"]);
    let out = output(cmd).await;
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    let j: Json = serde_json::from_slice(&out.stdout).expect("inspect --json is JSON");
    assert_eq!(j["mode"], "write");
    assert_eq!(j["fence"].as_u64(), Some(w.fence()));
    assert_eq!(j["slot"].as_u64(), Some(u64::from(held.slot())));
    assert_eq!(j["holders"][0]["owner"], "job-17");
    assert_eq!(j["holders"][0]["write"], 1);
    assert!(j["holders"][0]["lease_left_ms"].as_u64().unwrap() > 0);
    assert!(j["master"].is_string());

    // how long it has been held, by the server's clock, and the fence as a time
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let mut cmd = cli(cluster, &prefix);
    cmd.args(["inspect", "inspected", "--json"]);
    let j: Json = serde_json::from_slice(&output(cmd).await.stdout).expect("JSON");
    let held_for = j["holders"][0]["held_for_ms"]
        .as_u64()
        .expect("held_for_ms");
    assert!((1_000..30_000).contains(&held_for), "{j}");
    assert!(
        j["fence_time"].as_str().is_some_and(|t| t.ends_with('Z')),
        "{j}"
    );
    let mut cmd = cli(cluster, &prefix);
    cmd.args(["inspect", "inspected"]);
    let shown = text(&output(cmd).await.stdout);
    assert!(shown.contains("(granted 20"), "{shown}");
    assert!(
        shown.contains("  held 1.") || shown.contains("  held 2."),
        "{shown}"
    );
    assert!(shown.contains("lease left "), "{shown}");

    // one read lock on each master
    let mut names = HashSet::new();
    let mut guards = Vec::new();
    for slot in [0, 8000, 16000] {
        let master = cluster.master_for_slot(slot).await.unwrap();
        let lock = locks_on(cluster, &client, &master, 1, "spread-")
            .await
            .remove(0);
        names.insert(lock.name().to_string());
        guards.push(lock.read().await.unwrap());
    }
    assert_eq!(names.len(), 3);
    let mut cmd = cli(cluster, &prefix);
    cmd.args(["list", "spread-*", "--json"]);
    let out = output(cmd).await;
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    let listed: Json = serde_json::from_slice(&out.stdout).expect("list --json is JSON");
    let listed = listed.as_array().unwrap();
    let found: HashSet<String> = listed
        .iter()
        .map(|l| l["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(found, names, "the pattern keeps out `inspected`");
    let masters: HashSet<&str> = listed
        .iter()
        .map(|l| l["master"].as_str().unwrap())
        .collect();
    assert_eq!(masters.len(), 3, "{masters:?}");
    assert!(listed.iter().all(|l| l["mode"] == "read"));

    // the plain listing: one line per lock
    let mut cmd = cli(cluster, &prefix);
    cmd.arg("list");
    let out = output(cmd).await;
    assert_eq!(
        text(&out.stdout).lines().count(),
        4,
        "{}",
        text(&out.stdout)
    );

    assert!(
        text(&out.stderr).contains(&format!(
            "4 lock(s) matching '*' under prefix '{prefix}': 4 held, 0 free"
        )),
        "{}",
        text(&out.stderr)
    );

    // nothing under another prefix: said plainly, with the prefix looked under
    let mut cmd = cli(cluster, &format!("{prefix}-none"));
    cmd.arg("list");
    let out = output(cmd).await;
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "");
    assert!(
        text(&out.stderr).contains(&format!(
            "no locks matching '*' under prefix '{prefix}-none'"
        )),
        "{}",
        text(&out.stderr)
    );
    // a lock nobody holds: free, and why there is no fence
    let mut cmd = cli(cluster, &prefix);
    cmd.args(["inspect", "never-taken"]);
    let out = output(cmd).await;
    let shown = text(&out.stdout);
    assert!(
        shown.contains("mode     free (nobody holds it now)"),
        "{shown}"
    );
    assert!(
        shown.contains("fence    - (no grant in the last minute"),
        "{shown}"
    );

    // the holder's readable client name, in the JSON and the text
    let named = client_with(cluster, |c| {
        c.prefix(&prefix).client_name("publisher@host-a")
    })
    .await;
    let r = named.rwlock("named").unwrap().read().await.unwrap();
    let mut cmd = cli(cluster, &prefix);
    cmd.args(["inspect", "named", "--json"]);
    let out = output(cmd).await;
    let j: Json = serde_json::from_slice(&out.stdout).expect("inspect --json is JSON");
    assert_eq!(j["holders"][0]["client"], "publisher@host-a", "{j}");
    let mut cmd = cli(cluster, &prefix);
    cmd.args(["list", "named"]);
    let out = output(cmd).await;
    assert!(
        text(&out.stdout).contains("1 holder(s) (publisher@host-a)"),
        "{}",
        text(&out.stdout)
    );
    r.release().await.unwrap();
    named.close().await;

    for g in guards {
        g.release().await.unwrap();
    }
    w.release().await.unwrap();
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn break_says_what_it_would_remove_then_removes_it() {
    let cluster = cluster().await;
    let prefix = prefix("cli-break");
    let client = client(cluster, &prefix).await;
    let stuck = client
        .rwlock("stuck")
        .unwrap()
        .with_owner("job-17")
        .unwrap();
    let held = stuck.write().await.unwrap();

    let mut cmd = cli(cluster, &prefix);
    cmd.args(["break", "stuck"]);
    let out = output(cmd).await;
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("would remove 1 hold(s) of 1 owner(s)"),
        "{}",
        text(&out.stdout)
    );
    assert!(
        text(&out.stdout).contains("job-17"),
        "{}",
        text(&out.stdout)
    );
    assert_eq!(
        stuck.state().await.unwrap().holders.len(),
        1,
        "a dry run removes nothing"
    );

    let mut cmd = cli(cluster, &prefix);
    cmd.args(["break", "stuck", "--owner", "job-17", "--yes"]);
    let out = output(cmd).await;
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("broke stuck: 1 hold(s) removed"),
        "{}",
        text(&out.stdout)
    );
    let other = client.rwlock("stuck").unwrap();
    let w = other
        .try_write()
        .await
        .unwrap()
        .expect("free after the break");
    assert!(w.fence() > held.fence());
    w.release().await.unwrap();
    assert!(held.release().await.is_err(), "the broken hold is gone");
    client.close().await;
}

/// `break --client`: a stuck process's holds AND its other tasks' places in the queue, on
/// one lock or every lock under the prefix; the dry run names them and who is next.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn break_client_removes_a_whole_clients_holds_and_places() {
    let cluster = cluster().await;
    let prefix = prefix("cli-break-client");
    let stuck = client_with(cluster, |c| c.prefix(&prefix).client_name("stuck@a")).await;
    let other = client_with(cluster, |c| c.prefix(&prefix).client_name("fine@b")).await;
    let (one, two) = (
        stuck.rwlock("orders:{1}").unwrap(),
        stuck.rwlock("orders:{2}").unwrap(),
    );
    let held_one = one.write().await.unwrap();
    let held_two = two.read().await.unwrap();
    // another task of the stuck process waits for the first lock, then another client
    let queued = {
        let one = one.clone();
        tokio::spawn(async move { one.write_timeout(Duration::from_secs(30)).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let waiter = {
        let lock = other.rwlock("orders:{1}").unwrap();
        tokio::spawn(async move { lock.write().await.unwrap() })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;

    let mut cmd = cli(cluster, &prefix);
    cmd.args(["break", "orders:{1}", "--client", "stuck@a"]);
    let out = output(cmd).await;
    let shown = text(&out.stdout);
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    assert!(
        shown.contains("would remove 1 hold(s) of 1 owner(s) and 1 place(s)"),
        "{shown}"
    );
    assert!(shown.contains("next: the writer fine@b/"), "{shown}");
    assert!(!waiter.is_finished(), "a dry run removes nothing");

    let mut cmd = cli(cluster, &prefix);
    cmd.args(["break", "--all", "--client", "stuck@a", "--yes"]);
    let out = output(cmd).await;
    let shown = text(&out.stdout);
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    assert!(
        shown.contains("removed 2 hold(s) and 1 place(s) on 2 lock(s)"),
        "{shown}"
    );
    let g = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("the other client is next, not the stuck one")
        .unwrap();
    assert!(g.fence() > held_one.fence());
    g.release().await.unwrap();
    // its task that was queued, still running, is told its client was broken: an
    // operator who breaks a client means it (it does not queue again at the tail)
    match queued.await.unwrap() {
        Err(cluster_rwlock::Error::Broken { client }) => assert_eq!(client, "stuck@a"),
        other => panic!("the broken client's waiter: {other:?}"),
    }
    // nothing of it left: exit 3
    let mut cmd = cli(cluster, &prefix);
    cmd.args(["break", "--all", "--client", "stuck@a"]);
    let out = output(cmd).await;
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stdout));
    drop((held_one, held_two));
    stuck.close().await;
    other.close().await;
}

/// A holder that stopped renewing (here: a grant made with a bare `FCALL`, which nothing
/// renews) is flagged overdue once half its lease has passed since its grant, in the
/// text and in the JSON, with how long ago it renewed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_flags_a_holder_that_stopped_renewing() {
    use fred::prelude::*;
    let cluster = cluster().await;
    let prefix = prefix("cli-overdue");
    let client = client(cluster, &prefix).await;
    let lock = client.rwlock("stuck").unwrap();
    let granted: Value = client
        .redis()
        .fcall(
            "rwlock4_acquire",
            vec![lock.key()],
            vec!["w", "frozen-owner", "1", "6000", "0"],
        )
        .await
        .unwrap();
    assert!(
        matches!(&granted, Value::Array(p) if p[0].as_i64() == Some(1)),
        "{granted:?}"
    );
    let look = || async {
        let mut cmd = cli(cluster, &prefix);
        cmd.args(["inspect", "stuck", "--json"]);
        let j: Json = serde_json::from_slice(&output(cmd).await.stdout).expect("JSON");
        j
    };
    let fresh = look().await;
    assert_eq!(fresh["holders"][0]["overdue"], false, "{fresh}");
    assert_eq!(fresh["holders"][0]["lease_ms"], 6000, "{fresh}");
    tokio::time::sleep(Duration::from_millis(3300)).await;
    let late = look().await;
    assert_eq!(late["holders"][0]["overdue"], true, "{late}");
    let ago = late["holders"][0]["renewed_ago_ms"].as_u64().unwrap();
    assert!((3_000..6_000).contains(&ago), "{late}");
    let mut cmd = cli(cluster, &prefix);
    cmd.args(["inspect", "stuck"]);
    let shown = text(&output(cmd).await.stdout);
    assert!(shown.contains("OVERDUE"), "{shown}");
    assert!(shown.contains("renewed 3."), "{shown}");
    let _: i64 = client.redis().del(lock.key()).await.unwrap();
    client.close().await;
}

/// A master's only replica frozen: `inspect` (text and JSON) and `top` show it as not
/// acknowledging, by the address its master lists, with how long since its last ACK;
/// before the freeze it is listed as acknowledging. A cluster of the test's own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_and_top_name_a_replica_that_stopped_acknowledging() {
    let cluster = cluster_rwlock_testkit::TestCluster::start()
        .await
        .expect("cluster");
    let prefix = prefix("cli-silent");
    let client = client(&cluster, &prefix).await;
    let master = cluster.nodes()[0].clone();
    let lock = locks_on(&cluster, &client, &master, 1, "r")
        .await
        .pop()
        .unwrap();
    let replica = cluster.replica_of(master.index).await.unwrap();
    let port = format!(":{}", replica.port);
    let inspect = |json: bool| {
        let mut cmd = cli(&cluster, &prefix);
        cmd.args(["inspect", lock.name()]);
        if json {
            cmd.arg("--json");
        }
        output(cmd)
    };
    let j: Json = serde_json::from_slice(&inspect(true).await.stdout).expect("JSON");
    let listed = j["replicas"].as_array().expect("replicas listed").clone();
    assert_eq!(listed.len(), 1, "{j}");
    assert!(listed[0]["addr"].as_str().unwrap().ends_with(&port), "{j}");
    assert_eq!(listed[0]["silent"], false, "{j}");
    let shown = text(&inspect(false).await.stdout);
    assert!(shown.contains("replicas 1 (all acknowledging)"), "{shown}");

    cluster.pause(replica.index).await.unwrap();
    tokio::time::sleep(Duration::from_millis(4_500)).await;
    let j: Json = serde_json::from_slice(&inspect(true).await.stdout).expect("JSON");
    let r = &j["replicas"][0];
    assert_eq!(r["silent"], true, "{j}");
    assert!(r["addr"].as_str().unwrap().ends_with(&port), "{j}");
    assert!(r["lag_s"].as_u64().is_some_and(|s| s >= 3), "{j}");
    let shown = text(&inspect(false).await.stdout);
    assert!(
        shown.contains("NOT ACKNOWLEDGING") && shown.contains(&port),
        "{shown}"
    );
    let mut cmd = cli(&cluster, &prefix);
    cmd.args(["top", "--once"]);
    let shown = text(&output(cmd).await.stdout);
    assert!(
        shown
            .lines()
            .any(|l| l.contains("NOT ACKNOWLEDGING") && l.contains(&port)),
        "{shown}"
    );
    let mut cmd = cli(&cluster, &prefix);
    cmd.args(["top", "--once", "--json"]);
    let j: Json = serde_json::from_slice(&output(cmd).await.stdout).expect("JSON");
    let silent = j["silent_replicas"].as_array().expect("silent_replicas");
    assert!(
        silent
            .iter()
            .any(|r| r["addr"].as_str().is_some_and(|a| a.ends_with(&port))),
        "{j}"
    );
    cluster.unpause(replica.index).await.unwrap();
    client.close().await;
}
