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
/// The servers' clocks start here (ms since the epoch, a realistic size: fences are µs).
const EPOCH_MS: u64 = 1_700_000_000_000;
/// The lock's key.
const KEY: &str = "rwlock:{m}";
/// The key guarded writes set (in the lock's slot).
const DATA: &str = "data:{m}";

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

/// Where a client is in its protocol.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Holds nothing, waits for nothing.
    Idle,
    /// Its last attempt was refused; it has a place in the queue (or had).
    Waiting,
    /// Granted by `on`; its `WAIT` is out, and needs the replica to apply the first
    /// `needs` writes of the stream.
    Confirming {
        on: u8,
        needs: u8,
        fence: u64,
        until: u64,
    },
    /// Believes its hold until `until` (its clock, ms) while the time is below it.
    Holding { fence: u64, until: u64 },
    /// Renewed by `on`; its `WAIT` is out; it believes until `until` meanwhile.
    Renewing {
        on: u8,
        needs: u8,
        fence: u64,
        until: u64,
        renewed_until: u64,
    },
    /// Took its holds and gave them back.
    Done,
    /// Crashed: never acts again.
    Dead,
}

/// A client.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Client {
    pub mode: u8,
    pub phase: Phase,
    /// The hold id of the current (or last) attempt.
    pub id: u32,
    /// When it sent its first attempt under `id` (its clock, ms).
    pub first_sent: u64,
    pub cycles: u8,
    pub give_ups: u8,
    /// A forced release took its hold; it cannot know until its next renewal (a break
    /// is an operator's decision: fences, not exclusion, protect from such a holder).
    pub excused: bool,
    // What the checker knows and the client does not (server clocks, ms):
    /// Set when it crashes: the latest deadline (master's clock, at most) that a grant
    /// or renewal of its may have given a hold on the server.
    pub hold_deadline: Option<u64>,
    /// When a release last handed it the lock (from the channel).
    pub handed_at: Option<u64>,
    /// When its last attempt ran (a reader's only: its place lives a lease from it).
    pub attempted_at: Option<u64>,
    /// The tick of its last attempt or renewal: a client calls at most once a tick (a
    /// waiter's next attempt needs a message or its retry interval; a holder renews every
    /// third of a lease), which keeps the model finite.
    pub acted: Option<u8>,
}

/// A server node.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Node {
    pub keys: Keyspace,
    pub up: bool,
}

/// The system's state.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    pub ticks: u8,
    pub nodes: [Node; 2],
    pub master: u8,
    /// The master's replica (none once it was promoted).
    pub replica: Option<u8>,
    /// Whether the master lists it (`INFO replication`): a WAIT waits for it.
    pub listed: bool,
    pub drops: u8,
    /// What the master wrote that the replica has not applied, oldest first: the
    /// keyspace after each write (a function is replicated as its effects, in one step).
    pub stream: Vec<Keyspace>,
    pub clients: Vec<Client>,
    pub crashes: u8,
    pub failovers: u8,
    pub breaks: u8,
    /// How many writes of the stream the replica must still apply to have the last
    /// break (a break is not confirmed, as a release is not: a failover before the
    /// replica has it undoes it, and its holders hold again).
    pub break_needs: Option<u8>,
    /// The highest fence any client believed.
    pub believed_fence: u64,
    /// Set when a grant's fence was not above a believed one.
    pub fence_regressed: bool,
    /// Set when a live client was refused past every dead client's bound.
    pub starved: bool,
    /// Set when a reply was not one the protocol documents.
    pub odd_reply: bool,
    /// Set when a guarded write landed without a hold the server had, from a holder an
    /// operator broke, or while another client believed a conflicting hold.
    pub guarded_astray: bool,
    pub guarded_landed: bool,
    pub handoffs_taken: u8,
    pub granted_past_dead: bool,
    /// A waiter of a broken client heard its client's name and stopped.
    pub broken_waiter_stopped: bool,
}

/// A step.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// The model's time moves on one tick.
    Tick,
    /// Client `c` attempts (its first attempt, or a waiter's next one: woken by a
    /// message or its retry interval, whichever the schedule says).
    Attempt(u8),
    /// Client `c`'s `WAIT` is answered with every acknowledgement.
    WaitAcked(u8),
    /// Client `c`'s `WAIT` falls short (times out, or its connection is gone).
    WaitShort(u8),
    Renew(u8),
    /// Client `c` sets the data key through a guarded call under its hold (also after
    /// its belief ended: a holder paused past its lease writes as it wakes, before it
    /// looks at the time; the server must refuse it).
    GuardedWrite(u8),
    Release(u8),
    /// A waiter gives up and withdraws.
    GiveUp(u8),
    Crash(u8),
    /// The master fails and its replica is promoted with what it had received: the
    /// first `n` writes of the stream (any prefix, from none to all).
    Failover(u8),
    /// An operator breaks the lock: `force_release` of every owner (`None`), or of one
    /// client's every owner token (`Some(c)`, the `c` mode: its holds and its places).
    Break(Option<u8>),
    /// The master stops listing its replica (its link timed out), which lives on with
    /// what it had received and may still be promoted.
    DropReplica,
}

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

impl System {
    pub fn new(bounds: Bounds, bug: Option<Bug>) -> Result<System, String> {
        let text = library_text(bug)?;
        Engine::load(&text)?;
        // the documented window (the shipped text's), whatever a seeded bug made of it
        let claim_ms = cluster_rwlock::operator::library::TEXT
            .split("\nlocal CLAIM_MS = ")
            .nth(1)
            .and_then(|rest| rest.split('\n').next())
            .and_then(|n| n.trim().parse().ok())
            .ok_or("the library's CLAIM_MS is not found")?;
        let text_id = {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            text.hash(&mut h);
            h.finish()
        };
        Ok(System {
            bounds,
            bug,
            text,
            text_id,
            claim_ms,
        })
    }

    /// Runs `f` with the trace on, and returns what it logged.
    pub fn traced<R>(f: impl FnOnce() -> R) -> (R, Vec<String>) {
        TRACE.with(|t| *t.borrow_mut() = Some(Vec::new()));
        let r = f();
        let lines = TRACE.with(|t| t.borrow_mut().take()).unwrap_or_default();
        (r, lines)
    }

    fn clock(&self, s: &State, node: u8) -> u64 {
        let skew = if node == 0 {
            0
        } else {
            self.bounds.replica_skew_ms
        };
        (EPOCH_MS as i64 + s.ticks as i64 * TICK_MS as i64 + skew) as u64
    }

    /// Runs function `name` on the master, then replicates what it wrote and records
    /// the hand-offs its messages name. Returns the reply, the master's clock, and the
    /// messages published.
    fn call(&self, s: &mut State, name: &str, args: &[&str]) -> (Reply, u64, Vec<String>) {
        self.call_keys(s, name, &[KEY], args)
    }

    /// As `call`, with the keys given.
    fn call_keys(
        &self,
        s: &mut State,
        name: &str,
        keys: &[&str],
        args: &[&str],
    ) -> (Reply, u64, Vec<String>) {
        let node = s.master as usize;
        let now = self.clock(s, s.master);
        let mut call = Call {
            keys: std::mem::take(&mut s.nodes[node].keys),
            now_ms: now,
            wrote: false,
            published: vec![],
        };
        let full = format!("rwlock4_{name}");
        let reply = ENGINE.with(|cell| {
            let mut cell = cell.borrow_mut();
            if cell.as_ref().is_none_or(|(id, _)| *id != self.text_id) {
                let engine = Engine::load(&self.text).expect("loaded once in System::new");
                *cell = Some((self.text_id, engine));
            }
            let (_, engine) = cell.as_ref().expect("set above");
            engine.fcall(&mut call, &full, keys, args)
        });
        s.nodes[node].keys = call.keys;
        if call.wrote && s.replica.is_some() {
            // what the replica would be promoted with matters only while a failover may
            // still come: after that, a write's place in the stream is all a WAIT needs
            let copy = if s.failovers < self.bounds.failovers {
                s.nodes[node].keys.clone()
            } else {
                Keyspace::new()
            };
            s.stream.push(copy);
        }
        let messages: Vec<String> = call.published.into_iter().map(|(_, m)| m).collect();
        TRACE.with(|t| {
            if let Some(lines) = t.borrow_mut().as_mut() {
                lines.push(format!(
                    "    {full}({}) on node {node} at {} -> {reply}{}",
                    args.join(", "),
                    now - EPOCH_MS,
                    if messages.is_empty() {
                        String::new()
                    } else {
                        format!(", published {messages:?}")
                    }
                ));
            }
        });
        // a hand-off said on the channel is heard by the model however the call came
        Self::heard(s, &messages, now);
        (reply, now, messages)
    }

    fn now_ms(s: &State) -> u64 {
        s.ticks as u64 * TICK_MS
    }

    fn believes(s: &State, c: &Client) -> bool {
        let now = Self::now_ms(s);
        match c.phase {
            Phase::Holding { until, .. } | Phase::Renewing { until, .. } => now < until,
            _ => false,
        }
    }

    /// The messages of a call: a hand-off names its writer.
    fn heard(s: &mut State, messages: &[String], at: u64) {
        for m in messages {
            let mut words = m.split(' ');
            if words.next() == Some("g") {
                if let Some(o) = words.next() {
                    for (i, c) in s.clients.iter_mut().enumerate() {
                        if owner(i as u8) == o {
                            c.handed_at = Some(at);
                        }
                    }
                }
            }
        }
    }

    /// A refusal of live client `c` at server time `at`: fine while another client holds,
    /// is granted, or waits (it may be ahead in the queue), or while what another left
    /// may still stand: a dead client's hold (a lease from its last grant or renewal),
    /// a hand-off to it (the claim window), a dead reader's place (its lease and a
    /// window); an idle or finished client's last call (a grant it gave up on a master
    /// that then failed may live on the promoted one for a lease). Anything else is a
    /// free lock refusing a live waiter.
    fn refusal_is_justified(&self, s: &State, c: u8, at: u64) -> bool {
        // the bounds are exact on one clock (a call at the deadline itself may still
        // find it: 1 ms); after a failover, the new master's clock differs by the skew
        let skew = if s.failovers > 0 {
            self.bounds.replica_skew_ms.unsigned_abs()
        } else {
            0
        };
        let slack = 1 + skew;
        let ahead = self.bounds.replica_skew_ms.max(0) as u64;
        for (i, d) in s.clients.iter().enumerate() {
            if i as u8 == c {
                continue;
            }
            let until = match d.phase {
                Phase::Waiting
                | Phase::Confirming { .. }
                | Phase::Holding { .. }
                | Phase::Renewing { .. } => return true,
                Phase::Dead => [
                    d.hold_deadline,
                    d.handed_at.map(|h| h + self.claim_ms),
                    if d.mode == b'r' {
                        d.attempted_at.map(|a| a + LEASE_MS + self.claim_ms)
                    } else {
                        None
                    },
                ]
                .into_iter()
                .flatten()
                .max(),
                Phase::Idle | Phase::Done => [
                    d.acted
                        .map(|t| EPOCH_MS + t as u64 * TICK_MS + LEASE_MS + ahead),
                    d.handed_at.map(|h| h + self.claim_ms),
                ]
                .into_iter()
                .flatten()
                .max(),
            };
            if until.is_some_and(|u| at < u + slack) {
                return true;
            }
        }
        false
    }

    /// An attempt's reply: granted (confirm next), refused (wait), or odd.
    fn attempted(&self, s: &mut State, c: u8, reply: &Reply, at: u64) {
        let now = Self::now_ms(s);
        let code = reply.at(0).and_then(Reply::int);
        let client = &s.clients[c as usize];
        let handed = client.handed_at.is_some();
        let first_sent = client.first_sent;
        match code {
            Some(1) => {
                let Some(fence) = reply
                    .at(1)
                    .and_then(Reply::text)
                    .and_then(|f| f.parse().ok())
                else {
                    s.odd_reply = true;
                    return;
                };
                // '-': the lease counts from the first attempt under this id (rule 4)
                let until = match reply.at(3) {
                    Some(Reply::Bulk(dash)) if dash == "-" => first_sent + LEASE_MS - MARGIN_MS,
                    None => now + LEASE_MS - MARGIN_MS,
                    Some(_) => {
                        s.odd_reply = true;
                        return;
                    }
                };
                if fence <= s.believed_fence {
                    s.fence_regressed = true;
                }
                if handed {
                    s.handoffs_taken = s.handoffs_taken.saturating_add(1);
                }
                if s.clients
                    .iter()
                    .any(|d| d.phase == Phase::Dead && d.handed_at.is_some())
                {
                    s.granted_past_dead = true;
                }
                let needs = s.stream.len() as u8;
                let on = s.master;
                let cl = &mut s.clients[c as usize];
                cl.handed_at = None;
                cl.excused = false;
                if Bug::client_skips_wait(self.bug) {
                    cl.phase = Phase::Holding { fence, until };
                    s.believed_fence = s.believed_fence.max(fence);
                } else {
                    cl.phase = Phase::Confirming {
                        on,
                        needs,
                        fence,
                        until,
                    };
                }
            }
            Some(0) => {
                s.clients[c as usize].phase = Phase::Waiting;
                if !self.refusal_is_justified(s, c, at) {
                    s.starved = true;
                }
            }
            _ => s.odd_reply = true,
        }
    }

    /// The client gives back whatever its attempt may have been granted and ends this
    /// hold's cycle.
    fn withdraw(&self, s: &mut State, c: u8) {
        let id = s.clients[c as usize].id.to_string();
        let (reply, _, _) = self.call(s, "withdraw", &[&owner(c), &id]);
        if reply != Reply::Array(vec![Reply::Int(1)]) {
            s.odd_reply = true;
        }
        self.end_cycle(s, c);
    }

    fn end_cycle(&self, s: &mut State, c: u8) {
        let cycles = self.bounds.cycles;
        let cl = &mut s.clients[c as usize];
        cl.cycles += 1;
        cl.excused = false;
        cl.handed_at = None;
        cl.phase = if cl.cycles >= cycles {
            Phase::Done
        } else {
            Phase::Idle
        };
    }

    /// The replica applies the `n` oldest writes of the stream.
    fn replicate(s: &mut State, n: usize) {
        let Some(r) = s.replica else { return };
        if n == 0 {
            return;
        }
        let n = n.min(s.stream.len());
        let applied: Vec<Keyspace> = s.stream.drain(..n).collect();
        if let Some(last) = applied.into_iter().last() {
            s.nodes[r as usize].keys = last;
        }
        for c in &mut s.clients {
            if let Phase::Confirming { needs, .. } | Phase::Renewing { needs, .. } = &mut c.phase {
                *needs = needs.saturating_sub(n as u8);
            }
        }
        s.break_needs = s
            .break_needs
            .map(|b| b.saturating_sub(n as u8))
            .filter(|b| *b > 0);
    }

    /// Whether a WAIT on node `on` can be answered with every acknowledgement: its
    /// master is still up (with no replica, there is none to wait for; with one, the
    /// model applies the stream when a WAIT needs it, or when a failover picks how much
    /// the replica had).
    fn can_ack(s: &State, on: u8) -> bool {
        on == s.master && s.nodes[on as usize].up
    }

    /// Whether a WAIT must wait for the replica (else it answers at once: the master
    /// lists none).
    fn waits_for_replica(s: &State) -> bool {
        s.replica.is_some() && s.listed
    }
}

impl Model for System {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        let node = Node {
            keys: BTreeMap::new(),
            up: true,
        };
        vec![State {
            ticks: 0,
            nodes: [node.clone(), node],
            master: 0,
            replica: Some(1),
            listed: true,
            drops: 0,
            stream: vec![],
            clients: self
                .bounds
                .modes
                .iter()
                .map(|&mode| Client {
                    mode,
                    phase: Phase::Idle,
                    id: 0,
                    first_sent: 0,
                    cycles: 0,
                    give_ups: 0,
                    excused: false,
                    hold_deadline: None,
                    handed_at: None,
                    attempted_at: None,
                    acted: None,
                })
                .collect(),
            crashes: 0,
            failovers: 0,
            breaks: 0,
            break_needs: None,
            believed_fence: 0,
            fence_regressed: false,
            starved: false,
            odd_reply: false,
            guarded_astray: false,
            guarded_landed: false,
            handoffs_taken: 0,
            granted_past_dead: false,
            broken_waiter_stopped: false,
        }]
    }

    fn actions(&self, s: &State, actions: &mut Vec<Action>) {
        let live = s
            .clients
            .iter()
            .any(|c| !matches!(c.phase, Phase::Done | Phase::Dead));
        if !live {
            return;
        }
        if s.ticks < self.bounds.ticks {
            actions.push(Action::Tick);
        }
        if s.drops < self.bounds.drops && s.listed && s.replica.is_some() {
            actions.push(Action::DropReplica);
        }
        if s.failovers < self.bounds.failovers && s.replica.is_some() {
            for n in 0..=s.stream.len() {
                actions.push(Action::Failover(n as u8));
            }
        }
        let holding = s.clients.iter().any(|c| {
            matches!(
                c.phase,
                Phase::Confirming { .. } | Phase::Holding { .. } | Phase::Renewing { .. }
            )
        });
        if holding && s.breaks < self.bounds.breaks {
            actions.push(Action::Break(None));
            actions.push(Action::Break(Some(0)));
        }
        let now = Self::now_ms(s);
        for (i, c) in s.clients.iter().enumerate() {
            let i = i as u8;
            let fresh = c.acted != Some(s.ticks);
            match &c.phase {
                Phase::Idle => actions.push(Action::Attempt(i)),
                Phase::Waiting => {
                    if fresh {
                        actions.push(Action::Attempt(i));
                    }
                    if c.give_ups < self.bounds.give_ups {
                        actions.push(Action::GiveUp(i));
                    }
                }
                Phase::Confirming { on, needs, .. } | Phase::Renewing { on, needs, .. } => {
                    if Self::can_ack(s, *on) {
                        actions.push(Action::WaitAcked(i));
                    }
                    if !Self::can_ack(s, *on) || (*needs > 0 && Self::waits_for_replica(s)) {
                        actions.push(Action::WaitShort(i));
                    }
                }
                Phase::Holding { until, .. } => {
                    // every third of a lease after the send it counts from, or later (a
                    // paused holder), while it believes
                    let sent = until + MARGIN_MS - LEASE_MS;
                    if now < *until && now >= sent + RENEW_EVERY_MS && fresh {
                        actions.push(Action::Renew(i));
                    }
                    if self.bounds.writes && fresh {
                        actions.push(Action::GuardedWrite(i));
                    }
                    actions.push(Action::Release(i));
                }
                Phase::Done | Phase::Dead => continue,
            }
            // a crash that matters: with a place, a grant or a hold
            let stake = matches!(
                c.phase,
                Phase::Waiting | Phase::Confirming { .. } | Phase::Holding { .. }
            );
            if stake && s.crashes < self.bounds.crashes {
                actions.push(Action::Crash(i));
            }
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut s = last.clone();
        match action {
            Action::Tick => s.ticks += 1,
            Action::Failover(n) => {
                let r = s.replica?;
                Self::replicate(&mut s, n as usize);
                if s.break_needs.take().is_some() {
                    // the promoted replica never had the break: its holds are held again
                    for c in &mut s.clients {
                        c.excused = false;
                    }
                }
                s.nodes[s.master as usize].up = false;
                s.master = r;
                s.replica = None;
                s.stream.clear();
                s.failovers += 1;
            }
            Action::DropReplica => {
                s.drops += 1;
                s.listed = false;
            }
            Action::Break(whom) => {
                s.breaks += 1;
                let name = whom.map(|c| owner(c).split('/').next().unwrap_or("").to_string());
                let (reply, _, messages) = match &name {
                    None => self.call(&mut s, "force_release", &[""]),
                    Some(n) => self.call(&mut s, "force_release", &[n, "c"]),
                };
                if reply.at(0).and_then(Reply::int) != Some(1) {
                    s.odd_reply = true;
                }
                if s.replica.is_some() && !s.stream.is_empty() {
                    s.break_needs = Some(s.stream.len() as u8);
                }
                for (i, c) in s.clients.iter_mut().enumerate() {
                    let hit = whom.is_none_or(|w| w as usize == i);
                    if hit
                        && matches!(
                            c.phase,
                            Phase::Holding { .. }
                                | Phase::Renewing { .. }
                                | Phase::Confirming { .. }
                        )
                    {
                        c.excused = true;
                    }
                }
                // a waiter of the broken client hears its name on the channel and stops
                // (the Rust client: Error::Broken) rather than queue again at the tail
                if let Some(c) = whom {
                    let said = messages
                        .iter()
                        .any(|m| m.starts_with("x ") && m.rsplit(' ').next() == name.as_deref());
                    if s.clients[c as usize].phase == Phase::Waiting && said {
                        s.broken_waiter_stopped = true;
                        self.end_cycle(&mut s, c);
                    }
                }
            }
            Action::Attempt(c) => {
                let now = Self::now_ms(&s);
                let cl = &mut s.clients[c as usize];
                let intent = if cl.phase == Phase::Idle {
                    cl.id += 1;
                    cl.first_sent = now;
                    "1"
                } else {
                    "3"
                };
                let mode = (cl.mode as char).to_string();
                let id = cl.id.to_string();
                let lease = LEASE_MS.to_string();
                let (reply, at, _) = self.call(
                    &mut s,
                    "acquire",
                    &[&mode, &owner(c), &id, &lease, intent, "2"],
                );
                if s.clients[c as usize].mode == b'r' {
                    s.clients[c as usize].attempted_at = Some(at);
                }
                s.clients[c as usize].acted = Some(s.ticks);
                self.attempted(&mut s, c, &reply, at);
            }
            Action::WaitAcked(c) => {
                // the replica has applied at least what the WAIT waited for
                if let Phase::Confirming { needs, .. } | Phase::Renewing { needs, .. } =
                    s.clients[c as usize].phase
                {
                    if Self::waits_for_replica(&s) {
                        Self::replicate(&mut s, needs as usize);
                    }
                }
                let cl = &mut s.clients[c as usize];
                match cl.phase.clone() {
                    Phase::Confirming { fence, until, .. } => {
                        cl.phase = Phase::Holding { fence, until };
                        s.believed_fence = s.believed_fence.max(fence);
                    }
                    Phase::Renewing {
                        fence,
                        until,
                        renewed_until,
                        ..
                    } => {
                        cl.phase = Phase::Holding {
                            fence,
                            until: until.max(renewed_until),
                        };
                    }
                    _ => return None,
                }
            }
            Action::WaitShort(c) => match s.clients[c as usize].phase.clone() {
                // the grant does not count: give it back (rule 3)
                Phase::Confirming { .. } => {
                    if s.nodes[s.master as usize].up {
                        self.withdraw(&mut s, c);
                    } else {
                        self.end_cycle(&mut s, c);
                    }
                }
                // the renewal does not extend the belief
                Phase::Renewing { fence, until, .. } => {
                    s.clients[c as usize].phase = Phase::Holding { fence, until };
                }
                _ => return None,
            },
            Action::Renew(c) => {
                let Phase::Holding { fence, until } = s.clients[c as usize].phase else {
                    return None;
                };
                let now = Self::now_ms(&s);
                s.clients[c as usize].acted = Some(s.ticks);
                let named = format!("{} {}", owner(c), s.clients[c as usize].id);
                let (reply, _, _) = self.call(&mut s, "renew", &[&LEASE_MS.to_string(), &named]);
                let id = s.clients[c as usize].id.to_string();
                let still = match reply.at(1) {
                    Some(Reply::Array(per_owner)) => per_owner
                        .first()
                        .and_then(Reply::text)
                        .is_some_and(|ids| ids.split(' ').any(|i| i == id)),
                    _ => {
                        s.odd_reply = true;
                        false
                    }
                };
                let on = s.master;
                let needs = s.stream.len() as u8;
                let cl = &mut s.clients[c as usize];
                if still {
                    // the server said, after any break before this call, that it holds
                    cl.excused = false;
                    cl.phase = Phase::Renewing {
                        on,
                        needs,
                        fence,
                        until,
                        renewed_until: now + LEASE_MS - MARGIN_MS,
                    };
                } else {
                    // gone: the user is told at once, and the hold's cycle ends
                    self.end_cycle(&mut s, c);
                }
            }
            Action::GuardedWrite(c) => {
                let Phase::Holding { .. } = s.clients[c as usize].phase else {
                    return None;
                };
                s.clients[c as usize].acted = Some(s.ticks);
                let at = self.clock(&s, s.master);
                let id = s.clients[c as usize].id;
                let had_hold = holds_on_server(&s.nodes[s.master as usize].keys, &owner(c), id, at);
                let value = format!("c{c}");
                let (reply, _, _) = self.call_keys(
                    &mut s,
                    "guarded",
                    &[KEY, DATA],
                    &[
                        &owner(c),
                        &id.to_string(),
                        "1 0 1",
                        "3",
                        "ss-1",
                        "SET",
                        DATA,
                        &value,
                    ],
                );
                match reply.at(0).and_then(Reply::int) {
                    Some(1) => {
                        s.guarded_landed = true;
                        let me = &s.clients[c as usize];
                        let other_believes =
                            s.clients.iter().enumerate().any(|(j, d)| {
                                j != c as usize && !d.excused && System::believes(&s, d)
                            });
                        if !had_hold || me.excused || other_believes {
                            s.guarded_astray = true;
                        }
                    }
                    Some(2) => {}
                    _ => s.odd_reply = true,
                }
            }
            Action::Release(c) => {
                let id = s.clients[c as usize].id.to_string();
                let (reply, _, _) = self.call(&mut s, "release", &[&owner(c), &id]);
                if !matches!(reply.at(0).and_then(Reply::int), Some(0 | 1)) {
                    s.odd_reply = true;
                }
                self.end_cycle(&mut s, c);
            }
            Action::GiveUp(c) => {
                s.clients[c as usize].give_ups += 1;
                self.withdraw(&mut s, c);
            }
            Action::Crash(c) => {
                s.crashes += 1;
                let cl = &mut s.clients[c as usize];
                // the latest deadline the server may have given what it was granted, a
                // hold or a hand-off's: a lease from its last call (an attempt refreshes
                // its place, whose deadline a hand-off gives the hold), read on the clock
                // that runs furthest ahead
                // (a waiter's place blocks nobody by itself: a hand-off to it is bounded
                // by the claim window, from `handed_at`)
                let stake = matches!(
                    cl.phase,
                    Phase::Confirming { .. } | Phase::Holding { .. } | Phase::Renewing { .. }
                );
                cl.hold_deadline = cl.acted.filter(|_| stake).map(|tick| {
                    EPOCH_MS
                        + tick as u64 * TICK_MS
                        + LEASE_MS
                        + self.bounds.replica_skew_ms.max(0) as u64
                });
                cl.phase = Phase::Dead;
            }
        }
        Some(s)
    }

    fn within_boundary(&self, s: &State) -> bool {
        s.ticks <= self.bounds.ticks
    }

    fn properties(&self) -> Vec<Property<Self>> {
        let mut properties = vec![
            Property::always(EXCLUSION, |_, s: &State| {
                let believers: Vec<&Client> = s
                    .clients
                    .iter()
                    .filter(|c| !c.excused && System::believes(s, c))
                    .collect();
                let writers = believers.iter().filter(|c| c.mode == b'w').count();
                writers == 0 || believers.len() == 1
            }),
            Property::always(FENCE_ORDER, |_, s: &State| !s.fence_regressed),
            Property::always(NO_NEEDLESS_WAIT, |_, s: &State| !s.starved),
            Property::always(REPLIES_KNOWN, |_, s: &State| !s.odd_reply),
            Property::always(GUARDED_UNDER_HOLD, |_, s: &State| !s.guarded_astray),
        ];
        // what each scenario must reach (else it checked nothing of what it is for)
        properties.push(Property::sometimes(SOME_GRANT, |_, s: &State| {
            s.clients.iter().any(|c| System::believes(s, c))
        }));
        properties.push(Property::sometimes(SOME_HANDOFF, |_, s: &State| {
            s.handoffs_taken > 0
        }));
        if self.bounds.failovers > 0 {
            properties.push(Property::sometimes(SOME_FAILOVER_HOLD, |_, s: &State| {
                s.failovers > 0 && s.clients.iter().any(|c| System::believes(s, c))
            }));
        }
        if self.bounds.writes {
            properties.push(Property::sometimes(SOME_GUARDED, |_, s: &State| {
                s.guarded_landed
            }));
        }
        if self.bounds.breaks > 0 {
            properties.push(Property::sometimes(SOME_BROKEN_WAITER, |_, s: &State| {
                s.broken_waiter_stopped
            }));
        }
        if self.bounds.crashes > 0 && (self.bounds.cycles > 1 || self.bounds.modes.len() > 2) {
            properties.push(Property::sometimes(SOME_PAST_DEAD, |_, s: &State| {
                s.granted_past_dead
            }));
        }
        properties
    }
}

/// The lock's hash on a node, one field per line (for traces).
pub fn describe_hash(keys: &Keyspace) -> String {
    match keys.get(KEY) {
        None => "(no hash)".to_string(),
        Some(Entry {
            value: Value::Hash(h),
            ..
        }) => h
            .iter()
            .map(|(f, v)| format!("{f}={v}"))
            .collect::<Vec<_>>()
            .join("; "),
        Some(other) => format!("{other:?}"),
    }
}

/// Whether the lock's hash in `keys` has `owner`'s hold `id` with a deadline after `now`
/// (read by the layout docs/PROTOCOL.md documents, not by the functions: the summary's
/// lone hold, or the owner's entry `o:<owner>`).
fn holds_on_server(keys: &Keyspace, owner: &str, id: u32, now: u64) -> bool {
    let Some(Entry {
        value: Value::Hash(h),
        ..
    }) = keys.get(KEY)
    else {
        return false;
    };
    let mut holds: Vec<&str> = Vec::new();
    if let Some(summary) = h.get("s") {
        let words: Vec<&str> = summary.split(' ').collect();
        if words.len() == 11 && words[10] == owner {
            holds.push(words[9]);
        }
    }
    if let Some(entry) = h.get(&format!("o:{owner}")) {
        holds.extend(entry.split(' '));
    }
    holds.iter().any(|hold| {
        let mut parts = hold[1..].split(':');
        let (Some(hid), Some(_fence), Some(deadline)) = (parts.next(), parts.next(), parts.next())
        else {
            return false;
        };
        hold.starts_with('w')
            && hid == id.to_string()
            && deadline.parse::<u64>().is_ok_and(|d| d > now)
    })
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
