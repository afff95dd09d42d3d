//! One command's reply in a guarded call, as the crate's own type.

use fred::types::Value;

/// One command's reply in a guarded call. Its `Debug` shows text as text
/// (`Bytes("4651")`), bytes that are not UTF-8 as bytes.
///
/// ```
/// use cluster_rwlock::guarded::Reply;
/// assert_eq!(format!("{:?}", Reply::Bytes(b"4651".to_vec())), r#"Bytes("4651")"#);
/// assert_eq!(format!("{:?}", Reply::Bytes(vec![0xff])), "Bytes([255])");
/// ```
#[derive(Clone, PartialEq)]
#[non_exhaustive]
pub enum Reply {
    /// No value (a missing key, a field that is not there).
    Nil,
    /// An integer.
    Integer(i64),
    /// A string or a status (`OK`), as bytes.
    Bytes(Vec<u8>),
    /// A list of replies.
    Array(Vec<Reply>),
    /// The command failed (a wrong type, a value that is not a number, ...). A guarded
    /// call no longer returns it: a command that fails fails the whole call with
    /// [`Error::CommandFailed`](crate::Error::CommandFailed) (all or nothing). Kept for
    /// the code that matches it.
    Error(String),
}

impl Reply {
    pub(super) fn of(v: Value) -> Reply {
        match v {
            Value::Null => Reply::Nil,
            Value::Integer(i) => Reply::Integer(i),
            Value::Boolean(b) => Reply::Integer(i64::from(b)),
            Value::Double(d) => Reply::Bytes(d.to_string().into_bytes()),
            Value::String(s) => Reply::Bytes(s.as_bytes().to_vec()),
            Value::Bytes(b) => Reply::Bytes(b.to_vec()),
            Value::Array(a) => Reply::Array(a.into_iter().map(Reply::of).collect()),
            Value::Map(m) => Reply::Array(
                m.inner()
                    .into_iter()
                    .flat_map(|(k, v)| [Reply::Bytes(k.as_bytes().to_vec()), Reply::of(v)])
                    .collect(),
            ),
            Value::Queued => Reply::Nil,
        }
    }

    /// The reply as text, for a string or status reply that is UTF-8.
    ///
    /// ```
    /// use cluster_rwlock::guarded::Reply;
    /// assert_eq!(Reply::Bytes(b"paid".to_vec()).as_str(), Some("paid"));
    /// assert_eq!(Reply::Integer(1).as_str(), None);
    /// ```
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Reply::Bytes(b) => std::str::from_utf8(b).ok(),
            _ => None,
        }
    }

    /// The reply as an integer: an integer reply, or a string reply that is one in
    /// decimal (`HGET` of a counter, `GET`).
    ///
    /// ```
    /// use cluster_rwlock::guarded::Reply;
    /// assert_eq!(Reply::Integer(41).as_i64(), Some(41));
    /// assert_eq!(Reply::Bytes(b"-12".to_vec()).as_i64(), Some(-12));
    /// assert_eq!(Reply::Bytes(b"12 apples".to_vec()).as_i64(), None);
    /// assert_eq!(Reply::Nil.as_i64(), None);
    /// ```
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Reply::Integer(i) => Some(*i),
            Reply::Bytes(b) => std::str::from_utf8(b).ok()?.parse().ok(),
            _ => None,
        }
    }

    /// The reply's bytes, for a string or status reply.
    ///
    /// ```
    /// use cluster_rwlock::guarded::Reply;
    /// assert_eq!(Reply::Bytes(vec![0, 1]).as_bytes(), Some(&[0u8, 1][..]));
    /// assert_eq!(Reply::Nil.as_bytes(), None);
    /// ```
    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            Reply::Bytes(b) => Some(b),
            _ => None,
        }
    }

    /// Whether the reply is nil (a missing key or field).
    ///
    /// ```
    /// use cluster_rwlock::guarded::Reply;
    /// assert!(Reply::Nil.is_nil());
    /// assert!(!Reply::Integer(0).is_nil());
    /// ```
    pub fn is_nil(&self) -> bool {
        matches!(self, Reply::Nil)
    }

    /// The error message, for a command that failed.
    ///
    /// ```
    /// use cluster_rwlock::guarded::Reply;
    /// let r = Reply::Error("WRONGTYPE Operation against a key holding the wrong kind of value".into());
    /// assert!(r.error().is_some_and(|m| m.starts_with("WRONGTYPE")));
    /// assert_eq!(Reply::Nil.error(), None);
    /// ```
    pub fn error(&self) -> Option<&str> {
        match self {
            Reply::Error(m) => Some(m),
            _ => None,
        }
    }
}

impl std::fmt::Debug for Reply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reply::Nil => f.write_str("Nil"),
            Reply::Integer(i) => f.debug_tuple("Integer").field(i).finish(),
            Reply::Bytes(b) => match std::str::from_utf8(b) {
                Ok(s) => f.debug_tuple("Bytes").field(&s).finish(),
                Err(_) => f.debug_tuple("Bytes").field(b).finish(),
            },
            Reply::Array(a) => f.debug_tuple("Array").field(a).finish(),
            Reply::Error(m) => f.debug_tuple("Error").field(m).finish(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_read_as_users_expect() {
        assert_eq!(Reply::Bytes(b"4651".to_vec()).as_i64(), Some(4651));
        assert_eq!(
            format!("{:?}", Reply::Bytes(b"4651".to_vec())),
            "Bytes(\"4651\")"
        );
        assert_eq!(
            format!("{:?}", Reply::Array(vec![Reply::Nil, Reply::Integer(2)])),
            "Array([Nil, Integer(2)])"
        );
    }

    #[test]
    fn replies_are_the_crates_own() {
        assert_eq!(Reply::of(Value::Null), Reply::Nil);
        assert_eq!(Reply::of(Value::Integer(3)), Reply::Integer(3));
        assert_eq!(
            Reply::of(Value::Bytes(vec![0, 255].into())),
            Reply::Bytes(vec![0, 255])
        );
        assert_eq!(
            Reply::of(Value::Array(vec![Value::String("OK".into())])),
            Reply::Array(vec![Reply::Bytes(b"OK".to_vec())])
        );
    }
}
