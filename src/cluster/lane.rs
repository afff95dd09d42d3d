//! How script calls reach a node: one lane per connection, which sends the calls that
//! come while its previous batch is on the wire as ONE pipeline, confirmed by ONE `WAIT`
//! (group commit: many writes, one flush). The connection half of the transport; the
//! script half (arguments, `NOSCRIPT`, replies) is `scripts`.
//!
//! A lane is the only way script calls reach its connection, so they reach the server
//! in the order they were made (a lock's calls always use the same connection: see
//! [`Node::lane`](super::node::Node::lane)). A lone call is sent at once: no
//! timer, no added latency. Calls that come while a batch is on the wire wait for it
//! and go together in the next: `([ASKING] EVALSHA)... [WAIT n t]`, the `WAIT` when any
//! of them asks for confirmation. `WAIT` confirms every write made before it on its
//! connection, so one `WAIT` confirms the whole batch.
//!
//! # Why no connection proof is needed
//! A `WAIT` sent on a NEW connection counts none of the writes made on the old one
//! (a new connection has written nothing, and `WAIT` returns at once): an `EVALSHA`
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
//! So an `EVALSHA` and the `WAIT` after it that both have a reply ran on the same
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

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use fred::prelude::*;
use fred::types::{ClusterHash, CustomCommand};
use tokio::sync::{mpsc, oneshot, Notify};

/// `WAIT wanted timeout_ms` after a batch, in the same round trip on the same
/// connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Confirm {
    /// Replicas that must acknowledge (at least 1).
    pub wanted: u32,
    /// At most this long (at least 1 ms: `WAIT n 0` would block for ever).
    pub timeout_ms: u64,
}

/// A call's reply, or the error that stands for it.
pub(crate) type Reply = std::result::Result<Value, fred::error::Error>;

/// The replies of a send (one per `EVALSHA`, in order), and the replicas that
/// acknowledged the batch it went in (`None`: no `WAIT` was sent, or the batch failed
/// as a whole).
pub(crate) struct Batch {
    pub replies: Vec<Reply>,
    pub acked: Option<u32>,
}

impl Batch {
    /// With `confirm` asked for, and fewer replicas than it wants acknowledged: replicas
    /// wanted and those that acknowledged (`None`: confirmed, or not asked for).
    pub fn unconfirmed(&self, confirm: Option<Confirm>) -> Option<(u32, u32)> {
        let acked = self.acked.unwrap_or(0);
        confirm
            .filter(|c| acked < c.wanted)
            .map(|c| (c.wanted, acked))
    }
}

/// One send: its `EVALSHA` calls (each: sha, key count, keys, args), whether `ASKING`
/// goes before each, the confirmation it needs, and where its replies go.
struct Job {
    calls: Vec<Vec<Value>>,
    asking: bool,
    confirm: Option<Confirm>,
    done: oneshot::Sender<Batch>,
}

/// At most this many `EVALSHA` calls in one pipeline: a batch holds the connection for
/// a bounded time, and the jobs after it go in the next.
const MAX_CALLS: usize = 256;

/// The lane of one connection (cheap to clone).
#[derive(Clone)]
pub(crate) struct Lane {
    jobs: mpsc::UnboundedSender<Job>,
    plugs: Arc<Plugs>,
}

/// Callers that are handing the lane several calls at once (see [`Lane::plug`]).
#[derive(Default)]
struct Plugs {
    count: AtomicUsize,
    /// Told when the count falls to 0.
    released: Notify,
}

/// While it lives, the lane's next batch waits for more calls (see [`Lane::plug`]).
pub(crate) struct Plug {
    plugs: Arc<Plugs>,
}

impl Drop for Plug {
    fn drop(&mut self) {
        if self.plugs.count.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.plugs.released.notify_waiters();
        }
    }
}

impl Lane {
    /// The lane of `client`, which counts the `WAIT`s it sends in `waits`; its task runs
    /// on the current runtime until every clone of the lane is dropped.
    pub fn new(client: Client, waits: Arc<AtomicU64>) -> Lane {
        let (jobs, rx) = mpsc::unbounded_channel();
        let plugs = Arc::new(Plugs::default());
        tokio::spawn(run_lane(client, rx, waits, plugs.clone()));
        Lane { jobs, plugs }
    }

    /// Holds the lane's next batch until the plug is dropped, so that calls handed to it
    /// together (a multi-lock's attempts at its members, made in one poll) go in ONE
    /// batch under one `WAIT`, even when the lane's task runs on another thread at once.
    /// To be dropped right after those calls are handed over, with no wait between: the
    /// lane's calls wait for it.
    pub fn plug(&self) -> Plug {
        self.plugs.count.fetch_add(1, Ordering::AcqRel);
        Plug {
            plugs: self.plugs.clone(),
        }
    }

    /// Sends `calls` (`ASKING` before each when `asking`), with the `WAIT` of `confirm`,
    /// in the next batch of the lane. A future dropped after its first poll leaves the
    /// calls to be sent all the same (as a command handed to the connection would be).
    pub async fn send(
        &self,
        asking: bool,
        confirm: Option<Confirm>,
        calls: Vec<Vec<Value>>,
    ) -> Batch {
        let count = calls.len();
        let (done, reply) = oneshot::channel();
        let job = Job {
            calls,
            asking,
            confirm,
            done,
        };
        if self.jobs.send(job).is_err() {
            return failed(count, closed());
        }
        reply.await.unwrap_or_else(|_| failed(count, closed()))
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
    Batch {
        replies: (0..count).map(|_| Err(e.clone())).collect(),
        acked: None,
    }
}

/// The lane's task: a batch of every job waiting, sent as one pipeline, its replies
/// handed back; then the next.
async fn run_lane(
    client: Client,
    mut rx: mpsc::UnboundedReceiver<Job>,
    waits: Arc<AtomicU64>,
    plugs: Arc<Plugs>,
) {
    while let Some(first) = rx.recv().await {
        // a caller handing over several calls at once: wait until it is done
        loop {
            let released = plugs.released.notified();
            if plugs.count.load(Ordering::Acquire) == 0 {
                break;
            }
            released.await;
        }
        let mut calls = first.calls.len();
        let mut jobs = vec![first];
        while calls < MAX_CALLS {
            match rx.try_recv() {
                Ok(job) => {
                    calls += job.calls.len();
                    jobs.push(job);
                }
                Err(_) => break,
            }
        }
        send_jobs(&client, jobs, &waits).await;
    }
}

/// The confirmation of a batch: as many replicas as the most demanding job wants, within
/// the shortest timeout any of them gives (none waits longer than it asked).
fn combined(jobs: &[Job]) -> Option<Confirm> {
    jobs.iter()
        .filter_map(|j| j.confirm)
        .reduce(|a, b| Confirm {
            wanted: a.wanted.max(b.wanted),
            timeout_ms: a.timeout_ms.min(b.timeout_ms),
        })
}

async fn send_jobs(client: &Client, mut jobs: Vec<Job>, waits: &AtomicU64) {
    let confirm = combined(&jobs);
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
            queue(&pipeline, command("EVALSHA"), call).await;
            indexes.push(queued);
            queued += 1;
        }
        replies_of.push(indexes);
    }
    if let Some(c) = confirm {
        waits.fetch_add(1, Ordering::Relaxed);
        let timeout = i64::try_from(c.timeout_ms.max(1)).unwrap_or(i64::MAX);
        queue(
            &pipeline,
            command("WAIT"),
            vec![i64::from(c.wanted).into(), timeout.into()],
        )
        .await;
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
    let acked = confirm.map(|_| acknowledged(&replies));
    for (job, indexes) in jobs.into_iter().zip(replies_of) {
        let batch = Batch {
            replies: indexes.into_iter().map(|i| replies[i].clone()).collect(),
            // a job that asked for no confirmation is told none
            acked: job.confirm.and(acked),
        };
        // (a caller that gave up: its calls ran all the same)
        let _ = job.done.send(batch);
    }
}

/// The replicas a batch's `WAIT` counted (its last reply; 0 when it failed: see the
/// module docs for why a reply proves the whole batch).
fn acknowledged(replies: &[Reply]) -> u32 {
    match replies.last() {
        Some(Ok(Value::Integer(i))) => u32::try_from((*i).max(0)).unwrap_or(u32::MAX),
        _ => 0,
    }
}

fn command(name: &'static str) -> CustomCommand {
    CustomCommand::new_static(name, ClusterHash::Random, false)
}

/// Queues one command on `pipeline` (its reply comes from `try_all`).
async fn queue(pipeline: &fred::clients::Pipeline<Client>, cmd: CustomCommand, args: Vec<Value>) {
    let _: std::result::Result<(), _> = pipeline.custom(cmd, args).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(confirm: Option<Confirm>) -> Job {
        Job {
            calls: Vec::new(),
            asking: false,
            confirm,
            done: oneshot::channel().0,
        }
    }

    #[test]
    fn a_batch_waits_for_the_most_replicas_within_the_shortest_timeout() {
        let c = |wanted, timeout_ms| Some(Confirm { wanted, timeout_ms });
        assert_eq!(combined(&[job(None), job(None)]), None);
        assert_eq!(
            combined(&[job(c(1, 50)), job(None), job(c(2, 20))]),
            c(2, 20)
        );
    }

    #[test]
    fn a_batch_is_confirmed_by_its_waits_reply_alone() {
        let i = |n: i64| -> Reply { Ok(Value::Integer(n)) };
        let lost = || -> Reply {
            Err(fred::error::Error::new(
                fred::error::ErrorKind::IO,
                "connection lost",
            ))
        };
        // EVALSHA, EVALSHA, WAIT
        assert_eq!(acknowledged(&[i(1), i(1), i(2)]), 2);
        // a WAIT that failed (its connection lost) confirms nothing
        assert_eq!(acknowledged(&[i(1), lost()]), 0);
        assert_eq!(acknowledged(&[i(1), i(-3)]), 0);
        assert_eq!(acknowledged(&[]), 0);
        let b = Batch {
            replies: Vec::new(),
            acked: Some(1),
        };
        let want = |wanted| {
            Some(Confirm {
                wanted,
                timeout_ms: 5,
            })
        };
        assert_eq!(b.unconfirmed(want(1)), None);
        assert_eq!(b.unconfirmed(want(2)), Some((2, 1)));
        assert_eq!(b.unconfirmed(None), None);
    }
}
