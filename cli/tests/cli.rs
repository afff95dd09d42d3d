//! The `cluster-rwlock` binary run as a process against the test bed: what `run` hands
//! to its command, its exit codes, mutual exclusion between two processes, a lost lease,
//! `inspect --json` and `list`.

// the library's test helpers (one copy for both crates)
#[path = "../../tests/common/mod.rs"]
mod common;

use std::collections::HashSet;
use std::process::Output;
use std::time::{Duration, Instant};

use cluster_rwlock_testkit::TestCluster;
use common::{client, cluster, locks_on, prefix};
use fred::interfaces::KeysInterface;
use serde_json::Value as Json;
use tokio::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_cluster-rwlock");

/// The binary with the cluster's first seed (a plain `redis://` URL: cluster mode is
/// detected) and `prefix`.
fn cli(cluster: &TestCluster, prefix: &str) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.env("CLUSTER_RWLOCK_URL", &cluster.seed_urls()[0])
        .args(["--prefix", prefix])
        .kill_on_drop(true);
    cmd
}

async fn output(mut cmd: Command) -> Output {
    tokio::time::timeout(Duration::from_secs(60), cmd.output())
        .await
        .expect("the CLI finished within 60 s")
        .expect("the CLI ran")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_hands_the_fence_to_the_command_and_returns_its_status() {
    let cluster = cluster().await;
    let prefix = prefix("cli-run");
    let dir = std::env::temp_dir().join(format!("{prefix}-env"));
    let mut cmd = cli(cluster, &prefix);
    cmd.args(["run", "--write", "job:{7}", "--", "sh", "-c"]).arg(format!(
        "echo \"$CLUSTER_RWLOCK_FENCE $CLUSTER_RWLOCK_KEY $CLUSTER_RWLOCK_NAME $CLUSTER_RWLOCK_MODE\" > {}; exit 7",
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
    for url in [
        "redis://app:cli-s3cret@127.0.0.1:1",
        "http://app:cli-s3cret@127.0.0.1:1",
    ] {
        let mut cmd = Command::new(BIN);
        cmd.args(["--url", url, "inspect", "x"]);
        let out = output(cmd).await;
        assert_eq!(out.status.code(), Some(69), "{url}");
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
        "--lease", "1500ms", "run", "--write", "lost", "--grace", "300ms", "--", "sleep", "60",
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
async fn inspect_and_list_show_the_holders_on_every_master() {
    let cluster = cluster().await;
    let prefix = prefix("cli-look");
    let client = client(cluster, &prefix).await;
    let held = client.rwlock("inspected").unwrap().with_owner("job-17");
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
    let named = common::client_with(cluster, |c| {
        c.prefix(&prefix).client_name("publisher@host-a").unwrap()
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
async fn watch_sees_uncontended_cycles() {
    let cluster = cluster().await;
    let prefix = prefix("cli-watch");
    let client = common::client_with(cluster, |c| {
        c.prefix(&prefix).client_name("cycler@here").unwrap()
    })
    .await;
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
    let holder = common::client_with(cluster, |c| {
        c.prefix(&prefix).client_name("stuck@a").unwrap()
    })
    .await;
    let waiter = common::client_with(cluster, |c| {
        c.prefix(&prefix).client_name("next@b").unwrap()
    })
    .await;
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
    let granted = at("granted: write to next@b");
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn break_says_what_it_would_remove_then_removes_it() {
    let cluster = cluster().await;
    let prefix = prefix("cli-break");
    let client = client(cluster, &prefix).await;
    let stuck = client.rwlock("stuck").unwrap().with_owner("job-17");
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_works_under_the_least_privilege_acl_user() {
    let cluster = cluster().await;
    let prefix = prefix("cli-acl");
    let user = format!("cliapp{}", &prefix[prefix.len() - 8..]);
    // README's rule for the prefix, and what the CLI's `list` adds
    let rule = format!(
        "{} +scan +cluster|slots +cluster|info",
        common::app_acl_rule(&prefix)
    );
    let mut args = vec![
        "SETUSER".to_string(),
        user.clone(),
        "on".into(),
        ">cli-acl-pw".into(),
    ];
    args.extend(rule.split(' ').map(str::to_string));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    cluster.command_on_all("ACL", &args).await.unwrap();
    let port = cluster.nodes()[0].port;
    let url = format!("redis://{user}:cli-acl-pw@127.0.0.1:{port}");
    let cli_as = |sub: &[&str]| {
        let mut cmd = Command::new(BIN);
        cmd.args(["--url", &url, "--prefix", &prefix])
            .args(sub)
            .kill_on_drop(true);
        cmd
    };
    for sub in [
        vec!["run", "--write", "job", "--", "true"],
        vec!["inspect", "job"],
        vec!["list"],
    ] {
        let out = output(cli_as(&sub)).await;
        let shown = format!("{}{}", text(&out.stdout), text(&out.stderr));
        assert!(out.status.success(), "{sub:?} under the ACL user: {shown}");
        assert!(!shown.contains("cli-acl-pw"), "{shown}");
    }
    cluster
        .command_on_all("ACL", &["DELUSER", &user])
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_users_mistakes_get_answers() {
    let cluster = cluster().await;
    let prefix = prefix("cli-first-hour");
    // breaking a lock that holds nothing says so, with an exit code of its own
    for args in [
        vec!["break", "never-held"],
        vec!["break", "never-held", "--yes"],
    ] {
        let mut cmd = cli(cluster, &prefix);
        cmd.args(&args);
        let out = output(cmd).await;
        assert_eq!(
            out.status.code(),
            Some(3),
            "{args:?}: {}",
            text(&out.stderr)
        );
        assert!(
            text(&out.stdout).contains("nothing to break: never-held"),
            "{}",
            text(&out.stdout)
        );
    }
    // --lease and --name are run's: only its help shows them
    for (sub, shown) in [
        ("run", true),
        ("inspect", false),
        ("list", false),
        ("watch", false),
        ("break", false),
    ] {
        let mut cmd = Command::new(BIN);
        cmd.args([sub, "--help"]);
        let help = text(&output(cmd).await.stdout);
        assert_eq!(help.contains("--lease"), shown, "{sub}: {help}");
        assert_eq!(help.contains("--name"), shown, "{sub}: {help}");
    }
    // given before the subcommand, as older scripts do, --lease still counts
    let mut cmd = cli(cluster, &prefix);
    cmd.args([
        "--lease",
        "2s",
        "run",
        "--write",
        "lease-first",
        "--grace",
        "100ms",
        "--",
        "true",
    ]);
    assert_eq!(output(cmd).await.status.code(), Some(0));
    // no --url: the error says which URL was tried and how to give one (unless a
    // server answers on the default port of this machine)
    let mut cmd = Command::new(BIN);
    cmd.env_remove("CLUSTER_RWLOCK_URL").args(["inspect", "x"]);
    let out = output(cmd).await;
    if out.status.code() == Some(69) {
        let err = text(&out.stderr);
        assert!(
            err.contains("--url") && err.contains("CLUSTER_RWLOCK_URL"),
            "{err}"
        );
    }
    // rediss:// to a plaintext port: a hint about TLS
    let plain = cluster.seed_urls()[0].replace("redis://", "rediss://");
    let mut cmd = Command::new(BIN);
    cmd.args(["--url", plain.as_str(), "inspect", "x"]);
    let out = output(cmd).await;
    assert_eq!(out.status.code(), Some(69));
    assert!(
        text(&out.stderr).contains("use redis://"),
        "{}",
        text(&out.stderr)
    );
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
    cmd.args(["exec", "--write", &name, "--"]).args([
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
    client.close().await;
}
