//! What each action does: the clients' steps (following docs/PROTOCOL.md), the
//! servers' function calls, and the faults.

use super::*;

impl System {
    pub fn new(bounds: Bounds, bug: Option<Bug>) -> Result<System, String> {
        let text = library_text(bug)?;
        Engine::load(&text)?;
        // the documented window (the shipped text's), whatever a seeded bug made of it
        let claim_ms = cluster_rwlock::operator::library::TEXT
            .split("\nlocal CLAIM_MS = ")
            .nth(1)
            .and_then(|rest| rest.split('\n').next())
            .and_then(|n| n.trim().parse().ok())
            .ok_or("the library's CLAIM_MS is not found")?;
        let text_id = {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            text.hash(&mut h);
            h.finish()
        };
        Ok(System {
            bounds,
            bug,
            text,
            text_id,
            claim_ms,
        })
    }

    /// Runs `f` with the trace on, and returns what it logged.
    pub fn traced<R>(f: impl FnOnce() -> R) -> (R, Vec<String>) {
        TRACE.with(|t| *t.borrow_mut() = Some(Vec::new()));
        let r = f();
        let lines = TRACE.with(|t| t.borrow_mut().take()).unwrap_or_default();
        (r, lines)
    }

    pub(super) fn clock(&self, s: &State, node: u8) -> u64 {
        let skew = if node == 0 {
            0
        } else {
            self.bounds.replica_skew_ms
        };
        (EPOCH_MS as i64 + s.ticks as i64 * TICK_MS as i64 + skew) as u64
    }

    /// Runs function `name` on the master, then replicates what it wrote and records
    /// the hand-offs its messages name. Returns the reply, the master's clock, and the
    /// messages published.
    pub(super) fn call(
        &self,
        s: &mut State,
        name: &str,
        args: &[&str],
    ) -> (Reply, u64, Vec<String>) {
        self.call_keys(s, name, &[KEY], args)
    }

    /// As `call`, with the keys given.
    pub(super) fn call_keys(
        &self,
        s: &mut State,
        name: &str,
        keys: &[&str],
        args: &[&str],
    ) -> (Reply, u64, Vec<String>) {
        let node = s.master as usize;
        let now = self.clock(s, s.master);
        let mut call = Call {
            keys: std::mem::take(&mut s.nodes[node].keys),
            now_ms: now,
            wrote: false,
            published: vec![],
        };
        let full = format!("rwlock4_{name}");
        let reply = ENGINE.with(|cell| {
            let mut cell = cell.borrow_mut();
            if cell.as_ref().is_none_or(|(id, _)| *id != self.text_id) {
                let engine = Engine::load(&self.text).expect("loaded once in System::new");
                *cell = Some((self.text_id, engine));
            }
            let (_, engine) = cell.as_ref().expect("set above");
            engine.fcall(&mut call, &full, keys, args)
        });
        s.nodes[node].keys = call.keys;
        if call.wrote && s.replica.is_some() {
            // what the replica would be promoted with matters only while a failover may
            // still come: after that, a write's place in the stream is all a WAIT needs
            let copy = if s.failovers < self.bounds.failovers {
                s.nodes[node].keys.clone()
            } else {
                Keyspace::new()
            };
            s.stream.push(copy);
        }
        let messages: Vec<String> = call.published.into_iter().map(|(_, m)| m).collect();
        TRACE.with(|t| {
            if let Some(lines) = t.borrow_mut().as_mut() {
                lines.push(format!(
                    "    {full}({}) on node {node} at {} -> {reply}{}",
                    args.join(", "),
                    now - EPOCH_MS,
                    if messages.is_empty() {
                        String::new()
                    } else {
                        format!(", published {messages:?}")
                    }
                ));
            }
        });
        // a hand-off said on the channel is heard by the model however the call came
        Self::heard(s, &messages, now);
        (reply, now, messages)
    }

    pub(super) fn now_ms(s: &State) -> u64 {
        s.ticks as u64 * TICK_MS
    }

    pub(super) fn believes(s: &State, c: &Client) -> bool {
        let now = Self::now_ms(s);
        match c.phase {
            Phase::Holding { until, .. } | Phase::Renewing { until, .. } => now < until,
            _ => false,
        }
    }

    /// The messages of a call: a hand-off names its writer.
    pub(super) fn heard(s: &mut State, messages: &[String], at: u64) {
        for m in messages {
            let mut words = m.split(' ');
            if words.next() == Some("g") {
                if let Some(o) = words.next() {
                    for (i, c) in s.clients.iter_mut().enumerate() {
                        if owner(i as u8) == o {
                            c.handed_at = Some(at);
                        }
                    }
                }
            }
        }
    }

    /// A refusal of live client `c` at server time `at`: fine while another client holds,
    /// is granted, or waits (it may be ahead in the queue), or while what another left
    /// may still stand: a dead client's hold (a lease from its last grant or renewal),
    /// a hand-off to it (the claim window), a dead reader's place (its lease and a
    /// window); an idle or finished client's last call (a grant it gave up on a master
    /// that then failed may live on the promoted one for a lease). Anything else is a
    /// free lock refusing a live waiter.
    pub(super) fn refusal_is_justified(&self, s: &State, c: u8, at: u64) -> bool {
        // the bounds are exact on one clock (a call at the deadline itself may still
        // find it: 1 ms); after a failover, the new master's clock differs by the skew
        let skew = if s.failovers > 0 {
            self.bounds.replica_skew_ms.unsigned_abs()
        } else {
            0
        };
        let slack = 1 + skew;
        let ahead = self.bounds.replica_skew_ms.max(0) as u64;
        for (i, d) in s.clients.iter().enumerate() {
            if i as u8 == c {
                continue;
            }
            let until = match d.phase {
                Phase::Waiting
                | Phase::Confirming { .. }
                | Phase::Holding { .. }
                | Phase::Renewing { .. } => return true,
                Phase::Dead => [
                    d.hold_deadline,
                    d.handed_at.map(|h| h + self.claim_ms),
                    if d.mode == b'r' {
                        d.attempted_at.map(|a| a + LEASE_MS + self.claim_ms)
                    } else {
                        None
                    },
                ]
                .into_iter()
                .flatten()
                .max(),
                Phase::Idle | Phase::Done => [
                    d.acted
                        .map(|t| EPOCH_MS + t as u64 * TICK_MS + LEASE_MS + ahead),
                    d.handed_at.map(|h| h + self.claim_ms),
                ]
                .into_iter()
                .flatten()
                .max(),
            };
            if until.is_some_and(|u| at < u + slack) {
                return true;
            }
        }
        false
    }

    /// An attempt's reply: granted (confirm next), refused (wait), or odd.
    pub(super) fn attempted(&self, s: &mut State, c: u8, reply: &Reply, at: u64) {
        let now = Self::now_ms(s);
        let code = reply.at(0).and_then(Reply::int);
        let client = &s.clients[c as usize];
        let handed = client.handed_at.is_some();
        let first_sent = client.first_sent;
        match code {
            Some(1) => {
                let Some(fence) = reply
                    .at(1)
                    .and_then(Reply::text)
                    .and_then(|f| f.parse().ok())
                else {
                    s.odd_reply = true;
                    return;
                };
                // '-': the lease counts from the first attempt under this id (rule 4)
                let until = match reply.at(3) {
                    Some(Reply::Bulk(dash)) if dash == "-" => first_sent + LEASE_MS - MARGIN_MS,
                    None => now + LEASE_MS - MARGIN_MS,
                    Some(_) => {
                        s.odd_reply = true;
                        return;
                    }
                };
                if fence <= s.believed_fence {
                    s.fence_regressed = true;
                }
                if handed {
                    s.handoffs_taken = s.handoffs_taken.saturating_add(1);
                }
                if s.clients
                    .iter()
                    .any(|d| d.phase == Phase::Dead && d.handed_at.is_some())
                {
                    s.granted_past_dead = true;
                }
                // the grant's hint: nobody (0), others (1), or the queue's head ticket
                let head = match reply.at(2) {
                    None | Some(Reply::Int(0 | 1)) => None,
                    Some(Reply::Bulk(t)) => match t.strip_prefix("t:").map(str::parse) {
                        Some(Ok(t)) => Some(t),
                        _ => {
                            s.odd_reply = true;
                            return;
                        }
                    },
                    Some(_) => {
                        s.odd_reply = true;
                        return;
                    }
                };
                let needs = s.stream.len() as u8;
                let on = s.master;
                let cl = &mut s.clients[c as usize];
                cl.head = head;
                cl.handed_at = None;
                cl.excused = false;
                if Bug::client_skips_wait(self.bug) {
                    cl.phase = Phase::Holding { fence, until };
                    s.believed_fence = s.believed_fence.max(fence);
                } else {
                    cl.phase = Phase::Confirming {
                        on,
                        needs,
                        fence,
                        until,
                    };
                }
            }
            Some(0) => {
                s.clients[c as usize].phase = Phase::Waiting;
                if !self.refusal_is_justified(s, c, at) {
                    s.starved = true;
                }
            }
            _ => s.odd_reply = true,
        }
    }

    /// The client gives back whatever its attempt may have been granted and ends this
    /// hold's cycle.
    pub(super) fn withdraw(&self, s: &mut State, c: u8) {
        let id = s.clients[c as usize].id.to_string();
        let (reply, _, _) = self.call(s, "withdraw", &[&owner(c), &id]);
        if reply != Reply::Array(vec![Reply::Int(1)]) {
            s.odd_reply = true;
        }
        self.end_cycle(s, c);
    }

    pub(super) fn end_cycle(&self, s: &mut State, c: u8) {
        let cycles = self.bounds.cycles;
        let cl = &mut s.clients[c as usize];
        cl.cycles += 1;
        cl.excused = false;
        cl.head = None;
        cl.handed_at = None;
        cl.phase = if cl.cycles >= cycles {
            Phase::Done
        } else {
            Phase::Idle
        };
    }

    /// The replica applies the `n` oldest writes of the stream.
    pub(super) fn replicate(s: &mut State, n: usize) {
        let Some(r) = s.replica else { return };
        if n == 0 {
            return;
        }
        let n = n.min(s.stream.len());
        let applied: Vec<Keyspace> = s.stream.drain(..n).collect();
        if let Some(last) = applied.into_iter().last() {
            s.nodes[r as usize].keys = last;
        }
        for c in &mut s.clients {
            if let Phase::Confirming { needs, .. } | Phase::Renewing { needs, .. } = &mut c.phase {
                *needs = needs.saturating_sub(n as u8);
            }
        }
        s.break_needs = s
            .break_needs
            .map(|b| b.saturating_sub(n as u8))
            .filter(|b| *b > 0);
    }

    /// Whether a WAIT on node `on` can be answered with every acknowledgement: its
    /// master is still up (with no replica, there is none to wait for; with one, the
    /// model applies the stream when a WAIT needs it, or when a failover picks how much
    /// the replica had).
    pub(super) fn can_ack(s: &State, on: u8) -> bool {
        on == s.master && s.nodes[on as usize].up
    }

    /// Whether the replica may be promoted now: always without the failure detector in
    /// the model; with it, only once the majority has not heard from the master for the
    /// node timeout, and the election delay has passed.
    pub(super) fn may_fail_over(&self, s: &State) -> bool {
        !self.bounds.detector
            || s.cut_at
                .is_some_and(|h| Self::now_ms(s) >= h + NODE_TIMEOUT_MS + ELECTION_MS)
    }

    /// What a client's vouch finds (docs/PROTOCOL.md, "A silent replica"): the earliest
    /// time (its clock) the replica could be promoted, from how long ago the majority last
    /// heard from the master; `None` once the replica was promoted (the majority knows,
    /// and says so). Atomic in the model: the majority is asked at the step's time.
    pub(super) fn replaceable_after(&self, s: &State) -> Option<u64> {
        if s.failovers > 0 {
            return None;
        }
        let now = Self::now_ms(s);
        let age = if Bug::vouch_ignores_age(self.bug) {
            0
        } else {
            s.cut_at.map_or(0, |h| now - h)
        };
        (now + NODE_TIMEOUT_MS + ELECTION_MS).checked_sub(age)
    }

    /// Whether a WAIT must wait for the replica (else it answers at once: the master
    /// lists none).
    pub(super) fn waits_for_replica(s: &State) -> bool {
        s.replica.is_some() && s.listed
    }
}
