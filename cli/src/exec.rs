//! `exec`: Redis commands on keys of the lock's slot, run as one guarded call under the
//! lock (see `Grant::guarded`).

use cluster_rwlock::guarded::{Guarded, Reply};
use cluster_rwlock::LockClient;
use serde_json::{json, Value as Json};

use crate::args::ExecArgs;
use crate::code::{self, fail};

/// The commands: the words between `;` separators, empty ones dropped.
fn commands(words: &[String]) -> Vec<&[String]> {
    words
        .split(|w| w == ";")
        .filter(|c| !c.is_empty())
        .collect()
}

/// A reply as `redis-cli` shows one.
fn shown(r: &Reply) -> String {
    match r {
        Reply::Nil => "(nil)".into(),
        Reply::Integer(i) => format!("(integer) {i}"),
        Reply::Bytes(b) => format!("{:?}", String::from_utf8_lossy(b)),
        Reply::Array(items) if items.is_empty() => "(empty array)".into(),
        Reply::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, r)| format!("{}) {}", i + 1, shown(r)))
            .collect::<Vec<_>>()
            .join("\n"),
        Reply::Error(e) => format!("(error) {}", crate::shown::escaped(e)),
        _ => "(?)".into(),
    }
}

/// A reply as `redis-cli --raw` prints one: the value as it is (a nil, an empty line; an
/// array, its items one per line), each followed by a newline.
fn raw(r: &Reply, out: &mut Vec<u8>) {
    match r {
        Reply::Nil => {}
        Reply::Integer(i) => out.extend_from_slice(i.to_string().as_bytes()),
        Reply::Bytes(b) => out.extend_from_slice(b),
        Reply::Array(items) => {
            for item in items {
                raw(item, out);
            }
            return;
        }
        Reply::Error(e) => out.extend_from_slice(e.as_bytes()),
        _ => {}
    }
    out.push(b'\n');
}

fn as_json(r: &Reply) -> Json {
    match r {
        Reply::Nil => Json::Null,
        Reply::Integer(i) => json!(i),
        Reply::Bytes(b) => json!(String::from_utf8_lossy(b)),
        Reply::Array(items) => Json::Array(items.iter().map(as_json).collect()),
        Reply::Error(e) => json!({ "error": e }),
        _ => Json::Null,
    }
}

pub async fn exec(client: &LockClient, a: &ExecArgs) -> i32 {
    let list = commands(&a.commands);
    if list.is_empty() {
        eprintln!("cluster-rwlock: exec: no command given after --");
        return code::USAGE;
    }
    let lock = match client.rwlock(&a.name) {
        Ok(l) => l,
        Err(e) => return fail("bad lock name", &e),
    };
    // the call is built and checked before the lock is asked for: a command that may
    // not run must not wait for the lock first
    let mut call = Guarded::new(&lock);
    for words in &list {
        call = call.command(&words[0], &words[1..]);
    }
    let call = match call.check() {
        Ok(b) => b,
        Err(e) => return fail("the guarded commands", &e),
    };
    if call.writes() && !a.write {
        let e = cluster_rwlock::Error::InvalidCommand(
            "a command writes: take the lock with --write".into(),
        );
        return fail("the guarded commands", &e);
    }
    let guard = match crate::wait::acquire(&lock, a.write, a.timeout).await {
        Ok(g) => g,
        Err(code) => return code,
    };
    let replies = call.run_under(&guard).await;
    let released = guard.release().await;
    let replies = match replies {
        Ok(r) => r,
        // a command failed: nothing the call did stays written (all or nothing), or the
        // message says what stays
        Err(e @ cluster_rwlock::Error::CommandFailed { .. }) => {
            eprintln!(
                "cluster-rwlock: exec: {}",
                crate::shown::escaped(&e.to_string())
            );
            return code::COMMAND_FAILED;
        }
        Err(e) => return fail("the guarded commands", &e),
    };
    let raw_out = a.raw || (!a.no_raw && !std::io::IsTerminal::is_terminal(&std::io::stdout()));
    if a.json {
        say!("{}", Json::Array(replies.iter().map(as_json).collect()));
    } else if raw_out {
        let mut out = Vec::new();
        for r in &replies {
            raw(r, &mut out);
        }
        crate::shown::bytes(&out);
    } else {
        for r in &replies {
            say!("{}", shown(r));
        }
    }
    if let Err(e) = released {
        return fail(&format!("releasing {}", a.name), &e);
    }
    if let Some(at) = replies.iter().position(|r| matches!(r, Reply::Error(_))) {
        eprintln!(
            "cluster-rwlock: exec: command {} of {} failed (its reply above)",
            at + 1,
            list.len()
        );
        return code::COMMAND_FAILED;
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_split_at_semicolons_and_replies_read_as_redis_cli_shows_them() {
        let words: Vec<String> = ["SET", "k", "v", ";", ";", "GET", "k", ";"]
            .map(String::from)
            .to_vec();
        let list = commands(&words);
        assert_eq!(list.len(), 2);
        assert_eq!(list[1], ["GET", "k"]);
        assert_eq!(shown(&Reply::Integer(9)), "(integer) 9");
        assert_eq!(shown(&Reply::Nil), "(nil)");
        assert_eq!(shown(&Reply::Bytes(b"OK".to_vec())), "\"OK\"");
        assert_eq!(
            shown(&Reply::Array(vec![Reply::Integer(1), Reply::Nil])),
            "1) (integer) 1\n2) (nil)"
        );
        assert_eq!(as_json(&Reply::Error("x".into())), json!({"error": "x"}));
        let mut out = Vec::new();
        for r in [
            Reply::Integer(9),
            Reply::Bytes(b"a b\xff".to_vec()),
            Reply::Nil,
            Reply::Array(vec![Reply::Integer(1), Reply::Bytes(b"x".to_vec())]),
            Reply::Array(vec![]),
        ] {
            raw(&r, &mut out);
        }
        assert_eq!(out, b"9\na b\xff\n\n1\nx\n");
    }
}
