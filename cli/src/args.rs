//! The command line.

use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

const EXAMPLES: &str = "\
Examples:
  # one instance of a job across the fleet (exit 75 at once if another runs it)
  cluster-rwlock --url redis://10.0.0.5:7000 run --write nightly-report --timeout 0 -- /usr/local/bin/report
  # readers share, a writer waits for them (at most 30 s)
  cluster-rwlock run --read config:prod --timeout 30s -- ./render.sh
  cluster-rwlock inspect nightly-report --json
  cluster-rwlock list 'orders:*'
  cluster-rwlock watch nightly-report
  # once, as an admin user, where the applications' ACL user may not load functions
  cluster-rwlock --url redis://admin:pw@10.0.0.5:7000 setup

Exit codes of `run`: the command's status (128+N when killed by signal N);
  64 bad arguments, 69 Redis unreachable or failing, 70 the lease was lost while the
  command ran, 75 not granted within --timeout, 126 command not executable,
  127 command not found. `break`: 3 when the lock held nothing to break. `exec`: 65
  when a command failed or would have (all or nothing: nothing the call did stays
  written), 64 with nothing sent for a command that may not run under the lock.";

/// Take a distributed read/write lock on Redis Cluster (or Valkey, or one node) from the
/// shell, and look at the locks held.
#[derive(Debug, Parser)]
#[command(name = "cluster-rwlock", version, after_help = EXAMPLES)]
pub struct Cli {
    /// Any node of the cluster (`redis://host:port`; cluster mode is detected),
    /// `redis-cluster://host:port` to insist on a cluster, or a single node.
    #[arg(
        long,
        env = "CLUSTER_RWLOCK_URL",
        default_value = "redis://127.0.0.1:6379",
        global = true
    )]
    pub url: String,
    /// Key prefix of the locks.
    #[arg(long, default_value = cluster_rwlock::config::DEFAULT_PREFIX, global = true)]
    pub prefix: String,
    /// With a `rediss://` URL: trust the certificate authorities in this PEM file
    /// instead of the system's.
    #[arg(long, value_name = "FILE", global = true)]
    pub tls_ca: Option<std::path::PathBuf>,
    /// With a `rediss://` URL: present this client certificate (PEM; with `--tls-key`).
    #[arg(long, value_name = "FILE", requires = "tls_key", global = true)]
    pub tls_cert: Option<std::path::PathBuf>,
    /// The private key of `--tls-cert` (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_cert", global = true)]
    pub tls_key: Option<std::path::PathBuf>,
    /// With a `rediss://` URL: accept ANY server certificate (still encrypted, but
    /// anyone in the path can read and change the link). For tests only.
    #[arg(long, global = true)]
    pub tls_skip_verification_for_tests_only: bool,
    #[command(subcommand)]
    pub command: Command,
}

/// What to do.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Acquire the lock, run a command while holding it, release it when the command ends.
    Run(RunArgs),
    /// Show a lock: mode, holders, fence, queued writers, slot and master.
    Inspect(InspectArgs),
    /// List the locks under the prefix on every master (SCAN).
    List(ListArgs),
    /// A live table of the locks someone holds or waits for, the most contended on top
    /// (keys: s sort, / filter, b break the selected lock, q quit).
    Top(TopArgs),
    /// Follow a lock: grants, releases and waiters, until Ctrl-C.
    Watch(WatchArgs),
    /// Break a stuck lock: remove every hold (or one owner's, or one client's holds and
    /// places in the queue, on one lock or all), wake the waiters, raise the fence. The
    /// broken holders learn it at their next renewal. Without --yes, says what would go.
    Break(BreakArgs),
    /// Acquire the lock, run Redis commands on keys of its slot as one guarded call
    /// (nothing runs if the hold is gone by then), print their replies, release.
    Exec(ExecArgs),
    /// Load (or upgrade) the lock's function library on every master: once, as a user
    /// allowed FUNCTION LOAD, where the clients' user may only call it (FCALL).
    Setup,
}

/// `exec`.
#[derive(Debug, Args)]
pub struct ExecArgs {
    /// Take a read (shared) hold: reads only.
    #[arg(long, conflicts_with = "write", required_unless_present = "write")]
    pub read: bool,
    /// Take the write (exclusive) hold.
    #[arg(long)]
    pub write: bool,
    /// Give up after this long (exit 75); `0` tries once. Default: wait as long as it takes.
    #[arg(long, value_parser = duration)]
    pub timeout: Option<Duration>,
    /// Print the replies as one JSON array.
    #[arg(long)]
    pub json: bool,
    /// Print the values as they are, one per line, as `redis-cli --raw` does (for
    /// `v=$(cluster-rwlock exec ...)`): the default when standard output is not a
    /// terminal.
    #[arg(long, conflicts_with_all = ["json", "no_raw"])]
    pub raw: bool,
    /// Print the replies as `redis-cli` shows them on a terminal (`"text"`,
    /// `(integer) 9`, `(nil)`), even when standard output is not a terminal.
    #[arg(long = "no-raw", conflicts_with = "json")]
    pub no_raw: bool,
    /// The lock's name (its hashtag names the slot the commands' keys must be in).
    pub name: String,
    /// The commands (after `--`), separated by `;` (a word of its own: `\;` in a shell),
    /// e.g. `SET orders:{42}:status paid ; HINCRBY stock:{42} n -1`.
    #[arg(last = true, required = true)]
    pub commands: Vec<String>,
}

/// `break`.
#[derive(Debug, Args)]
pub struct BreakArgs {
    /// The lock's name (none with `--all`).
    #[arg(required_unless_present = "all")]
    pub name: Option<String>,
    /// Only the holds of this owner token (as `inspect` shows it).
    #[arg(long, conflicts_with = "client")]
    pub owner: Option<String>,
    /// Every hold AND place in the queue of this client (its client name, as `inspect`
    /// shows it): the lock is not handed to another task of the same stuck process.
    #[arg(long)]
    pub client: Option<String>,
    /// With `--client`: on every lock under the prefix.
    #[arg(long, requires = "client", conflicts_with = "name")]
    pub all: bool,
    /// Do it: without `--yes`, `break` only says what it would remove.
    #[arg(long)]
    pub yes: bool,
}

/// `run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Take a read (shared) hold.
    #[arg(long, conflicts_with = "write", required_unless_present = "write")]
    pub read: bool,
    /// Take the write (exclusive) hold.
    #[arg(long)]
    pub write: bool,
    /// Give up after this long (exit 75); `0` tries once. Default: wait as long as it takes.
    #[arg(long, value_parser = duration)]
    pub timeout: Option<Duration>,
    /// What to do to the command when the lease is lost.
    #[arg(long, value_enum, default_value_t = OnLost::Term)]
    pub on_lost: OnLost,
    /// With `--on-lost term`: how long to wait after SIGTERM before SIGKILL. The command
    /// is told this much earlier than a lease less the clock margin (a quarter of the
    /// lease), so that it is gone before the lease can end: at most a quarter of the lease.
    #[arg(long, value_parser = duration, default_value = "5s")]
    pub grace: Duration,
    /// Lease of the hold (renewed every third of it while the command runs) [default:
    /// 30s].
    #[arg(long, value_parser = duration)]
    pub lease: Option<Duration>,
    /// A readable name for the hold this command takes (shown by `inspect`, `list` and
    /// `watch`; default `<pid>@<host>`; also `CLUSTER_RWLOCK_NAME`). It changes nothing
    /// about ownership.
    #[arg(long = "name", value_name = "NAME", env = "CLUSTER_RWLOCK_NAME")]
    pub client_name: Option<String>,
    /// The lock's name.
    pub name: String,
    /// The command and its arguments (after `--`).
    #[arg(last = true, required = true)]
    pub command: Vec<String>,
}

/// `--on-lost`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OnLost {
    /// SIGTERM, then SIGKILL after `--grace`.
    Term,
    /// SIGKILL at once.
    Kill,
    /// Let the command run on (the exit code is still 70).
    Ignore,
}

/// `inspect`.
#[derive(Debug, Args)]
pub struct InspectArgs {
    /// The lock's name.
    pub name: String,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Only names that match this glob (`*`, `?`).
    #[arg(default_value = "*")]
    pub pattern: String,
    /// Print JSON (one array).
    #[arg(long)]
    pub json: bool,
}

/// `top`.
#[derive(Debug, Args)]
pub struct TopArgs {
    /// Only names that match this glob (`*`, `?`).
    #[arg(default_value = "*")]
    pub pattern: String,
    /// Print one frame as plain text and exit (for scripts).
    #[arg(long)]
    pub once: bool,
    /// Print one JSON document per refresh (with `--once`, one).
    #[arg(long)]
    pub json: bool,
    /// How often to refresh.
    #[arg(long, value_parser = duration, default_value = "1s")]
    pub every: Duration,
}

/// `watch`.
#[derive(Debug, Args)]
pub struct WatchArgs {
    /// The lock's name.
    pub name: String,
    /// How often to read the lock's state. Every grant moves the fence, which the lock
    /// keeps for a minute after its last release: a grant and its release between two
    /// looks are still seen (as one line per look).
    #[arg(long, value_parser = duration, default_value = "100ms")]
    pub every: Duration,
    /// Print JSON instead of text: one object per line, for each event and each new
    /// state.
    #[arg(long)]
    pub json: bool,
}

/// `500ms`, `30s`, `2m`, `1h`; a bare number is seconds.
pub fn duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, unit) = s.split_at(split);
    let n: f64 = number
        .parse()
        .map_err(|_| format!("{s:?}: expected a duration such as 500ms, 30s, 2m"))?;
    let secs = match unit {
        "" | "s" => n,
        "ms" => n / 1e3,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => return Err(format!("{s:?}: unknown unit {unit:?} (ms, s, m, h)")),
    };
    Duration::try_from_secs_f64(secs).map_err(|e| format!("{s:?}: {e}"))
}

/// Whether `name` matches the glob `pattern` (`*` any run, `?` one character).
pub fn glob(pattern: &str, name: &str) -> bool {
    let (p, n): (Vec<char>, Vec<char>) = (pattern.chars().collect(), name.chars().collect());
    let (mut i, mut j, mut star, mut mark) = (0, 0, None, 0);
    while j < n.len() {
        if i < p.len() && (p[i] == '?' || p[i] == n[j]) {
            i += 1;
            j += 1;
        } else if i < p.len() && p[i] == '*' {
            star = Some(i);
            mark = j;
            i += 1;
        } else if let Some(s) = star {
            i = s + 1;
            mark += 1;
            j = mark;
        } else {
            return false;
        }
    }
    p[i..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(duration("1.5"), Ok(Duration::from_millis(1500)));
        assert_eq!(duration("0"), Ok(Duration::ZERO));
        assert!(duration("-1s").is_err());
        assert!(duration("10 parsecs").is_err());
        assert!(duration("").is_err());
    }

    #[test]
    fn globs() {
        assert!(glob("*", "anything"));
        assert!(glob("orders:*", "orders:42"));
        assert!(!glob("orders:*", "order:42"));
        assert!(glob("a?c", "abc"));
        assert!(glob("*:{4?}", "orders:{42}"));
        assert!(!glob("a*b", "ac"));
    }

    #[test]
    fn arguments() {
        let cli = Cli::try_parse_from([
            "cluster-rwlock",
            "--url",
            "redis://h:1",
            "run",
            "--write",
            "job",
            "--timeout",
            "0",
            "--",
            "sh",
            "-c",
            "exit 3",
        ])
        .unwrap();
        match cli.command {
            Command::Run(r) => {
                assert!(r.write && !r.read);
                assert_eq!(r.timeout, Some(Duration::ZERO));
                assert_eq!(r.command, ["sh", "-c", "exit 3"]);
            }
            other => panic!("{other:?}"),
        }
        // a mode is required, and only one
        assert!(Cli::try_parse_from(["x", "run", "job", "--", "true"]).is_err());
        assert!(
            Cli::try_parse_from(["x", "run", "--read", "--write", "job", "--", "true"]).is_err()
        );
        assert!(Cli::try_parse_from(["x", "run", "--read", "job"]).is_err());
    }
}
