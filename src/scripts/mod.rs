//! The lock's algorithm: one Redis Functions library over one hash per lock (`src/lua/`,
//! loaded once per server with `FUNCTION LOAD`), and its raw calls (one method per
//! function, its arguments and its typed reply) and transport (`FCALL` through a
//! connection's lane, a library the server lacks loaded again, confirmation).
//!
//! The functions, the hash layout, the rules and the release messages are written down
//! in `docs/PROTOCOL.md`; each function's header in `src/lua/` gives its `KEYS`, `ARGV`
//! and replies.

use fred::prelude::*;

#[cfg(test)]
use crate::mode::Mode;

mod calls;
mod library;
#[cfg(all(test, feature = "cluster-tests"))]
mod live_tests;
mod reply;
mod transport;

pub(crate) use crate::cluster::lane::{Confirm, Gather, Lane};
pub(crate) use calls::{RenewItem, Renewed};
pub use library::Setup;
pub(crate) use library::{Library, CLAIM_WINDOW, LIBRARY, REVISION};
pub(crate) use reply::{RawHolder, RawState};
pub(crate) use transport::{Counters, On, Target};

/// The lock's functions as a client calls them: the library they are in (loaded again
/// where a server lacks it) and each function's name (a value shared by every call).
pub(crate) struct Scripts {
    library: &'static Library,
    acquire: Value,
    release: Value,
    downgrade: Value,
    upgrade: Value,
    renew: Value,
    withdraw: Value,
    state: Value,
    force_release: Value,
    guarded: Value,
    fenced_set: Value,
}

/// The reply of one acquire attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AttemptReply {
    Granted {
        fence: u64,
        /// Who else was at the lock right after the grant (a hint: the fast paths of
        /// this hold's release and of the next attempt are skipped when anyone was).
        others: Others,
        /// How much lease the grant gave, and from when it counts.
        lease: Counted,
        /// The replicas did not confirm the grant, and the other masters vouched that
        /// none could replace the master before this (see `cluster::vouch`): the grant
        /// is believed no longer, less the clock margin. `None`: confirmed.
        replaceable_after: Option<tokio::time::Instant>,
    },
    Busy {
        wait_ms: u64,
    },
    UpgradeDeadlock,
    /// The hold an upgrade starts from is gone (its lease ran out).
    Gone,
}

/// Who else was at a lock right after a grant, as the grant said: a hint, not a promise
/// (`lua/acquire.lua`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Others {
    /// Nobody else held or waited.
    #[default]
    Nobody,
    /// Another owner held, or someone waited.
    Present,
    /// Someone waited, and the queue's head was this ticket: the hold's release reads
    /// that ticket's field in its first read (one server command less when the head is
    /// still there).
    Queued(u32),
}

impl Others {
    /// Anyone else held or waited.
    pub fn any(self) -> bool {
        self != Others::Nobody
    }
}

/// How much lease a grant gave, and from when its client counts it (rule 4 of
/// docs/PROTOCOL.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Counted {
    /// A whole lease from the call's send.
    Whole,
    /// This many ms from the call's send, less than a whole lease (a hold handed over
    /// while queued keeps the deadline its place had: see `lua/acquire.lua`).
    Left(u64),
    /// A whole lease from the send of the caller's first attempt under the hold id: a
    /// hold handed over, taken without the server's clock ([`Intent::Take`]).
    FromFirstAttempt,
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

/// A guarded call, encoded (`lua/guarded.lua`): the words after the call's header.
pub(crate) struct GuardedCall<'a> {
    /// A command of either branch writes: the hold must be a write hold.
    pub writes: bool,
    /// How many conditions lead `words`.
    pub conditions: u32,
    /// How many commands the then-branch has (the rest are the else-branch's).
    pub then: u32,
    /// The keys the conditions and commands name, declared for the cluster's checks.
    pub keys: &'a [Vec<u8>],
    /// The conditions, then the commands, each led by its count (and a command by its
    /// check), as the function's header gives them.
    pub words: &'a [Vec<u8>],
}

/// What a guarded call did.
#[derive(Debug)]
pub(crate) enum GuardedReply {
    /// The hold was there: whether every condition held (the then-branch ran), the first
    /// that did not (from 1; 0 when all held), and each command's reply or error, the
    /// last an error when a command failed and what ran before it could not be put back
    /// (it stays; none after it ran).
    Ran {
        held: bool,
        failed: u32,
        replies: Vec<std::result::Result<Value, String>>,
    },
    /// A condition (`if`) or a command (`then`, `else`, from 1 in its branch) failed
    /// and nothing the call did stays written: found before any command ran, or
    /// (`undone`) the commands before it ran and were undone.
    Refused {
        branch: String,
        index: u32,
        message: String,
        undone: bool,
    },
}

/// Whose holds a forced release removes.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Breaking<'a> {
    /// Every holder's.
    Everyone,
    /// One owner token's.
    Owner(&'a str),
    /// Every owner token a client of this name made, and their places in the queue.
    Client(&'a str),
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
    /// As `Wait`, from a caller whose last attempt found the lock busy: the function skips
    /// its fast path (for a free lock), whose read would be wasted (one call less per
    /// attempt of a waiter).
    WaitBusy,
    /// As `WaitBusy`, from a waiter that expects to find the lock busy (no release
    /// message concerned it since its last refusal; or a writer's first attempt on a
    /// slot found busy or shared lately): sent without confirmation, so that a refusal
    /// costs no `WAIT`; a grant it wins is not believed until the same attempt, sent
    /// again as `WaitBusy`, is confirmed (see `acquire`).
    Probe,
    /// As `WaitBusy`, from a writer a release message said the lock was handed to, whose
    /// first attempt under its hold id was sent lately: a hold handed over is taken
    /// without the server's clock (one server command less), its lease counted from that
    /// first attempt ([`Counted::FromFirstAttempt`]).
    Take,
}

impl Intent {
    fn arg(self) -> &'static str {
        match self {
            Intent::Try => "0",
            Intent::Wait => "1",
            Intent::Again => "2",
            Intent::WaitBusy | Intent::Probe | Intent::Take => "3",
        }
    }

    /// The acquire's sixth argument: how the caller counts the lease of a hold handed
    /// over that this attempt takes (`lua/acquire.lua`).
    fn counts(self) -> &'static str {
        match self {
            Intent::Take => "2",
            _ => "1",
        }
    }
}

impl Scripts {
    /// The functions of the library this client loads.
    pub fn new() -> Scripts {
        Scripts::of(&LIBRARY)
    }

    fn of(library: &'static Library) -> Scripts {
        let name = |f: &str| Value::from(format!("{}{f}", library.prefix));
        Scripts {
            library,
            acquire: name("acquire"),
            release: name("release"),
            downgrade: name("downgrade"),
            upgrade: name("upgrade"),
            renew: name("renew"),
            withdraw: name("withdraw"),
            state: name("state"),
            force_release: name("force_release"),
            guarded: name("guarded"),
            fenced_set: name("fenced_set"),
        }
    }

    /// The same functions without their fast paths: the general path alone (a library of
    /// its own), for the test that both paths leave the same hash.
    #[cfg(all(test, feature = "cluster-tests"))]
    fn general_only() -> Scripts {
        Scripts::of(&library::GENERAL_ONLY)
    }

    /// Makes sure the node behind `client` (`addr`, for errors) serves this client's
    /// library, or a newer revision of it: loads it there otherwise (see
    /// [`Library::ensure`]).
    pub async fn load_all(&self, client: &Client, addr: &str) -> crate::error::Result<Setup> {
        self.library.ensure(client, addr).await
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
            [
                Intent::Try,
                Intent::Wait,
                Intent::Again,
                Intent::WaitBusy,
                Intent::Probe,
                Intent::Take
            ]
            .map(Intent::arg),
            ["0", "1", "2", "3", "3", "3"]
        );
        assert_eq!(
            [Intent::WaitBusy, Intent::Probe, Intent::Take].map(Intent::counts),
            ["1", "1", "2"]
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
        for name in ["TOMBSTONE", "LONE"] {
            let line = layout
                .lines()
                .find(|l| l.starts_with(&format!("local {name} = ")))
                .expect(name);
            assert!(
                line.contains(&format!("'^{version} ")),
                "{name} does not begin with the layout version {version}: {line}"
            );
        }
        // the protocol's document describes the same version
        assert!(include_str!("../../docs/PROTOCOL.md")
            .contains(&format!("## Hash layout (version {version})")));
    }

    #[test]
    fn every_function_is_registered_under_the_name_the_client_calls() {
        let text = LIBRARY.text;
        let s = Scripts::new();
        for name in [
            &s.acquire,
            &s.release,
            &s.downgrade,
            &s.upgrade,
            &s.renew,
            &s.withdraw,
            &s.state,
            &s.force_release,
            &s.guarded,
            &s.fenced_set,
        ] {
            let name = name.as_str().expect("a name");
            let bare = name.strip_prefix(LIBRARY.prefix).expect("the prefix");
            assert!(
                text.contains(&format!(
                    "redis.register_function(PREFIX .. '{bare}', {bare})"
                )),
                "{name} is not registered"
            );
            assert!(text.contains(&format!("local function {bare}(KEYS, ARGV)")));
        }
        // the functions name the release channel as the subscribers do
        assert_eq!(crate::keys::channel("k"), "k:released");
        assert!(text.contains("key .. ':released'"));
    }
}
