//! The bounds of a run: which scenario, how many clients, cycles, ticks and faults.

use super::*;

/// The bounds of one check.
#[derive(Clone, Debug)]
pub struct Bounds {
    /// Each client's mode: `w` write, `r` read.
    pub modes: Vec<u8>,
    /// Holds each client takes, one after the other.
    pub cycles: u8,
    /// The model's time ends here (ticks).
    pub ticks: u8,
    /// Clients that may crash.
    pub crashes: u8,
    /// Failovers that may happen.
    pub failovers: u8,
    /// Times the master may stop listing its replica while the replica lives on (what
    /// `repl-timeout` does to a silent replica; a grant then waits for no one).
    pub drops: u8,
    /// Forced releases (an operator's break of every holder).
    pub breaks: u8,
    /// Times each client may give up waiting.
    pub give_ups: u8,
    /// The replica's clock minus the master's (ms).
    pub replica_skew_ms: i64,
    /// Holders make guarded writes.
    pub writes: bool,
    /// The cluster's failure detector is in the model: the master may be cut off from
    /// the other masters (`Isolate`), and a failover comes no earlier than the node
    /// timeout and the election delay after the majority last heard from it. A client
    /// whose `WAIT` fell short then asks the majority how soon the replica could be
    /// promoted, and believes its grant or renewal until then, less the margin (the
    /// vouch of docs/PROTOCOL.md, "A silent replica").
    pub detector: bool,
}

impl Bounds {
    /// The scenarios CI checks, each aimed at faults of one kind (together they would
    /// multiply the states; `--crashes`, `--failovers` and `--breaks` combine them in a
    /// deeper run): by name, with what it is for.
    pub fn scenarios() -> Vec<(&'static str, &'static str, Bounds)> {
        let base = Bounds {
            modes: b"ww".to_vec(),
            cycles: 1,
            ticks: 8,
            crashes: 0,
            failovers: 0,
            drops: 0,
            breaks: 0,
            give_ups: 0,
            replica_skew_ms: 250,
            writes: false,
            detector: false,
        };
        vec![
            (
                "failover",
                "two writers; the replica lags, is promoted with what it has, its clock ahead",
                Bounds {
                    failovers: 1,
                    give_ups: 1,
                    ..base.clone()
                },
            ),
            (
                "dead",
                "two writers, one taking two holds; either may crash holding or waiting",
                Bounds {
                    cycles: 2,
                    crashes: 1,
                    ticks: 6,
                    ..base.clone()
                },
            ),
            (
                "break",
                "two writers that write through guarded calls; an operator breaks the lock \
                 under a holder",
                Bounds {
                    breaks: 1,
                    writes: true,
                    ticks: 7,
                    ..base.clone()
                },
            ),
            (
                "readers",
                "a reader and a writer; a failover",
                Bounds {
                    modes: b"rw".to_vec(),
                    failovers: 1,
                    ..base.clone()
                },
            ),
            (
                "silent",
                "two writers; the replica acknowledges nothing, grants and renewals are \
                 vouched for by the majority; the master is cut off from it and its replica \
                 promoted (no earlier than the failure detector allows), its clock behind",
                Bounds {
                    failovers: 1,
                    detector: true,
                    replica_skew_ms: -250,
                    ticks: 6,
                    give_ups: 0,
                    ..base
                },
            ),
        ]
    }

    /// The limits: configurations the protocol does NOT make safe, each with the
    /// property the checker must find broken (so that docs/GUARANTEES.md's word on them
    /// is checked as well as the rest).
    pub fn limits() -> Vec<(&'static str, &'static str, Bounds, &'static str)> {
        let base = Bounds::scenarios().swap_remove(0).2;
        vec![
            (
                "skew",
                "the promoted replica's clock runs a second ahead of the master's: more than \
                 the lease margin (500 ms), so holds end there before their holders stop \
                 believing",
                Bounds {
                    replica_skew_ms: 1000,
                    give_ups: 0,
                    ticks: 6,
                    ..base.clone()
                },
                EXCLUSION,
            ),
            (
                "dropped",
                "the master stops listing a silent replica (repl-timeout), grants go on without \
             it, then it is promoted with what it had",
                Bounds {
                    drops: 1,
                    give_ups: 0,
                    ticks: 6,
                    ..base
                },
                EXCLUSION,
            ),
        ]
    }

    /// The scenario (or limit) of that name.
    pub fn scenario(name: &str) -> Option<Bounds> {
        Bounds::scenarios()
            .into_iter()
            .map(|(n, _, b)| (n, b))
            .chain(Bounds::limits().into_iter().map(|(n, _, b, _)| (n, b)))
            .find(|(n, _)| *n == name)
            .map(|(_, b)| b)
    }
}
