//! The model as stateright checks it: its initial states, actions, next states and
//! properties.

use super::*;

impl Model for System {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        let node = Node {
            keys: BTreeMap::new(),
            up: true,
        };
        vec![State {
            ticks: 0,
            nodes: [node.clone(), node],
            master: 0,
            replica: Some(1),
            listed: true,
            cut_at: None,
            vouched: false,
            drops: 0,
            stream: vec![],
            clients: self
                .bounds
                .modes
                .iter()
                .map(|&mode| Client {
                    mode,
                    phase: Phase::Idle,
                    id: 0,
                    first_sent: 0,
                    cycles: 0,
                    give_ups: 0,
                    excused: false,
                    head: None,
                    hold_deadline: None,
                    handed_at: None,
                    attempted_at: None,
                    acted: None,
                })
                .collect(),
            crashes: 0,
            failovers: 0,
            breaks: 0,
            break_needs: None,
            believed_fence: 0,
            fence_regressed: false,
            starved: false,
            odd_reply: false,
            guarded_astray: false,
            guarded_landed: false,
            handoffs_taken: 0,
            granted_past_dead: false,
            broken_waiter_stopped: false,
        }]
    }

    fn actions(&self, s: &State, actions: &mut Vec<Action>) {
        let live = s
            .clients
            .iter()
            .any(|c| !matches!(c.phase, Phase::Done | Phase::Dead));
        if !live {
            return;
        }
        if s.ticks < self.bounds.ticks {
            actions.push(Action::Tick);
        }
        if s.drops < self.bounds.drops && s.listed && s.replica.is_some() {
            actions.push(Action::DropReplica);
        }
        let now = Self::now_ms(s);
        if self.bounds.detector && s.cut_at.is_none() && s.failovers < self.bounds.failovers {
            actions.push(Action::Isolate);
        }
        if s.failovers < self.bounds.failovers && s.replica.is_some() && self.may_fail_over(s) {
            for n in 0..=s.stream.len() {
                actions.push(Action::Failover(n as u8));
            }
        }
        let holding = s.clients.iter().any(|c| {
            matches!(
                c.phase,
                Phase::Confirming { .. } | Phase::Holding { .. } | Phase::Renewing { .. }
            )
        });
        if holding && s.breaks < self.bounds.breaks {
            actions.push(Action::Break(None));
            actions.push(Action::Break(Some(0)));
        }
        for (i, c) in s.clients.iter().enumerate() {
            let i = i as u8;
            let fresh = c.acted != Some(s.ticks);
            match &c.phase {
                Phase::Idle => actions.push(Action::Attempt(i)),
                Phase::Waiting => {
                    if fresh {
                        actions.push(Action::Attempt(i));
                    }
                    if c.give_ups < self.bounds.give_ups {
                        actions.push(Action::GiveUp(i));
                    }
                }
                Phase::Confirming { on, needs, .. } | Phase::Renewing { on, needs, .. } => {
                    if Self::can_ack(s, *on) {
                        actions.push(Action::WaitAcked(i));
                    }
                    if !Self::can_ack(s, *on) || (*needs > 0 && Self::waits_for_replica(s)) {
                        actions.push(Action::WaitShort(i));
                        if self.bounds.detector {
                            actions.push(Action::Vouch(i));
                        }
                    }
                }
                Phase::Holding { until, .. } => {
                    // every third of a lease after the send it counts from, or later (a
                    // paused holder), while it believes
                    let sent = until + MARGIN_MS - LEASE_MS;
                    if now < *until && now >= sent + RENEW_EVERY_MS && fresh {
                        actions.push(Action::Renew(i));
                    }
                    if self.bounds.writes && fresh {
                        actions.push(Action::GuardedWrite(i));
                    }
                    actions.push(Action::Release(i));
                }
                Phase::Done | Phase::Dead => continue,
            }
            // a crash that matters: with a place, a grant or a hold
            let stake = matches!(
                c.phase,
                Phase::Waiting | Phase::Confirming { .. } | Phase::Holding { .. }
            );
            if stake && s.crashes < self.bounds.crashes {
                actions.push(Action::Crash(i));
            }
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut s = last.clone();
        match action {
            Action::Tick => s.ticks += 1,
            Action::Failover(n) => {
                let r = s.replica?;
                Self::replicate(&mut s, n as usize);
                if s.break_needs.take().is_some() {
                    // the promoted replica never had the break: its holds are held again
                    for c in &mut s.clients {
                        c.excused = false;
                    }
                }
                s.nodes[s.master as usize].up = false;
                s.master = r;
                s.replica = None;
                s.stream.clear();
                s.failovers += 1;
            }
            Action::Isolate => s.cut_at = Some(Self::now_ms(&s)),
            Action::Vouch(c) => {
                let now = Self::now_ms(&s);
                let cap = self
                    .replaceable_after(&s)
                    .map(|at| at.saturating_sub(MARGIN_MS))
                    .filter(|cap| *cap > now);
                let cl = &mut s.clients[c as usize];
                match (cl.phase.clone(), cap) {
                    (Phase::Confirming { fence, until, .. }, Some(cap)) => {
                        cl.phase = Phase::Holding {
                            fence,
                            until: until.min(cap),
                        };
                        s.believed_fence = s.believed_fence.max(fence);
                        s.vouched = true;
                    }
                    (
                        Phase::Renewing {
                            fence,
                            until,
                            renewed_until,
                            ..
                        },
                        Some(cap),
                    ) => {
                        cl.phase = Phase::Holding {
                            fence,
                            until: until.max(renewed_until.min(cap)),
                        };
                        s.vouched = true;
                    }
                    // nothing vouched for: as a WAIT that fell short
                    (Phase::Confirming { .. } | Phase::Renewing { .. }, None) => {
                        return self.next_state(last, Action::WaitShort(c));
                    }
                    _ => return None,
                }
            }
            Action::DropReplica => {
                s.drops += 1;
                s.listed = false;
            }
            Action::Break(whom) => {
                s.breaks += 1;
                let name = whom.map(|c| owner(c).split('/').next().unwrap_or("").to_string());
                let (reply, _, messages) = match &name {
                    None => self.call(&mut s, "force_release", &[""]),
                    Some(n) => self.call(&mut s, "force_release", &[n, "c"]),
                };
                if reply.at(0).and_then(Reply::int) != Some(1) {
                    s.odd_reply = true;
                }
                if s.replica.is_some() && !s.stream.is_empty() {
                    s.break_needs = Some(s.stream.len() as u8);
                }
                for (i, c) in s.clients.iter_mut().enumerate() {
                    let hit = whom.is_none_or(|w| w as usize == i);
                    if hit
                        && matches!(
                            c.phase,
                            Phase::Holding { .. }
                                | Phase::Renewing { .. }
                                | Phase::Confirming { .. }
                        )
                    {
                        c.excused = true;
                    }
                }
                // a waiter of the broken client hears its name on the channel and stops
                // (the Rust client: Error::Broken) rather than queue again at the tail
                if let Some(c) = whom {
                    let said = messages
                        .iter()
                        .any(|m| m.starts_with("x ") && m.rsplit(' ').next() == name.as_deref());
                    if s.clients[c as usize].phase == Phase::Waiting && said {
                        s.broken_waiter_stopped = true;
                        self.end_cycle(&mut s, c);
                    }
                }
            }
            Action::Attempt(c) => {
                let now = Self::now_ms(&s);
                let cl = &mut s.clients[c as usize];
                let intent = if cl.phase == Phase::Idle {
                    cl.id += 1;
                    cl.first_sent = now;
                    "1"
                } else {
                    "3"
                };
                let mode = (cl.mode as char).to_string();
                let id = cl.id.to_string();
                let lease = LEASE_MS.to_string();
                let (reply, at, _) = self.call(
                    &mut s,
                    "acquire",
                    &[&mode, &owner(c), &id, &lease, intent, "2", "1"],
                );
                if s.clients[c as usize].mode == b'r' {
                    s.clients[c as usize].attempted_at = Some(at);
                }
                s.clients[c as usize].acted = Some(s.ticks);
                self.attempted(&mut s, c, &reply, at);
            }
            Action::WaitAcked(c) => {
                // the replica has applied at least what the WAIT waited for
                if let Phase::Confirming { needs, .. } | Phase::Renewing { needs, .. } =
                    s.clients[c as usize].phase
                {
                    if Self::waits_for_replica(&s) {
                        Self::replicate(&mut s, needs as usize);
                    }
                }
                let cl = &mut s.clients[c as usize];
                match cl.phase.clone() {
                    Phase::Confirming { fence, until, .. } => {
                        cl.phase = Phase::Holding { fence, until };
                        s.believed_fence = s.believed_fence.max(fence);
                    }
                    Phase::Renewing {
                        fence,
                        until,
                        renewed_until,
                        ..
                    } => {
                        cl.phase = Phase::Holding {
                            fence,
                            until: until.max(renewed_until),
                        };
                    }
                    _ => return None,
                }
            }
            Action::WaitShort(c) => match s.clients[c as usize].phase.clone() {
                // the grant does not count: give it back (rule 3)
                Phase::Confirming { .. } => {
                    if s.nodes[s.master as usize].up {
                        self.withdraw(&mut s, c);
                    } else {
                        self.end_cycle(&mut s, c);
                    }
                }
                // the renewal does not extend the belief
                Phase::Renewing { fence, until, .. } => {
                    s.clients[c as usize].phase = Phase::Holding { fence, until };
                }
                _ => return None,
            },
            Action::Renew(c) => {
                let Phase::Holding { fence, until } = s.clients[c as usize].phase else {
                    return None;
                };
                let now = Self::now_ms(&s);
                s.clients[c as usize].acted = Some(s.ticks);
                let named = format!("{} {}", owner(c), s.clients[c as usize].id);
                let (reply, _, _) = self.call(&mut s, "renew", &[&LEASE_MS.to_string(), &named]);
                let id = s.clients[c as usize].id.to_string();
                let still = match reply.at(1) {
                    Some(Reply::Array(per_owner)) => per_owner
                        .first()
                        .and_then(Reply::text)
                        .is_some_and(|ids| ids.split(' ').any(|i| i == id)),
                    _ => {
                        s.odd_reply = true;
                        false
                    }
                };
                let on = s.master;
                let needs = s.stream.len() as u8;
                let cl = &mut s.clients[c as usize];
                if still {
                    // the server said, after any break before this call, that it holds
                    cl.excused = false;
                    cl.phase = Phase::Renewing {
                        on,
                        needs,
                        fence,
                        until,
                        renewed_until: now + LEASE_MS - MARGIN_MS,
                    };
                } else {
                    // gone: the user is told at once, and the hold's cycle ends
                    self.end_cycle(&mut s, c);
                }
            }
            Action::GuardedWrite(c) => {
                let Phase::Holding { .. } = s.clients[c as usize].phase else {
                    return None;
                };
                s.clients[c as usize].acted = Some(s.ticks);
                let at = self.clock(&s, s.master);
                let id = s.clients[c as usize].id;
                let had_hold = holds_on_server(&s.nodes[s.master as usize].keys, &owner(c), id, at);
                let value = format!("c{c}");
                let (reply, _, _) = self.call_keys(
                    &mut s,
                    "guarded",
                    &[KEY, DATA],
                    &[
                        &owner(c),
                        &id.to_string(),
                        "1 0 1",
                        "3",
                        "ss-1",
                        "SET",
                        DATA,
                        &value,
                    ],
                );
                match reply.at(0).and_then(Reply::int) {
                    Some(1) => {
                        s.guarded_landed = true;
                        let me = &s.clients[c as usize];
                        let other_believes =
                            s.clients.iter().enumerate().any(|(j, d)| {
                                j != c as usize && !d.excused && System::believes(&s, d)
                            });
                        if !had_hold || me.excused || other_believes {
                            s.guarded_astray = true;
                        }
                    }
                    Some(2) => {}
                    _ => s.odd_reply = true,
                }
            }
            Action::Release(c) => {
                let id = s.clients[c as usize].id.to_string();
                // the queue's head its grant named, read by the release with the summary
                let (reply, _, _) = match s.clients[c as usize].head {
                    Some(t) => {
                        let ticket = format!("t:{t}");
                        self.call(&mut s, "release", &[&owner(c), &id, "1", &ticket])
                    }
                    None => self.call(&mut s, "release", &[&owner(c), &id]),
                };
                if !matches!(reply.at(0).and_then(Reply::int), Some(0 | 1)) {
                    s.odd_reply = true;
                }
                self.end_cycle(&mut s, c);
            }
            Action::GiveUp(c) => {
                s.clients[c as usize].give_ups += 1;
                self.withdraw(&mut s, c);
            }
            Action::Crash(c) => {
                s.crashes += 1;
                let cl = &mut s.clients[c as usize];
                cl.head = None;
                // the latest deadline the server may have given what it was granted, a
                // hold or a hand-off's: a lease from its last call (an attempt refreshes
                // its place, whose deadline a hand-off gives the hold), read on the clock
                // that runs furthest ahead
                // (a waiter's place blocks nobody by itself: a hand-off to it is bounded
                // by the claim window, from `handed_at`)
                let stake = matches!(
                    cl.phase,
                    Phase::Confirming { .. } | Phase::Holding { .. } | Phase::Renewing { .. }
                );
                cl.hold_deadline = cl.acted.filter(|_| stake).map(|tick| {
                    EPOCH_MS
                        + tick as u64 * TICK_MS
                        + LEASE_MS
                        + self.bounds.replica_skew_ms.max(0) as u64
                });
                cl.phase = Phase::Dead;
            }
        }
        Some(s)
    }

    fn within_boundary(&self, s: &State) -> bool {
        s.ticks <= self.bounds.ticks
    }

    fn properties(&self) -> Vec<Property<Self>> {
        let mut properties = vec![
            Property::always(EXCLUSION, |_, s: &State| {
                let believers: Vec<&Client> = s
                    .clients
                    .iter()
                    .filter(|c| !c.excused && System::believes(s, c))
                    .collect();
                let writers = believers.iter().filter(|c| c.mode == b'w').count();
                writers == 0 || believers.len() == 1
            }),
            Property::always(FENCE_ORDER, |_, s: &State| !s.fence_regressed),
            Property::always(NO_NEEDLESS_WAIT, |_, s: &State| !s.starved),
            Property::always(REPLIES_KNOWN, |_, s: &State| !s.odd_reply),
            Property::always(GUARDED_UNDER_HOLD, |_, s: &State| !s.guarded_astray),
        ];
        // what each scenario must reach (else it checked nothing of what it is for)
        properties.push(Property::sometimes(SOME_GRANT, |_, s: &State| {
            s.clients.iter().any(|c| System::believes(s, c))
        }));
        properties.push(Property::sometimes(SOME_HANDOFF, |_, s: &State| {
            s.handoffs_taken > 0
        }));
        if self.bounds.failovers > 0 {
            properties.push(Property::sometimes(SOME_FAILOVER_HOLD, |_, s: &State| {
                s.failovers > 0 && s.clients.iter().any(|c| System::believes(s, c))
            }));
        }
        if self.bounds.detector {
            properties.push(Property::sometimes(SOME_VOUCHED, |_, s: &State| {
                s.vouched && s.clients.iter().any(|c| System::believes(s, c))
            }));
        }
        if self.bounds.writes {
            properties.push(Property::sometimes(SOME_GUARDED, |_, s: &State| {
                s.guarded_landed
            }));
        }
        if self.bounds.breaks > 0 {
            properties.push(Property::sometimes(SOME_BROKEN_WAITER, |_, s: &State| {
                s.broken_waiter_stopped
            }));
        }
        if self.bounds.crashes > 0 && (self.bounds.cycles > 1 || self.bounds.modes.len() > 2) {
            properties.push(Property::sometimes(SOME_PAST_DEAD, |_, s: &State| {
                s.granted_past_dead
            }));
        }
        properties
    }
}
