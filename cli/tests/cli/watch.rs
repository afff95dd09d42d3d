//! `watch`: uncontended cycles, and the state at start then a break, in causal order.

use std::time::Duration;

use cluster_rwlock_testkit::TestCluster;
use serde_json::Value as Json;

use crate::common::{client, client_with, cluster, prefix};
use crate::{cli, text};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_sees_uncontended_cycles() {
    let cluster = cluster().await;
    let prefix = prefix("cli-watch");
    let client = client_with(cluster, |c| c.prefix(&prefix).client_name("cycler@here")).await;
    let lock = client.rwlock("brief").unwrap();
    let mut cmd = cli(cluster, &prefix);
    cmd.args(["watch", "brief", "--every", "50ms"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let watcher = cmd.spawn().expect("watch runs");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    // ten uncontended cycles, held for a moment each (a release publishes nothing then)
    let mut fences = Vec::new();
    for _ in 0..10 {
        let w = lock.write().await.unwrap();
        fences.push(w.fence());
        w.release().await.unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let mut watcher = watcher;
    watcher.start_kill().unwrap();
    let out = tokio::time::timeout(Duration::from_secs(10), watcher.wait_with_output())
        .await
        .expect("watch stops")
        .unwrap();
    let shown = text(&out.stdout);
    for fence in &fences {
        assert!(
            shown
                .lines()
                .any(|l| l.contains(" granted") && l.contains(&format!("(fence {fence})"))),
            "grant under fence {fence} not shown:\n{shown}"
        );
    }
    client.close().await;
}

/// What `watch ARGS` printed while `meanwhile` ran (from 1.5 s after its start, to half
/// a second after `meanwhile` ended).
async fn watching<F: std::future::Future<Output = ()>>(
    cluster: &TestCluster,
    prefix: &str,
    args: &[&str],
    meanwhile: F,
) -> String {
    let mut cmd = cli(cluster, prefix);
    cmd.arg("watch")
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut watcher = cmd.spawn().expect("watch runs");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    meanwhile.await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    watcher.start_kill().unwrap();
    let out = tokio::time::timeout(Duration::from_secs(10), watcher.wait_with_output())
        .await
        .expect("watch stops")
        .unwrap();
    text(&out.stdout)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_tells_the_state_at_start_then_a_break_in_causal_order() {
    let cluster = cluster().await;
    let prefix = prefix("cli-watch-break");
    let holder = client_with(cluster, |c| c.prefix(&prefix).client_name("stuck@a")).await;
    let waiter = client_with(cluster, |c| c.prefix(&prefix).client_name("next@b")).await;
    let held = holder.rwlock("broken").unwrap().write().await.unwrap();
    let old_fence = held.fence();
    let next = waiter.rwlock("broken").unwrap();
    let queued =
        tokio::spawn(async move { next.write_timeout(Duration::from_secs(20)).await.unwrap() });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let shown = watching(cluster, &prefix, &["broken", "--every", "50ms"], async {
        holder.force_release("broken", None).await.unwrap();
        let w = queued.await.unwrap();
        w.release().await.unwrap();
    })
    .await;
    let lines: Vec<&str> = shown.lines().collect();
    // human times, no JSON unless asked
    assert!(
        lines
            .iter()
            .all(|l| l.as_bytes().get(2) == Some(&b':') && !l.contains("{\"")),
        "{shown}"
    );
    // the hold taken before the watch is the state it found, not a grant
    let first = lines
        .iter()
        .position(|l| l.contains(" now: write held by stuck@a for "));
    let first = first.unwrap_or_else(|| panic!("state at start:\n{shown}"));
    assert!(
        !lines[..=first].iter().any(|l| l.contains("granted:")),
        "{shown}"
    );
    assert!(shown.contains(&format!("fence {old_fence}")), "{shown}");
    // then, in this order: the break, the hand-off it made, the grant that followed
    let at = |what: &str| {
        lines
            .iter()
            .position(|l| l.contains(what))
            .unwrap_or_else(|| panic!("{what:?} not shown:\n{shown}"))
    };
    let broken = at("broken by an operator: 1 hold(s) removed");
    let handed = at("handed to waiting writer");
    // the state is looked at every `--every`: the grant is seen held, or (the writer
    // gave it back at once) granted and released under the hand-off's fence
    let handoff_fence = lines[handed]
        .rsplit("fence ")
        .next()
        .and_then(|f| f.strip_suffix(')'))
        .unwrap_or_else(|| panic!("a fence: {}", lines[handed]));
    let granted = lines
        .iter()
        .position(|l| {
            l.contains("granted: write to next@b")
                || l.contains(&format!(
                    "granted and released since the last look (fence {handoff_fence})"
                ))
        })
        .unwrap_or_else(|| panic!("the grant not shown:\n{shown}"));
    assert!(
        first < broken && broken < handed && handed < granted,
        "{shown}"
    );
    holder.close().await;
    waiter.close().await;

    // with --json: every line is one JSON object
    let client = client(cluster, &prefix).await;
    let lock = client.rwlock("json").unwrap();
    let shown = watching(
        cluster,
        &prefix,
        &["json", "--json", "--every", "50ms"],
        async {
            lock.write().await.unwrap().release().await.unwrap();
        },
    )
    .await;
    let objects: Vec<Json> = shown
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|_| panic!("not JSON: {l}\n{shown}")))
        .collect();
    assert!(objects.iter().all(|o| o["at"].is_string()), "{shown}");
    assert!(
        objects.iter().any(|o| o["event"]
            .as_str()
            .is_some_and(|e| e.starts_with("granted"))),
        "{shown}"
    );
    client.close().await;
}
