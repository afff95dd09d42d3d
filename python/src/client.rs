//! A connected client and the locks it names: `connect()`, `Client.rwlock(name)`, and a
//! lock's acquire (blocking or awaitable), state and force release.

use std::time::Duration;

use cluster_rwlock::operator::LockState;
use cluster_rwlock::{LockClient, Mode, MultiLock, RwLock};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::guard::NativeGuard;
use crate::options::{config, Options};
use crate::run::{awaitable, awaitable_queued, seconds, wait, wait_queued};

/// A connection to a cluster (or one node): its connections, subscriptions and the task
/// that renews its holds. Cheap to share between threads.
#[pyclass(frozen, module = "cluster_rwlock._native")]
pub(crate) struct NativeClient {
    client: LockClient,
}

/// Connects and checks the server, blocking (see `cluster_rwlock.connect`).
#[pyfunction]
pub(crate) fn connect(py: Python<'_>, options: Options) -> PyResult<NativeClient> {
    let c = config(options)?;
    let client = wait(py, LockClient::connect(c))?;
    Ok(NativeClient { client })
}

/// As [`connect`], as an awaitable.
#[pyfunction]
pub(crate) fn connect_async<'py>(py: Python<'py>, options: Options) -> PyResult<Bound<'py, PyAny>> {
    let c = config(options)?;
    awaitable(py, async move {
        Ok(NativeClient {
            client: LockClient::connect(c).await?,
        })
    })
}

/// Gives everything back as the process ends (see `run::give_back_all`): the waits in
/// flight withdrawn, `guards` released, `clients` closed, all within `bound` seconds;
/// `park`: waits given up park their (daemon) threads rather than raise. Returns whether
/// it all ended in time.
#[pyfunction]
pub(crate) fn give_back_all(
    py: Python<'_>,
    guards: Vec<Bound<'_, NativeGuard>>,
    clients: Vec<Bound<'_, NativeClient>>,
    bound: f64,
    park: bool,
) -> PyResult<bool> {
    let bound = seconds("bound", Some(bound))?.unwrap_or_default();
    let releases = guards.iter().map(|g| g.get().release_quietly()).collect();
    let closes = clients
        .iter()
        .map(|c| {
            let client = c.get().client.clone();
            async move {
                client.close().await;
            }
        })
        .collect();
    Ok(crate::run::give_back_all(py, releases, closes, bound, park))
}

#[pymethods]
impl NativeClient {
    /// The lock `name` (checked: a bad name raises `InvalidName`), a handle of its own.
    fn rwlock(&self, py: Python<'_>, name: &str) -> PyResult<NativeLock> {
        let lock = self
            .client
            .rwlock(name)
            .map_err(|e| crate::errors::to_py(py, e))?;
        Ok(NativeLock { lock })
    }

    /// Several locks taken together, in any slots, without deadlock: `members` are
    /// `(name, mode)` pairs (checked: bad names raise `InvalidName`).
    fn multi(&self, py: Python<'_>, members: Vec<(String, String)>) -> PyResult<NativeMulti> {
        let members = members
            .into_iter()
            .map(|(name, mode)| Ok((name, mode_of(&mode)?)))
            .collect::<PyResult<Vec<_>>>()?;
        let multi = self
            .client
            .multi(members)
            .map_err(|e| crate::errors::to_py(py, e))?;
        Ok(NativeMulti { multi })
    }

    /// The client name in this client's owner tokens.
    #[getter]
    fn client_name(&self) -> String {
        self.client.config().get_client_name().to_string()
    }

    /// The client's lease, in seconds.
    #[getter]
    fn lease(&self) -> f64 {
        self.client.config().get_lease().as_secs_f64()
    }

    /// Breaks the lock `name` (every hold, or those of `owner`), blocking; returns
    /// `(holds_removed, fence)`.
    #[pyo3(signature = (name, owner=None))]
    fn force_release(
        &self,
        py: Python<'_>,
        name: String,
        owner: Option<String>,
    ) -> PyResult<(u64, Option<u64>)> {
        wait(py, force_release(self.client.clone(), name, owner))
    }

    /// As `force_release`, as an awaitable.
    #[pyo3(signature = (name, owner=None))]
    fn force_release_async<'py>(
        &self,
        py: Python<'py>,
        name: String,
        owner: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        awaitable(py, force_release(self.client.clone(), name, owner))
    }

    /// Breaks every hold of the client named `client_name` on the lock `name`, and its
    /// places in the queue, blocking; returns `(holds_removed, fence, places_removed)`.
    fn break_client(
        &self,
        py: Python<'_>,
        name: String,
        client_name: String,
    ) -> PyResult<(u64, Option<u64>, u64)> {
        wait(py, break_client(self.client.clone(), name, client_name))
    }

    /// As `break_client`, as an awaitable.
    fn break_client_async<'py>(
        &self,
        py: Python<'py>,
        name: String,
        client_name: String,
    ) -> PyResult<Bound<'py, PyAny>> {
        awaitable(py, break_client(self.client.clone(), name, client_name))
    }

    /// Stores `value` at `key` with `fence` unless a higher fence wrote there, blocking;
    /// returns `(written, fence)`: the fence that wrote last.
    fn fenced_set(
        &self,
        py: Python<'_>,
        key: String,
        fence: u64,
        value: Vec<u8>,
    ) -> PyResult<(bool, u64)> {
        wait(py, fenced_set(self.client.clone(), key, fence, value))
    }

    /// As `fenced_set`, as an awaitable.
    fn fenced_set_async<'py>(
        &self,
        py: Python<'py>,
        key: String,
        fence: u64,
        value: Vec<u8>,
    ) -> PyResult<Bound<'py, PyAny>> {
        awaitable(py, fenced_set(self.client.clone(), key, fence, value))
    }

    /// The value `fenced_set` stored at `key` and the fence that wrote it, blocking:
    /// `(fence, value)`, or `None` when there is none.
    fn fenced_get(&self, py: Python<'_>, key: String) -> PyResult<Option<(u64, FencedValue)>> {
        wait(py, fenced_get(self.client.clone(), key))
    }

    /// As `fenced_get`, as an awaitable.
    fn fenced_get_async<'py>(&self, py: Python<'py>, key: String) -> PyResult<Bound<'py, PyAny>> {
        awaitable(py, fenced_get(self.client.clone(), key))
    }

    /// Gives back what dropped holds left and closes the connections, blocking; returns
    /// how many give-backs were still unsent.
    fn close(&self, py: Python<'_>) -> PyResult<usize> {
        let client = self.client.clone();
        wait(py, async move { Ok(client.close().await) })
    }

    /// As `close`, as an awaitable.
    fn close_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let client = self.client.clone();
        awaitable(py, async move { Ok(client.close().await) })
    }
}

/// `force_release`, for the blocking method and the awaitable: (holds removed, raised
/// fence).
async fn force_release(
    client: LockClient,
    name: String,
    owner: Option<String>,
) -> cluster_rwlock::Result<(u64, Option<u64>)> {
    let r = client.force_release(&name, owner.as_deref()).await?;
    Ok((r.holds_removed, r.fence))
}

/// `break_client`, for the blocking method and the awaitable: (holds removed, raised
/// fence, places removed).
async fn break_client(
    client: LockClient,
    name: String,
    client_name: String,
) -> cluster_rwlock::Result<(u64, Option<u64>, u64)> {
    let r = client.break_client(&name, &client_name).await?;
    Ok((r.holds_removed, r.fence, r.places_removed))
}

/// `fenced_set`, for the blocking method and the awaitable: (written, fence).
async fn fenced_set(
    client: LockClient,
    key: String,
    fence: u64,
    value: Vec<u8>,
) -> cluster_rwlock::Result<(bool, u64)> {
    let w = client.fenced_set(&key, fence, value).await?;
    Ok((w.written, w.fence))
}

/// `fenced_get`, for the blocking method and the awaitable: (fence, value) or none.
async fn fenced_get(
    client: LockClient,
    key: String,
) -> cluster_rwlock::Result<Option<(u64, FencedValue)>> {
    let got = client.fenced_get(&key).await?;
    Ok(got.map(|(fence, value)| (fence, FencedValue(value))))
}

/// A value of the fenced store, handed to Python as `bytes` (a `Vec<u8>` would be a
/// list of ints).
struct FencedValue(Vec<u8>);

impl<'py> IntoPyObject<'py> for FencedValue {
    type Target = PyBytes;
    type Output = Bound<'py, PyBytes>;
    type Error = std::convert::Infallible;

    fn into_pyobject(self, py: Python<'py>) -> Result<Self::Output, Self::Error> {
        Ok(PyBytes::new(py, &self.0))
    }
}

/// One lock handle: each acquire through it is a hold of its own.
#[pyclass(frozen, module = "cluster_rwlock._native")]
pub(crate) struct NativeLock {
    lock: RwLock,
}

/// `"read"`, `"write"` or `"upgradable"` as a mode.
fn mode_of(word: &str) -> PyResult<Mode> {
    match word {
        "read" => Ok(Mode::Read),
        "write" => Ok(Mode::Write),
        "upgradable" => Ok(Mode::Upgradable),
        _ => Err(PyValueError::new_err(format!(
            "mode is \"read\", \"write\" or \"upgradable\"; got {word:?}"
        ))),
    }
}

/// The acquire `blocking` and `timeout` ask for: `None` when a non-blocking attempt found
/// the lock taken.
async fn acquire(
    lock: RwLock,
    mode: Mode,
    blocking: bool,
    timeout: Option<Duration>,
) -> cluster_rwlock::Result<Option<NativeGuard>> {
    let guard = match (blocking, timeout) {
        (false, _) => lock.try_acquire(mode).await?,
        (true, Some(t)) => Some(lock.acquire_timeout(mode, t).await?),
        (true, None) => Some(lock.acquire(mode).await?),
    };
    Ok(guard.map(|g| NativeGuard::new(g, lock)))
}

#[pymethods]
impl NativeLock {
    /// Acquires in `mode`, blocking: waits for at most `timeout` seconds (`None`: until
    /// granted), or not at all when `blocking` is false (then `None` when taken).
    #[pyo3(signature = (mode, blocking=true, timeout=None))]
    fn acquire(
        &self,
        py: Python<'_>,
        mode: &str,
        blocking: bool,
        timeout: Option<f64>,
    ) -> PyResult<Option<NativeGuard>> {
        let (mode, timeout) = (mode_of(mode)?, seconds("timeout", timeout)?);
        wait_queued(py, acquire(self.lock.clone(), mode, blocking, timeout))
    }

    /// As `acquire`, as an awaitable.
    #[pyo3(signature = (mode, blocking=true, timeout=None))]
    fn acquire_async<'py>(
        &self,
        py: Python<'py>,
        mode: &str,
        blocking: bool,
        timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (mode, timeout) = (mode_of(mode)?, seconds("timeout", timeout)?);
        awaitable_queued(py, acquire(self.lock.clone(), mode, blocking, timeout))
    }

    /// The same lock with its own lease (in seconds) for the holds taken through the
    /// new handle.
    fn with_lease(&self, py: Python<'_>, lease: f64) -> PyResult<NativeLock> {
        let lease = seconds("lease", Some(lease))?.unwrap_or_default();
        let lock = self
            .lock
            .with_lease(lease)
            .map_err(|e| crate::errors::to_py(py, e))?;
        Ok(NativeLock { lock })
    }

    /// The lock's name.
    #[getter]
    fn name(&self) -> &str {
        self.lock.name()
    }

    /// The Redis key of the lock's hash.
    #[getter]
    fn key(&self) -> &str {
        self.lock.key()
    }

    /// The cluster slot of the lock (and of its `{hashtag}`'s keys).
    #[getter]
    fn slot(&self) -> u16 {
        self.lock.slot()
    }

    /// The lease of holds taken through this handle, in seconds.
    #[getter]
    fn lease(&self) -> f64 {
        self.lock.lease().as_secs_f64()
    }

    /// The owner token of this handle's holds.
    #[getter]
    fn owner(&self) -> &str {
        self.lock.owner()
    }

    /// Whether `key` is in the lock's slot (guarded commands may name it).
    fn same_slot_as(&self, key: &str) -> bool {
        self.lock.same_slot_as(key)
    }

    /// Who holds and who waits, read from the server, blocking, as a dict.
    fn state<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let lock = self.lock.clone();
        let s = wait(py, async move { lock.state().await })?;
        state_dict(py, &s)
    }
}

/// `s` as Python reads it: `mode`, `fence`, `holders` (owner, client name, mode, holds,
/// lease left and time since the last renewal in seconds, overdue), `waiting_writers`,
/// `waiting_readers`.
fn state_dict<'py>(py: Python<'py>, s: &LockState) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("mode", s.mode.map(|m| m.as_str()))?;
    d.set_item("fence", s.fence)?;
    let holders = s
        .holders
        .iter()
        .map(|h| {
            let one = PyDict::new(py);
            one.set_item("owner", &h.owner)?;
            one.set_item("client", h.client_name())?;
            one.set_item("mode", h.mode.as_str())?;
            one.set_item("holds", h.count)?;
            one.set_item("lease_left", h.lease_left.as_secs_f64())?;
            one.set_item("renewed_ago", h.renewed_ago.as_secs_f64())?;
            one.set_item("overdue", h.overdue())?;
            Ok(one)
        })
        .collect::<PyResult<Vec<_>>>()?;
    d.set_item("holders", holders)?;
    d.set_item("waiting_writers", &s.waiting_writers)?;
    d.set_item("waiting_readers", &s.waiting_readers)?;
    Ok(d)
}

/// Several locks taken as one (see `NativeClient::multi`).
#[pyclass(frozen, module = "cluster_rwlock._native")]
pub(crate) struct NativeMulti {
    multi: MultiLock,
}

/// Takes every member (`None`: a non-blocking attempt found one taken; then none stays
/// held); each member's guard on its own, in the order they were taken.
async fn lock_all(
    multi: MultiLock,
    blocking: bool,
    timeout: Option<Duration>,
) -> cluster_rwlock::Result<Option<Vec<NativeGuard>>> {
    let guard = match (blocking, timeout) {
        (false, _) => multi.try_lock().await?,
        (true, Some(t)) => Some(multi.lock_timeout(t).await?),
        (true, None) => Some(multi.lock().await?),
    };
    Ok(guard.map(|g| {
        g.into_guards()
            .into_iter()
            .map(|member| {
                let lock = member.lock().clone();
                NativeGuard::new(member, lock)
            })
            .collect()
    }))
}

#[pymethods]
impl NativeMulti {
    /// Takes every member, blocking (at most `timeout` seconds in all; not at all when
    /// `blocking` is false): the members' guards, or `None` when not blocking and taken.
    #[pyo3(signature = (blocking=true, timeout=None))]
    fn lock(
        &self,
        py: Python<'_>,
        blocking: bool,
        timeout: Option<f64>,
    ) -> PyResult<Option<Vec<NativeGuard>>> {
        let timeout = seconds("timeout", timeout)?;
        wait_queued(py, lock_all(self.multi.clone(), blocking, timeout))
    }

    /// As `lock`, as an awaitable.
    #[pyo3(signature = (blocking=true, timeout=None))]
    fn lock_async<'py>(
        &self,
        py: Python<'py>,
        blocking: bool,
        timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let timeout = seconds("timeout", timeout)?;
        awaitable_queued(py, lock_all(self.multi.clone(), blocking, timeout))
    }

    /// The same members with their own lease (seconds).
    fn with_lease(&self, py: Python<'_>, lease: f64) -> PyResult<NativeMulti> {
        let lease = seconds("lease", Some(lease))?.unwrap_or_default();
        let multi = self
            .multi
            .with_lease(lease)
            .map_err(|e| crate::errors::to_py(py, e))?;
        Ok(NativeMulti { multi })
    }

    /// The members' names, in the order they are taken.
    fn names(&self) -> Vec<String> {
        self.multi
            .members()
            .map(|(lock, _)| lock.name().to_string())
            .collect()
    }
}
