//! An in-memory server keyspace with exactly the commands the lock's functions call, and
//! the replies Redis gives them (the types a script sees: integers, bulk strings, nil,
//! arrays, status and error replies). Expiry is by absolute deadline in ms, read against
//! the clock of the node that runs the call, as Redis does inside a script (the time the
//! script started).

use std::collections::BTreeMap;

/// A key's value: only the types the functions meet.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Value {
    /// A hash (the lock's hash; the fenced store's value).
    Hash(BTreeMap<String, String>),
    /// A string (what a guarded write sets; a lock key of another type, as a hostile
    /// name would find).
    Str(String),
}

/// A key: its value and its expiry (absolute, ms of the server's clock), if any.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Entry {
    pub value: Value,
    pub expires_at: Option<u64>,
}

/// A node's data.
pub type Keyspace = BTreeMap<String, Entry>;

/// A reply, as a script receives it from `redis.call` or returns it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    Int(i64),
    Bulk(String),
    Nil,
    Array(Vec<Reply>),
    Status(String),
    Error(String),
}

impl Reply {
    /// The element `i` of an array reply.
    pub fn at(&self, i: usize) -> Option<&Reply> {
        match self {
            Reply::Array(items) => items.get(i),
            _ => None,
        }
    }

    /// An integer reply's value.
    pub fn int(&self) -> Option<i64> {
        match self {
            Reply::Int(n) => Some(*n),
            _ => None,
        }
    }

    /// A bulk reply's text.
    pub fn text(&self) -> Option<&str> {
        match self {
            Reply::Bulk(s) => Some(s),
            _ => None,
        }
    }
}

impl std::fmt::Display for Reply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reply::Int(n) => write!(f, "{n}"),
            Reply::Bulk(s) => write!(f, "{s:?}"),
            Reply::Nil => write!(f, "nil"),
            Reply::Status(s) => write!(f, "+{s}"),
            Reply::Error(s) => write!(f, "-{s}"),
            Reply::Array(items) => {
                write!(f, "{{")?;
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    write!(f, "{item}")?;
                }
                write!(f, "}}")
            }
        }
    }
}

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

/// One function call's view of a node: its keyspace, its clock, and what the call did.
#[derive(Default)]
pub struct Call {
    pub keys: Keyspace,
    /// The node's clock when the call started (ms), as TIME answers it.
    pub now_ms: u64,
    /// Whether the call wrote (a call that writes nothing is not replicated).
    pub wrote: bool,
    /// The messages the call published: (channel, message).
    pub published: Vec<(String, String)>,
}

impl Call {
    /// Drops the keys whose expiry has passed (a call sees only live keys).
    pub fn expire(&mut self) {
        let now = self.now_ms;
        let before = self.keys.len();
        self.keys
            .retain(|_, e| e.expires_at.is_none_or(|at| at > now));
        if self.keys.len() != before {
            // Redis propagates the expiry as a DEL
            self.wrote = true;
        }
    }

    fn hash(&self, key: &str) -> Result<Option<&BTreeMap<String, String>>, Reply> {
        match self.keys.get(key).map(|e| &e.value) {
            None => Ok(None),
            Some(Value::Hash(h)) => Ok(Some(h)),
            Some(_) => Err(Reply::Error(WRONGTYPE.into())),
        }
    }

    fn hash_mut(&mut self, key: &str) -> Result<&mut BTreeMap<String, String>, Reply> {
        let entry = self.keys.entry(key.to_string()).or_insert_with(|| Entry {
            value: Value::Hash(BTreeMap::new()),
            expires_at: None,
        });
        match &mut entry.value {
            Value::Hash(h) => Ok(h),
            _ => Err(Reply::Error(WRONGTYPE.into())),
        }
    }

    /// Runs one command; an error reply for anything the model does not serve.
    pub fn command(&mut self, args: &[String]) -> Reply {
        match self.run(args) {
            Ok(r) | Err(r) => r,
        }
    }

    fn run(&mut self, args: &[String]) -> Result<Reply, Reply> {
        let name = args
            .first()
            .ok_or_else(|| Reply::Error("ERR wrong number of arguments".into()))?
            .to_ascii_uppercase();
        let arity = |n: usize| {
            if args.len() < n {
                Err(Reply::Error(format!(
                    "ERR wrong number of arguments for '{name}'"
                )))
            } else {
                Ok(())
            }
        };
        match name.as_str() {
            "TIME" => Ok(Reply::Array(vec![
                Reply::Bulk((self.now_ms / 1000).to_string()),
                Reply::Bulk(((self.now_ms % 1000) * 1000).to_string()),
            ])),
            "EXISTS" => {
                arity(2)?;
                let n = args[1..]
                    .iter()
                    .filter(|k| self.keys.contains_key(*k))
                    .count();
                Ok(Reply::Int(n as i64))
            }
            "TYPE" => {
                arity(2)?;
                let t = match self.keys.get(&args[1]).map(|e| &e.value) {
                    None => "none",
                    Some(Value::Hash(_)) => "hash",
                    Some(Value::Str(_)) => "string",
                };
                Ok(Reply::Status(t.into()))
            }
            "GET" => {
                arity(2)?;
                match self.keys.get(&args[1]).map(|e| &e.value) {
                    None => Ok(Reply::Nil),
                    Some(Value::Str(s)) => Ok(Reply::Bulk(s.clone())),
                    Some(_) => Err(Reply::Error(WRONGTYPE.into())),
                }
            }
            "HGET" => {
                arity(3)?;
                Ok(match self.hash(&args[1])?.and_then(|h| h.get(&args[2])) {
                    Some(v) => Reply::Bulk(v.clone()),
                    None => Reply::Nil,
                })
            }
            "HMGET" => {
                arity(3)?;
                let h = self.hash(&args[1])?;
                Ok(Reply::Array(
                    args[2..]
                        .iter()
                        .map(|f| match h.and_then(|h| h.get(f)) {
                            Some(v) => Reply::Bulk(v.clone()),
                            None => Reply::Nil,
                        })
                        .collect(),
                ))
            }
            "HGETALL" => {
                arity(2)?;
                let mut out = Vec::new();
                if let Some(h) = self.hash(&args[1])? {
                    for (f, v) in h {
                        out.push(Reply::Bulk(f.clone()));
                        out.push(Reply::Bulk(v.clone()));
                    }
                }
                Ok(Reply::Array(out))
            }
            "HSET" => {
                if args.len() < 4 || !args.len().is_multiple_of(2) {
                    return Err(Reply::Error(
                        "ERR wrong number of arguments for 'hset'".into(),
                    ));
                }
                let h = self.hash_mut(&args[1])?;
                let mut added = 0;
                for pair in args[2..].chunks(2) {
                    if h.insert(pair[0].clone(), pair[1].clone()).is_none() {
                        added += 1;
                    }
                }
                self.wrote = true;
                Ok(Reply::Int(added))
            }
            "HDEL" => {
                arity(3)?;
                let Some(entry) = self.keys.get_mut(&args[1]) else {
                    return Ok(Reply::Int(0));
                };
                let Value::Hash(h) = &mut entry.value else {
                    return Err(Reply::Error(WRONGTYPE.into()));
                };
                let removed = args[2..].iter().filter(|f| h.remove(*f).is_some()).count();
                if h.is_empty() {
                    self.keys.remove(&args[1]);
                }
                if removed > 0 {
                    self.wrote = true;
                }
                Ok(Reply::Int(removed as i64))
            }
            "DEL" => {
                arity(2)?;
                let n = args[1..]
                    .iter()
                    .filter(|k| self.keys.remove(*k).is_some())
                    .count();
                if n > 0 {
                    self.wrote = true;
                }
                Ok(Reply::Int(n as i64))
            }
            "PEXPIREAT" => {
                arity(3)?;
                let at: u64 = args[2]
                    .parse()
                    .map_err(|_| Reply::Error("ERR value is not an integer".into()))?;
                let now = self.now_ms;
                match self.keys.get_mut(&args[1]) {
                    None => Ok(Reply::Int(0)),
                    Some(_) if at <= now => {
                        self.keys.remove(&args[1]);
                        self.wrote = true;
                        Ok(Reply::Int(1))
                    }
                    Some(e) => {
                        e.expires_at = Some(at);
                        self.wrote = true;
                        Ok(Reply::Int(1))
                    }
                }
            }
            "SET" => {
                // the plain form only: what the model's guarded writes send
                if args.len() != 3 {
                    return Err(Reply::Error(
                        "ERR the model serves SET key value only".into(),
                    ));
                }
                self.keys.insert(
                    args[1].clone(),
                    Entry {
                        value: Value::Str(args[2].clone()),
                        expires_at: None,
                    },
                );
                self.wrote = true;
                Ok(Reply::Status("OK".into()))
            }
            "SPUBLISH" | "PUBLISH" => {
                arity(3)?;
                self.published.push((args[1].clone(), args[2].clone()));
                Ok(Reply::Int(0))
            }
            other => Err(Reply::Error(format!(
                "ERR the model serves no command '{other}'"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(keys: &mut Keyspace, now_ms: u64, args: &[&str]) -> Reply {
        let mut c = Call {
            keys: std::mem::take(keys),
            now_ms,
            wrote: false,
            published: vec![],
        };
        c.expire();
        let r = c.command(&args.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        *keys = c.keys;
        r
    }

    #[test]
    fn hashes_expire_and_refuse_other_types() {
        let mut ks = Keyspace::new();
        assert_eq!(
            call(&mut ks, 10, &["HSET", "k", "a", "1", "b", "2"]),
            Reply::Int(2)
        );
        assert_eq!(
            call(&mut ks, 10, &["HMGET", "k", "a", "z"]),
            Reply::Array(vec![Reply::Bulk("1".into()), Reply::Nil])
        );
        assert_eq!(call(&mut ks, 10, &["PEXPIREAT", "k", "20"]), Reply::Int(1));
        assert_eq!(call(&mut ks, 19, &["EXISTS", "k"]), Reply::Int(1));
        assert_eq!(call(&mut ks, 20, &["EXISTS", "k"]), Reply::Int(0));
        ks.insert(
            "s".into(),
            Entry {
                value: Value::Str("x".into()),
                expires_at: None,
            },
        );
        assert!(
            matches!(call(&mut ks, 20, &["HGET", "s", "a"]), Reply::Error(e) if e.starts_with("WRONGTYPE"))
        );
        assert_eq!(
            call(&mut ks, 20, &["TYPE", "s"]),
            Reply::Status("string".into())
        );
        assert_eq!(
            call(&mut ks, 1_234_567, &["TIME"]),
            Reply::Array(vec![
                Reply::Bulk("1234".into()),
                Reply::Bulk("567000".into())
            ])
        );
    }

    #[test]
    fn the_last_field_deleted_deletes_the_key() {
        let mut ks = Keyspace::new();
        call(&mut ks, 0, &["HSET", "k", "a", "1"]);
        assert_eq!(call(&mut ks, 0, &["HDEL", "k", "a", "b"]), Reply::Int(1));
        assert!(ks.is_empty());
    }
}
