//! The waiting policy's decisions, tested without a server: a fake lock under the seam
//! answers each attempt as the test says, logs every call, and delivers the release
//! messages the test sends. Time is tokio's paused clock, so waits are exact.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::broadcast;

use std::future::Future;

use crate::cluster::notify::Wake;
use crate::config::LockConfig;

use super::*;

/// A call the policy made on the lock.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Call {
    Acquire { id: u64, intent: Intent },
    Upgrade { from: u64, to: u64 },
    Withdraw { id: u64, from: Option<u64> },
    Release { id: u64 },
}

struct State {
    config: LockConfig,
    ids: AtomicU64,
    /// The answers to the next attempts, each after its delay; then busy for a minute.
    answers: Mutex<VecDeque<(Duration, Result<AttemptReply>)>>,
    calls: Mutex<Vec<Call>>,
    /// Release messages, when notifications are on.
    wakes: Option<broadcast::Sender<Wake>>,
    /// Marked contended (the client's memory of it, without its time window).
    contended: AtomicBool,
    /// How long a join takes to subscribe (messages sent before are not heard).
    join_delay: Mutex<Duration>,
}

#[derive(Clone)]
struct Fake(Arc<State>);

impl Fake {
    fn new(notifications: bool, answers: Vec<(Duration, Result<AttemptReply>)>) -> Fake {
        Fake(Arc::new(State {
            config: LockConfig::cluster(["redis://127.0.0.1:1"]),
            ids: AtomicU64::new(1),
            answers: Mutex::new(answers.into()),
            calls: Mutex::new(Vec::new()),
            wakes: notifications.then(|| broadcast::channel(16).0),
            contended: AtomicBool::new(false),
            join_delay: Mutex::new(Duration::ZERO),
        }))
    }

    fn calls(&self) -> Vec<Call> {
        self.0.calls.lock().unwrap().clone()
    }

    /// The intents of the acquire attempts made, in order.
    fn intents(&self) -> Vec<Intent> {
        self.calls()
            .into_iter()
            .filter_map(|c| match c {
                Call::Acquire { intent, .. } => Some(intent),
                _ => None,
            })
            .collect()
    }

    fn log(&self, call: Call) {
        self.0.calls.lock().unwrap().push(call);
    }

    fn send(&self, wake: Wake) {
        let _ = self.0.wakes.as_ref().expect("notifications on").send(wake);
    }

    async fn answer(&self) -> Result<AttemptReply> {
        let next = self.0.answers.lock().unwrap().pop_front();
        let (delay, answer) =
            next.unwrap_or((Duration::ZERO, Ok(AttemptReply::Busy { wait_ms: 60_000 })));
        tokio::time::sleep(delay).await;
        answer
    }
}

struct FakeWakes(broadcast::Receiver<Wake>);

impl Wakes for FakeWakes {
    fn is_live(&self) -> bool {
        true
    }
    async fn next(&mut self) -> Wake {
        self.0.recv().await.unwrap_or(Wake::Anyone)
    }
}

impl Seam for Fake {
    type Wakes = FakeWakes;
    fn name(&self) -> &str {
        "fake"
    }
    fn config(&self) -> &LockConfig {
        &self.0.config
    }
    fn lease(&self) -> std::time::Duration {
        self.0.config.lease
    }
    fn next_hold_id(&self) -> u64 {
        self.0.ids.fetch_add(1, Ordering::Relaxed)
    }
    fn contended_lately(&self) -> bool {
        self.0.contended.load(Ordering::Relaxed)
    }
    fn mark_contended(&self) {
        self.0.contended.store(true, Ordering::Relaxed);
    }
    fn confirms(&self) -> bool {
        true
    }
    fn join(&self) -> Option<impl Future<Output = FakeWakes> + Send + '_> {
        let delay = *self.0.join_delay.lock().unwrap();
        self.0.wakes.as_ref().map(|tx| {
            let tx = tx.clone();
            async move {
                tokio::time::sleep(delay).await;
                FakeWakes(tx.subscribe())
            }
        })
    }
    fn acquire<'a>(
        &'a self,
        _owner: &'a str,
        _mode: Mode,
        id: u64,
        intent: Intent,
        _deadline: Option<Instant>,
    ) -> impl Future<Output = Result<AttemptReply>> + Send + 'a {
        self.log(Call::Acquire { id, intent });
        self.answer()
    }
    fn upgrade<'a>(
        &'a self,
        _owner: &'a str,
        from: u64,
        to: u64,
        _wait: bool,
        _deadline: Option<Instant>,
    ) -> impl Future<Output = Result<AttemptReply>> + Send + 'a {
        self.log(Call::Upgrade { from, to });
        self.answer()
    }
    fn give_back<'a>(
        &'a self,
        _owner: &'a str,
        what: GiveBack,
    ) -> impl Future<Output = Result<bool>> + Send + 'a {
        self.log(match what {
            GiveBack::Attempt { id, from } => Call::Withdraw { id, from },
            GiveBack::Held { id, .. } => Call::Release { id },
        });
        async { Ok(true) }
    }
    fn spawn<F: Future<Output = ()> + Send + 'static>(&self, task: F) {
        tokio::spawn(task);
    }
}

const OWNER: &str = "me@host/1";

fn granted(fence: u64) -> (Duration, Result<AttemptReply>) {
    (
        Duration::ZERO,
        Ok(AttemptReply::Granted {
            replaceable_after: None,
            fence,
            others: Others::Nobody,
            lease: Counted::Whole,
        }),
    )
}

/// A grant whose reply says that others held or waited.
fn granted_shared(fence: u64) -> (Duration, Result<AttemptReply>) {
    (
        Duration::ZERO,
        Ok(AttemptReply::Granted {
            replaceable_after: None,
            fence,
            others: Others::Present,
            lease: Counted::Whole,
        }),
    )
}

fn busy(wait_ms: u64) -> (Duration, Result<AttemptReply>) {
    (Duration::ZERO, Ok(AttemptReply::Busy { wait_ms }))
}

fn unavailable() -> (Duration, Result<AttemptReply>) {
    (
        Duration::ZERO,
        Err(Error::Unavailable("x:1 did not answer".into())),
    )
}

/// Lets spawned tasks (the clean-ups) run.
async fn settle() {
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
}

mod errors; // errors, refusals and confirmations
mod giving_up; // timeouts, cancellation, a zero timeout, a slow subscription
mod messages; // release messages, hand-offs, the fast path, a handed lease
