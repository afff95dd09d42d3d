//! A granted hold: its fence, its loss signal, its release, its guarded calls, and its
//! upgrade and downgrade. The Rust guard lives here until released; dropped without a
//! release (the Python object collected), it is released in the background, as in Rust.
//!
//! A loss is told to Python as soon as any call finds it, whatever the Rust guard makes
//! of it: a guarded call or a release answered `LockLost`, and an upgrade or downgrade
//! that took the hold and neither kept it nor turned it into the new guard (an error, or
//! the call cancelled: the hold went back to the server with it), mark the guard lost
//! (`is_lost`, and the `on_lost` callbacks) at once.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use cluster_rwlock::guarded::{Condition, Guarded, Reply};
use cluster_rwlock::{AnyGuard, Error, LostSignal, Mode, RwLock};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};

use crate::run::{awaitable, awaitable_queued, runtime, seconds, wait, wait_queued};

/// The Rust guard, shared with the tasks that run guarded calls under it; `None` once
/// released (or turned into another guard by an upgrade or downgrade).
type Held = Arc<tokio::sync::RwLock<Option<AnyGuard>>>;

/// Set when a call of this binding found the hold lost (see the module's doc).
type Marked = Arc<tokio::sync::watch::Sender<bool>>;

/// Marks `m` lost.
fn mark(m: &Marked) {
    m.send_replace(true);
}

/// Marks its guard lost when dropped armed: an upgrade or downgrade that took the hold
/// and did not end by putting it back or turning it into the new guard.
struct MarkUnlessDone(Option<Marked>);

impl Drop for MarkUnlessDone {
    fn drop(&mut self) {
        if let Some(m) = self.0.take() {
            mark(&m);
        }
    }
}

/// One hold of a lock.
#[pyclass(frozen, module = "cluster_rwlock._native")]
pub(crate) struct NativeGuard {
    fence: u64,
    mode: Mode,
    owner: String,
    lost: LostSignal,
    marked: Marked,
    lock: RwLock,
    held: Held,
    /// The tasks waiting to tell Python of a loss: stopped at release, so that a normal
    /// release is never reported as a loss.
    watchers: Watchers,
}

/// The tasks that wait to tell Python of a loss, stopped when the hold ends well; `None`
/// once stopped for good (released, upgraded or downgraded, collected): a watcher asked
/// for after that is not started.
type Watchers = Arc<Mutex<Option<Vec<tokio::task::AbortHandle>>>>;

/// Stops every watcher of `w`, and any asked for later.
fn stop(w: &Watchers) {
    let handles = w.lock().unwrap_or_else(|e| e.into_inner()).take();
    handles
        .iter()
        .flatten()
        .for_each(tokio::task::AbortHandle::abort);
}

impl Drop for NativeGuard {
    /// A guard collected without a release: its Rust guard releases in the background
    /// (its own drop), and nobody is left to tell of a loss.
    fn drop(&mut self) {
        stop(&self.watchers);
    }
}

impl NativeGuard {
    pub(crate) fn new(guard: AnyGuard, lock: RwLock) -> NativeGuard {
        NativeGuard {
            fence: guard.fence(),
            mode: guard.mode(),
            owner: guard.owner().to_string(),
            lost: guard.lost_signal(),
            marked: Arc::new(tokio::sync::watch::channel(false).0),
            lock,
            held: Arc::new(tokio::sync::RwLock::new(Some(guard))),
            watchers: Arc::new(Mutex::new(Some(Vec::new()))),
        }
    }

    /// Stops the loss watchers and releases the Rust guard, if it is still there (a
    /// second release does nothing); a release answered `LockLost` marks the guard lost.
    async fn release_held(
        held: Held,
        watchers: Watchers,
        marked: Marked,
    ) -> cluster_rwlock::Result<()> {
        stop(&watchers);
        let guard = held.write().await.take();
        let released = match guard {
            Some(g) => g.release().await,
            None => Ok(()),
        };
        if matches!(released, Err(Error::LockLost)) {
            mark(&marked);
        }
        released
    }

    /// The release the process's exit makes (see `run::give_back_all`), its outcome
    /// unread.
    pub(crate) fn release_quietly(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let released = NativeGuard::release_held(
            self.held.clone(),
            self.watchers.clone(),
            self.marked.clone(),
        );
        async move {
            let _ = released.await;
        }
    }

    /// A `ValueError` unless this guard still holds and is in `mode`.
    fn check(&self, mode: Mode, what: &str) -> PyResult<()> {
        if !self.is_held() {
            return Err(PyValueError::new_err(
                "this guard was released (or upgraded, or downgraded)",
            ));
        }
        if self.mode != mode {
            return Err(PyValueError::new_err(format!(
                "only {what}; this guard is {}",
                self.mode.as_str()
            )));
        }
        Ok(())
    }
}

/// A step of a guarded call, as the Python builder hands it over.
#[derive(FromPyObject)]
pub(crate) enum Step {
    /// `(key, field or None, op, operand or None)`: a condition.
    Condition(Vec<u8>, Option<Vec<u8>>, String, Option<ConditionOperand>),
    /// `(name, [arguments])`: a command.
    Command(String, Vec<Vec<u8>>),
}

/// What a condition compares with: bytes for `eq`/`ne`, an integer for the orderings.
#[derive(FromPyObject)]
pub(crate) enum ConditionOperand {
    /// An integer (`lt`, `le`, `gt`, `ge`).
    Integer(i64),
    /// Bytes (`eq`, `ne`).
    Bytes(Vec<u8>),
}

/// The condition `(key, field, op, operand)` describes.
fn condition(
    key: Vec<u8>,
    field: Option<Vec<u8>>,
    op: &str,
    operand: Option<ConditionOperand>,
) -> PyResult<Condition> {
    use ConditionOperand::{Bytes, Integer};
    let compare = || match &field {
        Some(f) => Condition::field(&key, f),
        None => Condition::value(&key),
    };
    Ok(match (op, operand) {
        ("key_exists", None) => Condition::exists(&key),
        ("key_missing", None) => Condition::missing(&key),
        ("exists", None) => compare().exists(),
        ("missing", None) => compare().missing(),
        ("eq", Some(Bytes(b))) => compare().eq(b),
        ("ne", Some(Bytes(b))) => compare().ne(b),
        ("lt", Some(Integer(n))) => compare().lt(n),
        ("le", Some(Integer(n))) => compare().le(n),
        ("gt", Some(Integer(n))) => compare().gt(n),
        ("ge", Some(Integer(n))) => compare().ge(n),
        (op, _) => {
            return Err(PyValueError::new_err(format!(
                "not a condition: {op} with that operand"
            )))
        }
    })
}

/// The guarded call of `then` and, when given, `otherwise` (the branch run when a condition
/// fails), checked before anything is sent.
fn batch(
    py: Python<'_>,
    lock: &RwLock,
    then: Vec<Step>,
    otherwise: Option<Vec<Step>>,
) -> PyResult<Guarded> {
    let mut b = add_steps(Guarded::new(lock), then)?;
    if let Some(steps) = otherwise {
        b = add_steps(b.otherwise(), steps)?;
    }
    b.check().map_err(|e| crate::errors::to_py(py, e))
}

/// `b` with `steps` added in order.
fn add_steps(mut b: Guarded, steps: Vec<Step>) -> PyResult<Guarded> {
    for step in steps {
        b = match step {
            Step::Condition(key, field, op, operand) => {
                b.when(condition(key, field, &op, operand)?)
            }
            Step::Command(name, args) => b.command(&name, args),
        };
    }
    Ok(b)
}

/// A reply as Python reads it: `None`, `int`, `bytes`, a list, or (a command that failed,
/// in `commit()`'s replies) a `cluster_rwlock.errors.ReplyError`.
fn reply_to_py(py: Python<'_>, r: &Reply) -> PyResult<Py<PyAny>> {
    Ok(match r {
        Reply::Nil => py.None(),
        Reply::Integer(n) => n.into_pyobject(py)?.into_any().unbind(),
        Reply::Bytes(b) => PyBytes::new(py, b).into_any().unbind(),
        Reply::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(reply_to_py(py, item)?)?;
            }
            list.into_any().unbind()
        }
        Reply::Error(message) => py
            .import("cluster_rwlock.errors")?
            .getattr("ReplyError")?
            .call1((message.as_str(),))?
            .unbind(),
        _ => py.None(),
    })
}

/// What a guarded call returns to Python: `(succeeded, failed_condition, replies)`.
struct Ran {
    succeeded: bool,
    failed_condition: Option<u32>,
    replies: Vec<Reply>,
}

impl<'py> IntoPyObject<'py> for Ran {
    type Target = pyo3::types::PyTuple;
    type Output = Bound<'py, Self::Target>;
    type Error = PyErr;
    fn into_pyobject(self, py: Python<'py>) -> PyResult<Self::Output> {
        let replies = self
            .replies
            .iter()
            .map(|r| reply_to_py(py, r))
            .collect::<PyResult<Vec<_>>>()?;
        (self.succeeded, self.failed_condition, replies).into_pyobject(py)
    }
}

/// Runs `call` under the guard in `held`: `commit` reports a failed condition in the
/// result; else it is a `ConditionFailed`.
/// A call answered `LockLost` marks the guard lost.
async fn run_guarded(
    held: Held,
    call: Guarded,
    commit: bool,
    marked: Marked,
) -> cluster_rwlock::Result<Ran> {
    let held = held.read_owned().await;
    let Some(guard) = held.as_ref() else {
        return Err(Error::LockLost);
    };
    let ran = if commit {
        call.commit_under(guard).await.map(|o| Ran {
            succeeded: o.succeeded,
            failed_condition: o.failed_condition,
            replies: o.replies,
        })
    } else {
        call.run_under(guard).await.map(|replies| Ran {
            succeeded: true,
            failed_condition: None,
            replies,
        })
    };
    if matches!(ran, Err(Error::LockLost)) {
        mark(&marked);
    }
    ran
}

/// Upgrades (`to == Write`, within `timeout`) or downgrades (`to == Read`) the guard in
/// `held`; a timed-out upgrade keeps the upgradable hold in place, and its watchers. Any
/// other end but the new guard (an error, or this future dropped) leaves the guard
/// marked lost: its hold is gone with the call.
async fn change(
    held: Held,
    watchers: Watchers,
    marked: Marked,
    to: Mode,
    timeout: Option<Duration>,
) -> cluster_rwlock::Result<AnyGuard> {
    let mut slot = held.write_owned().await;
    let taken = slot.take();
    // (declared after `slot`, so dropped before it: marked before the guard is free)
    let mut unless_done = MarkUnlessDone(taken.is_some().then(|| marked.clone()));
    let changed: AnyGuard = match (taken, to, timeout) {
        (Some(AnyGuard::Upgradable(u)), Mode::Write, None) => u.upgrade().await?.into(),
        (Some(AnyGuard::Upgradable(u)), Mode::Write, Some(t)) => {
            match u.upgrade_timeout(t).await? {
                Ok(w) => w.into(),
                Err(kept) => {
                    *slot = Some(kept.into());
                    unless_done.0 = None;
                    return Err(Error::Timeout(t));
                }
            }
        }
        (Some(AnyGuard::Write(w)), Mode::Read, _) => w.downgrade().await?.into(),
        // (checked before: a guard of another mode never gets here; a released one may)
        (other, _, _) => {
            *slot = other;
            unless_done.0 = None;
            return Err(Error::LockLost);
        }
    };
    unless_done.0 = None;
    stop(&watchers);
    Ok(changed)
}

#[pymethods]
impl NativeGuard {
    /// The fencing token of this grant.
    #[getter]
    fn fence(&self) -> u64 {
        self.fence
    }

    /// `"read"`, `"write"` or `"upgradable"`.
    #[getter]
    fn mode(&self) -> &'static str {
        self.mode.as_str()
    }

    /// The owner token of the hold.
    #[getter]
    fn owner(&self) -> &str {
        &self.owner
    }

    /// The name of the lock held.
    #[getter]
    fn lock_name(&self) -> &str {
        self.lock.name()
    }

    /// Whether the hold may have been lost (its lease ran out before a renewal was
    /// confirmed, or the server said it is gone): from then on it must not be relied on.
    fn is_lost(&self) -> bool {
        self.lost.is_lost() || *self.marked.borrow()
    }

    /// Waits (blocking, at most `timeout` seconds) until no upgrade, downgrade or release
    /// of this guard is under way: one whose awaitable was cancelled has then ended, and
    /// `is_lost` tells what it left.
    fn settled(&self, py: Python<'_>, timeout: f64) -> PyResult<()> {
        let t = seconds("timeout", Some(timeout))?.unwrap_or_default();
        let held = self.held.clone();
        py.detach(|| {
            runtime().block_on(async {
                let _ = tokio::time::timeout(t, held.read()).await;
            })
        });
        Ok(())
    }

    /// Whether the guard still holds its Rust guard (not released, upgraded or
    /// downgraded).
    fn is_held(&self) -> bool {
        self.held.try_read().map(|g| g.is_some()).unwrap_or(true)
    }

    /// Calls `callback()` (from another thread) once, when the hold is lost; never after
    /// a release (nor at all when asked for after it).
    fn on_lost(&self, callback: Py<PyAny>) {
        let signal = self.lost.clone();
        let mut marked = self.marked.subscribe();
        // (started and listed under the lock, so that a release cannot come in between
        // and leave it running)
        let mut watchers = self.watchers.lock().unwrap_or_else(|e| e.into_inner());
        let Some(list) = watchers.as_mut() else {
            return;
        };
        let task = runtime().spawn(async move {
            tokio::select! {
                _ = signal.lost() => {}
                _ = marked.wait_for(|m| *m) => {}
            }
            Python::attach(|py| {
                if let Err(e) = callback.call0(py) {
                    e.write_unraisable(py, None);
                }
            });
        });
        list.push(task.abort_handle());
    }

    /// Releases the hold, blocking; a second release does nothing. Raises `LockLost` when
    /// the hold was gone before.
    fn release(&self, py: Python<'_>) -> PyResult<()> {
        wait(
            py,
            NativeGuard::release_held(
                self.held.clone(),
                self.watchers.clone(),
                self.marked.clone(),
            ),
        )
    }

    /// As `release`, as an awaitable.
    fn release_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        awaitable(
            py,
            NativeGuard::release_held(
                self.held.clone(),
                self.watchers.clone(),
                self.marked.clone(),
            ),
        )
    }

    /// Runs a guarded call, blocking: `then` (and `otherwise`, when a condition fails)
    /// are lists of steps; returns `(succeeded, failed_condition, replies)`. With
    /// `commit` false, a failed condition raises `ConditionFailed`.
    #[pyo3(signature = (then, otherwise=None, commit=false))]
    fn guarded(
        &self,
        py: Python<'_>,
        then: Vec<Step>,
        otherwise: Option<Vec<Step>>,
        commit: bool,
    ) -> PyResult<Py<PyAny>> {
        self.check(self.mode, "")?;
        let b = batch(py, &self.lock, then, otherwise)?;
        let ran = wait(
            py,
            run_guarded(self.held.clone(), b, commit, self.marked.clone()),
        )?;
        Ok(ran.into_pyobject(py)?.into_any().unbind())
    }

    /// As `guarded`, as an awaitable.
    #[pyo3(signature = (then, otherwise=None, commit=false))]
    fn guarded_async<'py>(
        &self,
        py: Python<'py>,
        then: Vec<Step>,
        otherwise: Option<Vec<Step>>,
        commit: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.check(self.mode, "")?;
        let b = batch(py, &self.lock, then, otherwise)?;
        awaitable(
            py,
            run_guarded(self.held.clone(), b, commit, self.marked.clone()),
        )
    }

    /// Upgrades an upgradable read hold to write, blocking (at most `timeout` seconds:
    /// then `Timeout`, and this guard still holds its upgradable read); returns the write
    /// guard, and this one is spent.
    #[pyo3(signature = (timeout=None))]
    fn upgrade(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<NativeGuard> {
        self.check(Mode::Upgradable, "an upgradable read guard upgrades")?;
        let t = seconds("timeout", timeout)?;
        let (held, lock, marked) = (self.held.clone(), self.lock.clone(), self.marked.clone());
        let g = wait_queued(
            py,
            change(held, self.watchers.clone(), marked, Mode::Write, t),
        )?;
        Ok(NativeGuard::new(g, lock))
    }

    /// As `upgrade`, as an awaitable.
    #[pyo3(signature = (timeout=None))]
    fn upgrade_async<'py>(
        &self,
        py: Python<'py>,
        timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.check(Mode::Upgradable, "an upgradable read guard upgrades")?;
        let t = seconds("timeout", timeout)?;
        let (held, lock, marked) = (self.held.clone(), self.lock.clone(), self.marked.clone());
        let watchers = self.watchers.clone();
        awaitable_queued(py, async move {
            Ok(NativeGuard::new(
                change(held, watchers, marked, Mode::Write, t).await?,
                lock,
            ))
        })
    }

    /// Downgrades a write hold to read, blocking, with no writer in between; returns the
    /// read guard, and this one is spent.
    fn downgrade(&self, py: Python<'_>) -> PyResult<NativeGuard> {
        self.check(Mode::Write, "a write guard downgrades")?;
        let (held, lock, marked) = (self.held.clone(), self.lock.clone(), self.marked.clone());
        let g = wait(
            py,
            change(held, self.watchers.clone(), marked, Mode::Read, None),
        )?;
        Ok(NativeGuard::new(g, lock))
    }

    /// As `downgrade`, as an awaitable.
    fn downgrade_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.check(Mode::Write, "a write guard downgrades")?;
        let (held, lock, marked) = (self.held.clone(), self.lock.clone(), self.marked.clone());
        let watchers = self.watchers.clone();
        awaitable(py, async move {
            Ok(NativeGuard::new(
                change(held, watchers, marked, Mode::Read, None).await?,
                lock,
            ))
        })
    }
}
