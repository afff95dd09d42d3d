//! The iptables rules of the faults made of several rules (an isolation, a replication
//! cut): added in one batch, listed and removed by their comment.
//!
//! Every rule of this session carries a comment that starts with
//! [`rule_tag`](super::partition::rule_tag): `cluster-rwlock-<session>` alone for a
//! partition, `cluster-rwlock-<session>-<kind>-<port>` for the others, so that one fault's
//! rules can be removed without touching another's, `iptables -S | grep cluster-rwlock-`
//! shows them all, and the reaper removes them all when the process ends.

use std::io::Write as _;
use std::process::{Command, Output, Stdio};

use super::TestkitError;

/// One rule to insert: its chain and match arguments, and the comment it carries.
pub(super) struct Rule {
    pub(super) chain: &'static str,
    pub(super) matches: Vec<String>,
    pub(super) tag: String,
}

impl Rule {
    /// A rule on `chain` (`INPUT` on `lo`, or `OUTPUT` on `lo`) with these matches.
    pub(super) fn new(chain: &'static str, matches: &[&str], tag: &str) -> Rule {
        Rule {
            chain,
            matches: matches.iter().map(|s| s.to_string()).collect(),
            tag: tag.to_string(),
        }
    }

    /// The rule as an `iptables-restore` line.
    fn line(&self) -> String {
        let dev = if self.chain == "INPUT" { "-i" } else { "-o" };
        format!(
            "-I {} {dev} lo -p tcp {} -m comment --comment {} -j DROP",
            self.chain,
            self.matches.join(" "),
            self.tag
        )
    }
}

/// Runs iptables (or `iptables-restore`, fed `input`) on a blocking thread.
async fn run(
    program: &'static str,
    args: Vec<String>,
    input: Option<String>,
) -> Result<Output, TestkitError> {
    tokio::task::spawn_blocking(move || {
        let mut child = Command::new(program)
            .args(&args)
            .stdin(if input.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        if let (Some(text), Some(mut stdin)) = (input, child.stdin.take()) {
            stdin.write_all(text.as_bytes())?;
        }
        child.wait_with_output()
    })
    .await
    .map_err(|e| TestkitError::Command(e.to_string()))?
    .map_err(|e| TestkitError::Iptables(format!("cannot run {program}: {e}")))
}

/// Inserts `rules` all at once (`iptables-restore --noflush`: all or none, so that a fault
/// starts at one instant and is never left half made).
pub(super) async fn insert(rules: &[Rule]) -> Result<(), TestkitError> {
    let mut input = String::from("*filter\n");
    for r in rules {
        input.push_str(&r.line());
        input.push('\n');
    }
    input.push_str("COMMIT\n");
    let out = run(
        "iptables-restore",
        vec!["-w".into(), "--noflush".into()],
        Some(input),
    )
    .await?;
    if out.status.success() {
        Ok(())
    } else {
        Err(TestkitError::Iptables(format!(
            "iptables-restore refused the rules: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

/// The comment of a rule as `iptables -S` prints it.
fn comment(line: &str) -> Option<&str> {
    let mut words = line.split_whitespace();
    words.find(|w| *w == "--comment")?;
    words.next()
}

/// This session's rules whose comment satisfies `keep`, as `iptables -S` prints them.
pub(super) async fn listed(keep: impl Fn(&str) -> bool) -> Result<Vec<String>, TestkitError> {
    let out = run("iptables", vec!["-w".into(), "-S".into()], None).await?;
    if !out.status.success() {
        return Err(TestkitError::Iptables(format!(
            "iptables -S refused: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| comment(l).is_some_and(&keep))
        .map(str::to_string)
        .collect())
}

/// Removes every rule whose comment is `tag` (none is fine).
pub(super) async fn remove_tagged(tag: &str) -> Result<(), TestkitError> {
    for line in listed(|c| c == tag).await? {
        // `-A CHAIN spec` as listed is deleted by `-D CHAIN spec`
        let mut args: Vec<String> = vec!["-w".into()];
        args.extend(
            line.split_whitespace()
                .enumerate()
                .map(|(i, w)| if i == 0 { "-D" } else { w }.to_string()),
        );
        let out = run("iptables", args, None).await?;
        // 1: gone meanwhile (another caller removed it); anything else is a real refusal
        if !out.status.success() && out.status.code() != Some(1) {
            return Err(TestkitError::Iptables(format!(
                "iptables refused to remove {line}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_and_lines() {
        let l =
            "-A INPUT -i lo -p tcp -m tcp --dport 7000 -m comment --comment x-repl-7000 -j DROP";
        assert_eq!(comment(l), Some("x-repl-7000"));
        assert_eq!(comment("-P INPUT ACCEPT"), None);
        let r = Rule::new("OUTPUT", &["-m", "owner", "--gid-owner", "107003"], "t");
        assert_eq!(
            r.line(),
            "-I OUTPUT -o lo -p tcp -m owner --gid-owner 107003 -m comment --comment t -j DROP"
        );
    }
}
