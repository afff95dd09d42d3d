//! The waiting policy's decisions, tested without a server: a fake lock under the seam
//! answers each attempt as the test says, logs every call, and delivers the release
//! messages the test sends. Time is tokio's paused clock, so waits are exact.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::broadcast;

use std::future::Future;

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
    answers: Mutex<VecDeque<(Duration, Result<Attempt>)>>,
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
    fn new(notifications: bool, answers: Vec<(Duration, Result<Attempt>)>) -> Fake {
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

    async fn answer(&self) -> Result<Attempt> {
        let next = self.0.answers.lock().unwrap().pop_front();
        let (delay, answer) =
            next.unwrap_or((Duration::ZERO, Ok(Attempt::Busy { wait_ms: 60_000 })));
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
    ) -> impl Future<Output = Result<Attempt>> + Send + 'a {
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
    ) -> impl Future<Output = Result<Attempt>> + Send + 'a {
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

fn granted(fence: u64) -> (Duration, Result<Attempt>) {
    (
        Duration::ZERO,
        Ok(Attempt::Granted {
            fence,
            others: false,
            lease: Counted::Whole,
        }),
    )
}

/// A grant whose reply says that others held or waited.
fn granted_shared(fence: u64) -> (Duration, Result<Attempt>) {
    (
        Duration::ZERO,
        Ok(Attempt::Granted {
            fence,
            others: true,
            lease: Counted::Whole,
        }),
    )
}

fn busy(wait_ms: u64) -> (Duration, Result<Attempt>) {
    (Duration::ZERO, Ok(Attempt::Busy { wait_ms }))
}

fn unavailable() -> (Duration, Result<Attempt>) {
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

#[test]
fn upgrades_wait_as_writers_do() {
    assert!(Ask::Hold(Mode::Write).writes());
    assert!(Ask::Upgrade { from: 1 }.writes());
    assert!(!Ask::Hold(Mode::Read).writes());
    assert!(!Ask::Hold(Mode::Upgradable).writes());
    assert_eq!(Ask::Upgrade { from: 1 }.mode(), Mode::Write);
    assert_eq!(Ask::Hold(Mode::Upgradable).mode(), Mode::Upgradable);
}

#[tokio::test(start_paused = true)]
async fn an_error_is_retried_after_the_backoff_while_time_is_left() {
    let lock = Fake::new(true, vec![unavailable(), granted(7)]);
    let began = Instant::now();
    let timeout = Some(Duration::from_secs(5));
    let g = wait(&lock, OWNER.into(), Ask::Hold(Mode::Write), timeout).await;
    let g = g.expect("granted on the second attempt");
    assert_eq!(g.fence, 7);
    assert_eq!(began.elapsed(), ERROR_BACKOFF);
    // the same hold id: the first attempt may have been granted, and its retry finds it
    let calls = lock.calls();
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert_eq!(calls[0], calls[1]);
    assert_eq!(g.id, 1);
}

#[tokio::test(start_paused = true)]
async fn without_a_deadline_an_error_ends_the_wait_and_is_cleaned_up() {
    let lock = Fake::new(true, vec![unavailable()]);
    let r = wait(&lock, OWNER.into(), Ask::Hold(Mode::Write), None).await;
    assert!(matches!(r, Err(Error::Unavailable(_))), "{r:?}");
    settle().await;
    // the attempt may have queued the writer: it leaves the queue
    assert_eq!(
        lock.calls().last(),
        Some(&Call::Withdraw { id: 1, from: None })
    );
}

#[tokio::test(start_paused = true)]
async fn an_unconfirmed_grant_is_undone_and_retried_under_a_new_id() {
    let not_replicated = Err(Error::NotReplicated {
        wanted: 1,
        acked: 0,
        silent: Vec::new(),
    });
    let lock = Fake::new(true, vec![(Duration::ZERO, not_replicated), granted(9)]);
    let timeout = Some(Duration::from_secs(5));
    let g = wait(&lock, OWNER.into(), Ask::Hold(Mode::Read), timeout).await;
    let g = g.expect("granted on the second attempt");
    settle().await;
    let calls = lock.calls();
    // the undo of the first grant runs in the background: the retry must not share its
    // id, or the undo could take back the second grant
    assert!(
        calls.contains(&Call::Withdraw { id: 1, from: None }),
        "{calls:?}"
    );
    assert_eq!(g.id, 2);
    assert!(calls.contains(&Call::Acquire {
        id: 2,
        intent: Intent::Wait
    }));
}

fn silent_replica() -> Result<Attempt> {
    let silent = crate::replica::ReplicaStatus::parse_info(
        "role:master\nmaster_repl_offset:9\nslave0:ip=10.0.0.4,port=6379,state=online,offset=1,lag=12\n",
    );
    Err(Error::NotReplicated {
        wanted: 1,
        acked: 0,
        silent,
    })
}

#[tokio::test(start_paused = true)]
async fn a_wait_that_runs_out_on_unconfirmed_grants_says_so_and_names_the_replica() {
    let refusals = (0..100).map(|_| (Duration::from_millis(50), silent_replica()));
    let lock = Fake::new(true, refusals.collect());
    let timeout = Some(Duration::from_secs(1));
    let e = wait(&lock, OWNER.into(), Ask::Hold(Mode::Write), timeout)
        .await
        .expect_err("never confirmed");
    assert!(e.is_retryable());
    let Error::NotReplicated { silent, .. } = &e else {
        panic!("{e:?}")
    };
    assert_eq!(silent[0].addr, "10.0.0.4:6379");
    assert!(
        e.to_string()
            .contains("10.0.0.4:6379 (online, last ACK 12 s ago"),
        "{e}"
    );
    // busy after a refusal (maybe with the refused grant itself, not given back yet):
    // still the replicas
    let lock = Fake::new(true, vec![(Duration::ZERO, silent_replica()), busy(20_000)]);
    let e = wait(&lock, OWNER.into(), Ask::Hold(Mode::Write), timeout).await;
    assert!(matches!(e, Err(Error::NotReplicated { .. })), "{e:?}");
    // busy only: a timeout
    let lock = Fake::new(true, vec![busy(20_000)]);
    let e = wait(&lock, OWNER.into(), Ask::Hold(Mode::Write), timeout).await;
    assert!(matches!(e, Err(Error::Timeout(_))), "{e:?}");
}

#[tokio::test(start_paused = true)]
async fn a_hand_off_message_wakes_the_writer_and_readers_messages_do_not() {
    let lock = Fake::new(true, vec![busy(20_000), granted(11)]);
    let waiter = {
        let lock = lock.clone();
        tokio::spawn(async move {
            let began = Instant::now();
            let g = wait(&lock, OWNER.into(), Ask::Hold(Mode::Write), None).await;
            (g, began.elapsed())
        })
    };
    tokio::time::sleep(Duration::from_millis(5)).await;
    // a message for readers: the writer sleeps on
    lock.send(Wake::Readers);
    tokio::time::sleep(Duration::from_millis(5)).await;
    assert_eq!(lock.calls().len(), 1);
    // a hand-off to another writer: not this one's either
    lock.send(Wake::Granted {
        owner: "other".into(),
        id: 1,
        fence: 10,
    });
    tokio::time::sleep(Duration::from_millis(5)).await;
    assert_eq!(lock.calls().len(), 1);
    lock.send(Wake::Granted {
        owner: OWNER.into(),
        id: 1,
        fence: 11,
    });
    let (g, waited) = waiter.await.unwrap();
    // the message only woke it: the grant is its own attempt's, under the same id
    assert_eq!(g.expect("handed over").fence, 11);
    assert_eq!(waited, Duration::from_millis(15));
    // the attempt after a busy one skips the function's path for a free lock
    assert_eq!(
        lock.calls(),
        vec![
            Call::Acquire {
                id: 1,
                intent: Intent::Wait
            },
            // woken by a message that hands it the lock: confirmed at once, no probe, and
            // its first attempt was sent lately: a take
            Call::Acquire {
                id: 1,
                intent: Intent::Take
            }
        ]
    );
}

/// A take's grant, answered without the server's clock.
fn taken(fence: u64) -> (Duration, Result<Attempt>) {
    (
        Duration::ZERO,
        Ok(Attempt::Granted {
            fence,
            others: false,
            lease: Counted::FromFirstAttempt,
        }),
    )
}

#[tokio::test(start_paused = true)]
async fn a_hold_taken_without_the_clock_counts_its_lease_from_the_first_attempt() {
    let lock = Fake::new(true, vec![busy(20_000), taken(11)]);
    let t0 = Instant::now();
    let waiter = {
        let lock = lock.clone();
        tokio::spawn(async move { wait(&lock, OWNER.into(), Ask::Hold(Mode::Write), None).await })
    };
    tokio::time::sleep(Duration::from_millis(40)).await;
    lock.send(Wake::Granted {
        owner: OWNER.into(),
        id: 1,
        fence: 11,
    });
    let g = waiter.await.unwrap().expect("taken");
    // counted from the first attempt (sent at t0), not from the take (40 ms later)
    assert_eq!((g.fence, g.sent, g.left), (11, t0, None));
    assert_eq!(lock.intents(), [Intent::Wait, Intent::Take]);

    // a writer that waited longer than a quarter of its lease takes the hold with the
    // clock: the function then says the lease left
    let lock = Fake::new(true, vec![busy(60_000), granted(12)]);
    let waiter = {
        let lock = lock.clone();
        tokio::spawn(async move { wait(&lock, OWNER.into(), Ask::Hold(Mode::Write), None).await })
    };
    let quarter = lock.lease() / 4;
    tokio::time::sleep(quarter + Duration::from_millis(1)).await;
    lock.send(Wake::Granted {
        owner: OWNER.into(),
        id: 1,
        fence: 12,
    });
    let g = waiter.await.unwrap().expect("granted");
    assert_eq!(g.fence, 12);
    assert_eq!(lock.intents(), [Intent::Wait, Intent::WaitBusy]);

    // only a take is answered so: to another attempt, it is a protocol error
    let lock = Fake::new(true, vec![taken(13)]);
    let r = try_once(&lock, OWNER.into(), Ask::Hold(Mode::Write)).await;
    assert!(matches!(r, Err(Error::Protocol(_))), "{r:?}");
}

#[tokio::test(start_paused = true)]
async fn a_lock_found_shared_or_busy_skips_the_fast_path_at_the_next_wait() {
    let lock = Fake::new(
        true,
        vec![granted(1), granted_shared(2), granted(3), granted(3)],
    );
    let ask = Ask::Hold(Mode::Write);
    // a free lock, as far as the client knows: the fast path is tried
    let g = wait(&lock, OWNER.into(), ask, None).await.expect("granted");
    assert!(!g.others);
    assert!(!lock.contended_lately());
    // a grant that says others held or waited: the hold is told, the lock is marked
    let g = wait(&lock, OWNER.into(), ask, None).await.expect("granted");
    assert!(g.others);
    assert!(lock.contended_lately());
    // and the next wait's first attempt skips the fast path, and goes as a probe (most
    // likely busy): the grant it wins is sent again, confirmed, before it is believed
    let g = wait(&lock, OWNER.into(), ask, None).await.expect("granted");
    assert_eq!((g.id, g.fence), (3, 3));
    let intents = lock.intents();
    assert_eq!(
        intents,
        [Intent::Wait, Intent::Wait, Intent::Probe, Intent::WaitBusy]
    );
    // a busy attempt marks it too, a try included (and a try keeps its own intent)
    let lock = Fake::new(true, vec![busy(5)]);
    assert!(try_once(&lock, OWNER.into(), ask).await.unwrap().is_none());
    assert!(lock.contended_lately());
    assert_eq!(
        lock.calls(),
        [Call::Acquire {
            id: 1,
            intent: Intent::Try
        }]
    );
}

#[tokio::test(start_paused = true)]
async fn without_messages_a_waiter_looks_again_at_the_retry_interval() {
    let lock = Fake::new(false, vec![busy(20_000), granted(3), granted(3)]);
    let began = Instant::now();
    let g = wait(&lock, OWNER.into(), Ask::Hold(Mode::Read), None).await;
    assert_eq!(g.expect("granted").fence, 3);
    assert_eq!(began.elapsed(), lock.config().retry_interval);
    // a look with no message since the busy attempt is a probe, its grant confirmed next
    let intents = lock.intents();
    assert_eq!(intents, [Intent::Wait, Intent::Probe, Intent::WaitBusy]);
}

/// A probe refused (most of a busy lock's calls) costs no confirmation, and the waiter
/// goes on as after any refusal; a grant is believed only from a confirmed attempt, and
/// one that errs after a probe's grant leaves the attempt to be withdrawn.
#[tokio::test(start_paused = true)]
async fn a_probe_is_refused_without_a_confirmation_and_its_grant_is_confirmed_before_it_counts() {
    // a waiter whose lock was busy lately: probes while no message concerns it
    let lock = Fake::new(true, vec![busy(10), busy(10), granted(4), granted(4)]);
    lock.mark_contended();
    let g = wait(&lock, OWNER.into(), Ask::Hold(Mode::Write), None).await;
    assert_eq!(g.expect("granted").fence, 4);
    let intents = lock.intents();
    use Intent::{Probe, WaitBusy};
    assert_eq!(intents, [Probe, Probe, Probe, WaitBusy]);
    // the confirmed attempt fails: nothing is believed, the attempt is withdrawn
    let lock = Fake::new(true, vec![granted(4), unavailable()]);
    lock.mark_contended();
    let r = wait(&lock, OWNER.into(), Ask::Hold(Mode::Write), None).await;
    assert!(matches!(r, Err(Error::Unavailable(_))), "{r:?}");
    settle().await;
    assert_eq!(
        lock.calls().last(),
        Some(&Call::Withdraw { id: 1, from: None })
    );
    // a probe's grant is confirmed in full however short the timeout (zero too), as a
    // first attempt is: a grant won in time is not thrown away
    let slow_grant = (
        Duration::from_millis(1),
        Ok(Attempt::Granted {
            fence: 5,
            others: false,
            lease: Counted::Whole,
        }),
    );
    let lock = Fake::new(true, vec![granted(5), slow_grant]);
    lock.mark_contended();
    let g = wait(
        &lock,
        OWNER.into(),
        Ask::Hold(Mode::Write),
        Some(Duration::ZERO),
    )
    .await;
    assert_eq!(g.expect("granted within a zero timeout").fence, 5);
    // a reader's first attempt on a slot found busy or shared lately is not a probe (a
    // lock shared by readers grants it at once); its attempt after a refusal is
    let lock = Fake::new(true, vec![granted(7), busy(10), granted(8), granted(8)]);
    lock.mark_contended();
    let read = Ask::Hold(Mode::Read);
    assert_eq!(
        wait(&lock, OWNER.into(), read, None).await.unwrap().fence,
        7
    );
    assert_eq!(
        wait(&lock, OWNER.into(), read, None).await.unwrap().fence,
        8
    );
    let intents = lock.intents();
    assert_eq!(intents, [WaitBusy, WaitBusy, Probe, WaitBusy]);
    // an upgrade is never a probe
    let lock = Fake::new(true, vec![busy(10), granted(6)]);
    lock.mark_contended();
    let g = wait(&lock, OWNER.into(), Ask::Upgrade { from: 9 }, None).await;
    assert_eq!(g.expect("upgraded").fence, 6);
    assert_eq!(lock.calls().len(), 2, "{:?}", lock.calls());
}

#[tokio::test(start_paused = true)]
async fn a_waiter_comes_back_before_its_queue_entry_lapses() {
    // told to wait longer than its queue entry lives (a lease), it attempts again at a
    // third of the lease, which refreshes the entry
    let lock = Fake::new(true, vec![busy(600_000), granted(5), granted(5)]);
    let began = Instant::now();
    let g = wait(&lock, OWNER.into(), Ask::Hold(Mode::Write), None).await;
    assert_eq!(g.expect("granted").fence, 5);
    assert_eq!(began.elapsed(), lock.lease() / 3);
}

#[tokio::test(start_paused = true)]
async fn a_timeout_gives_up_and_the_writer_leaves_the_queue() {
    let lock = Fake::new(true, vec![]);
    let began = Instant::now();
    let timeout = Duration::from_millis(300);
    let r = wait(&lock, OWNER.into(), Ask::Hold(Mode::Write), Some(timeout)).await;
    assert!(matches!(r, Err(Error::Timeout(t)) if t == timeout), "{r:?}");
    assert_eq!(began.elapsed(), timeout);
    settle().await;
    assert_eq!(
        lock.calls().last(),
        Some(&Call::Withdraw { id: 1, from: None })
    );
}

#[tokio::test(start_paused = true)]
async fn a_reader_that_times_out_withdraws_its_place() {
    let lock = Fake::new(true, vec![]);
    let timeout = Some(Duration::from_millis(300));
    let r = wait(&lock, OWNER.into(), Ask::Hold(Mode::Read), timeout).await;
    assert!(matches!(r, Err(Error::Timeout(_))), "{r:?}");
    settle().await;
    // a waiting reader has a place in the queue, which it gives up
    assert_eq!(
        lock.calls().last(),
        Some(&Call::Withdraw { id: 1, from: None })
    );
}

#[tokio::test(start_paused = true)]
async fn an_upgrade_that_times_out_withdraws_before_it_returns() {
    let lock = Fake::new(true, vec![]);
    let timeout = Some(Duration::from_millis(300));
    let r = wait(&lock, OWNER.into(), Ask::Upgrade { from: 40 }, timeout).await;
    assert!(matches!(r, Err(Error::Timeout(_))), "{r:?}");
    // no settle(): the withdrawal that keeps the upgradable hold ran before the return
    assert_eq!(
        lock.calls().last(),
        Some(&Call::Withdraw {
            id: 1,
            from: Some(40)
        })
    );
}

#[tokio::test(start_paused = true)]
async fn a_cancelled_wait_leaves_the_queue() {
    let lock = Fake::new(true, vec![]);
    let waiter = {
        let lock = lock.clone();
        tokio::spawn(async move { wait(&lock, OWNER.into(), Ask::Hold(Mode::Write), None).await })
    };
    tokio::time::sleep(Duration::from_millis(10)).await;
    waiter.abort();
    assert!(waiter.await.unwrap_err().is_cancelled());
    settle().await;
    assert_eq!(
        lock.calls().last(),
        Some(&Call::Withdraw { id: 1, from: None })
    );
}

/// A cancelled upgrade takes back a write hold it may have been granted; it does not turn
/// it into the upgradable hold it came from, which its own `Hold` gives back on another
/// path (turned back after that give-back, it would be held by nobody for a lease).
#[tokio::test(start_paused = true)]
async fn a_cancelled_upgrade_takes_back_its_write_hold() {
    let lock = Fake::new(true, vec![]);
    let upgrade = {
        let lock = lock.clone();
        tokio::spawn(
            async move { wait(&lock, OWNER.into(), Ask::Upgrade { from: 40 }, None).await },
        )
    };
    tokio::time::sleep(Duration::from_millis(10)).await;
    upgrade.abort();
    assert!(upgrade.await.unwrap_err().is_cancelled());
    settle().await;
    assert_eq!(
        lock.calls().last(),
        Some(&Call::Withdraw { id: 1, from: None })
    );
    // one that failed (no answer) the same
    let lock = Fake::new(
        true,
        vec![(
            Duration::from_millis(1),
            Err(Error::Unavailable("no answer".into())),
        )],
    );
    let r = try_once(&lock, OWNER.into(), Ask::Upgrade { from: 40 }).await;
    assert!(matches!(r, Err(Error::Unavailable(_))), "{r:?}");
    settle().await;
    assert_eq!(
        lock.calls().last(),
        Some(&Call::Withdraw { id: 1, from: None })
    );
}

#[tokio::test(start_paused = true)]
async fn a_zero_timeout_makes_one_full_attempt() {
    // the attempt's round trip outlasts the timeout: its grant is not thrown away
    let slow = (
        Duration::from_millis(50),
        Ok(Attempt::Granted {
            fence: 2,
            others: false,
            lease: Counted::Whole,
        }),
    );
    let lock = Fake::new(true, vec![slow]);
    let g = wait(
        &lock,
        OWNER.into(),
        Ask::Hold(Mode::Write),
        Some(Duration::ZERO),
    )
    .await;
    assert_eq!(g.expect("granted").fence, 2);
    // an attempt slower than FIRST_ATTEMPT is given up, and cleaned up
    let slower = (
        FIRST_ATTEMPT * 2,
        Ok(Attempt::Granted {
            fence: 3,
            others: false,
            lease: Counted::Whole,
        }),
    );
    let lock = Fake::new(true, vec![slower]);
    let r = wait(
        &lock,
        OWNER.into(),
        Ask::Hold(Mode::Write),
        Some(Duration::ZERO),
    )
    .await;
    assert!(matches!(r, Err(Error::Timeout(_))), "{r:?}");
    settle().await;
    assert_eq!(
        lock.calls().last(),
        Some(&Call::Withdraw { id: 1, from: None })
    );
}

/// A subscription slow to be made does not cost the first attempt: a free lock is
/// granted however short the timeout, and at once (a timeout shorter than the first
/// attempt's time leaves the join none of it).
#[tokio::test(start_paused = true)]
async fn the_first_attempt_does_not_wait_for_a_slow_subscription() {
    for timeout in [Duration::ZERO, Duration::from_millis(1)] {
        let lock = Fake::new(true, vec![granted(7)]);
        *lock.0.join_delay.lock().unwrap() = Duration::from_secs(1);
        let began = Instant::now();
        let g = wait(&lock, OWNER.into(), Ask::Hold(Mode::Write), Some(timeout)).await;
        assert_eq!(g.expect("a free lock is granted").fence, 7);
        assert_eq!(began.elapsed(), Duration::ZERO);
    }
    // a longer timeout: the join has all of it but the first attempt's time
    let lock = Fake::new(true, vec![granted(7)]);
    *lock.0.join_delay.lock().unwrap() = Duration::from_secs(1);
    let began = Instant::now();
    let g = wait(
        &lock,
        OWNER.into(),
        Ask::Hold(Mode::Write),
        Some(Duration::from_millis(300)),
    )
    .await;
    assert_eq!(g.expect("a free lock is granted").fence, 7);
    assert_eq!(began.elapsed(), Duration::from_millis(300) - FIRST_ATTEMPT);
}

/// Refused while its subscription is still being made, a waiter gives up when its time
/// is up (the caller's deadline, not later), and leaves the queue.
#[tokio::test(start_paused = true)]
async fn a_first_attempt_refused_before_the_subscription_ends_the_wait() {
    let lock = Fake::new(true, vec![busy(60_000)]);
    *lock.0.join_delay.lock().unwrap() = Duration::from_secs(1);
    let began = Instant::now();
    let r = wait(
        &lock,
        OWNER.into(),
        Ask::Hold(Mode::Write),
        Some(Duration::from_millis(50)),
    )
    .await;
    assert!(matches!(r, Err(Error::Timeout(_))), "{r:?}");
    assert_eq!(began.elapsed(), Duration::from_millis(50));
    settle().await;
    assert_eq!(
        lock.calls(),
        [
            Call::Acquire {
                id: 1,
                intent: Intent::Wait
            },
            Call::Withdraw { id: 1, from: None }
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn try_once_is_one_attempt_and_an_upgrade_deadlock_is_an_error() {
    let lock = Fake::new(true, vec![busy(10)]);
    let r = try_once(&lock, OWNER.into(), Ask::Hold(Mode::Write)).await;
    assert!(matches!(r, Ok(None)), "{r:?}");
    assert_eq!(
        lock.calls(),
        vec![Call::Acquire {
            id: 1,
            intent: Intent::Try
        }]
    );
    let lock = Fake::new(true, vec![(Duration::ZERO, Ok(Attempt::UpgradeDeadlock))]);
    let r = wait(&lock, OWNER.into(), Ask::Hold(Mode::Write), None).await;
    assert!(matches!(r, Err(Error::UpgradeDeadlock)), "{r:?}");
    let lock = Fake::new(true, vec![granted(4)]);
    let r = try_once(&lock, OWNER.into(), Ask::Upgrade { from: 8 }).await;
    assert_eq!(r.expect("granted").map(|g| g.mode), Some(Mode::Write));
    assert_eq!(lock.calls(), vec![Call::Upgrade { from: 8, to: 1 }]);
}

#[tokio::test(start_paused = true)]
async fn a_hold_handed_over_keeps_the_lease_left_that_its_grant_says() {
    // the attempt finds a hold handed over with 2.5 s of its lease left: that much counts
    // from the attempt's send time, no more
    let handed = || {
        (
            Duration::ZERO,
            Ok(Attempt::Granted {
                fence: 9,
                others: false,
                lease: Counted::Left(2_500),
            }),
        )
    };
    let lock = Fake::new(false, vec![handed()]);
    let g = wait(&lock, OWNER.into(), Ask::Hold(Mode::Write), None)
        .await
        .unwrap();
    assert_eq!(g.fence, 9);
    assert_eq!(g.left.map(|ms| ms.get()), Some(2_500));
    // found by a probe (no message since the refusal), it is sent again, confirmed; the
    // function then finds no place to remove and renews the hold for a whole lease
    let lock = Fake::new(false, vec![busy(10), handed(), granted(9)]);
    let g = wait(&lock, OWNER.into(), Ask::Hold(Mode::Write), None)
        .await
        .unwrap();
    assert_eq!((g.fence, g.left), (9, None));
    assert_eq!(lock.intents()[1..], [Intent::Probe, Intent::WaitBusy]);
}

#[test]
fn a_lease_left_is_never_rounded_up() {
    assert_eq!(super::lease_left(2_500).get(), 2_500);
    assert_eq!(super::lease_left(0).get(), 1);
    assert_eq!(super::lease_left(u64::MAX).get(), u32::MAX);
}
