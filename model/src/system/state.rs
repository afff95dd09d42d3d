//! The model's state: each client's phase and belief, each node's keyspace, and the
//! actions that move it.

use super::*;

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
    /// The queue's head ticket its grant named (acquire's `t:<ticket>` hint), which its
    /// release passes back, as the Rust client does.
    pub head: Option<u16>,
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
    /// When the other masters last heard from the master (model time, ms), once it is
    /// cut off from them (`None`: they hear it now).
    pub cut_at: Option<u64>,
    /// A grant or renewal was believed on the majority's word (a vouch).
    pub vouched: bool,
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
    /// Client `c`'s `WAIT` fell short, and it asks the other masters how long ago they
    /// last heard from the master: it believes its grant or renewal until the replica
    /// could first be promoted (the node timeout and the election delay after that),
    /// less the margin, or gives it up as after `WaitShort` when that is not later than
    /// now.
    Vouch(u8),
    /// The master is cut off from the other masters (a partition, or it hangs for
    /// them): from now on they do not hear from it, while clients still reach it.
    Isolate,
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
