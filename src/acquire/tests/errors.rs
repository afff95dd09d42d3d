//! Errors, refusals and confirmations: what an attempt that fails, or grants without
//! the replicas, leads to.

use super::*;

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

fn silent_replica() -> Result<AttemptReply> {
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
        Ok(AttemptReply::Granted {
            replaceable_after: None,
            fence: 5,
            others: Others::Nobody,
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
    let lock = Fake::new(
        true,
        vec![(Duration::ZERO, Ok(AttemptReply::UpgradeDeadlock))],
    );
    let r = wait(&lock, OWNER.into(), Ask::Hold(Mode::Write), None).await;
    assert!(matches!(r, Err(Error::UpgradeDeadlock)), "{r:?}");
    let lock = Fake::new(true, vec![granted(4)]);
    let r = try_once(&lock, OWNER.into(), Ask::Upgrade { from: 8 }).await;
    assert_eq!(r.expect("granted").map(|g| g.mode), Some(Mode::Write));
    assert_eq!(lock.calls(), vec![Call::Upgrade { from: 8, to: 1 }]);
}
