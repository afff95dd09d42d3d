//! What an application may choose (lock names, owner tokens) shown to an operator:
//! escaped, never sent to the terminal as it is; argument mistakes told as such (status
//! 64); `watch` ended by the first signal, and quietly by a closed pipe.

use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value as Json;
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::common::{client, cluster, prefix};
use crate::{cli, output, text};

/// A name that recolours the terminal, and an owner token that erases a line.
const EVIL_NAME: &str = "evil\x1b[31mRED\x1b[0m:{1}";
const EVIL_OWNER: &str = "op\x1b[2Kname";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_an_application_chose_are_shown_escaped() {
    let cluster = cluster().await;
    let prefix = prefix("cli-hostile");
    let client = client(cluster, &prefix).await;
    let lock = client
        .rwlock(EVIL_NAME)
        .unwrap()
        .with_owner(EVIL_OWNER)
        .unwrap();
    let held = lock.write().await.unwrap();

    for args in [
        vec!["list"],
        vec!["inspect", EVIL_NAME],
        vec!["break", EVIL_NAME],
    ] {
        let mut cmd = cli(cluster, &prefix);
        cmd.args(&args);
        let out = output(cmd).await;
        let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
        assert!(
            !out.stdout.contains(&0x1b) && !out.stderr.contains(&0x1b),
            "{args:?} sent an escape sequence: {stdout:?} {stderr:?}"
        );
        assert!(
            stdout.contains("evil\\x1b[31mRED\\x1b[0m:{1}"),
            "{args:?}: {stdout}"
        );
        if args[0] != "list" {
            assert!(stdout.contains("op\\x1b[2Kname"), "{args:?}: {stdout}");
        }
    }
    // JSON escapes them as JSON does, and gives the names back as they are
    let mut cmd = cli(cluster, &prefix);
    cmd.args(["inspect", EVIL_NAME, "--json"]);
    let out = output(cmd).await;
    assert!(!out.stdout.contains(&0x1b));
    let j: Json = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(j["name"], EVIL_NAME);
    assert_eq!(j["holders"][0]["owner"], EVIL_OWNER);

    // a client name with a control character is refused before anything is sent
    let mut cmd = cli(cluster, &prefix);
    cmd.args([
        "run",
        "--client-name",
        EVIL_OWNER,
        "--read",
        "x",
        "--",
        "true",
    ]);
    let out = output(cmd).await;
    assert_eq!(out.status.code(), Some(64), "{}", text(&out.stderr));
    assert!(!out.stderr.contains(&0x1b));
    held.release().await.unwrap();
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn argument_mistakes_exit_64_and_say_what_to_change() {
    let cluster = cluster().await;
    let prefix = prefix("cli-usage");
    // a lease too short for the default --grace
    let mut cmd = cli(cluster, &prefix);
    cmd.args(["run", "--write", "x", "--lease", "100ms", "--", "true"]);
    let out = output(cmd).await;
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(64), "{err}");
    assert!(!err.contains("cannot connect"), "{err}");
    assert!(
        err.contains("--grace 5s is too long for --lease 100ms")
            && err.contains("pass --grace 25ms or less, or --lease 20s or more"),
        "{err}"
    );
    // a lease the library refuses
    let mut cmd = cli(cluster, &prefix);
    cmd.args([
        "run", "--write", "x", "--lease", "0s", "--grace", "0s", "--", "true",
    ]);
    let out = output(cmd).await;
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(64), "{err}");
    assert!(
        err.contains("invalid configuration") && !err.contains("cannot connect"),
        "{err}"
    );
}

/// `watch` on a lock that is taken and given back all the time.
async fn watch_a_busy_lock(
    cluster: &cluster_rwlock_testkit::TestCluster,
    prefix: &str,
) -> (tokio::task::JoinHandle<()>, tokio::process::Child) {
    let client = client(cluster, prefix).await;
    let lock = client.rwlock("busy").unwrap();
    let cycler = tokio::spawn(async move {
        loop {
            let Ok(g) = lock.write().await else { return };
            tokio::time::sleep(Duration::from_millis(2)).await;
            let _ = g.release().await;
        }
    });
    let mut cmd = cli(cluster, prefix);
    cmd.args(["watch", "busy", "--every", "10ms"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let watcher = cmd.spawn().expect("watch runs");
    (cycler, watcher)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_stops_on_the_first_signal() {
    let cluster = cluster().await;
    let prefix = prefix("cli-watch-signal");
    for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGINT] {
        let (cycler, mut watcher) = watch_a_busy_lock(cluster, &prefix).await;
        let mut lines = BufReader::new(watcher.stdout.take().unwrap()).lines();
        // it is watching (its first lines are out), and busy
        for _ in 0..3 {
            lines.next_line().await.unwrap().expect("a line");
        }
        let drain = tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        let pid = i32::try_from(watcher.id().unwrap()).unwrap();
        // SAFETY: kill(2) with the pid of our own child and a valid signal number
        unsafe { libc::kill(pid, signal) };
        let began = Instant::now();
        let status = tokio::time::timeout(Duration::from_secs(3), watcher.wait())
            .await
            .unwrap_or_else(|_| panic!("watch still ran 3 s after signal {signal}"))
            .unwrap();
        assert_eq!(status.code(), Some(0), "signal {signal}");
        assert!(
            began.elapsed() < Duration::from_secs(1),
            "{:?}",
            began.elapsed()
        );
        cycler.abort();
        drain.abort();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_ends_quietly_when_its_reader_goes() {
    let cluster = cluster().await;
    let prefix = prefix("cli-watch-pipe");
    let (cycler, mut watcher) = watch_a_busy_lock(cluster, &prefix).await;
    let mut lines = BufReader::new(watcher.stdout.take().unwrap()).lines();
    lines.next_line().await.unwrap().expect("a line");
    // as `watch | head -1`: the reader takes a line and goes
    drop(lines);
    let out = tokio::time::timeout(Duration::from_secs(5), watcher.wait_with_output())
        .await
        .expect("watch ended once its reader had gone")
        .unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        !err.contains("panicked") && !err.contains("Broken pipe"),
        "{err}"
    );
    cycler.abort();
}
