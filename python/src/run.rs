//! Where the lock's work runs: one tokio runtime for the process (pyo3-async-runtimes'),
//! and the two ways Python waits for it: a blocking call that releases the GIL and
//! still stops on Ctrl-C, and an asyncio awaitable.

use std::future::Future;
use std::time::Duration;

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

use crate::errors::to_py;

/// How often a blocking call looks for a signal (Ctrl-C) while it waits.
const SIGNAL_CHECK: Duration = Duration::from_millis(50);

/// The runtime every client, renewal task and waiter of this process runs on.
pub(crate) fn runtime() -> &'static tokio::runtime::Runtime {
    pyo3_async_runtimes::tokio::get_runtime()
}

/// Runs `work` on the runtime and blocks the calling thread until it ends, with the GIL
/// released, so that other Python threads run meanwhile. A signal (Ctrl-C) raises its
/// exception (`KeyboardInterrupt`) at once and drops `work`: every operation of the lock
/// is cancel safe (an acquire given up withdraws its place; a grant that arrived in
/// between is released).
pub(crate) fn wait<T, F>(py: Python<'_>, work: F) -> PyResult<T>
where
    T: Send + 'static,
    F: Future<Output = cluster_rwlock::Result<T>> + Send + 'static,
{
    let mut handle = runtime().spawn(work);
    loop {
        let ended = py.detach(|| {
            runtime().block_on(async { tokio::time::timeout(SIGNAL_CHECK, &mut handle).await })
        });
        match ended {
            Ok(Ok(result)) => return result.map_err(|e| to_py(py, e)),
            Ok(Err(join)) => {
                return Err(PyRuntimeError::new_err(format!(
                    "the lock's task failed: {join}"
                )))
            }
            Err(_still_running) => {
                if let Err(signal) = py.check_signals() {
                    handle.abort();
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
