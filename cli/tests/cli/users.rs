//! What users meet: the CLI under the least-privilege ACL user, and the answers a new
//! user's mistakes get.

use tokio::process::Command;

use crate::common::{app_acl_rule, cluster, prefix};
use crate::{cli, output, text, BIN};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_works_under_the_least_privilege_acl_user() {
    let cluster = cluster().await;
    let prefix = prefix("cli-acl");
    let user = format!("cliapp{}", &prefix[prefix.len() - 8..]);
    // docs/SECURITY.md's rule for the prefix, and what the CLI's `list` adds
    let rule = format!(
        "{} +scan +cluster|slots +cluster|info",
        app_acl_rule(&prefix)
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
    // the operator's step, as a user that may load functions (the default user): what
    // each master had, one line each
    let mut setup = cli(cluster, &prefix);
    setup.arg("setup");
    let out = output(setup).await;
    let said = text(&out.stdout);
    assert!(out.status.success(), "{said}{}", text(&out.stderr));
    assert_eq!(said.lines().count(), 3, "{said}");
    assert!(
        said.lines()
            .all(|l| l.starts_with("127.0.0.1:")
                && (l.contains("revision") || l.contains("upgraded"))),
        "{said}"
    );
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
    // --lease belongs to run: given before the subcommand, it is a usage error
    let mut cmd = cli(cluster, &prefix);
    cmd.args([
        "--lease",
        "2s",
        "run",
        "--write",
        "lease-first",
        "--",
        "true",
    ]);
    let out = output(cmd).await;
    assert_eq!(out.status.code(), Some(64), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("--lease"),
        "{}",
        text(&out.stderr)
    );
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
