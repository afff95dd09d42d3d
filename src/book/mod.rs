//! The renewal book: which holds a client renews, by hold id (each with its lock key
//! and owner token), and the state that tells a holder its lease was lost. The renewal
//! task itself is in `renewal`.
//!
//! A hold is lost when a renewal finds it gone (its lease ran out, or someone deleted
//! it), or when its belief runs out: `sent + lease - margin` by the local monotonic
//! clock, `sent` being when the request whose grant or renewal was last CONFIRMED was
//! sent (the server's deadline is its own clock at execution + lease, later than that).
//! A timer of its own (`expiry_task`) marks it then, whatever a renewal round in flight
//! is doing: from then on another owner may hold the lock, whatever Redis says later.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use crate::mutex::lock;

/// The shared state of one hold: until when it may be believed, and whether it was lost.
#[derive(Debug)]
pub(crate) struct HoldState {
    lost: watch::Sender<bool>,
    /// An upgrade or a conversion of this hold is under way: a renewal that misses it may
    /// have run after the call that replaced it, before its reply came back, and
    /// proves nothing (its belief deadline still holds).
    converting: std::sync::atomic::AtomicBool,
    /// The belief deadline, in ns after `origin` (local monotonic clock): it only moves
    /// on, when a renewal is confirmed.
    origin: Instant,
    until_ns: AtomicU64,
}

impl HoldState {
    /// The state of a hold that may be believed until `until`.
    pub fn new(until: Instant) -> Arc<HoldState> {
        let origin = Instant::now();
        Arc::new(HoldState {
            lost: watch::channel(false).0,
            converting: std::sync::atomic::AtomicBool::new(false),
            origin,
            until_ns: AtomicU64::new(Self::ns(origin, until)),
        })
    }

    fn ns(origin: Instant, t: Instant) -> u64 {
        u64::try_from(t.saturating_duration_since(origin).as_nanos()).unwrap_or(u64::MAX)
    }

    /// Until when the hold may be believed (local monotonic clock).
    pub fn until(&self) -> Instant {
        let ns = self.until_ns.load(Ordering::Acquire);
        self.origin
            .checked_add(Duration::from_nanos(ns))
            .unwrap_or(self.origin)
    }

    /// Moves the belief deadline on to `until` (never back).
    fn extend(&self, until: Instant) {
        self.until_ns
            .fetch_max(Self::ns(self.origin, until), Ordering::AcqRel);
    }

    pub fn set_converting(&self, on: bool) {
        self.converting.store(on, Ordering::Release);
    }

    fn converting(&self) -> bool {
        self.converting.load(Ordering::Acquire)
    }

    /// Marks the hold lost: true when it was not marked so before.
    pub fn mark_lost(&self) -> bool {
        !self.lost.send_replace(true)
    }

    /// Lost: a renewal found it gone, or its belief deadline has passed, by the clock
    /// itself (not by the timer task that marks it, which a busy runtime may run late).
    pub fn is_lost(&self) -> bool {
        *self.lost.borrow() || Instant::now() >= self.until()
    }

    /// Resolves when the hold is lost: when it is marked so, or at its belief deadline,
    /// whichever comes first.
    pub async fn lost(&self) {
        let mut rx = self.lost.subscribe();
        loop {
            if self.is_lost() {
                return;
            }
            tokio::select! {
                // the sender lives as long as `self`: this only ends when lost
                _ = rx.wait_for(|lost| *lost) => return,
                _ = tokio::time::sleep_until(self.until()) => {}
            }
        }
    }
}

/// Each owner of a lock with the ids of its holds.
pub(crate) type OwnerHolds = Vec<(Arc<str>, Vec<u64>)>;

/// Holds of one lock and one lease to renew in one function call.
#[derive(Debug)]
pub(crate) struct RenewalOf {
    pub key: Arc<str>,
    pub lease: Duration,
    pub owners: OwnerHolds,
}

/// One hold in the book: its state, which carries when its lease runs out unless
/// renewed (local monotonic clock). Each hold has its own deadline, as on the server,
/// where a grant or renewal sets the deadline of the holds it names and no other (a
/// sibling process under the same owner token renews its own holds, never this one's).
pub(crate) struct Held {
    pub state: Arc<HoldState>,
    /// Its lease (the client's, or its lock handle's own).
    pub lease: Duration,
}

/// The holds of one owner of one lock that one lease renews: the lock, the lease, the
/// owner.
type HoldsOf<'a> = (&'a Arc<str>, Duration, &'a Arc<str>);

/// One hold in the book with the lock and owner it belongs to.
pub(crate) struct Entry {
    pub key: Arc<str>,
    pub owner: Arc<str>,
    pub held: Held,
}

/// The holds of one client, by hold id: the client gives each hold an id no other hold
/// of the client has (`Shared::next_hold_id`), so the id alone finds it, and adding or
/// removing one costs the same whatever the client holds (no lock name or owner token
/// hashed per grant and release; `held` is the map's length). The renewal rounds group
/// the holds by lock and owner as they go (once per round, not per grant).
pub(crate) struct Book {
    entries: Mutex<HashMap<u64, Entry>>,
    /// The client's lease (the holds' unless their lock handle has its own), for tests.
    #[cfg(test)]
    pub lease: Duration,
    /// What is taken off the lease of every belief when set (see
    /// `LockConfig::clock_margin`); a quarter of the hold's lease when not.
    margin: Option<Duration>,
    /// The shortest lease of any hold this book ever had (ns): the renewal task wakes
    /// every third of it.
    shortest_ns: AtomicU64,
    /// Told when a hold of a shorter lease than any before is added: the renewal task
    /// wakes sooner from then on.
    pub shortened: tokio::sync::Notify,
    /// Told when a hold is added whose belief deadline comes before the expiry task's
    /// next wake-up, so that the task looks again.
    added: tokio::sync::Notify,
    /// When the expiry task wakes next (`None`: it is not asleep on a deadline). Read and
    /// written with `entries` locked, so that a hold added while the task works out its
    /// next wake-up is either seen by it or wakes it.
    next_wake: Mutex<Option<Instant>>,
    started: std::sync::atomic::AtomicBool,
    /// A round of every hold is due by then (ns after `origin`; `u64::MAX`: none): set
    /// for a hold believed on the other masters' word (see `cluster::vouch`), whose
    /// belief is shorter than a renewal period.
    hurry_ns: AtomicU64,
    origin: Instant,
    /// Told when `hurry_ns` moves earlier: the renewal task wakes sooner.
    pub hurried: tokio::sync::Notify,
    /// Renewal rounds and lock renewals sent, for diagnostics.
    pub rounds: AtomicU64,
    pub renewals: AtomicU64,
}

impl Book {
    pub fn new(lease: Duration, margin: Option<Duration>) -> Book {
        Book {
            entries: Mutex::new(HashMap::new()),
            #[cfg(test)]
            lease,
            margin,
            shortest_ns: AtomicU64::new(Self::ns(lease)),
            shortened: tokio::sync::Notify::new(),
            added: tokio::sync::Notify::new(),
            next_wake: Mutex::new(None),
            started: std::sync::atomic::AtomicBool::new(false),
            hurry_ns: AtomicU64::new(u64::MAX),
            origin: Instant::now(),
            hurried: tokio::sync::Notify::new(),
            rounds: AtomicU64::new(0),
            renewals: AtomicU64::new(0),
        }
    }

    pub fn map(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Entry>> {
        lock(&self.entries)
    }

    fn ns(d: Duration) -> u64 {
        u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
    }

    /// What is taken off a lease of `lease` for the belief.
    pub fn margin_for(&self, lease: Duration) -> Duration {
        crate::config::margin_for(self.margin, lease)
    }

    /// How often the renewal task wakes: a third of the shortest lease it renews.
    pub fn period(&self) -> Duration {
        Duration::from_nanos(self.shortest_ns.load(Ordering::Acquire)) / 3
    }

    /// Starts renewing hold `id` of `owner` on lock `key`, of lease `lease`, believed
    /// until its state says. True for the first hold this book ever had: the renewal
    /// task is to start.
    pub fn add(
        &self,
        key: &Arc<str>,
        owner: &Arc<str>,
        id: u64,
        state: Arc<HoldState>,
        lease: Duration,
    ) -> bool {
        let before = self
            .shortest_ns
            .fetch_min(Self::ns(lease), Ordering::AcqRel);
        if Self::ns(lease) < before {
            self.shortened.notify_one();
        }
        let mut map = self.map();
        let until = state.until();
        map.insert(
            id,
            Entry {
                key: key.clone(),
                owner: owner.clone(),
                held: Held { state, lease },
            },
        );
        // a new hold's deadline is almost always after the earliest one the task sleeps
        // until: wake it only when it is not (one wake-up and one look at every hold per
        // grant would make a grant's cost grow with the holds of the client)
        let wake = lock(&self.next_wake).is_none_or(|at| until < at);
        drop(map);
        if wake {
            self.added.notify_one();
        }
        !self.started.swap(true, Ordering::AcqRel)
    }

    /// Until when a grant or renewal of lease `lease` confirmed for a request sent at
    /// `sent` may be believed.
    pub fn belief(&self, sent: Instant, lease: Duration) -> Instant {
        sent + lease.saturating_sub(self.margin_for(lease))
    }

    /// Until when a grant or renewal of lease `lease` sent at `sent`, that its replicas
    /// did not confirm, may be believed on the other masters' word that no replica can
    /// replace its master before `replaceable_after` (see `cluster::vouch`): that moment
    /// less the clock margin, at most the lease's own belief. Once the holder believes
    /// it, a renewal round is to come halfway there ([`hurry`](Self::hurry)).
    pub fn vouched_belief(
        &self,
        sent: Instant,
        lease: Duration,
        replaceable_after: Instant,
    ) -> Instant {
        let cap = replaceable_after
            .checked_sub(self.margin_for(lease))
            .unwrap_or(sent);
        self.belief(sent, lease).min(cap)
    }

    /// Asks for a renewal round of every hold halfway from now to `until` (a belief the
    /// other masters vouched for, shorter than a renewal period), unless one is asked
    /// for sooner already.
    pub fn hurry(&self, until: Instant) {
        let now = Instant::now();
        let by = now + until.saturating_duration_since(now) / 2;
        let ns = Self::ns(by.saturating_duration_since(self.origin));
        if ns < self.hurry_ns.fetch_min(ns, Ordering::AcqRel) {
            self.hurried.notify_one();
        }
    }

    /// The round asked for by [`hurry`](Self::hurry), if any, forgotten from now on.
    pub fn take_hurry(&self) -> Option<Instant> {
        let ns = self.hurry_ns.swap(u64::MAX, Ordering::AcqRel);
        (ns != u64::MAX).then(|| self.origin + Duration::from_nanos(ns))
    }

    /// When a hold of lease `lease` believed until `until` is due for renewal: a third
    /// of its lease after the request that was last confirmed was sent.
    fn due_at(&self, until: Instant, lease: Duration) -> Instant {
        let since = lease.saturating_sub(self.margin_for(lease));
        until.checked_sub(since).unwrap_or(until) + lease / 3
    }

    /// The earliest belief deadline of any hold in `map`.
    fn earliest_of(map: &HashMap<u64, Entry>) -> Option<Instant> {
        map.values().map(|e| e.held.state.until()).min()
    }

    /// When the expiry task is to wake next: at the earliest belief deadline, or at
    /// `bound`, whichever is first; recorded (with the book locked) for [`add`](Self::add).
    fn schedule_wake(&self, bound: Instant) -> Instant {
        let map = self.map();
        let until = Self::earliest_of(&map).map_or(bound, |n| n.min(bound));
        *lock(&self.next_wake) = Some(until);
        until
    }

    /// Marks every hold whose belief ran out, at each belief deadline, until the book
    /// is dropped (the client closed).
    pub async fn expiry_task(book: std::sync::Weak<Book>) {
        loop {
            let Some(k) = book.upgrade() else {
                return;
            };
            // wake at the earliest deadline, when a hold is added before it, and at
            // least every second to see whether the client is gone
            let until = k.schedule_wake(Instant::now() + Duration::from_secs(1));
            // (the book outlives its client by this wait, at most)
            tokio::select! {
                _ = tokio::time::sleep_until(until) => {}
                _ = k.added.notified() => {}
            }
            k.expire(Instant::now());
        }
    }

    /// Stops renewing a hold (released, or lost).
    pub fn remove(&self, key: &Arc<str>, owner: &Arc<str>, id: u64) {
        let mut map = self.map();
        // (the id alone is unique; the lock and owner are checked all the same)
        if let std::collections::hash_map::Entry::Occupied(e) = map.entry(id) {
            if e.get().key == *key && e.get().owner == *owner {
                e.remove();
            }
        }
    }

    /// Every lock with its owners' holds, by lease (one function call renews holds of one
    /// lease), at most `chunk` owners per entry; with `due`, only the holds due for
    /// renewal by then (a hold of a long lease is not renewed at the pace of a short one).
    pub fn snapshot(&self, chunk: usize, due: Option<Instant>) -> Vec<RenewalOf> {
        let map = self.map();
        // (lock, lease, owner) -> hold ids, then lock and lease -> each owner's ids
        let mut by_owner: HashMap<HoldsOf<'_>, Vec<u64>> = HashMap::new();
        for (id, e) in map.iter() {
            let h = &e.held;
            if due.is_none_or(|by| self.due_at(h.state.until(), h.lease) <= by) {
                by_owner
                    .entry((&e.key, h.lease, &e.owner))
                    .or_default()
                    .push(*id);
            }
        }
        let mut by_key: HashMap<(&Arc<str>, Duration), OwnerHolds> = HashMap::new();
        for ((key, lease, owner), ids) in by_owner {
            by_key
                .entry((key, lease))
                .or_default()
                .push((owner.clone(), ids));
        }
        let mut out = Vec::new();
        for ((k, lease), owners) in by_key {
            for part in owners.chunks(chunk.max(1)) {
                out.push(RenewalOf {
                    key: k.clone(),
                    lease,
                    owners: part.to_vec(),
                });
            }
        }
        out
    }

    /// A renewal sent at `sent` found, for each owner of `key` in `owners`, the hold ids
    /// in `present`: the others are lost. `replaceable_after`: the replicas did not
    /// confirm it, and the other masters vouched for its master until then (see
    /// [`vouched_belief`](Self::vouched_belief)).
    pub fn renewed(
        &self,
        of: &RenewalOf,
        present: Vec<Vec<u64>>,
        sent: Instant,
        replaceable_after: Option<Instant>,
    ) {
        let (key, owners) = (&of.key, &of.owners);
        let until = match replaceable_after {
            None => self.belief(sent, of.lease),
            Some(at) => {
                let until = self.vouched_belief(sent, of.lease, at);
                self.hurry(until);
                until
            }
        };
        let mut map = self.map();
        for ((owner, ids), still) in owners.iter().zip(present) {
            for id in ids {
                // (a hold of another lock or owner under this id: none, ids are the
                // client's own; checked all the same)
                let Some(entry) = map.get(id).filter(|e| e.key == *key && e.owner == *owner) else {
                    continue;
                };
                if still.contains(id) {
                    // renewed: only the holds the renewal named (see `Held`)
                    entry.held.state.extend(until);
                    continue;
                }
                if !entry.held.state.converting() {
                    if let Some(e) = map.remove(id) {
                        crate::observe::lost(key, owner, "the renewal found the hold gone");
                        e.held.state.mark_lost();
                    }
                }
            }
        }
    }

    /// Whatever Redis said: a lease not renewed by `now` is lost.
    pub fn expire(&self, now: Instant) {
        self.map().retain(|_, e| {
            if e.held.state.until() <= now {
                crate::observe::lost(
                    &e.key,
                    &e.owner,
                    "no renewal was confirmed for a lease (less the clock margin)",
                );
                e.held.state.mark_lost();
                false
            } else {
                true
            }
        });
    }

    /// Number of holds being renewed.
    pub fn held(&self) -> usize {
        self.map().len()
    }
}

#[cfg(test)]
mod tests; // the unit tests of this module
