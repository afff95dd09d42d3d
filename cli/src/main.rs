//! `cluster-rwlock`: take a distributed read/write lock from the shell, and look at locks.
//! The crate `cluster-rwlock-cli` (`cargo install cluster-rwlock-cli`): the library's
//! build gains nothing from it.

/// `println!` through [`shown::line`]: a closed pipe ends the command quietly.
macro_rules! say {
    ($($t:tt)*) => {
        $crate::shown::line(format_args!($($t)*))
    };
}

// The subcommands, one module each; none imports another.
mod break_lock; // `break`: remove a stuck holder's holds, or a client's
mod exec; // `exec`: Redis commands under the lock, as one guarded call
mod inspect; // `inspect`: one lock's holders, waiters and fence
mod list; // `list`: every lock under the prefix
mod run; // `run`: hold the lock while a command runs
mod setup; // `setup`: load the function library on every master
mod top; // `top`: a live table of the busy locks
mod watch; // `watch`: a live view of one lock's grants, releases and hand-offs

// What the subcommands share; none imports a subcommand.
mod args; // the command line (clap)
mod clock; // durations and times as the commands print them
mod code; // exit codes, and an error of the library as one
mod connect; // the client's configuration from the command line
mod replicas; // replicas that are not acknowledging, per master
mod scan; // the lock keys under a prefix, on every master
mod shown; // output: escaping, and a closed pipe that ends quietly
mod signals; // SIGINT and SIGTERM, listened to once
mod state; // a lock's state as text or JSON, and reading it
mod wait; // taking the lock as --write/--read and --timeout say

use clap::Parser;

use args::{Cli, Command};

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
