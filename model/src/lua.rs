//! The shipped function library, run by an embedded Lua 5.1 (the dialect Redis embeds)
//! against the in-memory keyspace of `redis.rs`: `redis.call`, `redis.pcall` and
//! `redis.register_function` behave as a server's do for the replies the functions
//! meet. The text is the library's own (`cluster_rwlock::operator::library::TEXT`), changed only
//! by a seeded bug's patches (`bugs.rs`), each of which must match exactly once.

use std::collections::HashMap;

use mlua::{Function, Lua, MultiValue, Table, Value as LuaValue};

use crate::redis::{Call, Reply};

/// A Lua state with the library loaded, and its functions by name.
pub struct Engine {
    lua: Lua,
    functions: HashMap<String, Function>,
}

/// What a server offers a function library before its text runs: the `redis` table
/// (call, pcall and register_function; the replies' helpers).
const PRELUDE: &str = r#"
redis = {}
__functions = {}
function redis.register_function(a, b)
  if type(a) == 'table' then __functions[a.function_name] = a.callback
  else __functions[a] = b end
end
function redis.error_reply(e) return {err = e} end
function redis.status_reply(s) return {ok = s} end
redis.call = function(...)
  local r = __command(...)
  if type(r) == 'table' and r.err ~= nil then error(r.err, 0) end
  return r
end
redis.pcall = function(...) return __command(...) end
"#;

impl Engine {
    /// Loads `text` (a library as `FUNCTION LOAD` takes it: the first line names it).
    pub fn load(text: &str) -> Result<Engine, String> {
        let lua = Lua::new();
        let command = lua
            .create_function(|lua, args: MultiValue| {
                let words = args
                    .into_iter()
                    .map(|v| match v {
                        LuaValue::String(s) => Ok(s.to_str()?.to_string()),
                        LuaValue::Integer(n) => Ok(n.to_string()),
                        LuaValue::Number(n) if n.fract() == 0.0 => Ok(format!("{n:.0}")),
                        LuaValue::Number(n) => Ok(n.to_string()),
                        other => Err(mlua::Error::runtime(format!(
                            "Lua redis lib command arguments must be strings or integers, not {}",
                            other.type_name()
                        ))),
                    })
                    .collect::<mlua::Result<Vec<String>>>()?;
                let reply = {
                    let mut call = lua
                        .app_data_mut::<Call>()
                        .ok_or_else(|| mlua::Error::runtime("redis.call outside a call"))?;
                    call.command(&words)
                };
                to_lua(lua, &reply)
            })
            .map_err(|e| e.to_string())?;
        lua.globals()
            .set("__command", command)
            .map_err(|e| e.to_string())?;
        lua.load(PRELUDE).exec().map_err(|e| e.to_string())?;
        let body = match text.split_once('\n') {
            Some((first, rest)) if first.starts_with("#!lua") => rest,
            _ => text,
        };
        lua.load(body)
            .set_name("library")
            .exec()
            .map_err(|e| format!("the library does not load: {e}"))?;
        let table: Table = lua
            .globals()
            .get("__functions")
            .map_err(|e| e.to_string())?;
        let mut functions = HashMap::new();
        for pair in table.pairs::<String, Function>() {
            let (name, f) = pair.map_err(|e| e.to_string())?;
            functions.insert(name, f);
        }
        Ok(Engine { lua, functions })
    }

    /// Runs function `name` on `call`'s keyspace with `keys` and `args`, as FCALL does;
    /// a Lua error comes back as an error reply.
    pub fn fcall(&self, call: &mut Call, name: &str, keys: &[&str], args: &[&str]) -> Reply {
        let Some(f) = self.functions.get(name) else {
            return Reply::Error(format!("ERR Function not found: {name}"));
        };
        call.expire();
        self.lua.set_app_data(std::mem::take(call));
        let result = (|| -> mlua::Result<LuaValue> {
            let k = self.lua.create_sequence_from(keys.iter().copied())?;
            let a = self.lua.create_sequence_from(args.iter().copied())?;
            f.call::<LuaValue>((k, a))
        })();
        if let Some(back) = self.lua.remove_app_data::<Call>() {
            *call = back;
        }
        match result {
            Ok(v) => from_lua(&v),
            Err(e) => Reply::Error(e.to_string()),
        }
    }
}

/// A command's reply as a script receives it (an error as `{err = ...}`, which
/// `redis.call` raises and `redis.pcall` returns).
fn to_lua(lua: &Lua, reply: &Reply) -> mlua::Result<LuaValue> {
    Ok(match reply {
        Reply::Int(n) => LuaValue::Integer(*n),
        Reply::Bulk(s) => LuaValue::String(lua.create_string(s)?),
        Reply::Nil => LuaValue::Boolean(false),
        Reply::Status(s) => tagged(lua, "ok", s)?,
        Reply::Error(e) => tagged(lua, "err", e)?,
        Reply::Array(items) => {
            let t = lua.create_table()?;
            for (i, item) in items.iter().enumerate() {
                t.set(i + 1, to_lua(lua, item)?)?;
            }
            LuaValue::Table(t)
        }
    })
}

/// `{<tag> = text}`: a status or error reply as a script sees it.
fn tagged(lua: &Lua, tag: &str, text: &str) -> mlua::Result<LuaValue> {
    let t = lua.create_table()?;
    t.set(tag, text)?;
    Ok(LuaValue::Table(t))
}

/// A function's return value as the client receives it (Redis's conversion: numbers
/// truncated to integers, an array up to its first nil, `{err}`/`{ok}` tables).
fn from_lua(v: &LuaValue) -> Reply {
    match v {
        LuaValue::Nil => Reply::Nil,
        LuaValue::Boolean(true) => Reply::Int(1),
        LuaValue::Boolean(false) => Reply::Nil,
        LuaValue::Integer(n) => Reply::Int(*n),
        LuaValue::Number(n) => Reply::Int(n.trunc() as i64),
        LuaValue::String(s) => Reply::Bulk(s.to_string_lossy().to_string()),
        LuaValue::Table(t) => {
            if let Ok(LuaValue::String(e)) = t.raw_get::<LuaValue>("err") {
                return Reply::Error(e.to_string_lossy().to_string());
            }
            if let Ok(LuaValue::String(s)) = t.raw_get::<LuaValue>("ok") {
                return Reply::Status(s.to_string_lossy().to_string());
            }
            let mut items = Vec::new();
            for i in 1.. {
                match t.raw_get::<LuaValue>(i) {
                    Ok(LuaValue::Nil) | Err(_) => break,
                    Ok(item) => items.push(from_lua(&item)),
                }
            }
            Reply::Array(items)
        }
        other => Reply::Error(format!("a function returned a {}", other.type_name())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redis::Keyspace;

    fn call(now_ms: u64) -> Call {
        Call {
            keys: Keyspace::new(),
            now_ms,
            wrote: false,
            published: vec![],
        }
    }

    #[test]
    fn the_shipped_library_grants_hands_over_and_fences() {
        let e = Engine::load(cluster_rwlock::operator::library::TEXT).unwrap();
        let mut c = call(1_700_000_000_000);
        let key = "rwlock:{a}";
        let (a, b) = (
            "a/0123456789abcdef0123456789abcdef:1",
            "b/0123456789abcdef0123456789abcdef:1",
        );
        let first = e.fcall(
            &mut c,
            "rwlock4_acquire",
            &[key],
            &["w", a, "1", "3000", "1", "2"],
        );
        assert_eq!(first.at(0), Some(&Reply::Int(1)), "{first}");
        assert!(c.wrote);
        let busy = e.fcall(
            &mut c,
            "rwlock4_acquire",
            &[key],
            &["w", b, "1", "3000", "1", "2"],
        );
        assert_eq!(busy.at(0), Some(&Reply::Int(0)), "{busy}");
        c.now_ms += 10;
        let released = e.fcall(&mut c, "rwlock4_release", &[key], &[a, "1"]);
        assert_eq!(released, Reply::Array(vec![Reply::Int(1)]));
        assert!(
            c.published
                .iter()
                .any(|(ch, m)| ch == "rwlock:{a}:released" && m.starts_with(&format!("g {b} 1 "))),
            "{:?}",
            c.published
        );
        let taken = e.fcall(
            &mut c,
            "rwlock4_acquire",
            &[key],
            &["w", b, "1", "3000", "3", "2"],
        );
        assert_eq!(taken.at(0), Some(&Reply::Int(1)), "{taken}");
        let (f1, f2) = (
            first.at(1).unwrap().text().unwrap().parse::<u64>().unwrap(),
            taken.at(1).unwrap().text().unwrap().parse::<u64>().unwrap(),
        );
        assert!(f2 > f1);
        // a key of another type is refused, untouched
        c.keys.insert(
            "s".into(),
            crate::redis::Entry {
                value: crate::redis::Value::Str("x".into()),
                expires_at: None,
            },
        );
        let other = e.fcall(
            &mut c,
            "rwlock4_acquire",
            &["s"],
            &["w", a, "2", "3000", "0"],
        );
        assert_eq!(
            other,
            Reply::Array(vec![Reply::Int(-3), Reply::Bulk("string".into())])
        );
    }
    /// A contended hand-off runs on the fast paths: the release of a lone hold that hands
    /// the lock to the writer first in line (told nothing, and told the queue's head) and
    /// that writer's take without the clock never reach the general path's begin(),
    /// which this library fails while `__no_general` is set.
    #[test]
    fn a_contended_hand_off_takes_the_fast_paths() {
        let begin = "local function begin(keys, argv, owner_arg, clock_later, ticket)\n";
        let text = cluster_rwlock::operator::library::TEXT;
        assert_eq!(text.matches(begin).count(), 1);
        let poisoned = text.replace(
            begin,
            &format!("{begin}  if __no_general then error('the general path') end\n"),
        );
        let e = Engine::load(&poisoned).unwrap();
        let general = |on: bool| e.lua.globals().set("__no_general", on).unwrap();
        let mut c = call(1_700_000_000_000);
        let key = "rwlock:{h}";
        let owners = ["a/0:1", "b/0:1", "c/0:1"];
        let acquire = |c: &mut Call, who: usize, args: &[&str]| {
            let mut all = vec!["w", owners[who], "1", "3000"];
            all.extend_from_slice(args);
            e.fcall(c, "rwlock4_acquire", &[key], &all)
        };
        assert_eq!(
            acquire(&mut c, 0, &["1", "2", "1"]).at(0),
            Some(&Reply::Int(1))
        );
        for who in [1, 2] {
            assert_eq!(
                acquire(&mut c, who, &["1", "2", "1"]).at(0),
                Some(&Reply::Int(0))
            );
        }
        general(true);
        c.now_ms += 5;
        // a's grant said nobody else was there: its release is told nothing
        let released = e.fcall(&mut c, "rwlock4_release", &[key], &[owners[0], "1"]);
        assert_eq!(released, Reply::Array(vec![Reply::Int(1)]), "{released}");
        assert!(c.published.iter().any(|(_, m)| m.starts_with("g b/0:1 1 ")));
        let taken = acquire(&mut c, 1, &["3", "2", "1"]);
        assert_eq!(taken.at(0), Some(&Reply::Int(1)), "{taken}");
        assert_eq!(taken.at(2), Some(&Reply::Bulk("t:1".into())), "{taken}");
        // b's release, told the head, hands the lock to c
        let released = e.fcall(
            &mut c,
            "rwlock4_release",
            &[key],
            &[owners[1], "1", "1", "t:1"],
        );
        assert_eq!(released, Reply::Array(vec![Reply::Int(1)]), "{released}");
        assert!(c.published.iter().any(|(_, m)| m.starts_with("g c/0:1 1 ")));
        let taken = acquire(&mut c, 2, &["3", "2", "1"]);
        assert_eq!(taken.at(0), Some(&Reply::Int(1)), "{taken}");
        assert_eq!(taken.at(2), Some(&Reply::Int(0)), "{taken}");
        // and the poison works: a call the fast paths do not take fails
        let queued = acquire(&mut c, 0, &["1", "1", "1"]);
        assert!(
            matches!(queued, Reply::Error(ref m) if m.contains("the general path")),
            "{queued}"
        );
    }
}
