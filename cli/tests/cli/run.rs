//! `run` and `exec`: what `run` hands to its command and its exit codes, mutual exclusion
//! between two processes, a lost lease that terminates the command, and `exec`'s guarded
//! commands.

use std::time::{Duration, Instant};

use fred::interfaces::KeysInterface;
use tokio::process::Command;

use crate::common::{client, cluster, prefix};
use crate::{cli, output, text, BIN};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_hands_the_fence_to_the_command_and_returns_its_status() {
    let cluster = cluster().await;
    let prefix = prefix("cli-run");
    let dir = std::env::temp_dir().join(format!("{prefix}-env"));
    let mut cmd = cli(cluster, &prefix);
    cmd.args(["run", "--write", "job:{7}", "--", "sh", "-c"]).arg(format!(
        "echo \"$CLUSTER_RWLOCK_FENCE $CLUSTER_RWLOCK_KEY $CLUSTER_RWLOCK_LOCK $CLUSTER_RWLOCK_MODE\" > {}; exit 7",
        dir.display()
    ));
    let out = output(cmd).await;
    assert_eq!(out.status.code(), Some(7), "stderr: {}", text(&out.stderr));
    let env = std::fs::read_to_string(&dir).expect("the command wrote its environment");
    let _ = std::fs::remove_file(&dir);
    let parts: Vec<&str> = env.split_whitespace().collect();
    let fence: u64 = parts[0].parse().expect("a numeric fence");
    assert!(fence > 0);
    assert_eq!(
        parts[1..],
        [format!("{prefix}:job:{{7}}").as_str(), "job:{7}", "write"]
    );

    // the lock was released when the command ended: a library writer gets it at once,
    // with a higher fence
    let client = client(cluster, &prefix).await;
    let w = client.rwlock("job:{7}").unwrap().try_write().await.unwrap();
    let w = w.expect("released after the command");
    assert!(w.fence() > fence);

    // busy: --timeout 0 gives up at once with 75 and does not run the command
    let mut cmd = cli(cluster, &prefix);
    cmd.args([
        "run",
        "--read",
        "job:{7}",
        "--timeout",
        "0",
        "--",
        "sh",
        "-c",
        "exit 3",
    ]);
    let out = output(cmd).await;
    assert_eq!(out.status.code(), Some(75), "stderr: {}", text(&out.stderr));
    let mut cmd = cli(cluster, &prefix);
    cmd.args([
        "run",
        "--write",
        "job:{7}",
        "--timeout",
        "300ms",
        "--",
        "true",
    ]);
    let began = Instant::now();
    let out = output(cmd).await;
    assert_eq!(out.status.code(), Some(75), "stderr: {}", text(&out.stderr));
    assert!(began.elapsed() >= Duration::from_millis(300));
    w.release().await.unwrap();

    // a command that cannot be found: 127; the lock is not left held
    let mut cmd = cli(cluster, &prefix);
    cmd.args(["run", "--write", "job:{7}", "--", "/no/such/program"]);
    assert_eq!(output(cmd).await.status.code(), Some(127));
    let r = client.rwlock("job:{7}").unwrap().try_write().await.unwrap();
    r.expect("free after a failed spawn")
        .release()
        .await
        .unwrap();

    // bad arguments: 64; Redis unreachable: 69
    let mut cmd = cli(cluster, &prefix);
    cmd.args(["run", "job", "--", "true"]);
    assert_eq!(output(cmd).await.status.code(), Some(64));
    let mut cmd = Command::new(BIN);
    cmd.args(["--url", "redis://127.0.0.1:1", "inspect", "x"]);
    assert_eq!(output(cmd).await.status.code(), Some(69));
    // a password in the URL never shows, whatever fails
    // (a URL of another scheme is an argument mistake: 64)
    for (url, status) in [
        ("redis://app:cli-s3cret@127.0.0.1:1", 69),
        ("http://app:cli-s3cret@127.0.0.1:1", 64),
    ] {
        let mut cmd = Command::new(BIN);
        cmd.args(["--url", url, "inspect", "x"]);
        let out = output(cmd).await;
        assert_eq!(out.status.code(), Some(status), "{url}");
        let shown = format!("{}{}", text(&out.stdout), text(&out.stderr));
        assert!(!shown.contains("cli-s3cret"), "{shown}");
        assert!(shown.contains("127.0.0.1:1"), "names the node: {shown}");
    }
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_writers_never_overlap() {
    let cluster = cluster().await;
    let prefix = prefix("cli-excl");
    let log = std::env::temp_dir().join(format!("{prefix}.log"));
    // each command appends "<start ns> <end ns>" after holding for 200 ms
    let script = format!(
        "s=$(date +%s%N); sleep 0.2; e=$(date +%s%N); echo \"$s $e\" >> {}",
        log.display()
    );
    let runs: Vec<_> = (0..4)
        .map(|_| {
            let mut cmd = cli(cluster, &prefix);
            cmd.args([
                "run",
                "--write",
                "shared-job",
                "--timeout",
                "30s",
                "--",
                "sh",
                "-c",
            ])
            .arg(&script);
            tokio::spawn(output(cmd))
        })
        .collect();
    for run in runs {
        let out = run.await.unwrap();
        assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    }
    let written = std::fs::read_to_string(&log).expect("log");
    let _ = std::fs::remove_file(&log);
    let mut spans: Vec<(u128, u128)> = written
        .lines()
        .map(|l| {
            let mut p = l.split_whitespace().map(|x| x.parse::<u128>().unwrap());
            (p.next().unwrap(), p.next().unwrap())
        })
        .collect();
    assert_eq!(spans.len(), 4, "{written}");
    spans.sort();
    for pair in spans.windows(2) {
        assert!(pair[0].1 <= pair[1].0, "two commands overlapped: {pair:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_lease_terminates_the_command_with_70() {
    let cluster = cluster().await;
    let prefix = prefix("cli-lost");
    let client = client(cluster, &prefix).await;
    let key = client.rwlock("lost").unwrap().key().to_string();
    let mut cmd = cli(cluster, &prefix);
    cmd.args([
        "run", "--lease", "1500ms", "--write", "lost", "--grace", "300ms", "--", "sleep", "60",
    ]);
    let began = Instant::now();
    let run = tokio::spawn(output(cmd));
    // wait until it holds, then delete the hash behind its back
    let lock = client.rwlock("lost").unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while lock.state().await.unwrap().holders.is_empty() {
        assert!(Instant::now() < deadline, "the CLI never took the lock");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let deleted = Instant::now();
    let _: i64 = client.redis().del(&key).await.unwrap();
    let out = run.await.unwrap();
    assert_eq!(out.status.code(), Some(70), "stderr: {}", text(&out.stderr));
    assert!(text(&out.stderr).contains("lost"), "{}", text(&out.stderr));
    // told within a renewal interval or so, and the command was stopped (not 60 s)
    assert!(
        deleted.elapsed() < Duration::from_secs(5),
        "{:?}",
        deleted.elapsed()
    );
    assert!(began.elapsed() < Duration::from_secs(30));
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_runs_guarded_commands_under_the_lock() {
    let cluster = cluster().await;
    let prefix = prefix("cli-exec");
    let tag = &uuid::Uuid::new_v4().simple().to_string()[..8];
    let (name, status, stock) = (
        format!("orders:{{{tag}}}"),
        format!("orders:{{{tag}}}:status"),
        format!("stock:{{{tag}}}"),
    );
    let mut cmd = cli(cluster, &prefix);
    cmd.args(["exec", "--write", "--no-raw", &name, "--"])
        .args([
            "SET", &status, "paid", ";", "HINCRBY", &stock, "n", "-1", ";", "GET", &status,
        ]);
    let out = output(cmd).await;
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "\"OK\"\n(integer) -1\n\"paid\"\n",
        "{}",
        text(&out.stderr)
    );
    // captured (not a terminal): the values as they are, one per line, as
    // `redis-cli --raw` prints them, for `v=$(cluster-rwlock exec ...)`; `--raw` says so
    for flag in [None, Some("--raw")] {
        let mut cmd = cli(cluster, &prefix);
        cmd.args(["exec", "--read"])
            .args(flag)
            .args([&name, "--", "GET", &status, ";", "HGET", &stock, "n", ";"])
            .args(["GET", &format!("missing:{{{tag}}}"), ";", "EXISTS", &status]);
        let out = output(cmd).await;
        assert!(out.status.success(), "stderr: {}", text(&out.stderr));
        assert_eq!(text(&out.stdout), "paid\n-1\n\n1\n", "{flag:?}");
    }
    // the lock was released: a library writer gets it at once
    let client = client(cluster, &prefix).await;
    let w = client.rwlock(&name).unwrap().try_write().await.unwrap();
    w.expect("released after exec").release().await.unwrap();

    // a key of another slot, or a write under a read hold: refused, nothing written
    let elsewhere = format!("orders:{{{tag}x}}:status");
    for (mode, key) in [("--write", elsewhere.as_str()), ("--read", status.as_str())] {
        let mut cmd = cli(cluster, &prefix);
        cmd.args(["exec", mode, &name, "--", "SET", key, "refunded"]);
        let out = output(cmd).await;
        assert_eq!(out.status.code(), Some(64), "{mode}: {}", text(&out.stderr));
    }
    let left: Option<String> = client.redis().get(&status).await.unwrap();
    assert_eq!(left.as_deref(), Some("paid"));
    let none: Option<String> = client.redis().get(&elsewhere).await.unwrap();
    assert_eq!(none, None);

    // the lock's own hash, another lock's hash of the slot: refused with nothing sent
    let lock = client.rwlock(&name).unwrap();
    let neighbour = client.rwlock(&format!("invoices:{{{tag}}}")).unwrap();
    for key in [lock.key(), neighbour.key()] {
        let mut cmd = cli(cluster, &prefix);
        cmd.args(["exec", "--write", &name, "--", "DEL", key]);
        let out = output(cmd).await;
        assert_eq!(out.status.code(), Some(64), "{key}: {}", text(&out.stderr));
        assert!(
            text(&out.stderr).contains("lock's own"),
            "{}",
            text(&out.stderr)
        );
    }

    // commands are checked before the lock is asked for: with the lock held by another,
    // a command that may not run exits 64 at once instead of waiting for it
    let held = lock.write().await.unwrap();
    let started = Instant::now();
    let mut cmd = cli(cluster, &prefix);
    cmd.args(["exec", "--write", &name, "--", "FLUSHALL"]);
    let out = output(cmd).await;
    assert_eq!(out.status.code(), Some(64), "{}", text(&out.stderr));
    assert!(started.elapsed() < Duration::from_secs(10));
    held.release().await.unwrap();

    // a command that would fail (INCR of a word) is found before any runs: nothing ran,
    // the exit is 65
    let before: Option<String> = client.redis().get(&status).await.unwrap();
    let mut cmd = cli(cluster, &prefix);
    cmd.args(["exec", "--write", &name, "--"]).args([
        "RPUSH",
        &format!("{name}:log"),
        "x",
        ";",
        "INCR",
        &status,
    ]);
    let out = output(cmd).await;
    assert_eq!(out.status.code(), Some(65), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("nothing ran"),
        "{}",
        text(&out.stderr)
    );
    let left: Option<String> = client.redis().get(&status).await.unwrap();
    assert_eq!(left, before);
    let logged: i64 = fred::interfaces::ListInterface::llen(client.redis(), format!("{name}:log"))
        .await
        .unwrap();
    assert_eq!(logged, 0, "the command before it did not run");
    // one that fails only while running (an overflow) fails the call too: what the
    // commands before it wrote is put back, none after it ran
    let big = format!("{name}:big");
    let _: () = client
        .redis()
        .set(&big, i64::MAX, None, None, false)
        .await
        .unwrap();
    let mut cmd = cli(cluster, &prefix);
    cmd.args(["exec", "--write", "--no-raw", &name, "--"])
        .args([
            "SET", &status, "packed", ";", "INCR", &big, ";", "SET", &status, "shipped",
        ]);
    let out = output(cmd).await;
    assert_eq!(out.status.code(), Some(65), "{}", text(&out.stderr));
    let said = text(&out.stderr);
    assert!(
        said.contains("overflow") && said.contains("undone"),
        "{said}"
    );
    let left: Option<String> = client.redis().get(&status).await.unwrap();
    assert_eq!(left, before, "the SET before the overflow was undone");
    client.close().await;
}

/// A `run` inside a `run`: the inner one is told its own lock's name, and takes its client
/// name from `--name` or `CLUSTER_RWLOCK_NAME` as any `run` does, never the outer lock's
/// name (which the outer `run` hands on as `CLUSTER_RWLOCK_LOCK`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nested_run_keeps_its_own_client_name() {
    let cluster = cluster().await;
    let prefix = prefix("cli-nested");
    let seen = std::env::temp_dir().join(format!("{prefix}-nested"));
    let _ = std::fs::remove_file(&seen);
    let mut cmd = cli(cluster, &prefix);
    cmd.env_remove("CLUSTER_RWLOCK_NAME")
        .args([
            "run",
            "--write",
            "outer:{5}",
            "--",
            BIN,
            "--prefix",
            &prefix,
        ])
        .args(["run", "--write", "inner:{5}", "--", "sh", "-c"])
        .arg(format!(
            "echo \"$CLUSTER_RWLOCK_LOCK\" > {}.tmp; mv {0}.tmp {0}; sleep 3",
            seen.display()
        ));
    let child = tokio::spawn(output(cmd));
    let client = client(cluster, &prefix).await;
    let until = Instant::now() + Duration::from_secs(20);
    while !seen.exists() {
        assert!(Instant::now() < until, "the inner command never ran");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let told = std::fs::read_to_string(&seen).unwrap();
    let _ = std::fs::remove_file(&seen);
    assert_eq!(told.trim(), "inner:{5}");
    let state = client.rwlock("inner:{5}").unwrap().state().await.unwrap();
    let names: Vec<Option<&str>> = state.holders.iter().map(|h| h.client_name()).collect();
    assert_eq!(names.len(), 1, "{state:?}");
    assert_ne!(
        names[0],
        Some("outer:{5}"),
        "the outer lock's name taken as a client name"
    );
    let out = child.await.unwrap();
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    client.close().await;
}
