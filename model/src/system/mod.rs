//! The model: one lock on one shard (a master and its replica, fed by an asynchronous
//! replication stream), clients that follow docs/PROTOCOL.md's "What a client must do",
//! an operator who may break the lock, and the faults: a client that crashes (holding or
//! waiting), a replica that falls behind or is cut off, a failover that promotes the
//! replica with whatever it had received, release messages lost or late (a waiter may
//! attempt at any moment, and need not attempt at all), pauses (any step may wait while
//! time passes). Every function call runs the shipped library (`lua.rs`).
//!
//! Time is discrete: a tick is `TICK_MS`. Clients count by their own clock (the model's
//! time); each server reads `TIME` from the model's time plus its own fixed offset (the
//! clock difference between master and replica, within the bound the lease margin
//! covers).

use std::cell::RefCell;
use std::collections::BTreeMap;

use stateright::{Model, Property};

use crate::bugs::{library_text, Bug};
use crate::lua::Engine;
pub use crate::properties::*;
use crate::redis::{Call, Entry, Keyspace, Reply, Value};

/// One tick of the model's time (ms).
pub const TICK_MS: u64 = 500;
/// The lease every grant asks for (ms).
pub const LEASE_MS: u64 = 2000;
/// What a holder takes off its lease before it stops believing (a quarter: the client's
/// default).
pub const MARGIN_MS: u64 = LEASE_MS / 4;
/// A holder renews this long after the send of its last grant or renewal (a third of a
/// lease, in whole ticks), or later.
pub const RENEW_EVERY_MS: u64 = (LEASE_MS / 3).div_ceil(TICK_MS) * TICK_MS;
/// The cluster's node timeout in the model (ms): a master flags another failing when it
/// has not heard from it for this long.
pub const NODE_TIMEOUT_MS: u64 = 1000;
/// The least delay between a master flagged failed and its replica's promotion (ms): a
/// replica starts its election 500 ms (plus a random part) after it learns of it.
pub const ELECTION_MS: u64 = 500;
/// The servers' clocks start here (ms since the epoch, a realistic size: fences are µs).
const EPOCH_MS: u64 = 1_700_000_000_000;
/// The lock's key.
const KEY: &str = "rwlock:{m}";
/// The key guarded writes set (in the lock's slot).
const DATA: &str = "data:{m}";

mod bounds; // the bounds of a run
mod model; // the model as stateright checks it
mod server; // reading a node's keyspace by the documented layout
mod state; // clients, nodes, the state and the actions
mod steps; // what each action does

pub use bounds::*;
use server::holds_on_server;
pub use server::*;
pub use state::*;

/// The model: its bounds and the seeded bug it runs with, if any.
pub struct System {
    pub bounds: Bounds,
    pub bug: Option<Bug>,
    text: String,
    /// `text`'s hash: which text a thread's Lua state runs.
    text_id: u64,
    claim_ms: u64,
}

thread_local! {
    /// Each checker thread's Lua state (the library loaded once), with the text it runs.
    static ENGINE: RefCell<Option<(u64, Engine)>> = const { RefCell::new(None) };
    /// When set, every function call appends a line (for counterexample traces).
    static TRACE: RefCell<Option<Vec<String>>> = const { RefCell::new(None) };
}

/// The owner token of client `c` (the Rust client's shape, so that a break by client
/// name would reach it).
pub fn owner(c: u8) -> String {
    format!("c{c}/0123456789abcdef0123456789abcdef:1")
}

#[cfg(test)]
mod tests {
    use super::*;
    use stateright::Checker;

    fn run(bounds: Bounds, bug: Option<Bug>) -> Vec<&'static str> {
        let model = System::new(bounds, bug).unwrap();
        let names: Vec<&'static str> = model.properties().iter().map(|p| p.name).collect();
        let checker = model.checker().spawn_bfs().join();
        names
            .into_iter()
            .filter(|n| checker.discovery(n).is_some())
            .collect()
    }

    #[test]
    fn a_short_clean_run_breaks_nothing_and_grants() {
        let bounds = Bounds {
            ticks: 3,
            ..Bounds::scenario("failover").unwrap()
        };
        let found = run(bounds, None);
        assert!(found.contains(&SOME_GRANT), "{found:?}");
        assert!(found.contains(&SOME_FAILOVER_HOLD), "{found:?}");
        for p in [EXCLUSION, FENCE_ORDER, NO_NEEDLESS_WAIT, REPLIES_KNOWN] {
            assert!(!found.contains(&p), "{p}");
        }
    }

    #[test]
    fn believing_before_the_wait_is_caught_in_a_short_run() {
        let bounds = Bounds {
            ticks: 2,
            ..Bounds::scenario("failover").unwrap()
        };
        assert!(run(bounds, Some(Bug::BelieveBeforeWait)).contains(&EXCLUSION));
    }
}
