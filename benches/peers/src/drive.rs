//! Runs a cycle from many tasks for a while and counts the cycles.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
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
    run.at_stop as f64 / run.took.as_secs_f64()
}

/// What [`run_for`] counted.
pub(crate) struct Run {
    /// Cycles done when the tasks were told to stop, `took` after the start.
    pub at_stop: u64,
    pub took: Duration,
    /// Cycles done once every task finished the cycle it was in.
    pub total: u64,
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
            while !stop.load(Ordering::Relaxed) {
                if cycle(i).await {
                    done.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    let began = Instant::now();
    tokio::time::sleep(secs).await;
    stop.store(true, Ordering::Relaxed);
    let at_stop = done.load(Ordering::Relaxed);
    let took = began.elapsed();
    for t in tasks {
        let _ = t.await;
    }
    Run {
        at_stop,
        took,
        total: done.load(Ordering::Relaxed),
    }
}
