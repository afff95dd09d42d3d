//! The lock's algorithm: Lua scripts over one hash per lock, and their raw calls.
//!
//! This module is the state machine; [`RwLock`](crate::RwLock) and the guards wrap it
//! in a safe API. Every script touches one key and its channel (one slot), goes by the
//! server's clock (`TIME`, or the key's TTL; never a client clock), and keeps the key's
//! TTL a minute past the latest deadline of its entries, so a lock whose holders all died
//! disappears. A lock nobody holds, queues for or waits for keeps its hash for that
//! minute as a tombstone: the summary alone, which remembers the last fence.
//!
//! # Hash layout (version 3)
//!
//! One hash per lock at `<prefix>:{<name>}`. A summary, kept up to date by every script
//! so that no operation reads the whole hash:
//!
//! | field | value | meaning |
//! |---|---|---|
//! | `s` | `3 <fence> <held> <dl> <du> <qh> <qt> <rw>` | layout version `3` (a hash without it, or with another, is refused: `Corrupt`); the last fence granted; owners that hold (any mode); a lower bound of the earliest deadline of any hold (expired holds are looked for only once it has passed); an upper bound of the latest (the key's TTL is a minute past it); the writer queue's head ticket and next ticket; until when readers wait (releases publish only when someone waits). Server ms; `-` for none. |
//! | `w` | owner token | the owner that holds write (absent when none) |
//! | `u` | `<owner>` or `<owner> <hold id> <lease-ms> <from id>` | the owner that holds the upgradable read (absent when none), and while it waits to upgrade, the write hold to grant it as soon as it is the only owner that holds, and the upgradable hold that write hold replaces (no later than that hold's own deadline) |
//!
//! Entries:
//!
//! | field | value | meaning |
//! |---|---|---|
//! | `o:<owner>` | `<hold> <hold> ...` | an owner's holds |
//! | `q:<owner>` | `<ticket> <deadline-ms> <hold id> <lease-ms>` | a queued writer: its place, the deadline of its intent, and the hold it is handed when its turn comes |
//! | `t:<ticket>` | owner token | who holds that place in the queue |
//!
//! A hold is `<r|w|u><id>:<fence>:<deadline-ms>`: its mode (read, write, upgradable
//! read), the id the client gave it (unique per owner, so that a retried call never takes
//! or gives back a second hold), its fence and its lease deadline (server ms). Each hold
//! has its own deadline, set by the grant or renewal that names it: two processes under
//! one explicit owner token renew their own holds, and the holds of one that died run
//! out one lease later, whatever the other does.
//!
//! # Cost
//! Every operation but [`RwLock::state`](crate::RwLock::state) touches O(1) fields: the
//! summary (one `HMGET`), the caller's own entry, and the queue's head (tickets of
//! writers that left are dropped as they reach the head, each once). Expired holds are
//! removed by one scan of the hash when the earliest-deadline bound `dl` has passed:
//! once per expiry, not per call. Renewing n owners costs n.
//!
//! Every script starts with two lines the client adds (`OWNER_ARG`, where the caller's
//! owner token is in `ARGV`; `PUBLISH`, the command of release messages), then
//! `lua/layout.lua`, the layout's vocabulary (its version, `FENCE_MEMORY`, how long a
//! tombstone stays, the reply codes, and the patterns of the summary and of a hold:
//! constants only, since every statement before the fast paths costs each call; the
//! functions that write these encodings open `lua/lib.lua`).
//! The two calls of an uncontended cycle have fast paths, which run next and write
//! exactly what the general part would write, without its parsing and bookkeeping (a
//! test runs both on a live server and compares the hashes they leave):
//! `lua/fast_acquire.lua` (the lock is free: no hash, or a tombstone; `HGET` of the
//! summary, `TIME`, one `HSET` of the summary, the owner's entry and `w`/`u`, `PEXPIRE`)
//! and `lua/fast_release.lua` (one `HMGET` of the summary and the caller's entry; the
//! caller's one hold is the lock's only hold and nobody waits: `TIME` tells no entry
//! has expired, then `HDEL`, `HSET` of the tombstone's summary, `PEXPIRE`). Anything else
//! goes on to `lua/head.lua` (the summary and the caller's entries in one `HMGET`),
//! `lua/lib.lua` and the script's file. Each call sends one key and only the arguments
//! its script reads: the release channel, `<key>:released`, is named by the scripts.
//!
//! # Rules
//! - Write is granted when no one holds and no writer is queued ahead; read when no
//!   writer holds, is queued, or waits to upgrade (writer preference); upgradable read as
//!   read, and when no other owner holds it. An owner that holds may always add a hold
//!   of the same mode, and a writer may also add read holds; an owner holding only read
//!   that asks for write gets `UpgradeDeadlock`.
//! - An upgrade is granted at once when its owner is the only one that holds; else it is
//!   left pending (in `u`), new readers wait, and the script that lets the last other
//!   owner out turns the upgradable hold into the write hold, before the writer queue.
//! - A write attempt that fails queues the writer (first come, first served); the queue
//!   entry lives for one lease and is refreshed by each attempt. When the lock becomes
//!   free, the script that freed it grants it to the first queued writer at once (a
//!   hand-off), with the deadline its queue entry had (a writer that died while queued
//!   blocks the lock no longer than its entry would have): the waiter learns it from
//!   the release message, which only wakes it. Its next attempt, under the same hold
//!   id, finds the hold and is a grant like any other, in every mode: the fence from
//!   the server, the lease counted from that attempt's send time, confirmed by the
//!   replicas (a message alone proves nothing: it may come from a master that lost the
//!   slot).
//! - Fence = max(last fence + 1, server time in µs): strictly increasing while the hash
//!   or its tombstone exists, and after that as long as the masters' clocks are less than
//!   `FENCE_MEMORY` (a minute) apart. A call sent again that finds the hold its first
//!   sending granted writes the owner's entry again with a fresh deadline, so that the
//!   `WAIT` that follows it covers the grant.
//! - A writer or an upgrade that gives up withdraws (`lua/withdraw.lua`): out of the
//!   queue or out of pending, and a hold handed over meanwhile is given back; an upgrade
//!   that names the upgradable hold it started from gets that hold back instead.
//! - Releases publish on `<key>:released` who may proceed, and only when someone waits:
//!   `g <owner> <hold id> <fence>` (the lock was handed to that writer or upgrader), `*`
//!   (anyone) or `r` (readers).

use std::sync::atomic::{AtomicU64, Ordering};

use fred::prelude::*;
use fred::types::scripts::Script;

use crate::error::{ClientResult, Error, Result};
use crate::mode::Mode;

#[cfg(all(test, feature = "cluster-tests"))]
mod paths;
mod reply;

pub(crate) use crate::cluster::lane::{Confirm, Lane};
use reply::{attempt, code, count, int, number, parse_renew, status, text};
pub(crate) use reply::{RawHolder, RawState};

/// A script's text, but for the line the client adds before it (see
/// [`Scripts::new`]): the line that tells the head where the caller's owner token is
/// (`ARGV` index, 0 for none), the layout version, the script's fast path if it has one
/// (it runs first, and falls through to the rest when it does not apply), the head that
/// reads the summary, the general part (`lib.lua`), then the script's own file.
macro_rules! lua {
    ($file:literal, $owner_arg:literal) => {
        concat!(
            "local OWNER_ARG = ",
            $owner_arg,
            "\n",
            include_str!("../lua/layout.lua"),
            "\n",
            include_str!("../lua/head.lua"),
            "\n",
            include_str!("../lua/lib.lua"),
            "\n",
            include_str!(concat!("../lua/", $file))
        )
    };
    (fast: $fast:literal, $file:literal, $owner_arg:literal) => {
        concat!(
            "local OWNER_ARG = ",
            $owner_arg,
            "\n",
            include_str!("../lua/layout.lua"),
            "\n",
            include_str!(concat!("../lua/", $fast)),
            "\n",
            include_str!("../lua/head.lua"),
            "\n",
            include_str!("../lua/lib.lua"),
            "\n",
            include_str!(concat!("../lua/", $file))
        )
    };
}

/// A script as loaded: the line that names the command of release messages (`PUBLISH`),
/// then `text`.
fn script(publish: &str, text: &str) -> Script {
    Script::from_lua(format!("local PUBLISH = '{publish}'\n{text}"))
}

/// The lock scripts, as loaded on the servers.
pub(crate) struct Scripts {
    acquire: Script,
    release: Script,
    downgrade: Script,
    upgrade: Script,
    renew: Script,
    withdraw: Script,
    state: Script,
    force_release: Script,
    guarded: Script,
    fenced_set: Script,
}

/// Counters of what the client sent, for benchmarks and diagnostics.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub attempts: AtomicU64,
    pub round_trips: AtomicU64,
    pub reloads: AtomicU64,
}

/// Outcome of one acquire attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Attempt {
    Granted {
        fence: u64,
    },
    Busy {
        wait_ms: u64,
    },
    UpgradeDeadlock,
    /// The hold an upgrade starts from is gone (its lease ran out).
    Gone,
}

/// What a release found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Released {
    /// The hold was there, and is given back.
    Now,
    /// The hold was not there; the last fence the lock remembers.
    NotThere { last_fence: Option<u64> },
}

/// What an acquire attempt does when it is not granted at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Intent {
    /// Nothing: one attempt.
    Try,
    /// The caller waits: a writer queues, a reader leaves its mark.
    Wait,
    /// Granted only if the owner holds already (reentrant on purpose); never waits.
    Again,
}

impl Intent {
    fn arg(self) -> &'static str {
        match self {
            Intent::Try => "0",
            Intent::Wait => "1",
            Intent::Again => "2",
        }
    }
}

/// The lock a call is about: its key, the script's one `KEYS` entry (the scripts name
/// the release channel, `<key>:released`, themselves: same slot, one key less to send).
#[derive(Clone, Copy)]
pub(crate) struct Target<'a> {
    pub key: &'a str,
    /// How the script's writes are confirmed by replicas (`None`: not at all).
    pub confirm: Option<Confirm>,
}

/// Where a script call goes: the connection to the node that serves the lock's slot, the
/// client's counters, and the lock (its key, and how the call is confirmed).
#[derive(Clone, Copy)]
pub(crate) struct On<'a> {
    /// The connection (to load a script it lacks).
    pub client: &'a Client,
    /// The connection's lane, which script calls take when confirmation is in use (see
    /// `cluster::lane`).
    pub lane: &'a Lane,
    /// Nothing is ever confirmed on this client (`Durability::MasterOnly`): a call
    /// without `ASKING` goes straight to the connection, which keeps many in flight
    /// (there is no `WAIT` to share, and a lane would only serialize the batches).
    pub direct: bool,
    /// The node is the target of an `ASK`: `ASKING` goes right before the script, in
    /// the same pipeline.
    pub asking: bool,
    pub counters: &'a Counters,
    pub target: Target<'a>,
}

/// What a script call brought back: its reply, and whether its writes were confirmed
/// when confirmation was asked for (`unconfirmed`: replicas wanted and those that
/// acknowledged). Each call decides what an unconfirmed reply means: a grant that does
/// not count, a refusal that does not matter.
pub(crate) struct Ran {
    pub value: Value,
    pub unconfirmed: Option<(u32, u32)>,
}

impl Ran {
    /// The reply, when its writes were confirmed (or none was asked for); else
    /// [`Error::NotReplicated`].
    fn confirmed(self, key: &str) -> Result<Value> {
        match self.unconfirmed {
            None => Ok(self.value),
            Some((wanted, acked)) => Err(not_replicated(key, wanted, acked)),
        }
    }
}

fn not_replicated(key: &str, wanted: u32, acked: u32) -> Error {
    crate::observe::not_replicated(key, wanted, acked);
    Error::NotReplicated { wanted, acked }
}

impl Scripts {
    /// The scripts of a client whose release messages go out with `publish`
    /// (`spublish`, `publish`, or `''` for none).
    pub fn new(publish: &str) -> Scripts {
        Scripts {
            acquire: script(publish, lua!(fast: "fast_acquire.lua", "acquire.lua", 2)),
            release: script(publish, lua!(fast: "fast_release.lua", "release.lua", 1)),
            downgrade: script(publish, lua!("downgrade.lua", 1)),
            upgrade: script(publish, lua!("upgrade.lua", 1)),
            renew: script(publish, lua!("renew.lua", 0)),
            withdraw: script(publish, lua!("withdraw.lua", 1)),
            state: script(publish, lua!("state.lua", 0)),
            force_release: script(publish, lua!("force_release.lua", 0)),
            guarded: script(publish, lua!("guarded.lua", 1)),
            fenced_set: script(publish, include_str!("../lua/fenced_set.lua")),
        }
    }

    /// The same scripts without their fast paths: the general path alone, for the test
    /// that both paths leave the same hash.
    #[cfg(all(test, feature = "cluster-tests"))]
    fn general_only(publish: &str) -> Scripts {
        Scripts {
            acquire: script(publish, lua!("acquire.lua", 2)),
            release: script(publish, lua!("release.lua", 1)),
            ..Scripts::new(publish)
        }
    }

    /// Loads every script on every master (done at connect; a promoted replica may still
    /// lack them, which `run` repairs).
    pub async fn load_all(&self, client: &Client) -> Result<()> {
        for s in [
            &self.acquire,
            &self.release,
            &self.downgrade,
            &self.upgrade,
            &self.renew,
            &self.withdraw,
            &self.state,
            &self.force_release,
            &self.guarded,
            &self.fenced_set,
        ] {
            s.load(client).await.lock_err()?;
        }
        Ok(())
    }

    /// EVALSHA through the connection's lane, loading the script again on NOSCRIPT; with
    /// `ASKING` before it when the node is the target of an `ASK`; with `t.confirm`,
    /// confirmed by the `WAIT` of the batch it goes in (what the script did stays on the
    /// master when too few replicas acknowledged: see [`Ran`]).
    ///
    /// Boxed: the client's futures are deep types, and every acquire, renewal and release
    /// future holds one; behind a box they add one pointer to the futures above, not their
    /// whole layout (which brought users' futures near the compiler's query depth limit).
    /// One allocation per round trip.
    fn run<'a>(
        &'a self,
        on: On<'a>,
        script: &'a Script,
        args: Vec<String>,
    ) -> futures_util::future::BoxFuture<'a, Result<Ran>> {
        let args = args.into_iter().map(Value::from).collect();
        self.run_with(on, script, Vec::new(), args)
    }

    /// [`run`](Self::run) with keys after the lock's (`KEYS[2..]`) and arguments of any
    /// bytes.
    fn run_with<'a>(
        &'a self,
        on: On<'a>,
        script: &'a Script,
        extra_keys: Vec<String>,
        args: Vec<Value>,
    ) -> futures_util::future::BoxFuture<'a, Result<Ran>> {
        Box::pin(async move {
            let t = &on.target;
            if on.direct && t.confirm.is_none() && !on.asking && extra_keys.is_empty() {
                let value = self
                    .run_plain(on.client, on.counters, script, t, args)
                    .await?;
                return Ok(Ran {
                    value,
                    unconfirmed: None,
                });
            }
            let mut call: Vec<Value> = Vec::with_capacity(3 + extra_keys.len() + args.len());
            let keys = i64::try_from(1 + extra_keys.len()).unwrap_or(i64::MAX);
            call.extend([script.sha1().to_string().into(), keys.into(), t.key.into()]);
            call.extend(extra_keys.into_iter().map(Value::from));
            call.extend(args);
            for first in [true, false] {
                // kept for a sending after NOSCRIPT (cloning fred's values only bumps
                // refcounts)
                let calls = if first {
                    vec![call.clone()]
                } else {
                    vec![std::mem::take(&mut call)]
                };
                on.counters.round_trips.fetch_add(1, Ordering::Relaxed);
                let mut batch = on.lane.send(on.asking, t.confirm, calls).await;
                let reply = match batch.replies.pop() {
                    Some(r) => r,
                    None => return Err(Error::Protocol("a script call: missing reply".into())),
                };
                match reply {
                    Err(e) if first && e.details().starts_with("NOSCRIPT") => {
                        on.counters.reloads.fetch_add(1, Ordering::Relaxed);
                        crate::observe::script_reloaded();
                        on.counters.round_trips.fetch_add(1, Ordering::Relaxed);
                        script.load(on.client).await.lock_err()?;
                    }
                    Err(e) => return Err(Error::from_client(e)),
                    Ok(value) => {
                        let unconfirmed = batch.unconfirmed(t.confirm);
                        return Ok(Ran { value, unconfirmed });
                    }
                }
            }
            Err(Error::Protocol("NOSCRIPT after loading the script".into()))
        })
    }

    /// EVALSHA alone (no confirmation, no `ASKING`), loading the script again on
    /// NOSCRIPT.
    async fn run_plain(
        &self,
        client: &Client,
        counters: &Counters,
        script: &Script,
        t: &Target<'_>,
        args: Vec<Value>,
    ) -> Result<Value> {
        // kept for a retry after NOSCRIPT; cloning fred's values only bumps refcounts
        let keys: Vec<fred::types::Key> = vec![t.key.into()];
        counters.round_trips.fetch_add(1, Ordering::Relaxed);
        match client
            .evalsha::<Value, _, _, _>(script.sha1().clone(), keys.clone(), args.clone())
            .await
        {
            Err(e) if e.details().starts_with("NOSCRIPT") => {
                counters.reloads.fetch_add(1, Ordering::Relaxed);
                crate::observe::script_reloaded();
                counters.round_trips.fetch_add(2, Ordering::Relaxed);
                script.load(client).await.lock_err()?;
                Ok(client.evalsha(script.sha1().clone(), keys, args).await.lock_err()?)
            }
            other => Ok(other.lock_err()?),
        }
    }

    pub async fn acquire(
        &self,
        on: On<'_>,
        mode: Mode,
        owner: &str,
        hold: u64,
        lease_ms: u64,
        intent: Intent,
    ) -> Result<Attempt> {
        on.counters.attempts.fetch_add(1, Ordering::Relaxed);
        let args = vec![
            mode.arg().to_string(),
            owner.to_string(),
            hold.to_string(),
            lease_ms.to_string(),
            intent.arg().to_string(),
        ];
        let ran = self.run(on, &self.acquire, args).await?;
        granted_only_if_confirmed(
            on.target.key,
            ran,
            "acquire",
            (-1, Attempt::UpgradeDeadlock),
        )
    }

    /// Gives back hold `hold` of `owner`: whether it was there.
    pub async fn release(&self, on: On<'_>, owner: &str, hold: u64) -> Result<Released> {
        let args = vec![owner.to_string(), hold.to_string()];
        let parts = status(
            on.target.key,
            self.run(on, &self.release, args).await?.value,
        )?;
        if code(&parts)? == 1 {
            return Ok(Released::Now);
        }
        let last_fence = match parts.get(1).map(text).transpose()? {
            Some(s) if !s.is_empty() && s != "-" => Some(
                s.parse()
                    .map_err(|_| Error::Protocol(format!("fence {s:?}")))?,
            ),
            _ => None,
        };
        Ok(Released::NotThere { last_fence })
    }

    /// Turns hold `from` (write, or upgradable) into hold `to` of mode `mode` (read, or
    /// upgradable from write): the new hold's fence, or `None` when `from` was gone.
    pub async fn downgrade(
        &self,
        on: On<'_>,
        owner: &str,
        from: u64,
        to: u64,
        mode: Mode,
        lease_ms: u64,
    ) -> Result<Option<u64>> {
        let args = vec![
            owner.to_string(),
            from.to_string(),
            to.to_string(),
            lease_ms.to_string(),
            mode.arg().to_string(),
        ];
        let parts = status(
            on.target.key,
            self.run(on, &self.downgrade, args).await?.value,
        )?;
        match code(&parts)? {
            1 => Ok(Some(number(parts.get(1))?)),
            _ => Ok(None),
        }
    }

    /// Turns upgradable hold `from` into write hold `to`; `wait`: leave the upgrade
    /// pending when readers still hold.
    pub async fn upgrade(
        &self,
        on: On<'_>,
        owner: &str,
        from: u64,
        to: u64,
        lease_ms: u64,
        wait: bool,
    ) -> Result<Attempt> {
        on.counters.attempts.fetch_add(1, Ordering::Relaxed);
        let args = vec![
            owner.to_string(),
            from.to_string(),
            to.to_string(),
            lease_ms.to_string(),
            if wait { "1" } else { "0" }.to_string(),
        ];
        let ran = self.run(on, &self.upgrade, args).await?;
        granted_only_if_confirmed(on.target.key, ran, "upgrade", (2, Attempt::Gone))
    }

    /// Renews the named holds of each owner (and no other hold: see `lua/renew.lua`);
    /// for each owner, the ids of those it still has.
    pub async fn renew(
        &self,
        on: On<'_>,
        lease_ms: u64,
        owners: &[(&str, &[u64])],
    ) -> Result<Vec<Vec<u64>>> {
        let mut args = vec![lease_ms.to_string()];
        args.extend(owners.iter().map(|(o, ids)| renew_arg(o, ids)));
        let ran = self.run(on, &self.renew, args).await?;
        parse_renew(on.target.key, ran.confirmed(on.target.key)?)
    }

    /// Leaves the writer queue and gives back hold `hold` if it was handed over.
    pub async fn withdraw(
        &self,
        on: On<'_>,
        owner: &str,
        hold: u64,
        upgrading_from: Option<u64>,
    ) -> Result<()> {
        let mut args = vec![owner.to_string(), hold.to_string()];
        args.extend(upgrading_from.map(|from| from.to_string()));
        status(
            on.target.key,
            self.run(on, &self.withdraw, args).await?.value,
        )?;
        Ok(())
    }

    /// Removes every hold (or `only`'s), tells the waiters, raises the fence: the holds
    /// removed and the fence.
    pub async fn force_release(
        &self,
        on: On<'_>,
        only: Option<&str>,
    ) -> Result<(u64, Option<u64>)> {
        let args = vec![only.unwrap_or_default().to_string()];
        let parts = status(
            on.target.key,
            self.run(on, &self.force_release, args).await?.value,
        )?;
        if code(&parts)? != 1 {
            return Err(Error::Protocol(format!(
                "force_release: code {:?}",
                parts.first()
            )));
        }
        let removed = parts
            .get(1)
            .map(int)
            .transpose()?
            .and_then(|n| u64::try_from(n).ok())
            .ok_or_else(|| Error::Protocol("force_release: no count".into()))?;
        let fence = match parts.get(2).map(text).transpose()? {
            Some(s) if !s.is_empty() => Some(
                s.parse()
                    .map_err(|_| Error::Protocol(format!("fence {s:?}")))?,
            ),
            _ => None,
        };
        Ok((removed, fence))
    }

    /// The fence, the holders and the queued writers.
    pub async fn state(&self, on: On<'_>) -> Result<RawState> {
        let parts = status(
            on.target.key,
            self.run(on, &self.state, Vec::new()).await?.value,
        )?;
        if code(&parts)? != 1 {
            return Err(Error::Protocol(format!("state: code {:?}", parts.first())));
        }
        let fence = match parts.get(1).map(text).transpose()? {
            Some(s) if !s.is_empty() => Some(
                s.parse()
                    .map_err(|_| Error::Protocol(format!("fence {s:?}")))?,
            ),
            _ => None,
        };
        let (Some(Value::Array(held)), Some(Value::Array(queued))) = (parts.get(2), parts.get(3))
        else {
            return Err(Error::Protocol("state: missing lists".into()));
        };
        let mut holders = Vec::new();
        for chunk in held.chunks(6) {
            let [o, r, w, u, left, held_for] = chunk else {
                return Err(Error::Protocol("state: short holder entry".into()));
            };
            holders.push(RawHolder {
                owner: text(o)?,
                read: count(r)?,
                write: count(w)?,
                upgradable: count(u)?,
                lease_left_ms: u64::try_from(int(left)?).unwrap_or(0),
                held_ms: u64::try_from(int(held_for)?).unwrap_or(0),
            });
        }
        let queued = queued.iter().map(text).collect::<Result<Vec<_>>>()?;
        Ok(RawState {
            fence,
            holders,
            queued,
        })
    }
}

impl Scripts {
    /// Runs `commands` (each: its words) on keys of the lock's slot (`keys`, declared so
    /// that the cluster checks them) while hold `id` of `owner` is on the server
    /// (`lua/guarded.lua`), confirmed as `on` says: each command's reply, or its error's
    /// message. [`Error::LockLost`] when the hold is gone (nothing ran);
    /// [`Error::NotReplicated`] when the commands ran on the master but too few replicas
    /// acknowledged them in time.
    pub async fn guarded(
        &self,
        on: On<'_>,
        keys: Vec<String>,
        owner: &str,
        id: u64,
        writes: bool,
        commands: &[Vec<Vec<u8>>],
    ) -> Result<Vec<std::result::Result<Value, String>>> {
        let mut args: Vec<Value> = vec![
            owner.into(),
            id.to_string().into(),
            if writes { "1" } else { "0" }.into(),
        ];
        for words in commands {
            args.push(words.len().to_string().into());
            args.extend(words.iter().map(|w| Value::Bytes(w.clone().into())));
        }
        let key = on.target.key;
        let ran = self.run_with(on, &self.guarded, keys, args).await?;
        let value = ran.confirmed(key)?;
        let parts = status(key, value)?;
        match code(&parts)? {
            1 => {}
            2 => return Err(Error::LockLost),
            -5 => {
                return Err(Error::InvalidCommand(
                    "a command writes and the hold is not a write hold".into(),
                ))
            }
            c => return Err(Error::Protocol(format!("guarded: code {c}"))),
        }
        let Some(Value::Array(replies)) = parts.get(1) else {
            return Err(Error::Protocol("guarded: no replies".into()));
        };
        replies
            .iter()
            .map(|r| match r {
                Value::Array(pair) => match (pair.first(), pair.get(1)) {
                    (Some(Value::Integer(0)), reply) => {
                        Ok(Ok(reply.cloned().unwrap_or(Value::Null)))
                    }
                    (Some(Value::Integer(1)), Some(message)) => Ok(Err(text(message)?)),
                    _ => Err(Error::Protocol("guarded: a malformed reply".into())),
                },
                _ => Err(Error::Protocol("guarded: a malformed reply".into())),
            })
            .collect()
    }
}

impl Scripts {
    /// Stores `value` at `on`'s key with `fence` unless a higher fence wrote there
    /// (`lua/fenced_set.lua`), confirmed as `on` says: whether it was written, and the
    /// fence that wrote last.
    pub async fn fenced_set(&self, on: On<'_>, fence: u64, value: &[u8]) -> Result<(bool, u64)> {
        let key = on.target.key;
        let args = vec![
            fence.to_string().into(),
            Value::Bytes(value.to_vec().into()),
        ];
        let ran = self
            .run_with(on, &self.fenced_set, Vec::new(), args)
            .await?;
        let parts = status(key, ran.value.clone())?;
        let last = match parts.get(1).map(text).transpose()? {
            Some(f) => f
                .parse()
                .map_err(|_| Error::Protocol(format!("fenced_set: fence {f:?}")))?,
            None => return Err(Error::Protocol("fenced_set: no fence".into())),
        };
        match code(&parts)? {
            // a write counts once the replicas have it
            1 => ran.confirmed(key).map(|_| (true, last)),
            0 => Ok((false, last)),
            c => Err(Error::Protocol(format!("fenced_set: code {c}"))),
        }
    }
}

/// An attempt's outcome from its reply: a grant counts only when its writes were
/// confirmed ([`Error::NotReplicated`] otherwise: what the script did stays on the
/// master, for the caller to undo); a refusal counts either way (a writer's place in the
/// queue that a replica misses costs it only its place, after a failover).
fn granted_only_if_confirmed(
    key: &str,
    ran: Ran,
    script: &str,
    other: (i64, Attempt),
) -> Result<Attempt> {
    let outcome = attempt(script, &status(key, ran.value)?, other)?;
    match (outcome, ran.unconfirmed) {
        (Attempt::Granted { .. }, Some((wanted, acked))) => Err(not_replicated(key, wanted, acked)),
        _ => Ok(outcome),
    }
}

/// One lock's renewal in a batch: key, and each owner with the ids of its holds that
/// are to be renewed.
#[derive(Clone)]
pub(crate) struct RenewItem {
    pub key: String,
    pub owners: Vec<(String, Vec<u64>)>,
}

/// renew.lua's argument for one owner: `<owner> <id> <id> ...`.
fn renew_arg(owner: &str, ids: &[u64]) -> String {
    let mut arg = owner.to_string();
    for id in ids {
        arg.push(' ');
        arg.push_str(&id.to_string());
    }
    arg
}

impl Scripts {
    /// Renews many locks of ONE node in one pipeline (one round trip); the result for each
    /// item is what [`renew`](Self::renew) returns (an error for an item the caller should
    /// renew again on its own, e.g. after NOSCRIPT on a promoted replica).
    pub async fn renew_pipeline(
        &self,
        lane: &Lane,
        counters: &Counters,
        lease_ms: u64,
        items: &[RenewItem],
        confirm: Option<Confirm>,
    ) -> Vec<Result<Vec<Vec<u64>>>> {
        let calls: Vec<Vec<Value>> = items
            .iter()
            .map(|item| {
                let mut args: Vec<Value> = vec![
                    self.renew.sha1().to_string().into(),
                    "1".into(),
                    item.key.as_str().into(),
                    lease_ms.to_string().into(),
                ];
                args.extend(
                    item.owners
                        .iter()
                        .map(|(o, ids)| Value::from(renew_arg(o, ids))),
                );
                args
            })
            .collect();
        counters.round_trips.fetch_add(1, Ordering::Relaxed);
        let batch = lane.send(false, confirm, calls).await;
        let unconfirmed = batch.unconfirmed(confirm);
        if let Some((wanted, acked)) = unconfirmed {
            crate::observe::not_replicated("(renewal)", wanted, acked);
        }
        // a call that failed (its connection lost, a redirect, NOSCRIPT) is its own error,
        // for the caller to send again on its own, routed afresh; one that ran counts
        // only if confirmed
        items
            .iter()
            .enumerate()
            .map(|(i, item)| match batch.replies.get(i) {
                Some(Ok(v)) => match unconfirmed {
                    Some((wanted, acked)) => Err(Error::NotReplicated { wanted, acked }),
                    None => parse_renew(&item.key, v.clone()),
                },
                Some(Err(e)) => Err(Error::from_client(e.clone())),
                None => Err(Error::Protocol("renew: missing reply".into())),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn script_arguments_are_the_ones_the_lua_expects() {
        assert_eq!(
            [Mode::Read, Mode::Write, Mode::Upgradable].map(Mode::arg),
            ["r", "w", "u"]
        );
        assert_eq!(
            [Intent::Try, Intent::Wait, Intent::Again].map(Intent::arg),
            ["0", "1", "2"]
        );
    }

    #[test]
    fn a_renewal_names_the_owner_and_its_holds() {
        assert_eq!(renew_arg("o1", &[7, 12]), "o1 7 12");
        assert_eq!(renew_arg("o1", &[]), "o1");
    }

    #[test]
    fn the_fast_paths_patterns_are_of_the_layout_version() {
        let layout = include_str!("../lua/layout.lua");
        let version = layout
            .lines()
            .find_map(|l| l.strip_prefix("local LAYOUT = '"))
            .and_then(|v| v.strip_suffix('\''))
            .expect("LAYOUT");
        for name in ["TOMBSTONE", "ONE_OWNER"] {
            let line = layout
                .lines()
                .find(|l| l.starts_with(&format!("local {name} = ")))
                .expect(name);
            assert!(
                line.contains(&format!("'^{version} ")),
                "{name} is not of layout {version}: {line}"
            );
        }
        // the module docs describe the same version
        assert!(include_str!("mod.rs").contains(&format!("# Hash layout (version {version})")));
    }

    #[test]
    fn every_script_starts_with_the_owner_line_and_the_shared_head() {
        for (text, owner_arg) in [
            (lua!(fast: "fast_acquire.lua", "acquire.lua", 2), "2"),
            (lua!(fast: "fast_release.lua", "release.lua", 1), "1"),
            (lua!("renew.lua", 0), "0"),
        ] {
            assert!(text.starts_with(&format!("local OWNER_ARG = {owner_arg}\n")));
            assert!(text.contains("local function finish()"));
            // the scripts name the release channel as the subscribers do
            assert_eq!(crate::keys::channel("k"), "k:released");
            assert!(text.contains("key .. ':released'"));
            assert!(text.contains("KEYS[1]"));
        }
    }
}
