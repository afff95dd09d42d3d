//! The `cluster-rwlock` binary run as a process against the test bed: what `run` hands
//! to its command, its exit codes, mutual exclusion between two processes, a lost lease,
//! `inspect --json` and `list`.
//!
//! A file per command family ([`run`], [`inspect`], [`watch`]) and [`users`] (the ACL
//! user, a new user's mistakes); [`common`] has the helpers that need the lock's client.
//! Here: the binary run as a process.

mod common;
mod hostile;
mod inspect;
mod run;
mod top;
mod users;
mod watch;

use std::process::Output;
use std::time::Duration;

use cluster_rwlock_testkit::TestCluster;
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
