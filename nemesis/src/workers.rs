//! The worker processes of a run: when each kills itself while a write of it waits
//! (`kill_plan`), and starting, replacing and reaping them (`Workers`).

use std::collections::VecDeque;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::{Rng, SeedableRng};

use crate::history::{now, Event};
use crate::workload;
use crate::RunArgs;

/// When the workers kill themselves while a write of theirs waits (`waiter_kill`, or
/// `--queued-kills`): times drawn in `[t0 + 5 s, until - lease - 10 s]`, each given to a
/// random worker; per worker, in order (the worker started in place of a killed one gets
/// the next).
pub(crate) fn kill_plan(
    args: &RunArgs,
    waiter_kills: bool,
    t0: u64,
    until: u64,
) -> Vec<VecDeque<u64>> {
    let mut plan = vec![VecDeque::new(); args.workers as usize];
    let default = if waiter_kills { args.duration / 10 } else { 0 };
    let count = args.queued_kills.unwrap_or(default as u32);
    let (lo, hi) = (
        t0 + 5_000_000_000,
        until.saturating_sub((args.lease_ms + 10_000) * 1_000_000),
    );
    if plan.is_empty() || hi <= lo {
        return plan;
    }
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(args.seed ^ 0xdead);
    let mut times: Vec<(usize, u64)> = (0..count)
        .map(|_| (rng.random_range(0..plan.len()), rng.random_range(lo..hi)))
        .collect();
    times.sort_by_key(|t| t.1);
    for (w, t) in times {
        plan[w].push_back(t);
    }
    plan
}

/// The worker processes: started, and replaced under a new number when one was killed on
/// purpose while a write of it waited.
pub(crate) struct Workers {
    pub(crate) exe: PathBuf,
    /// Every worker's spec but its number, seed, kill time and history file.
    pub(crate) template: workload::WorkerSpec,
    /// The run's seed.
    pub(crate) seed: u64,
    pub(crate) out: PathBuf,
    /// The number of the next worker started in place of a killed one.
    pub(crate) next: AtomicU32,
    /// The pids of the workers that run now (for `pause_client`).
    pub(crate) pids: Arc<Mutex<Vec<u32>>>,
    /// Every worker number started, whose histories the run reads.
    pub(crate) procs: Mutex<Vec<u32>>,
    /// Where `client_kill` events go.
    pub(crate) log: Arc<Mutex<Vec<Event>>>,
    /// `CLOCK_MONOTONIC` ns by which every worker must have ended.
    pub(crate) deadline: u64,
}

impl Workers {
    /// Starts worker `proc`, which kills itself while queued after `kill_at`.
    pub(crate) fn spawn(
        &self,
        proc: u32,
        kill_at: Option<u64>,
    ) -> Result<tokio::process::Child, String> {
        let spec = workload::WorkerSpec {
            proc,
            seed: self
                .seed
                .wrapping_mul(1_000_003)
                .wrapping_add(u64::from(proc)),
            kill_at,
            out: self
                .out
                .join(format!("worker-{proc}.jsonl"))
                .display()
                .to_string(),
            ..self.template.clone()
        };
        let child = tokio::process::Command::new(&self.exe)
            .arg("worker")
            .env(
                "NEMESIS_WORKER",
                serde_json::to_string(&spec).map_err(|e| e.to_string())?,
            )
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("worker {proc}: {e}"))?;
        self.procs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(proc);
        if let Some(pid) = child.id() {
            self.pids
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(pid);
        }
        Ok(child)
    }

    /// Waits for worker `proc` (started as `child`) to end; one that was killed on
    /// purpose while a write of it waited (SIGKILL, after its kill time) is replaced by a new worker
    /// with the next kill time of `plan`, and recorded as a `client_kill`.
    pub(crate) async fn supervise(
        self: Arc<Self>,
        mut proc: u32,
        mut child: tokio::process::Child,
        mut plan: VecDeque<u64>,
    ) -> Result<(), String> {
        loop {
            let pid = child.id().unwrap_or(0);
            let left = Duration::from_nanos(self.deadline.saturating_sub(now()));
            let status = tokio::time::timeout(left, child.wait()).await;
            self.pids
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .retain(|p| *p != pid);
            let status = match status {
                Ok(Ok(status)) => status,
                Ok(Err(e)) => return Err(format!("worker {proc}: {e}")),
                Err(_) => {
                    let _ = child.kill().await;
                    return Err(format!("worker {proc} did not end in time"));
                }
            };
            if status.success() {
                return Ok(());
            }
            let died = now();
            let planned = plan.front().is_some_and(|at| died >= *at);
            if status.signal() != Some(libc::SIGKILL) || !planned {
                return Err(format!("worker {proc} exited with {status}"));
            }
            plan.pop_front();
            let next = self.next.fetch_add(1, Ordering::SeqCst);
            child = self.spawn(next, plan.front().copied())?;
            self.log
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(Event::Fault {
                    kind: "client_kill".into(),
                    target: format!(
                        "worker {proc} (pid {pid}) killed while a write of it waited, replaced by worker {next}"
                    ),
                    start: died,
                    end: now(),
                    error: None,
                    pid: Some(pid),
                });
            proc = next;
        }
    }
}
