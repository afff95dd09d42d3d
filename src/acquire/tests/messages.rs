//! Waking: release messages, hand-offs, the fast path and the lease a grant carries.

use super::*;

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
fn taken(fence: u64) -> (Duration, Result<AttemptReply>) {
    (
        Duration::ZERO,
        Ok(AttemptReply::Granted {
            replaceable_after: None,
            fence,
            others: Others::Nobody,
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
    assert!(!g.others.any());
    assert!(!lock.contended_lately());
    // a grant that says others held or waited: the hold is told, the lock is marked
    let g = wait(&lock, OWNER.into(), ask, None).await.expect("granted");
    assert!(g.others.any());
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
async fn a_hold_handed_over_keeps_the_lease_left_that_its_grant_says() {
    // the attempt finds a hold handed over with 2.5 s of its lease left: that much counts
    // from the attempt's send time, no more
    let handed = || {
        (
            Duration::ZERO,
            Ok(AttemptReply::Granted {
                replaceable_after: None,
                fence: 9,
                others: Others::Nobody,
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
