//! How soon a master could be replaced, in the other masters' words: what lets a grant
//! or renewal whose `WAIT` fell short (a replica frozen, cut off, or in a full sync) be
//! believed for a while without breaking rule 1 (docs/PROTOCOL.md, "A silent replica").
//!
//! A replica is promoted only after its master was flagged failed (`FAIL`), which needs
//! a majority of the masters to flag it failing (`PFAIL`), and a master flags another so
//! only when it has not heard from it for its node timeout (Redis and Valkey:
//! `clusterCron` marks a node `PFAIL` when both its pending ping and its last data are
//! older than the node timeout; a ping outstanding means the last `PONG` is older than
//! it, and with none outstanding the next ping starts the count). The election then
//! waits at least 500 ms (`failover_auth_time`: 500 ms plus a random part and the
//! replica's rank). So each other master `X` answers, in one pipeline, `CLUSTER NODES`
//! (when it last had the master's `PONG`, on its clock), `TIME` (its clock now) and
//! its `cluster-node-timeout`: it cannot flag the master before
//! `asked + timeout(X) - silence(X)`, `asked` being when the question was sent, and the
//! silence `TIME - pong-recv + 500 ms` (a `PONG` time learnt by gossip may be up to
//! 500 ms ahead of X's clock; otherwise the silence is measured on X's clock alone, so
//! no clocks are compared). The promotion comes no earlier than the quorum-th of those
//! times, plus 500 ms.
//!
//! A master that does not answer in time, that does not list the master, or that lists
//! it as failing, a replica, or without a `PONG` yet, counts as having flagged it
//! already. The word is the majority's or nothing: fewer healthy answers than a quorum
//! and nothing is vouched for. An operator's `CLUSTER FAILOVER FORCE` or `TAKEOVER`
//! skips the failure detection, and is outside what this covers (as it is outside what
//! `WAIT` covers).

use std::time::Duration;

use fred::prelude::*;
use tokio::time::Instant;

use super::lane::{command, queue};
use super::router::Router;
use super::topology;

/// The least delay between a master flagged failed and its replica's promotion.
pub(crate) const ELECTION_DELAY: Duration = Duration::from_millis(500);

/// How long the other masters' answers are awaited: a vouch is asked only after a
/// `WAIT` fell short, and a master that does not answer in time counts against it.
const ASK_BOUND: Duration = Duration::from_millis(300);

/// A vouch this recent is taken again rather than asked anew: the other masters' word
/// holds whatever the call it is used for (it bounds the master's replacement, not a
/// grant), and a grant loses at most this much of its belief by it, where asking for
/// each of many grants in a row would cost each a round trip to every master.
const REUSE_FOR: Duration = Duration::from_millis(50);

/// The last vouch asked for each master: when asked, and what it said; and how many were
/// asked, and vouched, for the client's stats.
#[derive(Default)]
pub(crate) struct Vouches {
    last: std::sync::Mutex<std::collections::HashMap<String, (Instant, Option<Instant>)>>,
    asked: std::sync::atomic::AtomicU64,
    vouched: std::sync::atomic::AtomicU64,
}

impl Vouches {
    /// The other masters asked, and those times they vouched for the master.
    pub fn counts(&self) -> (u64, u64) {
        use std::sync::atomic::Ordering::Relaxed;
        (self.asked.load(Relaxed), self.vouched.load(Relaxed))
    }

    fn recent(&self, master: &str, now: Instant) -> Option<Option<Instant>> {
        let map = crate::mutex::lock(&self.last);
        let (asked, said) = map.get(master)?;
        (now.saturating_duration_since(*asked) < REUSE_FOR).then_some(*said)
    }

    /// Whether the last word on `master` vouched for it until after `now`.
    fn in_force(&self, master: &str, now: Instant) -> bool {
        let map = crate::mutex::lock(&self.last);
        map.get(master)
            .is_some_and(|(_, said)| said.is_some_and(|at| at > now))
    }

    fn record(&self, master: &str, asked: Instant, said: Option<Instant>) {
        use std::sync::atomic::Ordering::Relaxed;
        self.asked.fetch_add(1, Relaxed);
        if said.is_some() {
            self.vouched.fetch_add(1, Relaxed);
        }
        let mut map = crate::mutex::lock(&self.last);
        // (one entry per master the client ever vouched for: a handful)
        map.insert(master.to_string(), (asked, said));
    }
}

/// What one other master says of the master: how long its node timeout is, and how
/// long it has not had the master's `PONG` (both ms); `None`: it may flag the master
/// failing at any moment (no answer, or it does not see the master as a healthy master).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Word {
    pub node_timeout_ms: u64,
    pub silent_ms: u64,
}

/// How long after the question was sent the master's replica could first be promoted,
/// from the words of the OTHER masters of a cluster of `masters` masters (the master
/// included); `None` when nothing can be said (too few healthy words for a quorum, or
/// one of the quorum's flags could already be set).
pub(crate) fn replaceable_in(words: &[Option<Word>], masters: usize) -> Option<Duration> {
    let quorum = masters / 2 + 1;
    // each master's earliest `PFAIL` of the master, after the question (ms; may be
    // negative, and `None` first: it may be set already); the masters not asked (a
    // view listed more than the caller knew of) are `None` too
    let unasked = masters.saturating_sub(1).saturating_sub(words.len());
    let mut earliest: Vec<Option<i64>> = std::iter::repeat_n(None, unasked)
        .chain(words.iter().map(|w| {
            w.map(|w| {
                i64::try_from(w.node_timeout_ms).unwrap_or(i64::MAX)
                    - i64::try_from(w.silent_ms).unwrap_or(i64::MAX)
            })
        }))
        .collect();
    if earliest.len() < quorum {
        return None;
    }
    earliest.sort();
    // the quorum-th flag is the first moment the master can be flagged failed
    let fail_at = earliest[quorum - 1]?;
    let promoted_at = fail_at.checked_add(i64::try_from(ELECTION_DELAY.as_millis()).ok()?)?;
    u64::try_from(promoted_at)
        .ok()
        .filter(|ms| *ms > 0)
        .map(Duration::from_millis)
}

/// The word of the master that sent `nodes` (its `CLUSTER NODES` reply, from `asked`)
/// about the master at `master`, with its `TIME` in ms and its node timeout in ms.
#[cfg(test)]
fn word_of(
    nodes: &str,
    asked: &str,
    master: &str,
    time_ms: u64,
    node_timeout_ms: u64,
) -> Option<Word> {
    word_in(
        &topology::parse_nodes(nodes, asked)?,
        master,
        time_ms,
        node_timeout_ms,
    )
}

/// The masters that serve slots in a view: the cluster's size, whose majority fails a
/// master.
fn size_of(view: &[topology::NodeLine]) -> usize {
    view.iter()
        .filter(|l| l.master && !l.slots.is_empty())
        .count()
}

/// [`word_of`], from the view read.
fn word_in(
    view: &[topology::NodeLine],
    master: &str,
    time_ms: u64,
    node_timeout_ms: u64,
) -> Option<Word> {
    let line = view.iter().find(|l| l.addr.as_deref() == Some(master))?;
    if !line.master || line.failing || line.slots.is_empty() || line.pong_recv_ms == 0 {
        return None;
    }
    Some(Word {
        node_timeout_ms,
        // (a PONG time learnt by gossip may be up to GOSSIP_AHEAD ahead of this clock)
        silent_ms: (time_ms + GOSSIP_AHEAD_MS).saturating_sub(line.pong_recv_ms),
    })
}

/// How far ahead of a master's clock its `pong-recv` of another may be: with no ping
/// pending, a master takes the newer `PONG` time a third node's gossip reports, from
/// that node's clock, when it is at most 500 ms ahead of its own
/// (`clusterProcessGossipSection`, Redis and Valkey), and a ping it sends later counts
/// from then: so its flag comes no sooner than `pong-recv - 500 ms + node timeout`.
const GOSSIP_AHEAD_MS: u64 = 500;

/// `TIME`'s reply (seconds and microseconds) in ms.
fn time_ms(reply: &Value) -> Option<u64> {
    let Value::Array(parts) = reply else {
        return None;
    };
    let number = |v: Option<&Value>| -> Option<u64> {
        match v? {
            Value::Integer(i) => u64::try_from(*i).ok(),
            v => v.as_str()?.parse().ok(),
        }
    };
    Some(number(parts.first())? * 1000 + number(parts.get(1))? / 1000)
}

/// `CONFIG GET cluster-node-timeout`'s reply (an array or a map of name and value).
fn node_timeout_ms(reply: &Value) -> Option<u64> {
    let value = match reply {
        Value::Array(parts) => parts.get(1)?.as_str()?.parse().ok()?,
        Value::Map(map) => map.values().next()?.as_str()?.parse().ok()?,
        _ => return None,
    };
    Some(value)
}

/// Whom a call asks, when its `WAIT` falls short, how soon its master could be
/// replaced: the router (which knows the other masters) and the master's address.
#[derive(Clone, Copy)]
pub(crate) struct Vouch<'a> {
    pub router: &'a Router,
    pub master: &'a str,
}

impl Vouch<'_> {
    /// See [`Router::replaceable_after`].
    pub async fn ask(self) -> Option<Instant> {
        self.router.replaceable_after(self.master).await
    }

    /// While the other masters' word for the master is in force (its replica is
    /// silent, and they vouched for the master), a `WAIT` blocks at most
    /// [`SILENT_WAIT`]: one that would block its whole timeout only delays the vouch it
    /// falls back on, and a replica that is back acknowledges within it.
    pub fn shorten(self, confirm: &mut Option<crate::cluster::lane::Confirm>) {
        if let Some(c) = confirm.as_mut() {
            if self.router.vouches.in_force(self.master, Instant::now()) {
                let silent = u64::try_from(SILENT_WAIT.as_millis()).unwrap_or(u64::MAX);
                c.timeout_ms = c.timeout_ms.min(silent);
            }
        }
    }
}

/// How long a `WAIT` blocks, at most, on a master whose replica is silent and whom the
/// other masters vouched for (see [`Vouch::shorten`]).
pub(crate) const SILENT_WAIT: Duration = Duration::from_millis(50);

impl Router {
    /// The earliest moment a replica of the master at `master` could be promoted, in
    /// the word of the other masters (see the module docs); `None` when nothing can be
    /// vouched for (this client knows no cluster, too few masters answered, or the
    /// master is, or may be, flagged already).
    pub async fn replaceable_after(&self, master: &str) -> Option<Instant> {
        let asked = Instant::now();
        if let Some(said) = self.vouches.recent(master, asked) {
            return said;
        }
        let said = self.ask_masters(master, asked).await;
        self.vouches.record(master, asked, said);
        said
    }

    /// [`replaceable_after`](Self::replaceable_after), asked now (at `asked`).
    async fn ask_masters(&self, master: &str, asked: Instant) -> Option<Instant> {
        let routes = self.routes();
        let masters = routes.map.masters();
        if !self.clustered() || !masters.iter().any(|m| m == master) {
            return None;
        }
        let others = masters.iter().filter(|m| *m != master);
        let answers = futures_util::future::join_all(others.map(|other| async move {
            tokio::time::timeout(ASK_BOUND, self.word_about(other, master))
                .await
                .ok()
                .flatten()
        }))
        .await;
        // the cluster's size: the largest any view says (a master this client does not
        // know of yet counts as flagging)
        let size = answers
            .iter()
            .flatten()
            .map(|(_, size)| *size)
            .fold(masters.len(), usize::max);
        let words: Vec<Option<Word>> = answers.into_iter().map(|a| a.and_then(|a| a.0)).collect();
        let after = replaceable_in(&words, size);
        crate::observe::vouch(master, after);
        Some(asked + after?)
    }

    /// What the master at `other` says of the master at `master`, and how many masters
    /// serve slots in its view (`None`: no answer).
    async fn word_about(&self, other: &str, master: &str) -> Option<(Option<Word>, usize)> {
        let node = self.node(other).ok()?;
        let control = node.control().ok()?;
        let pipeline = control.pipeline();
        queue(&pipeline, command("CLUSTER"), vec!["NODES".into()]).await;
        queue(&pipeline, command("TIME"), Vec::new()).await;
        let timeout = vec!["GET".into(), "cluster-node-timeout".into()];
        queue(&pipeline, command("CONFIG"), timeout).await;
        let replies: Vec<std::result::Result<Value, fred::error::Error>> = pipeline.try_all().await;
        let [Ok(nodes), Ok(time), Ok(timeout)] = &replies[..] else {
            return None;
        };
        let view = topology::parse_nodes(nodes.as_str()?.as_ref(), other)?;
        let word = word_in(&view, master, time_ms(time)?, node_timeout_ms(timeout)?);
        Some((word, size_of(&view)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn word(node_timeout_ms: u64, silent_ms: u64) -> Option<Word> {
        Some(Word {
            node_timeout_ms,
            silent_ms,
        })
    }

    #[test]
    fn the_quorum_th_earliest_flag_and_the_election_bound_the_promotion() {
        // three masters: the quorum is 2, both others must flag the master
        let both = [word(2000, 100), word(2000, 900)];
        assert_eq!(
            replaceable_in(&both, 3),
            Some(Duration::from_millis(2000 - 100 + 500))
        );
        // five masters: the quorum is 3 of the 4 others: the third flag, the one that
        // did not answer counted as flagging already
        let four = [word(2000, 0), word(2000, 1500), word(2000, 500), None];
        assert_eq!(
            replaceable_in(&four, 5),
            Some(Duration::from_millis(2000 - 500 + 500))
        );
    }

    #[test]
    fn a_master_that_does_not_vouch_counts_as_flagging_already() {
        // three masters: both others must flag it; one may have, the other cannot yet
        assert_eq!(
            replaceable_in(&[word(2000, 300), None], 3),
            Some(Duration::from_millis(2200))
        );
        assert_eq!(replaceable_in(&[None, None], 3), None);
        // five masters, two silent: the third flag is the one that cannot come yet
        let four = [word(2000, 0), word(2000, 100), None, None];
        assert_eq!(
            replaceable_in(&four, 5),
            Some(Duration::from_millis(2000 - 100 + 500))
        );
        // masters this client did not ask (a view lists more than its map): flagging
        assert_eq!(
            replaceable_in(&[word(2000, 0), word(2000, 0)], 5),
            Some(Duration::from_millis(2500))
        );
        assert_eq!(replaceable_in(&[word(2000, 0), word(2000, 0)], 7), None);
        // no other master (a cluster of one): nobody could vote, but nobody vouches
        assert_eq!(replaceable_in(&[], 1), None);
    }

    #[test]
    fn a_silence_past_the_timeout_and_the_election_vouches_for_nothing() {
        assert_eq!(
            replaceable_in(&[word(2000, 2500), word(2000, 2600)], 3),
            None
        );
        assert_eq!(
            replaceable_in(&[word(2000, 2499), word(2000, 4000)], 3),
            Some(Duration::from_millis(1))
        );
        assert_eq!(replaceable_in(&[word(0, u64::MAX), word(0, 600)], 3), None);
    }

    const NODES: &str = "\
07c3 10.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-5460
67ed 10.0.0.2:7001@17001 master - 0 1700000000500 2 connected 5461-10922
2927 10.0.0.3:7002@17002 master,fail? - 1699999990000 1699999990000 3 connected 10923-16383
e7d1 10.0.0.4:7003@17003 slave 67ed 0 1700000000600 2 connected
";

    #[test]
    fn a_word_is_read_from_the_pong_of_a_healthy_master() {
        let w = word_of(
            NODES,
            "10.0.0.1:7000",
            "10.0.0.2:7001",
            1_700_000_001_000,
            2000,
        );
        assert_eq!(
            w,
            Some(Word {
                node_timeout_ms: 2000,
                // 500 ms since its PONG, and the 500 ms a gossiped PONG may be ahead
                silent_ms: 1000
            })
        );
        // flagged failing, a replica, unknown, or itself (no PONG): no word
        for m in [
            "10.0.0.3:7002",
            "10.0.0.4:7003",
            "10.0.0.9:7000",
            "10.0.0.1:7000",
        ] {
            assert_eq!(
                word_of(NODES, "10.0.0.1:7000", m, 1_700_000_001_000, 2000),
                None,
                "{m}"
            );
        }
        // a PONG time ahead of this clock (gossiped from a clock ahead): at most 500 ms
        // ahead counts; beyond, no silence, not negative
        let w = word_of(
            NODES,
            "10.0.0.1:7000",
            "10.0.0.2:7001",
            1_700_000_000_100,
            2000,
        );
        assert_eq!(w.map(|w| w.silent_ms), Some(100));
        let w = word_of(
            NODES,
            "10.0.0.1:7000",
            "10.0.0.2:7001",
            1_699_999_999_000,
            2000,
        );
        assert_eq!(w.map(|w| w.silent_ms), Some(0));
    }

    #[test]
    fn a_view_says_the_cluster_size() {
        let view = topology::parse_nodes(NODES, "10.0.0.1:7000").unwrap();
        assert_eq!(size_of(&view), 3);
    }

    #[test]
    fn time_and_config_replies_are_read_in_both_protocols() {
        let t = Value::Array(vec![Value::from("1700000001"), Value::from("250000")]);
        assert_eq!(time_ms(&t), Some(1_700_000_001_250));
        assert_eq!(time_ms(&Value::Null), None);
        let c = Value::Array(vec![
            Value::from("cluster-node-timeout"),
            Value::from("15000"),
        ]);
        assert_eq!(node_timeout_ms(&c), Some(15000));
        assert_eq!(node_timeout_ms(&Value::from("x")), None);
    }
}
