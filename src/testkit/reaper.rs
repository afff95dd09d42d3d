//! The session of this process and its reaper, which removes what the session started
//! when the process exits in any way.

use std::io::Write as _;
use std::os::unix::process::CommandExt as _;
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock};

use super::docker::docker_env;
use super::{partition, SESSION_LABEL};

/// This process's session: a random id in its container names and labels, node
/// directories and partition rules.
pub(super) fn session_id() -> &'static str {
    static ID: OnceLock<String> = OnceLock::new();
    ID.get_or_init(|| uuid::Uuid::new_v4().simple().to_string()[..12].to_string())
}

/// The reaper: a process of its own group that waits for our end of a pipe to close and
/// then removes everything this process started. Lines it is sent: `pid:<n>`, `dir:<path>`,
/// `rule:<port>:<gid>` (a partition's iptables rules, see [`partition`]), `rules:` (every
/// rule carrying the session's comment, as isolations and replication cuts add).
pub(super) fn reaper() -> &'static Mutex<Option<std::process::ChildStdin>> {
    static REAPER: OnceLock<Mutex<Option<std::process::ChildStdin>>> = OnceLock::new();
    REAPER.get_or_init(|| {
        let script = format!(
            r#"pids=""; dirs=""; rules=""; sweep=""
while read -r line; do
  case "$line" in pid:*) pids="$pids ${{line#pid:}}";; dir:*) dirs="$dirs ${{line#dir:}}";; rule:*) rules="$rules ${{line#rule:}}";; rules:*) sweep=1;; esac
done
for r in $rules; do
  port=${{r%%:*}}; gid=${{r#*:}}
  for p in $port $((port + 10000)); do
    while iptables -w -D INPUT -i lo -p tcp --dport $p -m comment --comment {rule_tag} -j DROP 2>/dev/null; do :; done
  done
  while iptables -w -D OUTPUT -o lo -m owner --gid-owner $gid -m comment --comment {rule_tag} -j DROP 2>/dev/null; do :; done
done
if [ -n "$sweep" ]; then
  iptables -w -S 2>/dev/null | grep -e "--comment {rule_tag} " | sed 's/^-A //' | while read -r r; do iptables -w -D $r 2>/dev/null; done
fi
ids=$(docker ps -aq --filter label={SESSION_LABEL}={session} 2>/dev/null)
[ -n "$ids" ] && docker rm -f -v $ids >/dev/null 2>&1
for p in $pids; do kill -CONT $p 2>/dev/null; kill -9 $p 2>/dev/null; done
for d in $dirs; do rm -rf "$d"; done
exit 0"#,
            session = session_id(),
            rule_tag = partition::rule_tag()
        );
        let child = docker_env(Command::new("sh"))
            .args(["-c", &script])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn();
        Mutex::new(child.ok().and_then(|mut c| c.stdin.take()))
    })
}

/// Tells the reaper one more thing to remove (a line as [`reaper`] describes).
pub(super) fn tell_reaper(line: &str) {
    if let Ok(mut guard) = reaper().lock() {
        if let Some(stdin) = guard.as_mut() {
            let _ = writeln!(stdin, "{line}");
        }
    }
}
