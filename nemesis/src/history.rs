//! The history: every event of a run, as one JSON object per line.
//!
//! Times are `CLOCK_MONOTONIC` nanoseconds ([`now`]): one clock for every process on the
//! machine, so events of the workers, the resource and the nemesis can be compared.

use serde::{Deserialize, Serialize};

/// `CLOCK_MONOTONIC` in nanoseconds: the same clock in every process of this machine.
pub fn now() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec for clock_gettime to fill.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    if rc != 0 {
        return 0;
    }
    (ts.tv_sec as u64) * 1_000_000_000 + ts.tv_nsec as u64
}

/// A lock mode, as the checker sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Mode {
    /// A plain read hold.
    R,
    /// An upgradable read hold.
    U,
    /// A write hold.
    W,
}

impl Mode {
    /// Whether two holds of these modes, by different owners, may not overlap.
    pub fn conflicts(self, other: Mode) -> bool {
        !matches!(
            (self, other),
            (Mode::R, Mode::R) | (Mode::R, Mode::U) | (Mode::U, Mode::R)
        )
    }

    /// The name used in tables.
    pub fn label(self) -> &'static str {
        match self {
            Mode::R => "read",
            Mode::U => "upgradable",
            Mode::W => "write",
        }
    }
}

/// How an operation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// It returned `Ok` (a grant, a release, a conversion).
    Ok,
    /// A `try_*` that found the lock busy (`Ok(None)`).
    Busy,
    /// It returned a typed error (`error` says which).
    Fail,
    /// The caller dropped it on purpose (a `select!` or timeout around it).
    Cancelled,
}

/// One event of the history.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "ev", rename_all = "snake_case")]
pub enum Event {
    /// One call of the lock's API, from its invocation to its return.
    Op {
        /// Worker process.
        proc: u32,
        /// Task within the process.
        task: u32,
        /// The call: `write`, `read_timeout`, `try_upgradable_read`, `upgrade`, `release`, ...
        call: String,
        /// Lock name.
        name: String,
        /// The hold this call made or acted on (unique in the run), if any.
        hold: Option<u64>,
        /// The owner token of that hold.
        owner: Option<String>,
        /// The call's own time limit (`*_timeout`), in ms.
        timeout_ms: Option<u64>,
        /// Invocation time.
        start: u64,
        /// Return time.
        end: u64,
        /// How it ended.
        outcome: Outcome,
        /// The error's variant and text, for `Fail`.
        error: Option<String>,
        /// The fence of the hold it granted (acquires, upgrades, downgrades).
        fence: Option<u64>,
        /// The mode it granted.
        mode: Option<Mode>,
        /// For a grant: the node (`host:port`) the client routed the name's slot to when
        /// it returned.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        node: Option<String>,
    },
    /// A stretch of time in which a holder believed it held `name` in `mode`: from the
    /// acquire's return (or a conversion) to the earlier of the release (or conversion)
    /// being sent and `lost()` resolving.
    Segment {
        /// Worker process.
        proc: u32,
        /// The hold (unique in the run).
        hold: u64,
        /// Lock name.
        name: String,
        /// Owner token.
        owner: String,
        /// Whether the owner was given explicitly (`with_owner`): its holds are reentrant.
        explicit: bool,
        /// Mode believed.
        mode: Mode,
        /// Fence of the grant.
        fence: u64,
        /// Start of the belief.
        from: u64,
        /// End of the belief.
        to: u64,
        /// Why it ended: `release`, `lost`, `convert`, `error`, `cancelled`, `drop`, or
        /// `killed` (the worker process was killed).
        end: String,
        /// The node (`host:port`) the client routed the name's slot to when the belief
        /// began: where its grant (or conversion) came from.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        node: Option<String>,
    },
    /// One access to the fenced resource, as the resource saw it (in its order).
    Access {
        /// Lock name (the resource's record).
        name: String,
        /// The hold that wrote.
        hold: u64,
        /// Owner token.
        owner: String,
        /// Mode the holder believed it held.
        mode: Mode,
        /// Fence sent.
        fence: u64,
        /// When the resource handled it.
        at: u64,
        /// Whether the holder sent it after its belief had ended on purpose (a replayed,
        /// late write, as a paused process would send).
        late: bool,
        /// Whether the resource accepted it.
        accepted: bool,
    },
    /// A fault of the nemesis, from its start to its heal; or a worker killed while a
    /// write of it waited (`client_kill`), from its death to its replacement's start.
    Fault {
        /// Kind: `kill`, `freeze_short`, `freeze_long`, `repl_lag`, `promote_thaw`,
        /// `partition`, `isolate`, `skew`, `slot_move`, `migration_stall`, `failover`,
        /// `pause_client`, `client_kill` (the `waiter_kill` kind's deaths, or
        /// `--queued-kills`'), `not_healed`.
        kind: String,
        /// What it acted on (`node 7001`, `slot 1234 7000->7002`, ...).
        target: String,
        /// Start.
        start: u64,
        /// Healed.
        end: u64,
        /// Error of the fault's own commands, if any.
        error: Option<String>,
        /// For a `client_kill`: the pid of the worker killed (its client name, and so
        /// its owner tokens, begin with it).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pid: Option<u32>,
    },
    /// A hand-off the controller saw pending on the server (it reads each name's hash
    /// every 100 ms or so while the run lasts): a writer's place below the queue's head
    /// whose owner holds the write hold of the place's id, not taken yet.
    Handoff {
        /// Lock name.
        name: String,
        /// The owner token the lock was handed to.
        owner: String,
        /// The hold id of the handed hold.
        hold: String,
        /// When the controller read it.
        at: u64,
        /// Whether anyone else waited then (the queue's head below its tail).
        waiting: bool,
    },
    /// A guarded write under a write hold: `RPUSH` of `entry` to the name's guarded log,
    /// in one script with the check that the hold is on the server
    /// (`Grant::guarded`).
    Guarded {
        /// Worker process.
        proc: u32,
        /// The hold it was made under.
        hold: u64,
        /// Lock name.
        name: String,
        /// Fence of the hold.
        fence: u64,
        /// The entry pushed: `<proc>:<hold>:<fence>:<n>`, unique in the run.
        entry: String,
        /// When it was called.
        start: u64,
        /// When it returned.
        end: u64,
        /// `Ok` (the entry is in the log), `Fail` (with `error`).
        outcome: Outcome,
        /// Error, if any.
        error: Option<String>,
    },
    /// After the run: each name's guarded log as the server has it, oldest first.
    GuardedLog {
        /// Lock name.
        name: String,
        /// The entries.
        entries: Vec<String>,
    },
    /// A worker's client after its tasks ended and every hold was released.
    ClientEnd {
        /// Worker process.
        proc: u32,
        /// Holds still renewed by the client.
        held: u64,
        /// Release channels still subscribed.
        subscriptions: u64,
        /// Times the client asked the other masters to vouch for a master whose `WAIT`
        /// fell short (a silent replica), and the times they did.
        #[serde(default)]
        vouches_asked: u64,
        #[serde(default)]
        vouched: u64,
    },
    /// After the run: how long a fresh client took to get each name for write.
    Probe {
        /// Lock name.
        name: String,
        /// Start of the probe.
        start: u64,
        /// Seconds it took, or `None` if not granted within the probe's limit.
        took_s: Option<f64>,
        /// Error, if any.
        error: Option<String>,
    },
    /// After the run: lock keys left on the masters.
    Leftover {
        /// The key.
        key: String,
        /// `HGETALL` of it, as text.
        content: String,
        /// Whether it was still there one lease (+1 s) later.
        persisted: bool,
    },
}

/// Reads a history file (one event per line; blank lines skipped).
pub fn read(path: &std::path::Path) -> Result<Vec<Event>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|e| format!("{}:{}: {e}", path.display(), i + 1))
        })
        .collect()
}

/// Appends events to a file, one per line.
pub struct Writer {
    out: std::io::BufWriter<std::fs::File>,
}

impl Writer {
    /// Creates (truncates) `path`.
    pub fn create(path: &std::path::Path) -> std::io::Result<Writer> {
        Ok(Writer {
            out: std::io::BufWriter::new(std::fs::File::create(path)?),
        })
    }

    /// Writes one event.
    pub fn write(&mut self, ev: &Event) -> std::io::Result<()> {
        use std::io::Write;
        serde_json::to_writer(&mut self.out, ev)?;
        self.out.write_all(b"\n")
    }

    /// Flushes to the file.
    pub fn flush(&mut self) -> std::io::Result<()> {
        use std::io::Write;
        self.out.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_without_a_node_still_read() {
        // a history written before grants named their node
        let line = r#"{"ev":"segment","proc":0,"hold":1,"name":"n","owner":"o","explicit":false,"mode":"W","fence":5,"from":1,"to":2,"end":"release"}"#;
        let ev: Event = serde_json::from_str(line).unwrap();
        assert!(matches!(ev, Event::Segment { node: None, .. }));
        let out = serde_json::to_string(&ev).unwrap();
        assert!(!out.contains("node"), "no node, no field: {out}");
    }
}
