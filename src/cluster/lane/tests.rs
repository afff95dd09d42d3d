//! The unit tests of `lane`.

use super::*;

/// A lane with no connection behind it: what it is handed, as it is handed.
fn bare_lane() -> (Lane, mpsc::UnboundedReceiver<Vec<Job>>) {
    let (jobs, rx) = mpsc::unbounded_channel();
    (Lane { jobs, turn: None }, rx)
}

#[tokio::test]
async fn a_gathered_batch_goes_whole_to_each_lane_however_its_calls_came() {
    let (a, mut on_a) = bare_lane();
    let (b, mut on_b) = bare_lane();
    let gather = Arc::new(Gather::new());
    let send = |lane: &Lane| {
        let (gather, lane) = (gather.clone(), lane.clone());
        tokio::spawn(async move { gather.send(&lane, false, None, vec![Vec::new()]).await })
    };
    let first = send(&a);
    // a caller that hands its call over later (after awaits of its own) is waited for
    for _ in 0..5 {
        tokio::task::yield_now().await;
    }
    let second = send(&b);
    let third = send(&a);
    while gather.gathered() < 3 {
        tokio::task::yield_now().await;
    }
    assert!(on_a.try_recv().is_err(), "nothing is sent before the flush");
    gather.flush();
    assert_eq!(
        on_a.try_recv().unwrap().len(),
        2,
        "lane a: its two calls at once"
    );
    assert_eq!(on_b.try_recv().unwrap().len(), 1);
    assert!(on_a.try_recv().is_err() && on_b.try_recv().is_err());
    // after the flush, a call goes straight to its lane
    let late = send(&a);
    let got = loop {
        match on_a.try_recv() {
            Ok(got) => break got,
            Err(_) => tokio::task::yield_now().await,
        }
    };
    assert_eq!(got.len(), 1);
    gather.flush();
    // the callers are answered as their batches are
    for job in got {
        let _ = job.done.send(unconfirmed(Vec::new()));
    }
    assert!(late.await.is_ok());
    for t in [first, second, third] {
        t.abort();
    }
}

fn job(confirm: Option<Confirm>) -> Job {
    Job {
        calls: Vec::new(),
        asking: false,
        confirm,
        done: oneshot::channel().0,
    }
}

/// Replicas wanted and acknowledged, of a confirmation that fell short.
fn pair(u: Option<Unconfirmed>) -> Option<(u32, u32)> {
    u.map(|u| (u.wanted, u.acked))
}

fn confirm(wanted: u32, timeout_ms: u64, every_attached: bool) -> Option<Confirm> {
    Some(Confirm {
        wanted,
        timeout_ms,
        every_attached,
    })
}

#[test]
fn a_batch_waits_for_the_most_replicas_within_the_longest_timeout() {
    let c = |wanted, timeout_ms| confirm(wanted, timeout_ms, false);
    assert_eq!(combined(&[job(None), job(None)]), None);
    // a job 1 ms from its deadline does not cut the others' WAIT to 1 ms
    assert_eq!(
        combined(&[job(c(1, 50)), job(None), job(c(2, 1))]),
        c(2, 50)
    );
    assert_eq!(
        combined(&[job(c(2, 5)), job(confirm(0, 20, true))]),
        confirm(2, 20, true)
    );
}

#[test]
fn the_masters_own_count_of_its_replicas_is_read_from_its_info() {
    let info = "# Replication\r\nrole:master\r\nconnected_slaves:3\r\n\
        slave0:ip=127.0.0.1,port=7004,state=online,offset=120,lag=0\r\n\
        slave1:ip=127.0.0.1,port=7005,state=wait_bgsave,offset=0,lag=0\r\n\
        slave2:ip=127.0.0.1,port=7006,state=online,offset=118,lag=7\r\n\
        master_failover_state:no-failover\r\nmaster_repl_offset:120\r\n";
    // a lagging replica whose link is up, and one still loading its first copy,
    // count: either could be promoted
    assert_eq!(attached_replicas(info), Some(3));
    assert_eq!(
        attached_replicas("role:master\r\nconnected_slaves:0\r\n"),
        Some(0)
    );
    assert_eq!(
        attached_replicas("role:master\nreplica0:ip=a,port=1,state=online,offset=1,lag=0\n"),
        Some(1)
    );
    assert_eq!(
        attached_replicas("role:slave\r\nmaster_host:127.0.0.1\r\n"),
        None
    );
    assert_eq!(attached_replicas(""), None);
    // fields that only look alike
    assert_eq!(
        attached_replicas("role:master\nslaves:state=online\nslave_read_only:1\n"),
        Some(0)
    );
}

#[test]
fn every_attached_replica_must_acknowledge_whatever_was_guessed() {
    let b = |acked, attached| Batch {
        replies: Vec::new(),
        acked,
        attached,
        listed: Vec::new(),
    };
    // guessed 1, the master says 2: one acknowledgement is not enough
    assert_eq!(
        pair(b(Some(1), Some(2)).unconfirmed(confirm(1, 5, true))),
        Some((2, 1))
    );
    // guessed 2, one of them died: the one left confirms
    assert_eq!(
        pair(b(Some(1), Some(1)).unconfirmed(confirm(2, 5, true))),
        None
    );
    // no replica: confirmed alone, by the master's own word only
    assert_eq!(
        pair(b(None, Some(0)).unconfirmed(confirm(0, 5, true))),
        None
    );
    assert_eq!(
        pair(b(None, Some(1)).unconfirmed(confirm(0, 5, true))),
        Some((1, 0))
    );
    // the master's word unreadable: at least one
    assert_eq!(
        pair(b(None, None).unconfirmed(confirm(0, 5, true))),
        Some((1, 0))
    );
    assert_eq!(
        pair(b(Some(1), None).unconfirmed(confirm(1, 5, true))),
        None
    );
    // an explicit count is that count
    assert_eq!(
        pair(b(Some(1), Some(2)).unconfirmed(confirm(1, 5, false))),
        None
    );
    // a short confirmation names the replicas listed that acknowledged least
    let listed = ReplicaStatus::parse_info(
        "role:master\nmaster_repl_offset:90\n\
         slave0:ip=10.0.0.4,port=6379,state=online,offset=90,lag=0\n\
         slave1:ip=10.0.0.5,port=6379,state=online,offset=40,lag=9\n",
    );
    let short = Batch {
        listed,
        ..b(Some(1), Some(2))
    };
    let u = short.unconfirmed(confirm(1, 5, true)).expect("short");
    let named: Vec<&str> = u.silent.iter().map(|r| r.addr.as_str()).collect();
    assert_eq!((u.wanted, u.acked, named), (2, 1, vec!["10.0.0.5:6379"]));
    assert_eq!(u.silent[0].lag_secs, Some(9));
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
    assert_eq!(acknowledged(Some(&i(2))), 2);
    // a WAIT that failed (its connection lost) confirms nothing
    assert_eq!(acknowledged(Some(&lost())), 0);
    assert_eq!(acknowledged(Some(&i(-3))), 0);
    assert_eq!(acknowledged(None), 0);
    let b = Batch {
        replies: Vec::new(),
        acked: Some(1),
        attached: None,
        listed: Vec::new(),
    };
    let want = |wanted| confirm(wanted, 5, false);
    assert_eq!(pair(b.unconfirmed(want(1))), None);
    assert_eq!(pair(b.unconfirmed(want(2))), Some((2, 1)));
    assert_eq!(pair(b.unconfirmed(None)), None);
}
