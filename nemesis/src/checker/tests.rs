//! The checker's tests: short histories, each with violations of some kinds, and what
//! [`check`] must find in them.

use crate::history::{Event, Mode, Outcome};

use super::check;

fn seg(hold: u64, owner: &str, explicit: bool, mode: Mode, from: u64, to: u64) -> Event {
    Event::Segment {
        proc: 0,
        hold,
        name: "n".into(),
        owner: owner.into(),
        explicit,
        mode,
        fence: hold,
        from,
        to,
        end: "release".into(),
        node: Some(format!("127.0.0.1:{}", 7000 + hold)),
    }
}

fn grant(fence: u64, start: u64, end: u64) -> Event {
    Event::Op {
        proc: 0,
        task: 0,
        call: "write".into(),
        name: "n".into(),
        hold: Some(fence),
        owner: None,
        timeout_ms: None,
        start,
        end,
        outcome: Outcome::Ok,
        error: None,
        fence: Some(fence),
        mode: Some(Mode::W),
        node: None,
    }
}

fn access(hold: u64, owner: &str, mode: Mode, fence: u64, accepted: bool) -> Event {
    Event::Access {
        name: "n".into(),
        hold,
        owner: owner.into(),
        mode,
        fence,
        at: 0,
        late: false,
        accepted,
    }
}

#[test]
fn conflicting_overlaps_of_different_owners_are_found() {
    let h = [
        seg(1, "a", false, Mode::W, 0, 10),
        seg(2, "b", false, Mode::W, 10, 20), // touches, does not overlap
        seg(3, "c", false, Mode::R, 15, 30), // overlaps hold 2
        seg(4, "d", false, Mode::R, 16, 17), // overlaps hold 2, not hold 3
        seg(5, "e", false, Mode::U, 25, 40), // upgradable with read: fine
        seg(6, "f", false, Mode::U, 35, 50), // upgradable with upgradable: conflict
        seg(7, "j", true, Mode::W, 60, 70),
        seg(8, "j", true, Mode::W, 65, 75), // one explicit owner: reentrant
        seg(9, "j", false, Mode::W, 72, 80), // same text, not explicit: conflict
    ];
    let v = check(&h, 0);
    assert_eq!(v.overlap.count, 4, "{:?}", v.overlap.examples);
    assert!(v.overlap.examples[0].contains("hold 2"));
    assert!(
        v.overlap.examples[0].contains("via 127.0.0.1:7003"),
        "the grant's node is named: {}",
        v.overlap.examples[0]
    );
}

#[test]
fn fences_must_grow_in_real_time_order_only() {
    let h = [
        grant(10, 0, 5),
        grant(9, 3, 8),    // concurrent with the first: no order known
        grant(11, 6, 9),   // after the first: greater, fine
        grant(10, 10, 12), // after the third: not greater
    ];
    let v = check(&h, 0);
    assert_eq!(v.fence_order.count, 1, "{:?}", v.fence_order.examples);
    assert!(v.fence_order.examples[0].contains("fence 11"));
}

#[test]
fn stale_accesses_are_told_apart_from_refusals() {
    let h = [
        access(1, "a", Mode::W, 10, true),
        access(2, "b", Mode::W, 20, true),
        access(1, "a", Mode::W, 10, false), // refused: fencing at work
        access(3, "c", Mode::R, 15, true),  // accepted though write 20 came: stale
        access(2, "b", Mode::R, 19, true),  // its own owner's write: not stale
        access(4, "d", Mode::R, 25, true),
        access(5, "e", Mode::R, 21, true), // reads do not conflict with reads
        access(6, "f", Mode::W, 22, true), // a write below the read of fence 25: stale
        access(7, "b", Mode::W, 5, false), // refused, but only its own fence 20 is... not only
    ];
    let v = check(&h, 0);
    assert_eq!(v.stale_accepted.count, 2, "{:?}", v.stale_accepted.examples);
    assert_eq!(v.stale_refused, 2);
    assert_eq!(v.other_refused, 0);
    assert_eq!(v.accesses_accepted, 5);
}

#[test]
fn slow_calls_probes_and_leftovers_are_reported() {
    let mut op = grant(1, 0, 3_000_000_000);
    if let Event::Op { timeout_ms, .. } = &mut op {
        *timeout_ms = Some(1_500);
    }
    let h = [
        op,
        Event::Probe {
            name: "n".into(),
            start: 0,
            took_s: Some(0.1),
            error: None,
        },
        Event::Probe {
            name: "m".into(),
            start: 0,
            took_s: None,
            error: Some("Timeout".into()),
        },
        Event::ClientEnd {
            proc: 1,
            held: 0,
            subscriptions: 1,
            vouches_asked: 0,
            vouched: 0,
        },
        Event::Leftover {
            key: "p:{n}".into(),
            content: "{}".into(),
            persisted: false,
        },
    ];
    let v = check(&h, 0);
    assert_eq!(v.slow_op.count, 1);
    assert_eq!(v.unavailable.count, 1);
    assert_eq!(v.leftover.count, 2);
    assert_eq!(v.violations(), 4);
}

fn guarded_write(hold: u64, entry: &str, ok: bool) -> Event {
    Event::Guarded {
        proc: 0,
        hold,
        name: "n".into(),
        fence: hold,
        entry: entry.into(),
        start: 1,
        end: 2,
        outcome: if ok { Outcome::Ok } else { Outcome::Fail },
        error: None,
    }
}

#[test]
fn guarded_writes_outside_their_hold_or_lost_are_found() {
    // holds 5 (owner a) then 7 (owner b), write holds whose fence is their id
    let mut h = vec![
        seg(5, "a", false, Mode::W, 10, 20),
        seg(7, "b", false, Mode::W, 30, 40),
        guarded_write(5, "0:5:5:0", true),
        guarded_write(7, "0:7:7:1", true),
        guarded_write(7, "0:7:7:2", true),
        guarded_write(5, "0:5:5:3", false),
    ];
    let log = |entries: &[&str]| Event::GuardedLog {
        name: "n".into(),
        entries: entries.iter().map(|e| e.to_string()).collect(),
    };
    h.push(log(&["0:5:5:0", "0:7:7:1", "0:7:7:2"]));
    let v = check(&h, 0);
    assert_eq!((v.guarded_ok, v.guarded_failed), (3, 1));
    assert_eq!(v.guarded_outside.count + v.guarded_lost.count, 0);
    // a write of hold 5 that landed after hold 7's; one Ok write missing; an entry of
    // a hold that never held write
    h.pop();
    h.push(log(&["0:5:5:0", "0:7:7:1", "0:5:5:3", "0:9:9:0"]));
    let v = check(&h, 0);
    assert_eq!(
        v.guarded_outside.count, 2,
        "{:?}",
        v.guarded_outside.examples
    );
    assert_eq!(v.guarded_lost.count, 1, "{:?}", v.guarded_lost.examples);
}

const S: u64 = 1_000_000_000;
const MS: u64 = 1_000_000;

fn killed(pid: u32, at: u64) -> Event {
    Event::Fault {
        kind: "client_kill".into(),
        target: format!("worker 0 (pid {pid})"),
        start: at,
        end: at + 10 * MS,
        error: None,
        pid: Some(pid),
    }
}

/// Observations of a hand-off of `name` to an owner of pid `pid`, every 100 ms from
/// `from` to `to` (ms), others waiting or not.
fn seen(name: &str, pid: u32, from: u64, to: u64, waiting: bool) -> Vec<Event> {
    (from..=to)
        .step_by(100)
        .map(|ms| Event::Handoff {
            name: name.into(),
            owner: format!("{pid}@host/{}:1", "0f".repeat(16)),
            hold: "7".into(),
            at: ms * MS,
            waiting,
        })
        .collect()
}

#[test]
fn a_lock_handed_to_a_dead_owner_longer_than_the_claim_window_is_found() {
    // worker 41 died at 1 s; its hand-off on n is seen, others waiting, 2-4.5 s
    let mut h = vec![killed(41, S)];
    h.extend(seen("n", 41, 2_000, 4_500, true));
    let v = check(&h, 0);
    assert_eq!(v.handed_to_dead.count, 1, "{:?}", v.handed_to_dead.examples);
    assert!(v.handed_to_dead.examples[0].contains("pid 41"));
    assert_eq!((v.dead_handoffs, v.dead_handoffs_waited), (1, 1));
    assert!((v.dead_handoff_longest_s - 2.5).abs() < 1e-9);
    assert_eq!(v.violations(), 1);
}

#[test]
fn hand_offs_within_the_window_or_nobody_waiting_or_not_dead_are_not_violations() {
    let mut h = vec![killed(41, S), killed(42, 9 * S)];
    // 1.5 s while others waited, then nobody waiting (nothing calls: it stays) for 10 s
    h.extend(seen("n", 41, 2_000, 3_500, true));
    h.extend(seen("n", 41, 3_600, 13_600, false));
    // seen 5 s while others waited, but its worker died after it was first seen
    h.extend(seen("m", 42, 8_000, 13_000, true));
    // a live owner's, 5 s
    h.extend(seen("o", 43, 2_000, 7_000, true));
    // the observer could not read the name for 3 s (a frozen master) in the middle
    h.extend(seen("p", 41, 2_000, 3_000, true));
    h.extend(seen("p", 41, 6_000, 7_500, true));
    let v = check(&h, 0);
    assert_eq!(v.handed_to_dead.count, 0, "{:?}", v.handed_to_dead.examples);
    assert_eq!(
        (v.handoffs_seen, v.dead_handoffs, v.dead_handoffs_waited),
        (4, 2, 2)
    );
    assert!((v.dead_handoff_longest_s - 1.5).abs() < 1e-9);
    // a node's clock stepped back while it was pending: 1 s more than allowed, but
    // within the step's allowance
    let mut h = vec![killed(41, S)];
    h.extend(seen("n", 41, 2_000, 5_000, true));
    h.push(Event::Fault {
        kind: "skew".into(),
        target: "node 7000 -1500 ms".into(),
        start: 2_500 * MS,
        end: 12 * S,
        error: None,
        pid: None,
    });
    assert_eq!(check(&h, 0).handed_to_dead.count, 0);
    h.pop();
    assert_eq!(check(&h, 0).handed_to_dead.count, 1);
    // a master frozen until its replica was promoted, healed 1 s before: the waiters may
    // still be looking for the new master
    h.push(Event::Fault {
        kind: "freeze_long".into(),
        target: "node 7000".into(),
        start: 0,
        end: S,
        error: None,
        pid: None,
    });
    assert_eq!(check(&h, 0).handed_to_dead.count, 0);
}
