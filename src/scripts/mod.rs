//! The lock's algorithm: Lua scripts over one hash per lock, and their raw calls (one
//! method per script, its arguments and its typed reply) and transport (`EVALSHA`
//! through a connection's lane, `NOSCRIPT`, confirmation).
//!
//! The hash layout, the scripts' rules and the release messages are written down in
//! `docs/PROTOCOL.md`; each script's header in `src/lua/` gives its `KEYS`, `ARGV` and
//! replies.

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
        // the protocol's document describes the same version
        assert!(include_str!("../../docs/PROTOCOL.md")
            .contains(&format!("## Hash layout (version {version})")));
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
