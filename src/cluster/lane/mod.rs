//! How function calls reach a node: one lane per connection, which sends the calls that
//! come while its previous batch is on the wire as ONE pipeline, confirmed by ONE `WAIT`
//! (group commit: many writes, one flush). The connection half of the transport; the
//! function half (arguments, a library missing, replies) is `scripts`.
//!
//! A lane is the only way function calls reach its connection, so they reach the server
//! in the order they were made (a lock's calls always use the same connection: see
//! [`Node::lane`](super::node::Node::lane)). A lone call is sent at once: no
//! timer, no added latency; a call that finds its lane idle (no batch on the wire, none
//! waiting) is sent by its caller's own task, so that its reply wakes the caller, not
//! the lane's task and then the caller (two wake-ups fewer: what a caller that blocks a
//! thread, as a Python thread does, pays most). Calls that come while a batch is on the
//! wire wait for it and go together in the next, which the lane's task sends:
//! `([ASKING] FCALL)... [WAIT n t]`, the `WAIT` when any of them asks for confirmation.
//! `WAIT` confirms every write made before it on its connection, so one `WAIT` confirms
//! the whole batch. Calls that are to share a batch (a multi-lock's attempts at its
//! members) are built into a [`Gather`], then sent: each lane is handed its calls at
//! once, and what a lane is handed at once is never split.
//!
//! # Why no connection proof is needed
//! A `WAIT` sent on a NEW connection counts none of the writes made on the old one
//! (a new connection has written nothing, and `WAIT` returns at once): an `FCALL`
//! answered on one connection and a `WAIT` answered on another would confirm nothing.
//! That cannot happen here, for two reasons the connection's configuration fixes (see
//! `node::Connector`, whose unit test checks it):
//! - every command is written at most once (`max_command_attempts = 1`): a command whose
//!   connection is lost fails, it is never sent again on the next connection;
//! - the client writes a pipeline's commands one after another in one step of its
//!   connection task, and a lost connection is only replaced after that step (the
//!   reconnection is queued behind it): the commands after a loss find no connection and
//!   fail.
//!
//! So an `FCALL` and the `WAIT` after it that both have a reply ran on the same
//! connection, in that order, and no `CLIENT ID` around a batch is needed to prove it
//! at run time (two commands a batch saved). A second guard: the commands of a pipeline
//! share one reply channel, and the first error fails the whole pipeline (`try_all`
//! returns fewer replies than were queued, and every call of the batch fails).
//!
//! What must stay so (the Redis client's code, read for this): its `replicas` feature
//! off (with it, a command that finds no connection gets its attempt back and is written
//! on the next one); no per-command option that raises the attempts; `WAIT` sent as a
//! non-blocking command, so that the client's check for unresponsive connections still
//! covers it; and a `WAIT` timeout well below the command timeout (see
//! `Shared::confirm_with`: at most three quarters), so that a batch ends confirmed or not, not
//! timed out.

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fred::prelude::*;
use fred::types::{ClusterHash, CustomCommand};
use tokio::sync::{mpsc, oneshot};

use crate::cluster::topology::UNKNOWN;
use crate::replica::{self, ReplicaStatus};

/// `WAIT wanted timeout_ms` after a batch, in the same round trip on the same
/// connection, and, for a call that must reach every replica that could be promoted,
/// `INFO replication` after it: the master's own list of the replicas attached to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Confirm {
    /// Replicas that must acknowledge (0: no `WAIT`, only the master's count, which must
    /// then be 0 too).
    pub wanted: u32,
    /// At most this long (at least 1 ms: `WAIT n 0` would block for ever).
    pub timeout_ms: u64,
    /// Every replica the master reports attached must have acknowledged, whatever
    /// `wanted` guessed (`Durability::AllReplicas`): `WAIT n` is met by ANY n replicas,
    /// so the count to wait for comes from the master itself, read in the same pipeline.
    pub every_attached: bool,
}

/// A call's reply, or the error that stands for it.
pub(crate) type Reply = std::result::Result<Value, fred::error::Error>;

/// The replies of a send (one per `FCALL`, in order), the replicas that acknowledged
/// the batch it went in (`None`: no `WAIT` was sent, or the batch failed as a whole),
/// and the replicas the master reported attached right after (`None`: not asked, or
/// not readable).
pub(crate) struct Batch {
    pub replies: Vec<Reply>,
    pub acked: Option<u32>,
    pub attached: Option<u32>,
    /// When the batch's `WAIT` came back short: the replicas the master listed right
    /// after, to name those that did not acknowledge (empty otherwise).
    pub listed: Vec<ReplicaStatus>,
}

/// A confirmation that fell short: replicas needed, those that acknowledged, and those
/// that most likely did not (see [`replica::silent`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Unconfirmed {
    pub wanted: u32,
    pub acked: u32,
    pub silent: Vec<ReplicaStatus>,
    /// What the other masters vouched for, when asked (see `cluster::vouch`): no
    /// replica of the master can be promoted before this.
    pub replaceable_after: Option<tokio::time::Instant>,
}

impl Batch {
    /// With `confirm` asked for, and fewer replicas acknowledged than it needs (its
    /// `wanted`; for `every_attached`, as many as the master reported attached, at least
    /// one when that report could not be read): replicas needed and those that
    /// acknowledged, with those listed that did not (`None`: confirmed, or not asked
    /// for).
    pub fn unconfirmed(&self, confirm: Option<Confirm>) -> Option<Unconfirmed> {
        let c = confirm?;
        let acked = self.acked.unwrap_or(0);
        let needed = if c.every_attached {
            self.attached.unwrap_or(c.wanted.max(1))
        } else {
            c.wanted
        };
        if needed == 0 && c.every_attached {
            crate::observe::confirmed_alone();
        }
        (acked < needed).then(|| Unconfirmed {
            wanted: needed,
            acked,
            silent: replica::silent(self.listed.clone(), needed - acked, acked == 0),
            replaceable_after: None,
        })
    }
}

/// One send: its `FCALL` calls (each: function, key count, keys, args), whether `ASKING`
/// goes before each, the confirmation it needs, and where its replies go.
struct Job {
    calls: Vec<Vec<Value>>,
    asking: bool,
    confirm: Option<Confirm>,
    done: oneshot::Sender<Batch>,
}

/// At most this many `FCALL` calls in one pipeline: a batch holds the connection for
/// a bounded time, and the jobs after it go in the next.
const MAX_CALLS: usize = 256;

/// The lane of one connection (cheap to clone). What it is handed at once (one job, or
/// the jobs of a [`Gather`] for this lane) goes in one batch, never split.
#[derive(Clone)]
pub(crate) struct Lane {
    jobs: mpsc::UnboundedSender<Vec<Job>>,
    /// What a caller needs to send its own batch when the lane is idle (`None`: every
    /// batch goes through the lane's task, as in the unit tests' lanes with no
    /// connection).
    turn: Option<Arc<Turn>>,
}

/// The connection's turn: one batch on the wire at a time, sent by the lane's task or by
/// a caller that found the lane idle.
struct Turn {
    client: Client,
    tally: Tally,
    /// Held while a batch is sent and answered.
    sending: tokio::sync::Mutex<()>,
    /// Jobs handed to the lane's task and not yet taken by it: a caller that finds any
    /// hands its job over too, behind them (the order calls were made in is kept).
    queued: AtomicUsize,
}

/// What a lane's task shares with its node: the `WAIT`s sent (by every node's lanes),
/// and the replicas the node last reported attached to it ([`UNKNOWN`] before the first
/// report), which the next calls' confirmations start from.
#[derive(Clone)]
pub(crate) struct Tally {
    pub waits: Arc<AtomicU64>,
    pub attached: Arc<AtomicU32>,
    /// When `attached` was last read from the node.
    read_at: Arc<std::sync::Mutex<Option<Instant>>>,
    /// The node's last confirmation, when it fell short (and when): cleared by the next
    /// one that does not.
    short: Arc<std::sync::Mutex<Option<(Instant, Unconfirmed)>>>,
}

/// How long the node's count of its replicas is used without reading it again (a
/// replica attached since is counted from the next batch after that; one that died is
/// noticed at once, by the short `WAIT` it causes).
const COUNT_FRESH: Duration = Duration::from_millis(250);

impl Default for Tally {
    fn default() -> Tally {
        Tally::new(Arc::default())
    }
}

impl Tally {
    /// A tally for a new node, counting `WAIT`s in `waits`.
    pub fn new(waits: Arc<AtomicU64>) -> Tally {
        Tally {
            waits,
            attached: Arc::new(AtomicU32::new(UNKNOWN)),
            read_at: Arc::default(),
            short: Arc::default(),
        }
    }

    /// The node's last confirmation, if it fell short no earlier than `since` and none
    /// was confirmed after it.
    pub fn short_since(&self, since: Instant) -> Option<Unconfirmed> {
        crate::mutex::lock(&self.short)
            .as_ref()
            .filter(|(at, _)| *at >= since)
            .map(|(_, u)| u.clone())
    }

    /// The replicas the node last reported attached, if it has.
    pub fn attached(&self) -> Option<u32> {
        Some(self.attached.load(Ordering::Relaxed)).filter(|&n| n != UNKNOWN)
    }

    /// Whether the count is to be read again (never read, or read `COUNT_FRESH` ago).
    fn stale(&self) -> bool {
        let read_at = *self.read_at.lock().unwrap_or_else(|e| e.into_inner());
        read_at.is_none_or(|t| t.elapsed() >= COUNT_FRESH)
    }

    /// The node reported `n` replicas attached.
    fn record(&self, n: u32) {
        self.attached.store(n, Ordering::Relaxed);
        *self.read_at.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
    }
}

impl Lane {
    /// The lane of `client`, which counts what it sends in `tally`; its task runs on the
    /// current runtime until every clone of the lane is dropped.
    pub fn new(client: Client, tally: Tally) -> Lane {
        let (jobs, rx) = mpsc::unbounded_channel();
        let turn = Arc::new(Turn {
            client,
            tally,
            sending: tokio::sync::Mutex::new(()),
            queued: AtomicUsize::new(0),
        });
        tokio::spawn(run_lane(rx, turn.clone()));
        Lane {
            jobs,
            turn: Some(turn),
        }
    }

    /// Sends `calls` (`ASKING` before each when `asking`), with the `WAIT` of `confirm`,
    /// in the next batch of the lane: at once from this task when the lane is idle. A
    /// future dropped after its first poll leaves the calls to be sent all the same (as
    /// a command handed to the connection would be): the first poll either hands them
    /// to the connection or to the lane's task.
    pub async fn send(
        &self,
        asking: bool,
        confirm: Option<Confirm>,
        calls: Vec<Vec<Value>>,
    ) -> Batch {
        let count = calls.len();
        let (job, reply) = Job::new(asking, confirm, calls);
        if let Some(turn) = &self.turn {
            if let Ok(_sending) = turn.sending.try_lock() {
                // idle: no batch on the wire, nothing handed to the task and not taken
                // (the task takes its jobs under the same turn, then sends them)
                if turn.queued.load(Ordering::Acquire) == 0 {
                    send_jobs(&turn.client, vec![job], &turn.tally).await;
                    return answer(reply, count).await;
                }
            }
        }
        if self.enqueue(vec![job]).is_err() {
            return failed(count, closed());
        }
        answer(reply, count).await
    }

    /// Hands `jobs` to the lane's task (in one batch).
    fn enqueue(&self, jobs: Vec<Job>) -> Result<(), ()> {
        if let Some(turn) = &self.turn {
            turn.queued.fetch_add(1, Ordering::AcqRel);
        }
        self.jobs.send(jobs).map_err(|_| {
            if let Some(turn) = &self.turn {
                turn.queued.fetch_sub(1, Ordering::AcqRel);
            }
        })
    }

    /// The same lane (the same connection's task).
    fn same(&self, other: &Lane) -> bool {
        self.jobs.same_channel(&other.jobs)
    }
}

impl Job {
    fn new(
        asking: bool,
        confirm: Option<Confirm>,
        calls: Vec<Vec<Value>>,
    ) -> (Job, oneshot::Receiver<Batch>) {
        let (done, reply) = oneshot::channel();
        let job = Job {
            calls,
            asking,
            confirm,
            done,
        };
        (job, reply)
    }
}

/// The batch a job went in, once answered.
async fn answer(reply: oneshot::Receiver<Batch>, count: usize) -> Batch {
    reply.await.unwrap_or_else(|_| failed(count, closed()))
}

/// A batch built, then sent, as a Redis client's pipeline: the calls handed to
/// [`Gather::send`] wait until [`Gather::flush`], which hands each lane ITS calls at
/// once, so that every call to one connection goes in ONE batch under ONE `WAIT` (a
/// multi-lock's attempts at its members). Nothing depends on when the callers are
/// polled: a caller that awaits something before it hands its call over is simply
/// waited for. Once flushed, calls go straight to their lanes (a call sent again after
/// a redirect).
pub(crate) struct Gather {
    /// The calls handed over and not flushed yet, each with its lane; `None` once
    /// flushed.
    pending: std::sync::Mutex<Option<Vec<(Lane, Job)>>>,
    /// Calls handed over before the flush.
    gathered: AtomicUsize,
}

impl Gather {
    pub fn new() -> Gather {
        Gather {
            pending: std::sync::Mutex::new(Some(Vec::new())),
            gathered: AtomicUsize::new(0),
        }
    }

    /// How many calls wait for the flush (or went in it).
    pub fn gathered(&self) -> usize {
        self.gathered.load(Ordering::Acquire)
    }

    /// As [`Lane::send`], in the batch being built (or, once it was flushed, at once).
    pub async fn send(
        &self,
        lane: &Lane,
        asking: bool,
        confirm: Option<Confirm>,
        calls: Vec<Vec<Value>>,
    ) -> Batch {
        let count = calls.len();
        let gathered = {
            let mut pending = crate::mutex::lock(&self.pending);
            match pending.as_mut() {
                Some(jobs) => {
                    let (job, reply) = Job::new(asking, confirm, calls);
                    jobs.push((lane.clone(), job));
                    self.gathered.fetch_add(1, Ordering::AcqRel);
                    Ok(reply)
                }
                None => Err(calls),
            }
        };
        match gathered {
            Ok(reply) => answer(reply, count).await,
            // flushed already: straight to the lane, as any call
            Err(calls) => lane.send(asking, confirm, calls).await,
        }
    }

    /// Sends what was gathered: each lane's calls handed to it at once (one batch per
    /// connection). Later calls go straight to their lanes; flushing twice does nothing.
    pub fn flush(&self) {
        let Some(jobs) = crate::mutex::lock(&self.pending).take() else {
            return;
        };
        let mut lanes: Vec<(Lane, Vec<Job>)> = Vec::new();
        for (lane, job) in jobs {
            match lanes.iter_mut().find(|(l, _)| l.same(&lane)) {
                Some((_, group)) => group.push(job),
                None => lanes.push((lane, vec![job])),
            }
        }
        for (lane, group) in lanes {
            // a lane that closed drops the jobs: their callers are told it closed
            let _ = lane.enqueue(group);
        }
    }
}

fn closed() -> fred::error::Error {
    fred::error::Error::new(
        fred::error::ErrorKind::Canceled,
        "the connection's lane closed",
    )
}

/// `count` replies that are all `e`.
fn failed(count: usize, e: fred::error::Error) -> Batch {
    unconfirmed((0..count).map(|_| Err(e.clone())).collect())
}

/// A batch of `replies` with no confirmation sent.
fn unconfirmed(replies: Vec<Reply>) -> Batch {
    Batch {
        replies,
        acked: None,
        attached: None,
        listed: Vec::new(),
    }
}

/// The lane's task: a batch of every job waiting, sent as one pipeline in the
/// connection's turn (after the batch a caller may be sending), its replies handed back;
/// then the next.
async fn run_lane(mut rx: mpsc::UnboundedReceiver<Vec<Job>>, turn: Arc<Turn>) {
    while let Some(mut jobs) = rx.recv().await {
        let _sending = turn.sending.lock().await;
        let mut taken = 1;
        // what was handed over at once stays whole (a gathered batch may pass MAX_CALLS)
        let mut calls: usize = jobs.iter().map(|j| j.calls.len()).sum();
        while calls < MAX_CALLS {
            match rx.try_recv() {
                Ok(more) => {
                    calls += more.iter().map(|j| j.calls.len()).sum::<usize>();
                    jobs.extend(more);
                    taken += 1;
                }
                Err(_) => break,
            }
        }
        turn.queued.fetch_sub(taken, Ordering::AcqRel);
        send_jobs(&turn.client, jobs, &turn.tally).await;
    }
}

/// The confirmation of a batch: as many replicas as the most demanding job wants,
/// within the LONGEST timeout any of them allows (each is capped below the command
/// timeout already): a job near its own deadline must not cut the `WAIT` of every other
/// job of its batch short, turning their grants into refusals on a replica a little
/// slow. A caller whose deadline passes first stops waiting by itself (its attempt is
/// bounded by that deadline, and what it left is given back). The master's count is
/// read when any job needs it.
fn combined(jobs: &[Job]) -> Option<Confirm> {
    jobs.iter()
        .filter_map(|j| j.confirm)
        .reduce(|a, b| Confirm {
            wanted: a.wanted.max(b.wanted),
            timeout_ms: a.timeout_ms.max(b.timeout_ms),
            every_attached: a.every_attached || b.every_attached,
        })
}

/// The replicas `INFO replication` of a master reports attached to it, in any state: in
/// sync (`online`), or still loading their first copy (a replica restarted empty, or
/// just attached). One that is loading acknowledges nothing until it has loaded, so
/// grants wait for it meanwhile; not counted, it could be promoted (the cluster may
/// elect it if its master fails then) without what was granted during its sync. `None`
/// for a reply that is not a master's.
fn attached_replicas(info: &str) -> Option<u32> {
    replica::listed(info).map(|(_, r)| u32::try_from(r.len()).unwrap_or(u32::MAX))
}

async fn send_jobs(client: &Client, mut jobs: Vec<Job>, tally: &Tally) {
    let confirm = combined(&jobs);
    if let [job] = jobs.as_slice() {
        if confirm.is_none() && !job.asking && job.calls.len() == 1 {
            if let Some(job) = jobs.pop() {
                return send_alone(client, job).await;
            }
        }
    }
    let pipeline = client.pipeline();
    // the reply index of each call of each job
    let mut replies_of: Vec<Vec<usize>> = Vec::with_capacity(jobs.len());
    let mut queued = 0;
    for job in &mut jobs {
        let mut indexes = Vec::with_capacity(job.calls.len());
        for call in std::mem::take(&mut job.calls) {
            if job.asking {
                // the flag lasts one command: right before each call
                queue(&pipeline, command("ASKING"), Vec::new()).await;
                queued += 1;
            }
            queue(&pipeline, command("FCALL"), call).await;
            indexes.push(queued);
            queued += 1;
        }
        replies_of.push(indexes);
    }
    // the reply index of the WAIT and of the master's count, when sent
    let (mut wait_at, mut info_at) = (None, None);
    if let Some(c) = confirm.filter(|c| c.wanted > 0) {
        tally.waits.fetch_add(1, Ordering::Relaxed);
        let timeout = i64::try_from(c.timeout_ms.max(1)).unwrap_or(i64::MAX);
        queue(
            &pipeline,
            command("WAIT"),
            vec![i64::from(c.wanted).into(), timeout.into()],
        )
        .await;
        wait_at = Some(queued);
        queued += 1;
    }
    // the master's own count, when a job needs it: a job that would be confirmed with no
    // replica (the count it started from is 0) needs the master's word in this very
    // pipeline; others, a count read no longer than COUNT_FRESH ago
    let counted = |c: &Confirm| c.every_attached;
    let alone = jobs
        .iter()
        .any(|j| j.confirm.is_some_and(|c| counted(&c) && c.wanted == 0));
    if alone || (confirm.is_some_and(|c| counted(&c)) && tally.stale()) {
        // after the WAIT: a replica that attached while it blocked is counted too
        queue(&pipeline, command("INFO"), vec!["replication".into()]).await;
        info_at = Some(queued);
        queued += 1;
    }
    let replies: Vec<Reply> = pipeline.try_all().await;
    if replies.len() != queued {
        // the pipeline as a whole failed (a connection lost): its error, as each reply
        let e = replies
            .into_iter()
            .find_map(|r| r.err())
            .unwrap_or_else(|| {
                fred::error::Error::new(fred::error::ErrorKind::IO, "a pipeline lost replies")
            });
        for (job, indexes) in jobs.into_iter().zip(replies_of) {
            let _ = job.done.send(failed(indexes.len(), e.clone()));
        }
        return;
    }
    let acked = wait_at.map(|i| acknowledged(replies.get(i)));
    // fewer acknowledgements than a job wanted (the count it started from, or the one
    // it asked for): a replica may have died, detached, or be silent
    let short = confirm.is_some_and(|c| acked.unwrap_or(0) < c.wanted);
    let mut info: Option<&Reply> = info_at.and_then(|i| replies.get(i));
    let read_again: Reply;
    if info.is_none() && short {
        // the master's list now says whether those that acknowledged are all it has (a
        // replica attached since the WAIT is counted, which can only refuse a grant, and
        // one gone since is dead to any election), and which did not acknowledge
        read_again = client
            .custom(command("INFO"), vec![Value::from("replication")])
            .await;
        info = Some(&read_again);
    }
    let attached = info_count(info);
    if let Some(n) = attached {
        // the next calls to this node start from what it said
        tally.record(n);
    }
    // (only on a short WAIT, or on a count that outgrew it: a confirmed batch lists none)
    let listed = match info {
        Some(reply) if short || attached.is_some_and(|n| acked.unwrap_or(0) < n) => {
            info_text(reply)
                .and_then(|text| replica::listed(&text).map(|(_, r)| r))
                .unwrap_or_default()
        }
        _ => Vec::new(),
    };
    let mut fell_short = None;
    for (job, indexes) in jobs.into_iter().zip(replies_of) {
        let batch = Batch {
            replies: indexes.into_iter().map(|i| replies[i].clone()).collect(),
            // a job that asked for no confirmation is told none
            acked: job.confirm.and(acked),
            attached: job.confirm.and(attached),
            listed: if job.confirm.is_some() {
                listed.clone()
            } else {
                Vec::new()
            },
        };
        if fell_short.is_none() {
            fell_short = batch.unconfirmed(job.confirm);
        }
        // (a caller that gave up: its calls ran all the same)
        let _ = job.done.send(batch);
    }
    if confirm.is_some() {
        // what a wait that runs out of time meanwhile says (see `Tally::short_since`)
        *crate::mutex::lock(&tally.short) = fell_short.map(|u| (Instant::now(), u));
    }
}

/// A job of one call with nothing to confirm: the command alone, no pipeline around it.
async fn send_alone(client: &Client, mut job: Job) {
    let call = job.calls.pop().unwrap_or_default();
    let reply: Reply = client.custom(command("FCALL"), call).await;
    let _ = job.done.send(unconfirmed(vec![reply]));
}

/// The text of a reply of `INFO replication`.
fn info_text(reply: &Reply) -> Option<std::borrow::Cow<'_, str>> {
    match reply {
        Ok(Value::String(s)) => Some(std::borrow::Cow::Borrowed(&**s)),
        Ok(Value::Bytes(b)) => Some(String::from_utf8_lossy(b)),
        _ => None,
    }
}

/// The count of [`attached_replicas`] in a reply of `INFO replication`.
fn info_count(reply: Option<&Reply>) -> Option<u32> {
    attached_replicas(&info_text(reply?)?)
}

/// The replicas a batch's `WAIT` counted (0 when it failed: see the module docs for why
/// a reply proves the whole batch).
fn acknowledged(wait: Option<&Reply>) -> u32 {
    match wait {
        Some(Ok(Value::Integer(i))) => u32::try_from((*i).max(0)).unwrap_or(u32::MAX),
        _ => 0,
    }
}

/// A command sent to the connection's own node (no key decides where it goes).
pub(super) fn command(name: &'static str) -> CustomCommand {
    CustomCommand::new_static(name, ClusterHash::Random, false)
}

/// Queues one command on `pipeline` (its reply comes from `try_all`).
pub(super) async fn queue(
    pipeline: &fred::clients::Pipeline<Client>,
    cmd: CustomCommand,
    args: Vec<Value>,
) {
    let _: std::result::Result<(), _> = pipeline.custom(cmd, args).await;
}

#[cfg(test)]
mod tests; // the unit tests of this module
