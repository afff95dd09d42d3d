//! A worker process: one `LockClient`, several tasks doing random operations on the
//! run's names, each hold writing to the fenced resource, every call and belief recorded.
//!
//! Now and then a task queues a write behind a hold of its own and drops it while it
//! waits; at the times the controller gives (`kill_at`), the worker kills itself
//! (SIGKILL) while such a write waits, after recording every belief it held as ended
//! then, and the controller starts another worker in its place.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cluster_rwlock::{LockClient, LockConfig, RwLock};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::guard::{attempt, blocking, timed, Guard, Held as _};
use crate::history::{now, Event, Mode, Outcome, Writer};
use crate::resource::Conn;

/// What a worker is told by the controller (as JSON in `NEMESIS_WORKER`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkerSpec {
    /// Worker number.
    pub proc: u32,
    /// Seed URLs of the cluster (`rediss://` on a TLS cluster).
    pub seeds: Vec<String>,
    /// The CA of a TLS cluster, in PEM.
    pub ca_pem: Option<String>,
    /// Key prefix of the run.
    pub prefix: String,
    /// Lock names.
    pub names: Vec<String>,
    /// Explicit owners shared by every worker.
    pub shared_owners: Vec<String>,
    /// The resource's address.
    pub resource: String,
    /// Lease, ms.
    pub lease_ms: u64,
    /// The configuration under test: `default`, `acks` (`replica_acks(1, 500 ms)`) or
    /// `master-only` (`Durability::MasterOnly`).
    pub durability: String,
    /// Tasks.
    pub tasks: u32,
    /// Holds in 100 that last long: longer than a lease, or `long_hold_ms` (to 1.25 x).
    pub long_holds_pct: u32,
    /// How long the long holds last, when not longer than a lease.
    pub long_hold_ms: Option<u64>,
    /// Seed of this worker's randomness.
    pub seed: u64,
    /// `CLOCK_MONOTONIC` ns at which tasks stop starting new rounds.
    pub until: u64,
    /// `CLOCK_MONOTONIC` ns after which the worker kills itself (SIGKILL) while a write
    /// of one of its tasks waits in a queue, if it is still a lease and 5 s before
    /// `until`.
    #[serde(default)]
    pub kill_at: Option<u64>,
    /// Where to write the history.
    pub out: String,
}

/// The client's default command timeout, the limit of `try_*` calls and conversions.
const COMMAND_TIMEOUT_MS: u64 = 5_000;
/// How long the worker waits, at most, for its client to hold nothing and be
/// subscribed to nothing once its tasks ended (subscriptions linger 2 s after their last
/// waiter, and are swept every second).
const SETTLE: Duration = Duration::from_secs(8);
/// How long a worker tries to connect (one started in place of a killed one may start
/// while a fault is on).
const CONNECT_FOR: Duration = Duration::from_secs(30);
/// One round in this many queues a write behind a hold of the task's own and drops it
/// while it waits.
const QUEUED_DROP_ODDS: u32 = 100;

/// How a task upgrades its upgradable hold.
#[derive(Clone, Copy)]
enum Upgrade {
    /// `upgrade()`, cancelled at the end of the run.
    Wait,
    /// `upgrade_timeout(ms)`.
    Timeout(u64),
    /// `try_upgrade()`.
    Try,
}

/// A belief being held: what its segment will say, but its end.
struct Open {
    name: String,
    owner: String,
    explicit: bool,
    mode: Mode,
    fence: u64,
    from: u64,
    node: Option<String>,
}

struct Ctx {
    spec: WorkerSpec,
    out: Mutex<Writer>,
    holds: AtomicU64,
    /// The beliefs held now, by hold: recorded as ended when the worker kills itself.
    /// Locked after `out` when both are.
    open: Mutex<HashMap<u64, Open>>,
    /// A task has taken on the worker's death (`kill_at`).
    dying: AtomicBool,
    /// Guarded writes made, for unique log entries.
    guarded: AtomicU64,
}

impl Ctx {
    fn record(&self, ev: Event) {
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        let _ = out.write(&ev);
    }

    /// A belief begins (or goes on in another mode, after a conversion).
    fn believe(&self, b: &Belief, mode: Mode, fence: u64) {
        let open = Open {
            name: b.name.clone(),
            owner: b.owner.clone(),
            explicit: b.explicit,
            mode,
            fence,
            from: b.from,
            node: b.node.clone(),
        };
        self.open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(b.hold, open);
    }

    /// Records the end of the belief of `hold` (its segment `ev`).
    fn end_belief(&self, hold: u64, ev: Event) {
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        self.open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&hold);
        let _ = out.write(&ev);
    }

    /// Whether this worker is due to kill itself now: its `kill_at` has come, the run
    /// ends more than a lease and 5 s later (its holds expire before the checks after
    /// the run), and no other task has taken it on.
    fn kill_due(&self) -> bool {
        self.spec.kill_at.is_some_and(|at| now() >= at)
            && self.may_die()
            && self
                .dying
                .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
    }

    /// Whether the run ends more than a lease and 5 s from now.
    fn may_die(&self) -> bool {
        now() + (self.spec.lease_ms + 5_000) * 1_000_000 < self.spec.until
    }

    /// Kills this process (SIGKILL, as the OOM killer or a `kill -9` would) after
    /// recording every belief held as ended now (`killed`) and flushing the history;
    /// other tasks record nothing more (the history's lock is kept to the end).
    fn die(&self) -> ! {
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        let at = now();
        let open: Vec<(u64, Open)> = self
            .open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain()
            .collect();
        for (hold, o) in open {
            let _ = out.write(&Event::Segment {
                proc: self.spec.proc,
                hold,
                name: o.name,
                owner: o.owner,
                explicit: o.explicit,
                mode: o.mode,
                fence: o.fence,
                from: o.from,
                to: at,
                end: "killed".into(),
                node: o.node,
            });
        }
        let _ = out.flush();
        // SAFETY: kill(2) of this very process with a valid signal number.
        unsafe {
            libc::kill(libc::getpid(), libc::SIGKILL);
        }
        std::process::abort()
    }

    fn next_hold(&self) -> u64 {
        (u64::from(self.spec.proc) << 40) | self.holds.fetch_add(1, Ordering::Relaxed)
    }
}

/// `config` verifying the nodes against `ca_pem`, when the cluster speaks TLS.
pub fn with_ca(config: LockConfig, ca_pem: Option<&str>) -> LockConfig {
    match ca_pem {
        Some(pem) => config.tls_ca_pem(pem),
        None => config,
    }
}

/// Runs a worker to its end.
pub async fn run(spec: WorkerSpec) -> Result<(), String> {
    let mut config = with_ca(
        LockConfig::cluster(spec.seeds.clone())
            .prefix(spec.prefix.clone())
            .lease(Duration::from_millis(spec.lease_ms)),
        spec.ca_pem.as_deref(),
    );
    match spec.durability.as_str() {
        "acks" => config = config.replica_acks(1, Duration::from_millis(500)),
        "master-only" => config = config.durability(cluster_rwlock::Durability::MasterOnly),
        _ => {}
    }
    let began = std::time::Instant::now();
    let client = loop {
        match LockClient::connect(config.clone()).await {
            Ok(c) => break c,
            Err(e) if began.elapsed() > CONNECT_FOR => {
                return Err(format!("worker {} cannot connect: {e}", spec.proc))
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    };
    let out = Writer::create(std::path::Path::new(&spec.out))
        .map_err(|e| format!("cannot create {}: {e}", spec.out))?;
    let ctx = Arc::new(Ctx {
        spec,
        out: Mutex::new(out),
        holds: AtomicU64::new(0),
        open: Mutex::new(HashMap::new()),
        dying: AtomicBool::new(false),
        guarded: AtomicU64::new(0),
    });
    let mut tasks = Vec::new();
    for task in 0..ctx.spec.tasks {
        let ctx = ctx.clone();
        let client = client.clone();
        tasks.push(tokio::spawn(async move {
            let mut t = Task::new(ctx, client, task).await?;
            while now() < t.ctx.spec.until {
                t.round().await;
            }
            Ok::<(), String>(())
        }));
    }
    for t in tasks {
        t.await.map_err(|e| e.to_string())??;
    }
    // background releases land and subscriptions linger a while: wait for both, a while
    let began = std::time::Instant::now();
    let mut stats = client.stats();
    while (stats.held > 0 || stats.subscriptions > 0) && began.elapsed() < SETTLE {
        tokio::time::sleep(Duration::from_millis(100)).await;
        stats = client.stats();
    }
    ctx.record(Event::ClientEnd {
        proc: ctx.spec.proc,
        held: stats.held,
        subscriptions: stats.subscriptions,
    });
    client.close().await;
    let flushed = ctx
        .out
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .flush()
        .map_err(|e| e.to_string());
    flushed
}

/// Whose belief is being recorded, and since when: a segment's fields besides the mode
/// and fence, which are the guard's (kept apart from it, since conversions consume it).
struct Belief {
    hold: u64,
    name: String,
    owner: String,
    explicit: bool,
    /// Start of the current belief segment.
    from: u64,
    /// The node the client routed the name's slot to when the segment began.
    node: Option<String>,
}

/// A granted hold and the belief being recorded.
struct Held {
    guard: Guard,
    belief: Belief,
    /// Whether it wrote to the resource (a late write replays the last one).
    wrote: bool,
}

/// A call of the lock's API as invoked: recorded with its outcome when it returns.
struct Call {
    call: String,
    name: String,
    hold: Option<u64>,
    owner: Option<String>,
    timeout_ms: Option<u64>,
    start: u64,
}

impl Call {
    /// A call on the hold of `b`, invoked now.
    fn on(call: &str, b: &Belief, timeout_ms: Option<u64>) -> Call {
        Call {
            call: call.to_string(),
            name: b.name.clone(),
            hold: Some(b.hold),
            owner: Some(b.owner.clone()),
            timeout_ms,
            start: now(),
        }
    }
}

struct Task {
    ctx: Arc<Ctx>,
    task: u32,
    rng: ChaCha8Rng,
    client: LockClient,
    locks: Vec<RwLock>,
    conn: Conn,
}

fn err_text(e: &cluster_rwlock::Error) -> String {
    let variant = format!("{e:?}");
    let variant = variant
        .split(['(', ' ', '{'])
        .next()
        .unwrap_or("?")
        .to_string();
    format!("{variant}: {e}")
}

impl Task {
    async fn new(ctx: Arc<Ctx>, client: LockClient, task: u32) -> Result<Task, String> {
        let locks = ctx
            .spec
            .names
            .iter()
            .map(|n| client.rwlock(n).map_err(|e| e.to_string()))
            .collect::<Result<Vec<_>, _>>()?;
        let conn = Conn::connect(&ctx.spec.resource)
            .await
            .map_err(|e| format!("cannot reach the resource: {e}"))?;
        let seed = ctx.spec.seed ^ (u64::from(ctx.spec.proc) << 32) ^ u64::from(task);
        Ok(Task {
            task,
            rng: ChaCha8Rng::seed_from_u64(seed),
            client,
            locks,
            conn,
            ctx,
        })
    }

    /// Records `c` as returned now.
    /// Records that call `c` was granted `guard` on `name`: a new belief from `from`
    /// (`explicit`: under an owner given with `with_owner`), and the call's success
    /// with the hold it made.
    fn granted(&self, c: Call, name: &str, guard: &Guard, explicit: bool, from: u64) -> Belief {
        let belief = Belief {
            hold: self.ctx.next_hold(),
            name: name.to_string(),
            owner: guard.owner().to_string(),
            explicit,
            from,
            node: self.node_of(name),
        };
        self.ctx.believe(&belief, guard.held(), guard.fence());
        let c = Call {
            hold: Some(belief.hold),
            owner: Some(belief.owner.clone()),
            ..c
        };
        self.op(c, Outcome::Ok, None, Some((guard.fence(), guard.held())));
        belief
    }

    fn op(&self, c: Call, outcome: Outcome, error: Option<String>, granted: Option<(u64, Mode)>) {
        let node = granted.and_then(|_| self.node_of(&c.name));
        self.ctx.record(Event::Op {
            proc: self.ctx.spec.proc,
            task: self.task,
            call: c.call,
            name: c.name,
            hold: c.hold,
            owner: c.owner,
            timeout_ms: c.timeout_ms,
            start: c.start,
            end: now(),
            outcome,
            error,
            fence: granted.map(|g| g.0),
            mode: granted.map(|g| g.1),
            node,
        });
    }

    /// The node the client routes the slot of `name` to now (where a grant that returns
    /// now came from, unless it was redirected on the way).
    fn node_of(&self, name: &str) -> Option<String> {
        let lock = self.locks.iter().find(|l| l.name() == name)?;
        self.client.node_for_slot(lock.slot())
    }

    /// Records the belief `b` in `mode` under `fence`, ended at `to` for reason `end`.
    fn segment(&self, b: &Belief, mode: Mode, fence: u64, to: u64, end: &str) {
        self.ctx.end_belief(
            b.hold,
            Event::Segment {
                proc: self.ctx.spec.proc,
                hold: b.hold,
                name: b.name.clone(),
                owner: b.owner.clone(),
                explicit: b.explicit,
                mode,
                fence,
                from: b.from,
                to,
                end: end.to_string(),
                node: b.node.clone(),
            },
        );
    }

    /// Records the belief of `h`, in its guard's mode, ended at `to` for reason `end`.
    fn held_segment(&self, h: &Held, to: u64, end: &str) {
        self.segment(&h.belief, h.guard.held(), h.guard.fence(), to, end);
    }

    fn until(&self) -> tokio::time::Instant {
        let left = self.ctx.spec.until.saturating_sub(now());
        tokio::time::Instant::now() + Duration::from_nanos(left)
    }

    /// One round: acquire (in one of many ways), hold and write, maybe convert, release;
    /// one in ten takes several names at once with a multi-lock; one in a hundred queues
    /// a write behind its own hold and drops it there; when the worker is due to die, a
    /// round queues one and the process dies with it queued.
    async fn round(&mut self) {
        if self.ctx.kill_due() {
            self.queued_round(true).await;
            // still alive: no hold to queue behind, or the write did not wait; the next
            // round tries again
            self.ctx.dying.store(false, Ordering::SeqCst);
            return;
        }
        if self.rng.random_range(0..QUEUED_DROP_ODDS) == 0 {
            return self.queued_round(false).await;
        }
        if self.locks.len() >= 2 && self.rng.random_range(0..10) == 0 {
            return self.multi_round().await;
        }
        let i = self.rng.random_range(0..self.locks.len());
        let mut lock = self.locks[i].clone();
        let name = lock.name().to_string();
        let explicit = self.rng.random_bool(0.15);
        if explicit {
            let owners = &self.ctx.spec.shared_owners;
            let owner = owners[self.rng.random_range(0..owners.len())].clone();
            lock = lock.with_owner(owner);
        }
        let mode = match self.rng.random_range(0..10) {
            0..=3 => Mode::W,
            4..=7 => Mode::R,
            _ if explicit => Mode::R,
            _ => Mode::U,
        };
        let Some(held) = self.acquire(&lock, &name, mode, explicit).await else {
            // not granted: a short pause before the next round
            let ms = self.rng.random_range(0..30);
            tokio::time::sleep(Duration::from_millis(ms)).await;
            return;
        };
        self.hold_and_release(held).await;
    }

    async fn acquire(
        &mut self,
        lock: &RwLock,
        name: &str,
        mode: Mode,
        explicit: bool,
    ) -> Option<Held> {
        let style = self.rng.random_range(0..100);
        let start = now();
        let label = |suffix: &str| {
            let base = match mode {
                Mode::R => "read",
                Mode::U => "upgradable_read",
                Mode::W => "write",
            };
            match suffix {
                "try" => format!("try_{base}"),
                "" => base.to_string(),
                s => format!("{base}_{s}"),
            }
        };
        // (call, limit, result); a `None` result is a cancellation
        let (call, limit, result): (
            String,
            Option<u64>,
            Option<cluster_rwlock::Result<Option<Guard>>>,
        ) = if style < 30 {
            // blocking, cancelled at the run's end, or at a random point for some
            let cancel_at = if self.rng.random_bool(0.2) {
                tokio::time::Instant::now() + Duration::from_millis(self.rng.random_range(0..300))
            } else {
                self.until()
            };
            let fut = blocking(lock, mode);
            let r = tokio::select! {
                r = fut => Some(r.map(Some)),
                _ = tokio::time::sleep_until(cancel_at) => None,
            };
            (label(""), None, r)
        } else if style < 60 {
            let ms = self.rng.random_range(20..800);
            let r = timed(lock, mode, Duration::from_millis(ms)).await;
            let r = match r {
                Err(cluster_rwlock::Error::Timeout(_)) => Ok(None),
                r => r.map(Some),
            };
            (label("timeout"), Some(ms), Some(r))
        } else if style < 90 {
            let r = attempt(lock, mode).await;
            (label("try"), Some(COMMAND_TIMEOUT_MS), Some(r))
        } else {
            // dropped at a random point of its life
            let ms = self.rng.random_range(0..100);
            let r = tokio::time::timeout(Duration::from_millis(ms), blocking(lock, mode)).await;
            (label("cancelled"), None, r.ok().map(|r| r.map(Some)))
        };
        let c = Call {
            call,
            name: name.to_string(),
            hold: None,
            owner: explicit.then(|| lock.owner().to_string()),
            timeout_ms: limit,
            start,
        };
        match result {
            None => {
                self.op(c, Outcome::Cancelled, None, None);
                None
            }
            Some(Ok(None)) => {
                // try_* busy, or *_timeout ran out
                if c.call.starts_with("try_") {
                    self.op(c, Outcome::Busy, None, None);
                } else {
                    let error = Some("Timeout: not granted in time".to_string());
                    self.op(c, Outcome::Fail, error, None);
                }
                None
            }
            Some(Err(e)) => {
                self.op(c, Outcome::Fail, Some(err_text(&e)), None);
                None
            }
            Some(Ok(Some(guard))) => {
                let belief = self.granted(c, name, &guard, explicit, now());
                Some(Held {
                    guard,
                    belief,
                    wrote: false,
                })
            }
        }
    }

    /// A multi-lock round: 2 or 3 names in a random order and random modes, taken with
    /// `lock_timeout`, `try_lock` or a `lock` dropped at a random point; each member is
    /// recorded as a hold of its own (its grant, its belief, its release).
    async fn multi_round(&mut self) {
        let count = self.rng.random_range(2..=3.min(self.locks.len()));
        let mut pool: Vec<usize> = (0..self.locks.len()).collect();
        let mut picked = Vec::new();
        for _ in 0..count {
            let i = pool.remove(self.rng.random_range(0..pool.len()));
            let mode = if self.rng.random_bool(0.5) {
                Mode::W
            } else {
                Mode::R
            };
            picked.push((self.locks[i].name().to_string(), mode));
        }
        let to_api = |m: Mode| match m {
            Mode::W => cluster_rwlock::Mode::Write,
            _ => cluster_rwlock::Mode::Read,
        };
        let multi = match self
            .client
            .multi(picked.iter().map(|(n, m)| (n.as_str(), to_api(*m))))
        {
            Ok(m) => m,
            Err(e) => {
                let c = Call {
                    call: "multi".into(),
                    name: picked[0].0.clone(),
                    hold: None,
                    owner: None,
                    timeout_ms: None,
                    start: now(),
                };
                return self.op(c, Outcome::Fail, Some(err_text(&e)), None);
            }
        };
        let style = self.rng.random_range(0..100);
        let start = now();
        let (call, limit, result) = if style < 50 {
            let ms = self.rng.random_range(50..1_500);
            let r = match multi.lock_timeout(Duration::from_millis(ms)).await {
                Err(cluster_rwlock::Error::Timeout(_)) => Ok(None),
                r => r.map(Some),
            };
            ("multi_lock_timeout", Some(ms), Some(r))
        } else if style < 85 {
            let r = multi.try_lock().await;
            ("multi_try_lock", Some(COMMAND_TIMEOUT_MS * 3), Some(r))
        } else {
            let ms = self.rng.random_range(0..200);
            let r = tokio::time::timeout(Duration::from_millis(ms), multi.lock()).await;
            ("multi_cancelled", None, r.ok().map(|r| r.map(Some)))
        };
        // one operation per member, so that the checker sees every grant by name
        let member_call = |name: &str| Call {
            call: call.to_string(),
            name: name.to_string(),
            hold: None,
            owner: None,
            timeout_ms: limit,
            start,
        };
        let guard = match result {
            None => {
                for (name, _) in &picked {
                    self.op(member_call(name), Outcome::Cancelled, None, None);
                }
                return;
            }
            Some(Ok(None)) => {
                for (name, _) in &picked {
                    if call == "multi_try_lock" {
                        self.op(member_call(name), Outcome::Busy, None, None);
                    } else {
                        let error = Some("Timeout: not granted in time".to_string());
                        self.op(member_call(name), Outcome::Fail, error, None);
                    }
                }
                let ms = self.rng.random_range(0..30);
                return tokio::time::sleep(Duration::from_millis(ms)).await;
            }
            Some(Err(e)) => {
                for (name, _) in &picked {
                    self.op(member_call(name), Outcome::Fail, Some(err_text(&e)), None);
                }
                return;
            }
            Some(Ok(Some(g))) => g,
        };
        let from = now();
        let mut held = Vec::new();
        for guard in guard.into_guards() {
            let name = guard.lock().name().to_string();
            let belief = self.granted(member_call(&name), &name, &guard, false, from);
            held.push(Held {
                guard,
                belief,
                wrote: false,
            });
        }
        // the work: each member's resource in turn, while no member is lost
        let until = tokio::time::Instant::now() + self.hold_time();
        let mut lost_at = None;
        'work: while tokio::time::Instant::now() < until {
            for h in held.iter_mut() {
                if h.guard.is_lost() {
                    lost_at = Some(now());
                    break 'work;
                }
                let (fence, mode) = (h.guard.fence(), h.guard.held());
                let b = &h.belief;
                if self
                    .conn
                    .access(b.hold, fence, mode, false, &b.owner, &b.name)
                    .await
                    .is_ok()
                {
                    h.wrote = true;
                }
            }
            let pause = Duration::from_millis(self.rng.random_range(5..60));
            tokio::time::sleep(
                pause.min(until.saturating_duration_since(tokio::time::Instant::now())),
            )
            .await;
        }
        let (at, why) = match lost_at {
            Some(at) => (at, "lost"),
            None => (now(), "release"),
        };
        for h in held {
            self.end(h, at, why).await;
        }
    }

    /// A writer that waits in a queue and dies there: the task takes a name (read or
    /// write, in one of the usual ways), then asks for write as a new owner, which
    /// queues behind its own hold; 50-1,500 ms later the waiting call is dropped
    /// (`write_queued_dropped`) and the hold released, or, with `kill`, the whole worker
    /// process is killed while the call waits (`write_queued_killed`). Returns (alive)
    /// when the name was not granted, the queued call returned before, or the run's end
    /// came too near meanwhile (then the call is dropped).
    async fn queued_round(&mut self, kill: bool) {
        let i = self.rng.random_range(0..self.locks.len());
        let lock = self.locks[i].clone();
        let name = lock.name().to_string();
        let mode = if self.rng.random_bool(0.5) {
            Mode::W
        } else {
            Mode::R
        };
        let Some(held) = self.acquire(&lock, &name, mode, false).await else {
            return;
        };
        let wait = Duration::from_millis(self.rng.random_range(50..1_500));
        let mut c = Call {
            call: "write_queued_dropped".into(),
            name: name.clone(),
            hold: None,
            owner: None,
            timeout_ms: None,
            start: now(),
        };
        enum Next {
            Lost(u64),
            Returned(Box<cluster_rwlock::Result<Guard>>),
            Waited,
        }
        let next = {
            let waiter = blocking(&lock, Mode::W);
            tokio::pin!(waiter);
            let next = tokio::select! {
                biased;
                _ = held.guard.lost() => Next::Lost(now()),
                r = &mut waiter => Next::Returned(Box::new(r)),
                _ = tokio::time::sleep(wait) => Next::Waited,
            };
            // (the blocking acquire may have taken long: still far enough from the end)
            if matches!(next, Next::Waited) && kill && self.ctx.may_die() {
                // the write waits in the queue: the process dies with it there
                c.call = "write_queued_killed".into();
                self.op(c, Outcome::Cancelled, None, None);
                self.ctx.die();
            }
            next
            // a waiting call is dropped here, while it is queued
        };
        let returned = match next {
            Next::Lost(at) => {
                self.op(c, Outcome::Cancelled, None, None);
                return self.end(held, at, "lost").await;
            }
            Next::Waited => {
                self.op(c, Outcome::Cancelled, None, None);
                let at = now();
                return self.end(held, at, "release").await;
            }
            Next::Returned(r) => *r,
        };
        match returned {
            Err(e) => {
                self.op(c, Outcome::Fail, Some(err_text(&e)), None);
                let at = now();
                self.end(held, at, "release").await;
            }
            Ok(guard) => {
                // granted while this task believed it held the name: only right if the
                // hold was lost unnoticed (the checker reports the overlap otherwise)
                let belief = self.granted(c, &name, &guard, false, now());
                let at = now();
                self.end(held, at, "release").await;
                let waiter = Held {
                    guard,
                    belief,
                    wrote: false,
                };
                self.hold_and_release(waiter).await;
            }
        }
    }

    /// How long to hold: mostly 0-200 ms, 5 in 100 up to 1.5 s, `long_holds_pct` in 100
    /// longer than a lease (or `long_hold_ms`).
    fn hold_time(&mut self) -> Duration {
        let lease = self.ctx.spec.lease_ms;
        let long = self.ctx.spec.long_holds_pct.min(100);
        let roll = self.rng.random_range(0..100);
        let ms = if roll < long {
            match self.ctx.spec.long_hold_ms {
                Some(ms) => self.rng.random_range(ms..ms + ms / 4 + 1),
                None => lease + self.rng.random_range(500..2_000),
            }
        } else if roll < long + 5 {
            self.rng.random_range(200..1_500)
        } else {
            self.rng.random_range(0..200)
        };
        Duration::from_millis(ms)
    }

    /// Writes to the resource now and then for `time`, or until the lease is lost;
    /// returns when it was lost, if it was.
    async fn work(&mut self, h: &mut Held, time: Duration) -> Option<u64> {
        let until = tokio::time::Instant::now() + time;
        let ctx = &self.ctx;
        let conn = &mut self.conn;
        let rng = &mut self.rng;
        let guard = &h.guard;
        let (mode, fence) = (guard.held(), guard.fence());
        let b = &h.belief;
        let mut wrote = false;
        let lost = {
            let work = async {
                loop {
                    // only while believed valid: a lost lease stops the work first
                    if guard.is_lost() {
                        return;
                    }
                    if conn
                        .access(b.hold, fence, mode, false, &b.owner, &b.name)
                        .await
                        .is_ok()
                    {
                        wrote = true;
                    }
                    // now and then under a write hold, a guarded write to the name's
                    // log: the checker reads the log at the end
                    if mode == Mode::W && rng.random_bool(0.3) {
                        let n = ctx.guarded.fetch_add(1, Ordering::Relaxed);
                        let entry = format!("{}:{}:{fence}:{n}", ctx.spec.proc, b.hold);
                        let key = crate::after::guarded_log_key(guard.lock().key(), &b.name);
                        let start = now();
                        let r = guard
                            .guarded()
                            .command("RPUSH", [key.as_str(), entry.as_str()])
                            .run()
                            .await;
                        ctx.record(Event::Guarded {
                            proc: ctx.spec.proc,
                            hold: b.hold,
                            name: b.name.clone(),
                            fence,
                            entry,
                            start,
                            end: now(),
                            outcome: if r.is_ok() {
                                Outcome::Ok
                            } else {
                                Outcome::Fail
                            },
                            error: r.err().map(|e| format!("{e:?}")),
                        });
                    }
                    let pause = Duration::from_millis(rng.random_range(5..60));
                    if tokio::time::Instant::now() + pause >= until {
                        tokio::time::sleep_until(until).await;
                        return;
                    }
                    tokio::time::sleep(pause).await;
                }
            };
            tokio::select! {
                biased;
                _ = guard.lost() => Some(now()),
                _ = work => None,
            }
        };
        h.wrote |= wrote;
        lost.or_else(|| h.guard.is_lost().then(now))
    }

    async fn hold_and_release(&mut self, mut h: Held) {
        // a conversion now and then (the roll decides which); one in three comes at a
        // random point of the first two renewal periods (a renewal runs every lease/3),
        // not right after the grant: before, during or after a renewal
        let roll = self.rng.random_range(0..100);
        let converts = match h.guard.held() {
            Mode::W => roll < 20,
            Mode::U => roll < 60,
            Mode::R => false,
        };
        let time = if converts && self.rng.random_range(0..3) == 0 {
            let lease = self.ctx.spec.lease_ms;
            Duration::from_millis(self.rng.random_range(0..lease * 2 / 3))
        } else {
            self.hold_time()
        };
        if let Some(at) = self.work(&mut h, time).await {
            return self.end(h, at, "lost").await;
        }
        let mut h = match h.guard.held() {
            Mode::W if roll < 20 => match self.convert_down(h, roll < 15).await {
                Some(h) => h,
                None => return,
            },
            Mode::U if roll < 60 => {
                let how = match roll {
                    0..25 => Upgrade::Wait,
                    25..40 => Upgrade::Timeout(self.rng.random_range(20..800)),
                    _ => Upgrade::Try,
                };
                match self.upgrade(h, how).await {
                    Some(h) => h,
                    None => return,
                }
            }
            _ => h,
        };
        let time = Duration::from_millis(self.rng.random_range(0..100));
        if let Some(at) = self.work(&mut h, time).await {
            return self.end(h, at, "lost").await;
        }
        let at = now();
        self.end(h, at, "release").await;
    }

    /// Ends a hold: the belief ends at `at`; released (or, for a few, dropped); a late
    /// write replayed for some.
    async fn end(&mut self, h: Held, at: u64, why: &str) {
        let (mode, fence, wrote) = (h.guard.held(), h.guard.fence(), h.wrote);
        if why != "lost" && self.rng.random_bool(0.05) {
            // dropped: released in the background
            self.held_segment(&h, at, "drop");
            drop(h.guard);
        } else {
            self.held_segment(&h, at.min(now()), why);
            let limit = self.ctx.spec.lease_ms.max(COMMAND_TIMEOUT_MS);
            let c = Call::on("release", &h.belief, Some(limit));
            match h.guard.release().await {
                Ok(()) => self.op(c, Outcome::Ok, None, None),
                Err(e) => self.op(c, Outcome::Fail, Some(err_text(&e)), None),
            }
        }
        if wrote && self.rng.random_bool(0.1) {
            // a late write, as a holder paused after its check would send it
            let ms = self.rng.random_range(0..self.ctx.spec.lease_ms / 2);
            tokio::time::sleep(Duration::from_millis(ms)).await;
            let b = &h.belief;
            let _ = self
                .conn
                .access(b.hold, fence, mode, true, &b.owner, &b.name)
                .await;
        }
    }

    /// Write -> read (or upgradable): the write belief ends when the call is made; the
    /// weaker one runs from then on.
    async fn convert_down(&mut self, h: Held, to_read: bool) -> Option<Held> {
        let Guard::Write(w) = h.guard else {
            return Some(h);
        };
        let call = if to_read {
            "downgrade"
        } else {
            "downgrade_to_upgradable"
        };
        let c = Call::on(call, &h.belief, Some(COMMAND_TIMEOUT_MS));
        self.segment(&h.belief, Mode::W, w.fence(), c.start, "convert");
        let r = if to_read {
            w.downgrade().await.map(Guard::Read)
        } else {
            w.downgrade_to_upgradable().await.map(Guard::Upgradable)
        };
        match r {
            Ok(g) => {
                let belief = Belief {
                    from: c.start,
                    node: self.node_of(&h.belief.name),
                    ..h.belief
                };
                self.ctx.believe(&belief, g.held(), g.fence());
                self.op(c, Outcome::Ok, None, Some((g.fence(), g.held())));
                Some(Held {
                    guard: g,
                    belief,
                    wrote: h.wrote,
                })
            }
            Err(e) => {
                self.op(c, Outcome::Fail, Some(err_text(&e)), None);
                None
            }
        }
    }

    /// Upgradable -> write: the upgradable belief lasts until the call returns; the
    /// write belief starts then (a busy or timed-out upgrade keeps the upgradable hold).
    async fn upgrade(&mut self, h: Held, how: Upgrade) -> Option<Held> {
        let Guard::Upgradable(u) = h.guard else {
            return Some(h);
        };
        let fence = u.fence();
        let (call, limit) = match how {
            Upgrade::Wait => ("upgrade", None),
            Upgrade::Timeout(ms) => ("upgrade_timeout", Some(ms)),
            Upgrade::Try => ("try_upgrade", Some(COMMAND_TIMEOUT_MS)),
        };
        let c = Call::on(call, &h.belief, limit);
        let r = match how {
            Upgrade::Wait => {
                let until = self.until();
                tokio::select! {
                    r = u.upgrade() => Some(r.map(Ok)),
                    _ = tokio::time::sleep_until(until) => None,
                }
            }
            Upgrade::Timeout(ms) => Some(u.upgrade_timeout(Duration::from_millis(ms)).await),
            Upgrade::Try => Some(u.try_upgrade().await),
        };
        match r {
            None => {
                self.segment(&h.belief, Mode::U, fence, c.start, "cancelled");
                self.op(c, Outcome::Cancelled, None, None);
                None
            }
            Some(Err(e)) => {
                self.segment(&h.belief, Mode::U, fence, c.start, "error");
                self.op(c, Outcome::Fail, Some(err_text(&e)), None);
                None
            }
            Some(Ok(Err(u))) => {
                self.op(c, Outcome::Busy, None, None);
                Some(Held {
                    guard: Guard::Upgradable(u),
                    ..h
                })
            }
            Some(Ok(Ok(w))) => {
                let at = now();
                self.segment(&h.belief, Mode::U, fence, at, "convert");
                let belief = Belief {
                    from: at,
                    node: self.node_of(&h.belief.name),
                    ..h.belief
                };
                self.ctx.believe(&belief, Mode::W, w.fence());
                self.op(c, Outcome::Ok, None, Some((w.fence(), Mode::W)));
                Some(Held {
                    guard: Guard::Write(w),
                    belief,
                    wrote: h.wrote,
                })
            }
        }
    }
}
