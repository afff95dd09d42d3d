//! Guarded calls are all or nothing, checked against the real server: random calls of
//! one to four commands, drawn from every command a guarded call may run, with random
//! (often bad) arguments, on keys of the lock's slot put first in random states (missing,
//! integers, text, floats, hashes, lists, sets, sorted sets, with or without an expiry).
//! Each key is read (`DUMP`, `PEXPIRETIME`) before and after each call: either every
//! command succeeded, or every key is exactly as before (its bytes and its expiry).
//!
//! Seeds are fixed (`SEEDS`); `GUARDED_FUZZ_SEED=<n>` runs that seed alone and
//! `GUARDED_FUZZ_CASES=<n>` sets the cases per seed. The counts are printed
//! (`--nocapture`).

mod common;

use std::time::Instant;

use cluster_rwlock::guarded::{self, Condition};
use cluster_rwlock::Error;
use common::{client, cluster, prefix};
use fred::prelude::*;

/// The seeds run by default, and the cases of each.
const SEEDS: &[u64] = &[1, 2, 3, 4, 5, 6, 7, 8];
const CASES: usize = 400;
/// How many keys a case puts in random states (and the calls name).
const KEYS: usize = 5;

/// splitmix64: a fixed sequence per seed, so that a failing case can be run again.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len())]
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

/// Arguments where an integer goes (the builder takes what Rust reads as an i64, so
/// `+3` and `007` reach the server, which refuses them).
const INTS: &[&str] = &[
    "0",
    "1",
    "-1",
    "2",
    "5",
    "100",
    "-7",
    "+3",
    "007",
    "9223372036854775807",
    "-9223372036854775808",
];
/// Arguments where a number goes but nothing is checked before sending.
const NUMS: &[&str] = &[
    "1.5", "-2", "3", "abc", "1e400", "inf", "-inf", "nan", "0x10", "5 ", " 5", "",
];
const VALUES: &[&str] = &[
    "x",
    "abc",
    "5",
    "-2",
    "1.5",
    "5 ",
    "",
    "9223372036854775807",
];
const FIELDS: &[&str] = &["n", "t", "f", "new"];
const MEMBERS: &[&str] = &["a", "b", "c", "z"];

/// The commands to put `key` in a random state: each its words.
fn random_state(rng: &mut Rng, key: &str) -> (String, Vec<Vec<String>>) {
    let w = |words: &[&str]| words.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let (what, mut commands) = match rng.below(9) {
        0 => ("missing", vec![]),
        1 => {
            let v = rng.pick(&[
                "5",
                "-3",
                "0",
                "9223372036854775807",
                "-9223372036854775808",
            ]);
            ("integer", vec![w(&["SET", key, v])])
        }
        2 => {
            let v = rng.pick(&["abc", "5 ", "", "+3", "007"]);
            ("text", vec![w(&["SET", key, v])])
        }
        3 => {
            let v = rng.pick(&["1.5", "2e3", "-0.25"]);
            ("float", vec![w(&["SET", key, v])])
        }
        4 | 5 => {
            let n = rng.pick(&["3", "-1", "9223372036854775807", "abc"]);
            (
                "hash",
                vec![w(&["HSET", key, "n", n, "t", "abc", "f", "2.5"])],
            )
        }
        6 => ("list", vec![w(&["RPUSH", key, "a", "b", "c"])]),
        7 => ("set", vec![w(&["SADD", key, "a", "b"])]),
        _ => ("zset", vec![w(&["ZADD", key, "1", "a", "2.5", "b"])]),
    };
    let mut what = what.to_string();
    if !commands.is_empty() && rng.chance(40) {
        let ttl = (300_000 + rng.below(100_000)).to_string();
        commands.push(w(&["PEXPIRE", key, &ttl]));
        what.push_str("+ttl");
    }
    (what, commands)
}

/// The type of a key in the state `what` (`random_state`): `s`, `h`, `l`, `S`, `z`, or
/// `-` when missing.
fn kind_of(what: &str) -> char {
    match what.split('+').next().unwrap_or("") {
        "missing" => '-',
        "hash" => 'h',
        "list" => 'l',
        "set" => 'S',
        "zset" => 'z',
        _ => 's',
    }
}

/// The type of key the command `name` works on (a guess by its name: `*` any).
fn family(name: &str) -> char {
    match name {
        "MGET" | "EXISTS" | "TYPE" | "TTL" | "PTTL" | "DEL" | "UNLINK" | "EXPIRE" | "PEXPIRE"
        | "PERSIST" => '*',
        "SET" | "SETNX" | "STRLEN" => 's',
        n if n.starts_with('H') => 'h',
        n if n.starts_with('L') || n.starts_with("RP") => 'l',
        n if n.starts_with('S') => 'S',
        n if n.starts_with('Z') => 'z',
        _ => 's',
    }
}

/// A random call of `name`: its arguments, keys drawn from `keys`.
fn random_args(rng: &mut Rng, name: &str, keys: &[String]) -> Vec<String> {
    let k = keys[rng.below(keys.len())].clone();
    let s = |x: &str| x.to_string();
    let some_keys = |rng: &mut Rng| {
        let n = 1 + rng.below(3);
        (0..n)
            .map(|_| keys[rng.below(keys.len())].clone())
            .collect::<Vec<_>>()
    };
    match name {
        "GET" | "STRLEN" | "INCR" | "DECR" | "GETDEL" | "TYPE" | "TTL" | "PTTL" | "PERSIST"
        | "HGETALL" | "HLEN" | "HKEYS" | "HVALS" | "LLEN" | "SMEMBERS" | "SCARD" | "ZCARD" => {
            vec![k]
        }
        "MGET" | "EXISTS" | "DEL" | "UNLINK" => some_keys(rng),
        "GETRANGE" | "LRANGE" | "LTRIM" => vec![k, s(rng.pick(INTS)), s(rng.pick(INTS))],
        "SET" => {
            let mut a = vec![k, s(rng.pick(VALUES))];
            for _ in 0..rng.below(3) {
                let opt = rng.pick(&[
                    "NX",
                    "XX",
                    "GET",
                    "KEEPTTL",
                    "EX 100",
                    "PX 200000",
                    "EX abc",
                    "EX 0",
                    "EX 9223372036854775807",
                    "get",
                    "nx",
                ]);
                a.extend(opt.split(' ').map(s));
            }
            a
        }
        "SETNX" | "GETSET" | "APPEND" => vec![k, s(rng.pick(VALUES))],
        "INCRBY" | "DECRBY" => vec![k, s(rng.pick(INTS))],
        "INCRBYFLOAT" => vec![k, s(rng.pick(NUMS))],
        "EXPIRE" | "PEXPIRE" => {
            let t = rng.pick(&["100", "100000", "-1", "0", "9223372036854775807", "5"]);
            let mut a = vec![k, s(t)];
            if rng.chance(30) {
                a.push(s(rng.pick(&["NX", "XX", "GT", "LT"])));
            }
            a
        }
        "HGET" | "HEXISTS" => vec![k, s(rng.pick(FIELDS))],
        "HMGET" | "HDEL" => {
            let mut a = vec![k];
            for _ in 0..1 + rng.below(2) {
                a.push(s(rng.pick(FIELDS)));
            }
            a
        }
        "HSET" => {
            let mut a = vec![k];
            for _ in 0..1 + rng.below(2) {
                a.push(s(rng.pick(FIELDS)));
                a.push(s(rng.pick(VALUES)));
            }
            a
        }
        "HSETNX" => vec![k, s(rng.pick(FIELDS)), s(rng.pick(VALUES))],
        "HINCRBY" => vec![k, s(rng.pick(FIELDS)), s(rng.pick(INTS))],
        "HINCRBYFLOAT" => vec![k, s(rng.pick(FIELDS)), s(rng.pick(NUMS))],
        "LINDEX" => vec![k, s(rng.pick(INTS))],
        "LPUSH" | "RPUSH" | "SADD" | "SREM" => {
            let mut a = vec![k];
            for _ in 0..1 + rng.below(2) {
                a.push(s(rng.pick(MEMBERS)));
            }
            a
        }
        "LPOP" | "RPOP" => {
            let mut a = vec![k];
            if rng.chance(40) {
                a.push(s(rng.pick(&["1", "2", "0", "-1", "10"])));
            }
            a
        }
        "LSET" => vec![k, s(rng.pick(&["0", "1", "5", "-1"])), s(rng.pick(VALUES))],
        "SISMEMBER" | "ZSCORE" => vec![k, s(rng.pick(MEMBERS))],
        "ZRANK" => {
            let mut a = vec![k, s(rng.pick(MEMBERS))];
            if rng.chance(20) {
                a.push(s("WITHSCORE"));
            }
            a
        }
        "ZRANGE" => {
            let mut a = vec![k, s("0"), s(rng.pick(&["-1", "1", "abc"]))];
            if rng.chance(30) {
                a.push(s(rng.pick(&["WITHSCORES", "BYSCORE", "REV"])));
            }
            a
        }
        "ZADD" => {
            let mut a = vec![k];
            for _ in 0..rng.below(3) {
                a.push(s(rng.pick(&["NX", "XX", "GT", "LT", "CH", "INCR"])));
            }
            for _ in 0..1 + rng.below(2) {
                a.push(s(rng.pick(&["1", "2.5", "abc", "inf", "nan", "-inf"])));
                a.push(s(rng.pick(MEMBERS)));
            }
            a
        }
        "ZREM" => vec![k, s(rng.pick(MEMBERS))],
        "ZINCRBY" => vec![
            k,
            s(rng.pick(&["1", "2.5", "abc", "inf", "nan"])),
            s(rng.pick(MEMBERS)),
        ],
        other => panic!("the fuzzer draws no arguments for {other}: add it"),
    }
}

/// A key as read: its `DUMP` (none when missing), its `PEXPIRETIME`, and its value in a
/// canonical form (its type and content, members sorted): a set or hash put back may
/// iterate in another order, so that its `DUMP` differs though nothing in it does.
#[derive(Debug)]
struct Read {
    dump: Option<Vec<u8>>,
    expires: i64,
    value: Vec<u8>,
}

impl PartialEq for Read {
    fn eq(&self, other: &Read) -> bool {
        self.expires == other.expires && (self.dump == other.dump || self.value == other.value)
    }
}

/// Each key as read ([`Read`]), in one script (the keys share a slot).
async fn snapshot(redis: &Client, keys: &[String]) -> Vec<Read> {
    let script = "local r = {} for i, k in ipairs(KEYS) do \
        local t = redis.call('TYPE', k)['ok'] local v \
        if t == 'string' then v = {redis.call('GET', k)} \
        elseif t == 'hash' then v = redis.call('HGETALL', k) \
          local p = {} for j = 1, #v, 2 do p[#p + 1] = v[j] .. '=' .. v[j + 1] end \
          table.sort(p) v = p \
        elseif t == 'list' then v = redis.call('LRANGE', k, 0, -1) \
        elseif t == 'set' then v = redis.call('SMEMBERS', k) table.sort(v) \
        elseif t == 'zset' then v = redis.call('ZRANGE', k, 0, -1, 'WITHSCORES') \
        else v = {} end \
        r[3 * i - 2] = redis.call('DUMP', k) or '' \
        r[3 * i - 1] = redis.call('PEXPIRETIME', k) \
        r[3 * i] = t .. ':' .. table.concat(v, '\\0') end return r";
    let v: Vec<Value> = redis
        .eval(script, keys.to_vec(), Vec::<String>::new())
        .await
        .expect("snapshot");
    v.chunks(3)
        .map(|read| Read {
            dump: read[0]
                .as_bytes()
                .map(<[u8]>::to_vec)
                .filter(|d| !d.is_empty()),
            expires: read[1].as_i64().expect("an expiry"),
            value: read[2].as_bytes().map(<[u8]>::to_vec).expect("a value"),
        })
        .collect()
}

/// Runs `commands` (each its words) in one script.
async fn setup(redis: &Client, keys: &[String], commands: &[Vec<String>]) {
    let script = "redis.call('DEL', unpack(KEYS)) local i = 1 while i <= #ARGV do \
        local n = tonumber(ARGV[i]) local w = {} for j = 1, n do w[j] = ARGV[i + j] end \
        redis.call(unpack(w)) i = i + n + 1 end return 1";
    let mut args = Vec::new();
    for c in commands {
        args.push(c.len().to_string());
        args.extend(c.iter().cloned());
    }
    let _: i64 = redis
        .eval(script, keys.to_vec(), args)
        .await
        .expect("setup");
}

#[derive(Default, Debug)]
struct Counts {
    cases: usize,
    succeeded: usize,
    refused_by_builder: usize,
    refused_up_front: usize,
    rolled_back: usize,
    /// A command failed and the commands before it stayed written (by the reply).
    partly_ran: usize,
    /// Refused though each command, run alone in a script, succeeded.
    false_refusals: usize,
    violations: usize,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guarded_call_that_fails_leaves_every_key_as_it_was() {
    let cluster = cluster().await;
    let p = prefix("gfuzz");
    let client = client(cluster, &p).await;
    let redis = client.redis().clone();
    // (connected on first use: an EVAL first would find no routes yet)
    redis.wait_for_connect().await.unwrap();
    let _: Option<String> = redis.get("k:{fz}").await.unwrap();
    let seeds: Vec<u64> = match std::env::var("GUARDED_FUZZ_SEED") {
        Ok(s) => vec![s.parse().expect("GUARDED_FUZZ_SEED: a number")],
        Err(_) => SEEDS.to_vec(),
    };
    let cases: usize = std::env::var("GUARDED_FUZZ_CASES")
        .map(|c| c.parse().expect("GUARDED_FUZZ_CASES: a number"))
        .unwrap_or(CASES);
    let names: Vec<&str> = guarded::commands().collect();
    let started = Instant::now();
    let mut counts = Counts::default();
    let mut reports = Vec::new();
    for &seed in &seeds {
        let mut rng = Rng(seed);
        let tag = format!("fz{seed}");
        let lock = client.rwlock(&format!("fuzz:{{{tag}}}")).unwrap();
        let keys: Vec<String> = (0..KEYS).map(|i| format!("k{i}:{{{tag}}}")).collect();
        let guard = lock.write().await.unwrap();
        for case in 0..cases {
            counts.cases += 1;
            let mut states = Vec::new();
            let mut kinds = Vec::new();
            let mut commands = Vec::new();
            for key in &keys {
                let (what, c) = random_state(&mut rng, key);
                kinds.push(kind_of(&what));
                states.push(format!("{key}={what}"));
                commands.extend(c);
            }
            setup(&redis, &keys, &commands).await;
            let before = snapshot(&redis, &keys).await;

            let n = 1 + rng.below(4);
            let calls: Vec<(String, Vec<String>)> = (0..n)
                .map(|_| {
                    let name = names[rng.below(names.len())];
                    // most commands name keys of their type (or missing), so that
                    // calls get past their first command
                    let fitting: Vec<String> = keys
                        .iter()
                        .zip(&kinds)
                        .filter(|(_, &k)| k == '-' || k == family(name))
                        .map(|(key, _)| key.clone())
                        .collect();
                    let drawn = if rng.chance(70) && !fitting.is_empty() {
                        &fitting
                    } else {
                        &keys
                    };
                    (name.to_string(), random_args(&mut rng, name, drawn))
                })
                .collect();
            let mut call = guard.guarded();
            // a quarter of the calls have a condition, and an else-branch
            let split = if rng.chance(25) {
                let key = keys[rng.below(keys.len())].as_str();
                call = call.when(if rng.chance(50) {
                    Condition::exists(key)
                } else {
                    Condition::value(key).eq("5")
                });
                Some(rng.below(n + 1))
            } else {
                None
            };
            for (i, (name, args)) in calls.iter().enumerate() {
                if split == Some(i) {
                    call = call.otherwise();
                }
                call = call.command(name, args);
            }
            let out = call.commit().await;
            let failed = match &out {
                Ok(o) if o.replies.iter().all(|r| r.error().is_none()) => {
                    counts.succeeded += 1;
                    None
                }
                Ok(o) => {
                    counts.partly_ran += 1;
                    Some(format!("{:?}", o.replies))
                }
                Err(Error::CommandFailed {
                    nothing_ran: true, ..
                }) => {
                    if rolled_back(out.as_ref().unwrap_err()) {
                        counts.rolled_back += 1;
                    } else {
                        counts.refused_up_front += 1;
                    }
                    Some(out.as_ref().unwrap_err().to_string())
                }
                Err(Error::CommandFailed { .. }) => {
                    counts.partly_ran += 1;
                    Some(out.as_ref().unwrap_err().to_string())
                }
                Err(Error::InvalidCommand(_)) => {
                    counts.refused_by_builder += 1;
                    Some(out.as_ref().unwrap_err().to_string())
                }
                Err(e) => panic!("seed {seed} case {case}: {e} ({calls:?})"),
            };
            let Some(failure) = failed else { continue };
            let after = snapshot(&redis, &keys).await;
            // the other side of the difference: the same commands, run by a plain
            // script that stops at the first error, on the keys as they were. A call
            // refused though every command would have succeeded is a false refusal
            let direct = if split.is_none() && after == before {
                Some(run_directly(&redis, &keys, &calls).await)
            } else {
                None
            };
            if let Some(Ok(replies)) = &direct {
                counts.violations += 1;
                counts.false_refusals += 1;
                reports.push(format!(
                    "seed {seed} case {case}: states [{}], calls {calls:?}: refused ({failure}), yet each ran: {replies}",
                    states.join(" ")
                ));
            }
            let changed: Vec<String> = keys
                .iter()
                .zip(before.iter().zip(&after))
                .filter(|(_, (b, a))| b != a)
                .map(|(k, (b, a))| {
                    format!(
                        "{k}: {:?} expiring {} -> {:?} expiring {}",
                        String::from_utf8_lossy(&b.value),
                        b.expires,
                        String::from_utf8_lossy(&a.value),
                        a.expires
                    )
                })
                .collect();
            if !changed.is_empty() {
                counts.violations += 1;
                reports.push(format!(
                    "seed {seed} case {case}: states [{}], calls {calls:?} (else from {split:?}): {failure}; changed: {}",
                    states.join(" "),
                    changed.join("; ")
                ));
            }
        }
        guard.release().await.unwrap();
        let _: i64 = redis.del(keys).await.unwrap();
    }
    let elapsed = started.elapsed();
    println!(
        "guarded fuzz: seeds {seeds:?}, {cases} cases each, {:.1} s: {counts:?}",
        elapsed.as_secs_f64()
    );
    for r in &reports {
        println!("{r}");
    }
    assert!(
        reports.is_empty(),
        "{} calls failed with keys changed, e.g. {}",
        reports.len(),
        reports[0]
    );
}

/// Runs `calls` in a plain script, stopping at the first error: each reply, or the
/// error (the caller sets the keys up again after).
async fn run_directly(
    redis: &Client,
    keys: &[String],
    calls: &[(String, Vec<String>)],
) -> Result<String, String> {
    let script = "local i, out = 1, {} while i <= #ARGV do \
        local n = tonumber(ARGV[i]) local w = {} for j = 1, n do w[j] = ARGV[i + j] end \
        local r = redis.pcall(unpack(w)) \
        if type(r) == 'table' and r['err'] then return {0, r['err']} end \
        out[#out + 1] = tostring(type(r) == 'table' and #r or r) i = i + n + 1 end \
        return {1, table.concat(out, ' ')}";
    let mut args = Vec::new();
    for (name, a) in calls {
        args.push((1 + a.len()).to_string());
        args.push(name.clone());
        args.extend(a.iter().cloned());
    }
    let v: Vec<Value> = redis
        .eval(script, keys.to_vec(), args)
        .await
        .expect("direct run");
    let text = v[1].as_string().unwrap_or_default();
    if v[0].as_i64() == Some(1) {
        Ok(text)
    } else {
        Err(text)
    }
}

/// Whether a refusal says the commands before it ran and were undone.
fn rolled_back(e: &Error) -> bool {
    matches!(e, Error::CommandFailed { undone: true, .. })
}

/// The commands the fuzzer draws from are every command a guarded call may run.
#[test]
fn the_fuzzer_draws_every_command() {
    let mut rng = Rng(7);
    let keys = vec!["k:{t}".to_string()];
    for name in guarded::commands() {
        let _ = random_args(&mut rng, name, &keys);
    }
}
