//! The unit tests of `book`.

use super::*;

fn arc(s: &str) -> Arc<str> {
    s.into()
}

fn of(key: &Arc<str>, lease: Duration, owners: OwnerHolds) -> RenewalOf {
    RenewalOf {
        key: key.clone(),
        lease,
        owners,
    }
}

/// A lock handle's own lease: its holds are believed for it, renewed at its pace
/// (the task wakes every third of the shortest lease), and the holds of a longer
/// lease are sent only when they are due, in calls of their own lease.
#[tokio::test]
async fn each_hold_follows_its_own_lease() {
    let book = Book::new(Duration::from_secs(30), None);
    let (k, o) = (arc("k"), arc("o"));
    let t0 = Instant::now();
    let long = HoldState::new(book.belief(t0, Duration::from_secs(30)));
    book.add(&k, &o, 1, long.clone(), Duration::from_secs(30));
    assert_eq!(book.period(), Duration::from_secs(10));
    let short = HoldState::new(book.belief(t0, Duration::from_secs(3)));
    book.add(&k, &o, 2, short.clone(), Duration::from_secs(3));
    assert_eq!(book.period(), Duration::from_secs(1));
    // believed for the lease less a quarter of it
    assert_eq!(short.until(), t0 + Duration::from_millis(2250));
    assert_eq!(long.until(), t0 + Duration::from_millis(22_500));
    // one second on, only the short hold is due
    let due = book.snapshot(10, Some(t0 + Duration::from_secs(1)));
    assert_eq!(due.len(), 1, "{due:?}");
    assert_eq!(due[0].lease, Duration::from_secs(3));
    assert_eq!(due[0].owners, vec![(o.clone(), vec![2])]);
    // every hold, by lease, when all are asked for
    let mut all = book.snapshot(10, None);
    all.sort_by_key(|r| r.lease);
    assert_eq!(all.len(), 2);
    assert_eq!(
        (all[0].lease, all[1].lease),
        (Duration::from_secs(3), Duration::from_secs(30))
    );
    // ten seconds on, the long one too
    assert_eq!(
        book.snapshot(10, Some(t0 + Duration::from_secs(10))).len(),
        2
    );
    // a renewal of the short lease moves its belief on by its own lease
    book.renewed(&due[0], vec![vec![2]], t0 + Duration::from_secs(1), None);
    assert_eq!(short.until(), t0 + Duration::from_millis(3250));
    book.expire(t0 + Duration::from_millis(3300));
    assert!(short.is_lost() && !long.is_lost());
}

/// Adds a hold granted by a call sent at `sent`, believed from then as `Hold::new`
/// does: its state, and whether it was the book's first hold.
fn put(
    book: &Book,
    key: &Arc<str>,
    owner: &Arc<str>,
    id: u64,
    sent: Instant,
) -> (Arc<HoldState>, bool) {
    let state = HoldState::new(book.belief(sent, book.lease));
    let first = book.add(key, owner, id, state.clone(), book.lease);
    (state, first)
}

#[tokio::test]
async fn holds_are_kept_by_key_owner_and_id() {
    let book = Book::new(Duration::from_secs(3), Some(Duration::ZERO));
    let k = arc("rwlock:{a}");
    let now = Instant::now();
    assert!(put(&book, &k, &arc("o1"), 1, now).1);
    assert!(!put(&book, &k, &arc("o1"), 2, now).1);
    assert!(!put(&book, &k, &arc("o2"), 3, now).1);
    assert_eq!(book.held(), 3);
    let snap = book.snapshot(1, None);
    assert_eq!(snap.len(), 2, "one owner per entry");
    book.remove(&k, &arc("o1"), 1);
    book.remove(&k, &arc("o1"), 1);
    assert_eq!(book.held(), 2);
}

#[tokio::test]
async fn a_renewal_that_misses_a_hold_marks_it_lost() {
    let book = Book::new(Duration::from_secs(3), Some(Duration::ZERO));
    let (k, o) = (arc("k"), arc("o"));
    let now = Instant::now();
    let (kept, _) = put(&book, &k, &o, 1, now);
    let (gone, _) = put(&book, &k, &o, 2, now);
    let owners = vec![(o.clone(), vec![1, 2])];
    book.renewed(&of(&k, book.lease, owners), vec![vec![1]], now, None);
    assert!(!kept.is_lost());
    assert!(gone.is_lost());
    assert_eq!(book.held(), 1);
}

#[tokio::test]
async fn a_renewal_moves_on_the_belief_of_the_holds_it_named_only() {
    let book = Book::new(Duration::from_secs(3), Some(Duration::ZERO));
    let (k, o) = (arc("k"), arc("o"));
    let t0 = Instant::now();
    let (renewed, _) = put(&book, &k, &o, 1, t0);
    let (not_named, _) = put(&book, &k, &o, 2, t0);
    // a renewal sent 2 s later named hold 1 only (hold 2 was granted after its
    // snapshot, say): the server moved hold 1's deadline on, not hold 2's
    let owners = vec![(o.clone(), vec![1])];
    book.renewed(
        &of(&k, book.lease, owners),
        vec![vec![1]],
        t0 + Duration::from_secs(2),
        None,
    );
    book.expire(t0 + Duration::from_secs(3));
    assert!(!renewed.is_lost());
    assert!(not_named.is_lost());
    assert_eq!(book.held(), 1);
}

#[tokio::test]
async fn a_hold_being_converted_is_not_lost_to_a_renewal_that_misses_it() {
    let book = Book::new(Duration::from_secs(3), Some(Duration::ZERO));
    let (k, o) = (arc("k"), arc("o"));
    let (from, _) = put(&book, &k, &o, 1, Instant::now());
    from.set_converting(true);
    // the renewal ran after the conversion function replaced hold 1 by hold 2
    book.renewed(
        &of(&k, book.lease, vec![(o.clone(), vec![1])]),
        vec![vec![2]],
        Instant::now(),
        None,
    );
    assert!(!from.is_lost());
    from.set_converting(false);
    book.renewed(
        &of(&k, book.lease, vec![(o.clone(), vec![1])]),
        vec![vec![]],
        Instant::now(),
        None,
    );
    assert!(from.is_lost());
}

#[test]
fn a_hold_is_lost_at_its_belief_deadline_with_no_timer_running() {
    // no runtime, no expiry task: the deadline itself says it
    let state = HoldState::new(Instant::now() + Duration::from_millis(30));
    assert!(!state.is_lost());
    std::thread::sleep(Duration::from_millis(40));
    assert!(state.is_lost());
    // a renewal confirmed later moves it on; one that would move it back does not
    let state = HoldState::new(Instant::now() + Duration::from_millis(30));
    state.extend(Instant::now() + Duration::from_secs(60));
    state.extend(Instant::now());
    std::thread::sleep(Duration::from_millis(40));
    assert!(!state.is_lost());
    state.mark_lost();
    assert!(state.is_lost());
}

#[tokio::test(flavor = "current_thread")]
async fn lost_resolves_at_the_belief_deadline_even_if_nothing_marks_it() {
    let state = HoldState::new(Instant::now() + Duration::from_millis(50));
    let began = Instant::now();
    tokio::time::timeout(Duration::from_secs(2), state.lost())
        .await
        .expect("lost() resolves by itself");
    assert!(began.elapsed() >= Duration::from_millis(45));
}

#[tokio::test]
async fn a_lease_not_renewed_in_time_is_lost() {
    let book = Book::new(Duration::from_secs(3), Some(Duration::ZERO));
    let now = Instant::now();
    let (state, _) = put(&book, &arc("k"), &arc("o"), 1, now);
    book.expire(now + Duration::from_secs(2));
    assert!(!state.is_lost());
    book.expire(now + Duration::from_secs(3));
    assert!(state.is_lost());
    assert_eq!(book.held(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_hold_added_before_the_timers_next_wake_up_wakes_it() {
    let book = Arc::new(Book::new(Duration::from_secs(10), Some(Duration::ZERO)));
    let t0 = Instant::now();
    let (late, _) = put(&book, &arc("k"), &arc("a"), 1, t0);
    tokio::spawn(Book::expiry_task(Arc::downgrade(&book)));
    // the task is asleep until its one-second bound (the hold runs out at 10 s)
    tokio::time::sleep(Duration::from_millis(100)).await;
    // a hold believed for 300 ms more: before the task's wake-up, so it is told
    let early = HoldState::new(Instant::now() + Duration::from_millis(300));
    book.add(&arc("k"), &arc("b"), 2, early.clone(), book.lease);
    // a later one changes nothing
    let (later, _) = put(&book, &arc("k"), &arc("c"), 3, Instant::now());
    tokio::time::sleep_until(t0 + Duration::from_millis(410)).await;
    // marked by the timer itself at its deadline, not only seen by the clock
    assert!(*early.lost.borrow());
    assert!(!*late.lost.borrow() && !*later.lost.borrow());
    assert_eq!(book.held(), 2);
}

#[tokio::test(start_paused = true)]
async fn the_timer_marks_a_hold_lost_at_sent_plus_lease_minus_margin() {
    let book = Arc::new(Book::new(
        Duration::from_secs(4),
        Some(Duration::from_secs(1)),
    ));
    let sent = Instant::now();
    let (state, _) = put(&book, &arc("k"), &arc("o"), 1, sent);
    tokio::spawn(Book::expiry_task(Arc::downgrade(&book)));
    tokio::time::sleep_until(sent + Duration::from_millis(2_990)).await;
    assert!(!state.is_lost());
    state.lost().await;
    let at = Instant::now() - sent;
    assert!(
        at >= Duration::from_secs(3) && at < Duration::from_millis(3_010),
        "{at:?}"
    );
    // a renewal confirmed later moves the belief on; one sent earlier does not
    let sent2 = Instant::now();
    let (again, _) = put(&book, &arc("k"), &arc("o"), 2, sent2);
    let owners = vec![(arc("o"), vec![2])];
    book.renewed(
        &of(&arc("k"), book.lease, owners),
        vec![vec![2]],
        sent2 - Duration::from_secs(2),
        None,
    );
    again.lost().await;
    assert!(Instant::now() - sent2 < Duration::from_millis(3_010));
}

#[tokio::test]
async fn a_vouched_belief_ends_a_margin_before_the_replacement_and_hurries_a_round() {
    let book = Book::new(Duration::from_secs(30), Some(Duration::from_millis(500)));
    let sent = Instant::now();
    let lease = Duration::from_secs(30);
    // the other masters' word ends before the lease: a margin before it
    let at = sent + Duration::from_secs(2);
    assert_eq!(
        book.vouched_belief(sent, lease, at),
        at - Duration::from_millis(500)
    );
    // a word beyond the lease: the lease's own belief
    let far = sent + Duration::from_secs(60);
    assert_eq!(
        book.vouched_belief(sent, lease, far),
        book.belief(sent, lease)
    );
    // a round is asked for halfway there, the earliest asked for kept, once
    assert_eq!(book.take_hurry(), None);
    let until = Instant::now() + Duration::from_secs(2);
    book.hurry(until);
    book.hurry(until + Duration::from_secs(10));
    let by = book.take_hurry().expect("a round asked for");
    assert!(
        by <= Instant::now() + Duration::from_millis(1_001),
        "{by:?}"
    );
    assert_eq!(book.take_hurry(), None);
}
