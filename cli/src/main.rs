//! `cluster-rwlock`: take a distributed read/write lock from the shell, and look at locks.
//! The crate `cluster-rwlock-cli` (`cargo install cluster-rwlock-cli`): the library's
//! build gains nothing from it.

/// `println!` through [`shown::line`]: a closed pipe ends the command quietly.
macro_rules! say {
    ($($t:tt)*) => {
        $crate::shown::line(format_args!($($t)*))
    };
}

mod args;
mod break_lock;
mod clock;
mod connect;
mod exec;
mod inspect;
mod list;
mod replicas;
mod run;
mod setup;
mod shown;
mod top;
mod watch;

use clap::Parser;

use args::{Cli, Command};

/// Exit codes, as `flock(1)`, `timeout(1)` and sysexits.h have them.
pub mod code {
    /// Bad arguments.
    pub const USAGE: i32 = 64;
    /// Redis could not be reached, or answered with an error.
    pub const UNAVAILABLE: i32 = 69;
    /// The lease was lost while the command ran.
    pub const LOST: i32 = 70;
    /// The lock was not granted within `--timeout`.
    pub const BUSY: i32 = 75;
    /// `exec`: a command failed, or would have: nothing the call did stays written (all
    /// or nothing).
    pub const COMMAND_FAILED: i32 = 65;
    /// `break`: the lock held nothing to break (of the owner given).
    pub const NOTHING_HELD: i32 = 3;
    /// The command could not be run.
    pub const NOT_EXECUTABLE: i32 = 126;
    /// The command was not found.
    pub const NOT_FOUND: i32 = 127;
}

fn main() {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let usage = e.use_stderr();
            let _ = e.print();
            std::process::exit(if usage { code::USAGE } else { 0 });
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cluster-rwlock: cannot start the runtime: {e}");
            std::process::exit(code::UNAVAILABLE);
        }
    };
    let status = runtime.block_on(async move {
        if let Command::Setup = cli.command {
            return setup::setup(&cli).await;
        }
        let client = match connect::client(&cli).await {
            Ok(c) => c,
            Err(connect::NoClient::Usage(e)) => {
                eprintln!("cluster-rwlock: {}", shown::escaped(&e));
                return code::USAGE;
            }
            Err(connect::NoClient::Unreachable(e)) => {
                // the error names the node; the URL may carry a password
                eprintln!(
                    "cluster-rwlock: cannot connect: {e}{}",
                    connect_hint(&cli.url)
                );
                return code::UNAVAILABLE;
            }
        };
        let status = match &cli.command {
            Command::Run(a) => run::run(&client, a).await,
            Command::Inspect(a) => inspect::inspect(&client, a).await,
            Command::List(a) => list::list(&client, &cli, a).await,
            Command::Top(a) => top::top(&client, &cli.prefix, a).await,
            Command::Watch(a) => watch::watch(&client, a).await,
            Command::Break(a) => break_lock::break_lock(&client, &cli.prefix, a).await,
            Command::Exec(a) => exec::exec(&client, a).await,
            // (handled above, before connecting)
            Command::Setup => setup::setup(&cli).await,
        };
        // sends what is still to be given back (an undone grant, a dropped guard) first
        let unsent = client.close().await;
        if unsent > 0 {
            eprintln!(
                "cluster-rwlock: {unsent} hold(s) could not be given back in time; they end with their lease"
            );
        }
        status
    });
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    std::process::exit(status);
}

/// What to try when the connection failed: where the URL came from, and TLS.
fn connect_hint(url: &str) -> String {
    let given = std::env::var_os("CLUSTER_RWLOCK_URL").is_some()
        || std::env::args().any(|a| a == "--url" || a.starts_with("--url="));
    let mut hint = String::new();
    if !given {
        hint.push_str(
            "\n  (no --url given: this tried the default, redis://127.0.0.1:6379; pass --url or set CLUSTER_RWLOCK_URL)",
        );
    }
    if url.starts_with("rediss") {
        hint.push_str(
            "\n  (rediss:// speaks TLS: if that port is plaintext, use redis://; with a private CA, pass --tls-ca)",
        );
    }
    hint
}

/// Prints an error of the library and returns its exit code.
pub fn fail(what: &str, e: &cluster_rwlock::Error) -> i32 {
    eprintln!(
        "cluster-rwlock: {}: {}",
        shown::escaped(what),
        shown::escaped(&e.to_string())
    );
    match e {
        cluster_rwlock::Error::Timeout(_) => code::BUSY,
        cluster_rwlock::Error::InvalidName(_)
        | cluster_rwlock::Error::InvalidCommand(_)
        | cluster_rwlock::Error::WrongSlot { .. }
        | cluster_rwlock::Error::LockKey { .. }
        | cluster_rwlock::Error::InvalidConfig(_)
        | cluster_rwlock::Error::InvalidOwner(_) => code::USAGE,
        cluster_rwlock::Error::LockLost => code::LOST,
        _ => code::UNAVAILABLE,
    }
}
