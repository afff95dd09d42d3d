//! The session of this process and its reaper, which removes what the session started
//! when the process exits in any way.

use std::io::Write as _;
use std::os::unix::process::CommandExt as _;
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock};

use super::engine::docker_env;
use super::session::{rule_tag, session_id};
use super::SESSION_LABEL;

/// The reaper: a process of its own group that waits for our end of a pipe to close and
/// then removes everything this process started. Lines it is sent: `pid:<n>`, `dir:<path>`,
/// and `rule:<what>` (iptables rules were added: a partition's, an isolation's, a
/// replication cut's; see [`rule_tag`]), after which it removes every rule whose comment
/// is this session's tag or starts with it and a dash.
pub(super) fn reaper() -> &'static Mutex<Option<std::process::ChildStdin>> {
    static REAPER: OnceLock<Mutex<Option<std::process::ChildStdin>>> = OnceLock::new();
    REAPER.get_or_init(|| {
        // the sweep runs again after the containers are gone: an iptables process that
        // was still adding rules when we died has finished by then
        let script = format!(
            r#"pids=""; dirs=""; rules=""
while read -r line; do
  case "$line" in pid:*) pids="$pids ${{line#pid:}}";; dir:*) dirs="$dirs ${{line#dir:}}";; rule:*) rules=1;; esac
done
sweep() {{
  [ -n "$rules" ] || return 0
  iptables -w -S 2>/dev/null | grep -E -e "--comment {rule_tag}( |-)" | sed 's/^-A //' | while read -r r; do iptables -w -D $r 2>/dev/null; done
}}
sweep
ids=$(docker ps -aq --filter label={SESSION_LABEL}={session} 2>/dev/null)
[ -n "$ids" ] && docker rm -f -v $ids >/dev/null 2>&1
for p in $pids; do kill -CONT $p 2>/dev/null; kill -9 $p 2>/dev/null; done
for d in $dirs; do rm -rf "$d"; done
sweep
exit 0"#,
            session = session_id(),
            rule_tag = rule_tag()
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
