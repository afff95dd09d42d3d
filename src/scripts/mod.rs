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
//! | `x` | `<fence>` | the fence the last forced release raised (absent when none was forced while the hash lived): a release sent again finds its hold gone, and learns whether a break came after its grant |
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
//! test runs both on a live server and compares the hashes they leave and their TTLs):
//! `lua/fast_acquire.lua` (the lock is free: no hash, or a tombstone; `HGET` of the
//! summary, `TIME`, one `HSET` of the summary, the owner's entry and `w`/`u`, `PEXPIRE`)
//! and `lua/fast_release.lua` (one `HMGET` of the summary and the caller's entry; the
//! caller's one hold is the lock's only hold and nobody waits: `TIME` tells no entry
//! has expired, then `HDEL` and `HSET` of the tombstone's summary; the key's TTL is
//! kept, a minute past a deadline that has not passed, so the tombstone lives a minute
//! or more, where the general part sets a minute from now). The fast paths are skipped
//! where they would most likely fall through: an attempt of a waiter that found the lock
//! busy (intent `3`, also a waiter's first attempt in a slot the client lately found
//! busy or shared), and the release of a hold whose grant said that others held or
//! waited (`ARGV[3]` `1`; the general path's grant replies `{1, fence, others}`, the fast
//! path grants only a free lock). Anything else
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

use fred::prelude::*;
use fred::types::scripts::Script;

use crate::error::{ClientResult, Result};
#[cfg(test)]
use crate::mode::Mode;

mod calls;
#[cfg(all(test, feature = "cluster-tests"))]
mod live_tests;
mod reply;
mod transport;

pub(crate) use crate::cluster::lane::{Confirm, Gather, Lane};
pub(crate) use calls::RenewItem;
pub(crate) use reply::{RawHolder, RawState};
pub(crate) use transport::{Counters, On, Target};

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

/// Outcome of one acquire attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Attempt {
    Granted {
        fence: u64,
        /// Another owner held, or someone waited, right after the grant (a hint: the
        /// fast paths of this hold's release and of the next attempt are skipped).
        others: bool,
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
    /// The hold was not there: the last fence the lock remembers, and the fence of its
    /// last forced release.
    NotThere {
        last_fence: Option<u64>,
        broken_at: Option<u64>,
    },
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
    /// As `Wait`, from a caller whose last attempt found the lock busy: the script skips
    /// its fast path (for a free lock), whose read would be wasted (one call less per
    /// attempt of a waiter).
    WaitBusy,
}

impl Intent {
    fn arg(self) -> &'static str {
        match self {
            Intent::Try => "0",
            Intent::Wait => "1",
            Intent::Again => "2",
            Intent::WaitBusy => "3",
        }
    }
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
            [Intent::Try, Intent::Wait, Intent::Again, Intent::WaitBusy].map(Intent::arg),
            ["0", "1", "2", "3"]
        );
    }

    #[test]
    fn a_renewal_names_the_owner_and_its_holds() {
        use super::calls::renew_arg;
        assert_eq!(renew_arg("o1", &[7, 12]), "o1 7 12");
        assert_eq!(renew_arg("o1", &[]), "o1");
    }

    #[test]
    fn the_fast_paths_patterns_begin_with_the_layout_version() {
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
                "{name} does not begin with the layout version {version}: {line}"
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
