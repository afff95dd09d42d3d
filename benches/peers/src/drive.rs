//! Runs a cycle from many tasks for a while and counts the cycles.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::TASKS;

/// Runs `cycle(task index)` from TASKS tasks for `secs`; cycles per second.
pub(crate) async fn drive<F, Fut>(secs: Duration, cycle: F) -> f64
where
    F: Fn(usize) -> Fut + Send + Sync + Clone + 'static,
    Fut: std::future::Future<Output = bool> + Send,
{
    drive_n(TASKS, secs, cycle).await
}

/// As [`drive`], from `tasks` tasks.
pub(crate) async fn drive_n<F, Fut>(tasks_n: usize, secs: Duration, cycle: F) -> f64
where
    F: Fn(usize) -> Fut + Send + Sync + Clone + 'static,
    Fut: std::future::Future<Output = bool> + Send,
{
    let run = run_for(tasks_n, secs, cycle).await;
    *LAST_CYCLES.lock().unwrap_or_else(|e| e.into_inner()) = run.cycle_ms;
    run.at_stop as f64 / run.took.as_secs_f64()
}

/// The times of the cycles that counted in the last [`drive_n`] run, in ms, sorted: for
/// the latency of a single task (B1-single), read right after its run.
static LAST_CYCLES: Mutex<Vec<f64>> = Mutex::new(Vec::new());

/// The `p`th percentile of the last [`drive_n`] run's cycle times, in ms (0 when none
/// counted).
pub(crate) fn last_cycle_pct(p: f64) -> f64 {
    let cycles = LAST_CYCLES.lock().unwrap_or_else(|e| e.into_inner());
    if cycles.is_empty() {
        return 0.0;
    }
    let i = ((p / 100.0) * (cycles.len() - 1) as f64).round() as usize;
    cycles[i.min(cycles.len() - 1)]
}

/// What [`run_for`] counted.
pub(crate) struct Run {
    /// Cycles done when the tasks were told to stop, `took` after the start.
    pub at_stop: u64,
    pub took: Duration,
    /// Cycles done once every task finished the cycle it was in.
    pub total: u64,
    /// The time of every cycle that counted, in ms, sorted.
    pub cycle_ms: Vec<f64>,
}

/// Runs `cycle(task index)` from `tasks_n` tasks, each until `secs` have passed and its
/// cycle ended; a cycle counts when it returns true.
pub(crate) async fn run_for<F, Fut>(tasks_n: usize, secs: Duration, cycle: F) -> Run
where
    F: Fn(usize) -> Fut + Send + Sync + Clone + 'static,
    Fut: std::future::Future<Output = bool> + Send,
{
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for i in 0..tasks_n {
        let (stop, done, cycle) = (stop.clone(), done.clone(), cycle.clone());
        tasks.push(tokio::spawn(async move {
            let mut times = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let began = Instant::now();
                if cycle(i).await {
                    times.push(began.elapsed().as_secs_f64() * 1e3);
                    done.fetch_add(1, Ordering::Relaxed);
                }
            }
            times
        }));
    }
    let began = Instant::now();
    tokio::time::sleep(secs).await;
    stop.store(true, Ordering::Relaxed);
    let at_stop = done.load(Ordering::Relaxed);
    let took = began.elapsed();
    let mut cycle_ms = Vec::new();
    for t in tasks {
        cycle_ms.extend(t.await.unwrap_or_default());
    }
    cycle_ms.sort_by(f64::total_cmp);
    Run {
        at_stop,
        took,
        total: done.load(Ordering::Relaxed),
        cycle_ms,
    }
}
