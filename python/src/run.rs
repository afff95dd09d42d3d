//! Where the lock's work runs: one tokio runtime for the process (pyo3-async-runtimes'),
//! the two ways Python waits for it (a blocking call that releases the GIL and still
//! stops on Ctrl-C, and an asyncio awaitable), and the process's exit: every wait in
//! flight withdrawn, every hold released, every client closed, within one bound.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::LazyLock;
use std::time::Duration;

use pyo3::prelude::*;
use tokio::sync::watch;

use crate::errors::{exiting, to_py};

/// How often a blocking call looks for a signal (Ctrl-C) while it waits.
const SIGNAL_CHECK: Duration = Duration::from_millis(50);

/// The runtime every client, renewal task and waiter of this process runs on.
pub(crate) fn runtime() -> &'static tokio::runtime::Runtime {
    pyo3_async_runtimes::tokio::get_runtime()
}

/// Set when the process gives everything back ([`give_back_all`]): the waits in flight
/// give up (their places are withdrawn) and new ones are refused.
static EXITING: LazyLock<watch::Sender<bool>> = LazyLock::new(|| watch::channel(false).0);

/// How many waits ([`queued`]) are in flight.
static WAITS: LazyLock<watch::Sender<usize>> = LazyLock::new(|| watch::channel(0).0);

/// Whether a wait given up at exit parks its thread for good rather than raising: at
/// interpreter exit only daemon threads are left, and a traceback from each would be
/// noise; at SIGTERM, threads that are not daemons must end for the process to end, so
/// they raise `Closed`.
static PARK: AtomicBool = AtomicBool::new(false);

/// Whether the process is giving everything back.
fn is_exiting() -> bool {
    *EXITING.borrow()
}

/// One wait in flight, counted until dropped.
struct InFlight;

impl InFlight {
    fn new() -> InFlight {
        WAITS.send_modify(|n| *n += 1);
        InFlight
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        WAITS.send_modify(|n| *n = n.saturating_sub(1));
    }
}

/// `work` (a wait for the lock: an acquire, an upgrade), given up when the process
/// exits: `None` then. Giving up drops `work`, which withdraws what it left on the
/// server (a place in the queue, a hold handed over meanwhile) in the background, before
/// this wait stops being counted; the client's `close` sends those withdrawals.
async fn queued<T>(
    work: impl Future<Output = cluster_rwlock::Result<T>>,
) -> Option<cluster_rwlock::Result<T>> {
    let _counted = InFlight::new();
    let mut exit = EXITING.subscribe();
    tokio::select! {
        biased;
        _ = exit.wait_for(|e| *e) => None,
        r = work => Some(r),
    }
}

/// Runs `work` on the calling thread, within the runtime, until it ends, with the GIL
/// released, so that other Python threads run meanwhile. A signal (Ctrl-C) raises its
/// exception (`KeyboardInterrupt`) once `work` was dropped: every operation of the lock
/// is cancel safe (an acquire given up withdraws its place; a grant that arrived in
/// between is released).
pub(crate) fn wait<T, F>(py: Python<'_>, work: F) -> PyResult<T>
where
    T: Send + 'static,
    F: Future<Output = cluster_rwlock::Result<T>> + Send + 'static,
{
    block(py, async move { Some(work.await) })
}

/// As [`wait`], for a wait for the lock, which the process's exit gives up: refused
/// (`Closed`) once the exit began; given up by it, it raises `Closed` or, at interpreter
/// exit, never returns (its thread is a daemon that the exit ends).
pub(crate) fn wait_queued<T, F>(py: Python<'_>, work: F) -> PyResult<T>
where
    T: Send + 'static,
    F: Future<Output = cluster_rwlock::Result<T>> + Send + 'static,
{
    if is_exiting() {
        return Err(exiting(py));
    }
    block(py, queued(work))
}

/// Runs `work` (`None`: given up at exit) as [`wait`] says: polled on the calling thread
/// (with the GIL released), not spawned on a worker of the runtime, so that a call costs
/// one wake-up of this thread when its reply comes, not a hop to a worker and one back.
fn block<T, F>(py: Python<'_>, work: F) -> PyResult<T>
where
    T: Send + 'static,
    F: Future<Output = Option<cluster_rwlock::Result<T>>> + Send + 'static,
{
    let mut work = Box::pin(work);
    loop {
        let ended = py.detach(|| {
            let ended =
                runtime().block_on(async { tokio::time::timeout(SIGNAL_CHECK, &mut work).await });
            // parked without taking the GIL again: the interpreter may be finalizing
            if matches!(ended, Ok(None)) && PARK.load(Ordering::Acquire) {
                loop {
                    std::thread::park();
                }
            }
            ended
        });
        match ended {
            Ok(Some(result)) => return result.map_err(|e| to_py(py, e)),
            Ok(None) => return Err(exiting(py)),
            Err(_still_running) => {
                if let Err(signal) = py.check_signals() {
                    // dropped in the runtime's context: what it gives back (a place in
                    // the queue withdrawn, a grant that arrived in between released)
                    // goes on the runtime, in the background
                    py.detach(|| {
                        let _runtime = runtime().enter();
                        drop(work);
                    });
                    return Err(signal);
                }
            }
        }
    }
}

/// `work` as an asyncio awaitable of the running loop; an error becomes this package's
/// exception. Cancelling the awaitable drops `work` (cancel safe, as for [`wait`]).
pub(crate) fn awaitable<'py, T, F>(py: Python<'py>, work: F) -> PyResult<Bound<'py, PyAny>>
where
    T: for<'a> IntoPyObject<'a> + Send + 'static,
    F: Future<Output = cluster_rwlock::Result<T>> + Send + 'static,
{
    pyo3_async_runtimes::tokio::future_into_py(py, async move {
        match work.await {
            Ok(v) => Ok(v),
            Err(e) => Err(Python::attach(|py| to_py(py, e))),
        }
    })
}

/// As [`awaitable`], for a wait for the lock, which the process's exit gives up (as
/// [`wait_queued`]: `Closed`, or at interpreter exit an awaitable that never ends).
pub(crate) fn awaitable_queued<'py, T, F>(py: Python<'py>, work: F) -> PyResult<Bound<'py, PyAny>>
where
    T: for<'a> IntoPyObject<'a> + Send + 'static,
    F: Future<Output = cluster_rwlock::Result<T>> + Send + 'static,
{
    if is_exiting() {
        return Err(exiting(py));
    }
    pyo3_async_runtimes::tokio::future_into_py(py, async move {
        match queued(work).await {
            Some(Ok(v)) => Ok(v),
            Some(Err(e)) => Err(Python::attach(|py| to_py(py, e))),
            None => {
                if PARK.load(Ordering::Acquire) {
                    std::future::pending::<()>().await;
                }
                Err(Python::attach(exiting))
            }
        }
    })
}

/// Gives everything back as the process ends, blocking for at most `bound`: every wait
/// in flight gives up (its place withdrawn) and new ones are refused, every hold in
/// `releases` is released, all at once, then every client in `closes` sends what is
/// left and closes. Past `bound` it gives up: what is left ends with its lease on the
/// server. `park`: see [`PARK`]. Returns whether it all ended within `bound`.
pub(crate) fn give_back_all<R, C>(
    py: Python<'_>,
    releases: Vec<R>,
    closes: Vec<C>,
    bound: Duration,
    park: bool,
) -> bool
where
    R: Future<Output = ()> + Send + 'static,
    C: Future<Output = ()> + Send + 'static,
{
    PARK.store(park, Ordering::Release);
    EXITING.send_replace(true);
    let work = async move {
        let mut first = tokio::task::JoinSet::new();
        for r in releases {
            first.spawn(r);
        }
        first.spawn(async {
            let _ = WAITS.subscribe().wait_for(|n| *n == 0).await;
        });
        while first.join_next().await.is_some() {}
        let mut then = tokio::task::JoinSet::new();
        for c in closes {
            then.spawn(c);
        }
        while then.join_next().await.is_some() {}
    };
    py.detach(|| runtime().block_on(async { tokio::time::timeout(bound, work).await.is_ok() }))
}

/// A duration in seconds from Python, checked: `None` is none; a negative, NaN, infinite
/// or too large one (beyond `Duration::MAX`) is a `ValueError`.
pub(crate) fn seconds(what: &str, value: Option<f64>) -> PyResult<Option<Duration>> {
    match value {
        None => Ok(None),
        Some(s) => Duration::try_from_secs_f64(s).map(Some).map_err(|_| {
            let shown = if s.abs() < 1e12 {
                format!("{s}")
            } else {
                format!("{s:e}")
            };
            pyo3::exceptions::PyValueError::new_err(format!(
                "{what} must be a number of seconds from 0 to 1.8e19; got {shown}"
            ))
        }),
    }
}
