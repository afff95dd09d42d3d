//! Giving up: timeouts, cancellation, a zero timeout and a slow subscription; each
//! leaves nothing queued.

use super::*;

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
        Ok(AttemptReply::Granted {
            replaceable_after: None,
            fence: 2,
            others: Others::Nobody,
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
        Ok(AttemptReply::Granted {
            replaceable_after: None,
            fence: 3,
            others: Others::Nobody,
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
