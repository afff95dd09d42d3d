//! The scripts' replies, parsed in one place: every number is checked, never cast, and
//! the error codes of `lua/lib.lua` become typed errors.

use fred::prelude::*;

use crate::error::{Error, Result};

use super::{AttemptReply, Counted, Others};

/// The reply of the state script.
pub(crate) struct RawState {
    pub fence: Option<u64>,
    pub holders: Vec<RawHolder>,
    pub queued: Vec<String>,
    /// Owners of readers with a place in the queue, first first.
    pub queued_readers: Vec<String>,
}

/// One owner's holds in [`RawState`].
pub(crate) struct RawHolder {
    pub owner: String,
    pub read: u32,
    pub write: u32,
    pub upgradable: u32,
    pub lease_left_ms: u64,
    /// Since the grant of its earliest hold (by its fence), by the server's clock.
    pub held_ms: u64,
    /// Since the last grant or renewal of its latest-running hold, by the server's clock.
    pub renewed_ago_ms: u64,
    /// That hold's lease, as its last grant or renewal gave it.
    pub lease_ms: u64,
}

/// A count of holds: a non-negative integer that fits in `u32`.
pub(super) fn count(v: &Value) -> Result<u32> {
    let i = int(v)?;
    u32::try_from(i).map_err(|_| Error::Protocol(format!("count out of range: {i}")))
}

/// The reply as a list, with the scripts' error codes (see `lua/lib.lua`) turned into errors.
pub(super) fn status(key: &str, reply: Value) -> Result<Vec<Value>> {
    let Value::Array(parts) = reply else {
        return Err(Error::Protocol(format!("expected a list, got {reply:?}")));
    };
    match code(&parts)? {
        -3 => Err(Error::WrongType {
            key: key.to_string(),
            found: text_or(parts.get(1)),
        }),
        -4 => Err(Error::Corrupt {
            key: key.to_string(),
            field: text_or(parts.get(1)),
        }),
        -7 => Err(Error::OtherLayout {
            key: key.to_string(),
            found: text_or(parts.get(1)),
        }),
        _ => Ok(parts),
    }
}

/// The reply of an attempt (acquire or upgrade): `{1, fence[, others]}` granted,
/// `{0, wait_ms}` busy, or the one code of `op`'s own (`special`); any other code is a
/// protocol error.
pub(super) fn attempt(
    op: &str,
    parts: &[Value],
    special: (i64, AttemptReply),
) -> Result<AttemptReply> {
    match code(parts)? {
        1 => Ok(AttemptReply::Granted {
            replaceable_after: None,
            fence: number(parts.get(1))?,
            others: others(parts.get(2))?,
            lease: counted(parts.get(3))?,
        }),
        0 => Ok(AttemptReply::Busy {
            wait_ms: number(parts.get(1))?,
        }),
        c if c == special.0 => Ok(special.1),
        c => Err(Error::Protocol(format!("{op} returned code {c}"))),
    }
}

/// How a grant's lease counts, from its fourth element: absent, a whole lease from the
/// call; ms left from the call; `-`, a whole lease from the caller's first attempt.
fn counted(v: Option<&Value>) -> Result<Counted> {
    match v {
        None => Ok(Counted::Whole),
        Some(v) if v.as_str().as_deref() == Some("-") => Ok(Counted::FromFirstAttempt),
        Some(v) => number(Some(v)).map(Counted::Left),
    }
}

/// A grant's hint that others held or waited: `1`, or the queue's head ticket field
/// `t:<ticket>`; `0` or absent, nobody (the fast path and the scripts that do not give
/// it). A ticket past `u32` is kept as `1` (the release then reads the head as before).
fn others(v: Option<&Value>) -> Result<Others> {
    let Some(v) = v else {
        return Ok(Others::Nobody);
    };
    if let Ok(i) = int(v) {
        return match i {
            0 => Ok(Others::Nobody),
            1 => Ok(Others::Present),
            i => Err(Error::Protocol(format!("a grant's hint: {i}"))),
        };
    }
    let hint = text(v)?;
    match hint.strip_prefix("t:").map(str::parse::<u64>) {
        Some(Ok(ticket)) => Ok(u32::try_from(ticket).map_or(Others::Present, Others::Queued)),
        _ => Err(Error::Protocol(format!("a grant's hint: {hint:?}"))),
    }
}

pub(super) fn code(parts: &[Value]) -> Result<i64> {
    parts
        .first()
        .map(int)
        .transpose()?
        .ok_or_else(|| Error::Protocol("empty reply".into()))
}

pub(super) fn int(v: &Value) -> Result<i64> {
    match v {
        Value::Integer(i) => Ok(*i),
        other => text(other)?
            .parse()
            .map_err(|_| Error::Protocol(format!("expected an integer, got {other:?}"))),
    }
}

pub(super) fn number(v: Option<&Value>) -> Result<u64> {
    let v = v.ok_or_else(|| Error::Protocol("missing number".into()))?;
    let i = int(v)?;
    u64::try_from(i).map_err(|_| Error::Protocol(format!("negative number {i}")))
}

pub(super) fn text(v: &Value) -> Result<String> {
    match v {
        Value::String(s) => Ok(s.to_string()),
        Value::Bytes(b) => String::from_utf8(b.to_vec())
            .map_err(|_| Error::Protocol("invalid UTF-8 in reply".into())),
        Value::Integer(i) => Ok(i.to_string()),
        Value::Null => Ok(String::new()),
        other => Err(Error::Protocol(format!("expected text, got {other:?}"))),
    }
}

/// A fence the scripts may leave out: `'-'` for none.
pub(super) fn optional_fence(v: Option<&Value>) -> Result<Option<u64>> {
    match v.map(text).transpose()? {
        Some(s) if s != "-" => s
            .parse()
            .map(Some)
            .map_err(|_| Error::Protocol(format!("fence {s:?}"))),
        _ => Ok(None),
    }
}

fn text_or(v: Option<&Value>) -> String {
    v.and_then(|v| text(v).ok()).unwrap_or_else(|| "?".into())
}

pub(super) fn parse_renew(key: &str, reply: Value) -> Result<Vec<Vec<u64>>> {
    let parts = status(key, reply)?;
    let Some(Value::Array(list)) = parts.get(1) else {
        return Err(Error::Protocol("renew: no list".into()));
    };
    list.iter()
        .map(|v| {
            text(v)?
                .split_whitespace()
                .map(|id| {
                    id.parse()
                        .map_err(|_| Error::Protocol(format!("renew: hold id {id:?}")))
                })
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(items: Vec<Value>) -> Value {
        Value::Array(items)
    }

    #[test]
    fn error_codes_of_the_scripts_become_typed_errors() {
        let wrong = list(vec![Value::Integer(-3), Value::from("string")]);
        match status("k", wrong) {
            Err(Error::WrongType { key, found }) => {
                assert_eq!((key.as_str(), found.as_str()), ("k", "string"))
            }
            other => panic!("{other:?}"),
        }
        let corrupt = list(vec![Value::Integer(-4), Value::from("s")]);
        assert!(matches!(status("k", corrupt), Err(Error::Corrupt { field, .. }) if field == "s"));
        let other = list(vec![Value::Integer(-7), Value::from("3")]);
        assert!(
            matches!(status("k", other), Err(Error::OtherLayout { found, .. }) if found == "3")
        );
        assert!(matches!(
            status("k", Value::from("OK")),
            Err(Error::Protocol(_))
        ));
        assert!(matches!(status("k", list(vec![])), Err(Error::Protocol(_))));
        let ok = status("k", list(vec![Value::Integer(1), Value::from("42")])).unwrap();
        assert_eq!(number(ok.get(1)).unwrap(), 42);
    }

    #[test]
    fn numbers_from_the_server_are_checked_not_cast() {
        assert_eq!(
            number(Some(&Value::from("18446744073709551615"))).ok(),
            None
        );
        assert!(number(Some(&Value::Integer(-1))).is_err());
        assert!(number(None).is_err());
        assert_eq!(number(Some(&Value::from("7"))).unwrap(), 7);
        assert!(count(&Value::Integer(-2)).is_err());
        assert!(count(&Value::Integer(i64::from(u32::MAX) + 1)).is_err());
        assert_eq!(count(&Value::Integer(3)).unwrap(), 3);
        assert!(int(&Value::from("x")).is_err());
        assert!(text(&Value::Bytes(vec![0xff, 0xfe].into())).is_err());
    }

    #[test]
    fn an_optional_fence_is_a_number_or_none() {
        // (a reply without that element: none)
        assert_eq!(optional_fence(None).unwrap(), None);
        assert_eq!(optional_fence(Some(&Value::from("-"))).unwrap(), None);
        assert!(optional_fence(Some(&Value::from(""))).is_err());
        assert_eq!(optional_fence(Some(&Value::from("42"))).unwrap(), Some(42));
        assert!(optional_fence(Some(&Value::from("4x"))).is_err());
        assert!(optional_fence(Some(&Value::from("-1"))).is_err());
    }

    #[test]
    fn renew_replies_list_the_ids_each_owner_still_holds() {
        let reply = list(vec![
            Value::Integer(1),
            list(vec![Value::from("3 4"), Value::from(""), Value::from("9")]),
        ]);
        assert_eq!(
            parse_renew("k", reply).unwrap(),
            vec![vec![3, 4], vec![], vec![9]]
        );
        let bad = list(vec![Value::Integer(1), list(vec![Value::from("3 x")])]);
        assert!(matches!(parse_renew("k", bad), Err(Error::Protocol(_))));
        let no_list = list(vec![Value::Integer(1)]);
        assert!(parse_renew("k", no_list).is_err());
    }

    #[test]
    fn attempt_replies_map_to_outcomes() {
        let reply = |items: Vec<Value>| status("k", list(items)).unwrap();
        let deadlock = (-1, AttemptReply::UpgradeDeadlock);
        let granted = reply(vec![Value::Integer(1), Value::from("77")]);
        assert_eq!(
            attempt("acquire", &granted, deadlock).unwrap(),
            AttemptReply::Granted {
                replaceable_after: None,
                fence: 77,
                others: Others::Nobody,
                lease: Counted::Whole,
            }
        );
        // a hold handed over while queued: the lease left, in ms
        let handed = reply(vec![
            Value::Integer(1),
            Value::from("79"),
            Value::Integer(1),
            Value::Integer(2500),
        ]);
        assert_eq!(
            attempt("acquire", &handed, deadlock).unwrap(),
            AttemptReply::Granted {
                replaceable_after: None,
                fence: 79,
                others: Others::Present,
                lease: Counted::Left(2500),
            }
        );
        // such a hold taken without the server's clock: counted from the first attempt
        let taken = reply(vec![
            Value::Integer(1),
            Value::from("80"),
            Value::Integer(0),
            Value::from("-"),
        ]);
        assert_eq!(
            attempt("acquire", &taken, deadlock).unwrap(),
            AttemptReply::Granted {
                replaceable_after: None,
                fence: 80,
                others: Others::Nobody,
                lease: Counted::FromFirstAttempt,
            }
        );
        let word = reply(vec![
            Value::Integer(1),
            Value::from("80"),
            Value::Integer(0),
            Value::from("x"),
        ]);
        assert!(matches!(
            attempt("acquire", &word, deadlock),
            Err(Error::Protocol(_))
        ));
        let negative = reply(vec![
            Value::Integer(1),
            Value::from("79"),
            Value::Integer(1),
            Value::Integer(-5),
        ]);
        assert!(matches!(
            attempt("acquire", &negative, deadlock),
            Err(Error::Protocol(_))
        ));
        // the general path's hint that others held or waited, or the queue's head ticket
        // field (one past u32 is kept as a plain hint); any other value is refused
        for (hint, others) in [
            (Value::Integer(0), Others::Nobody),
            (Value::Integer(1), Others::Present),
            (Value::from("t:447"), Others::Queued(447)),
            (Value::from("t:4294967295"), Others::Queued(u32::MAX)),
            (Value::from("t:4294967296"), Others::Present),
        ] {
            let granted = reply(vec![Value::Integer(1), Value::from("78"), hint]);
            assert_eq!(
                attempt("acquire", &granted, deadlock).unwrap(),
                AttemptReply::Granted {
                    replaceable_after: None,
                    fence: 78,
                    others,
                    lease: Counted::Whole
                }
            );
        }
        for odd in [
            Value::Integer(2),
            Value::from("t:"),
            Value::from("t:-1"),
            Value::from("q:5"),
            Value::from("t:5 "),
        ] {
            let odd = reply(vec![Value::Integer(1), Value::from("78"), odd]);
            assert!(matches!(
                attempt("acquire", &odd, deadlock),
                Err(Error::Protocol(_))
            ));
        }
        let busy = reply(vec![Value::Integer(0), Value::Integer(12)]);
        assert_eq!(
            attempt("acquire", &busy, deadlock).unwrap(),
            AttemptReply::Busy { wait_ms: 12 }
        );
        let minus_one = reply(vec![Value::Integer(-1)]);
        assert_eq!(
            attempt("acquire", &minus_one, deadlock).unwrap(),
            AttemptReply::UpgradeDeadlock
        );
        // a code of another operation is not this one's
        assert!(matches!(
            attempt("upgrade", &minus_one, (2, AttemptReply::Gone)),
            Err(Error::Protocol(_))
        ));
        let two = reply(vec![Value::Integer(2)]);
        assert_eq!(
            attempt("upgrade", &two, (2, AttemptReply::Gone)).unwrap(),
            AttemptReply::Gone
        );
    }
}
