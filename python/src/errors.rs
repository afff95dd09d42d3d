//! The lock's errors as the Python package's exceptions (`cluster_rwlock.errors`): one
//! class per kind of the Rust error, each with `is_retryable` (the Rust
//! error's predicate) and the details a handler reads (`index`, `nothing_ran`, ...).

use cluster_rwlock::error::ConnectionErrorKind;
use cluster_rwlock::Error;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

/// The class of `cluster_rwlock.errors` that `e` is raised as: one for every kind of
/// the Rust error (a kind that refines another is a subclass of it in Python:
/// `InvalidOwner` of `InvalidConfig`, `WriteNotReplicated` of `NotReplicated`, `WrongSlot`
/// and `LockKey` of `InvalidCommand`, `NotSetUp` of `PermissionDenied`). A failure to
/// connect is raised as the class of its cause, with the node's `addr`.
fn class_of(e: &Error) -> &'static str {
    match e {
        Error::Timeout(_) => "Timeout",
        Error::LockLost => "LockLost",
        Error::Broken { .. } => "Broken",
        Error::UpgradeDeadlock => "UpgradeDeadlock",
        Error::NotReplicated { .. } => "NotReplicated",
        Error::WriteNotReplicated { .. } => "WriteNotReplicated",
        Error::InvalidName(_) => "InvalidName",
        Error::InvalidConfig(_) => "InvalidConfig",
        Error::InvalidOwner(_) => "InvalidOwner",
        Error::InvalidCommand(_) => "InvalidCommand",
        Error::WrongSlot { .. } => "WrongSlot",
        Error::LockKey { .. } => "LockKey",
        Error::ConditionFailed { .. } => "ConditionFailed",
        Error::CommandFailed { .. } => "CommandFailed",
        Error::WrongType { .. } => "WrongType",
        Error::Corrupt { .. } => "Corrupt",
        Error::OtherLayout { .. } => "OtherLayout",
        Error::NotSetUp { .. } => "NotSetUp",
        Error::Unsupported(_) => "Unsupported",
        Error::Protocol(_) => "ProtocolError",
        Error::Closed => "Closed",
        Error::Unavailable(_) => "Unavailable",
        Error::Connect { source, .. } => class_of(source),
        e if e.is_permission_denied() => "PermissionDenied",
        Error::Server(_) => "ServerError",
        e if e.is_unavailable() => "Unavailable",
        Error::Connection(_) => "ConnectionFailed",
        _ => "LockError",
    }
}

/// A connection error's kind as Python reads it.
fn kind_word(kind: ConnectionErrorKind) -> &'static str {
    match kind {
        ConnectionErrorKind::Io => "io",
        ConnectionErrorKind::Tls => "tls",
        ConnectionErrorKind::Timeout => "timeout",
        ConnectionErrorKind::NotSent => "not_sent",
        ConnectionErrorKind::Closed => "closed",
        ConnectionErrorKind::Protocol => "protocol",
        _ => "other",
    }
}

/// The attributes a handler reads, beyond the message.
fn details<'py>(py: Python<'py>, e: &Error) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("is_retryable", e.is_retryable())?;
    add_details(py, e, &d)?;
    Ok(d)
}

/// `e`'s own attributes into `d` (a failure to connect: its cause's, and `addr`).
fn add_details<'py>(py: Python<'py>, e: &Error, d: &Bound<'py, PyDict>) -> PyResult<()> {
    match e {
        Error::Timeout(after) => d.set_item("after", after.as_secs_f64())?,
        Error::NotReplicated { wanted, acked, .. }
        | Error::WriteNotReplicated { wanted, acked } => {
            d.set_item("wanted", wanted)?;
            d.set_item("acked", acked)?;
            // a write that ran on the master stays written: say so to the handler
            d.set_item("written", matches!(e, Error::WriteNotReplicated { .. }))?;
            // the replicas that did not acknowledge, as their master lists them
            let silent = PyList::empty(py);
            if let Error::NotReplicated {
                silent: replicas, ..
            } = e
            {
                for r in replicas {
                    let one = PyDict::new(py);
                    one.set_item("addr", &r.addr)?;
                    one.set_item("state", &r.state)?;
                    one.set_item("lag", r.lag_secs)?;
                    one.set_item("behind", r.behind)?;
                    silent.append(one)?;
                }
            }
            d.set_item("silent", silent)?;
        }
        Error::ConditionFailed { index } => d.set_item("index", index)?,
        Error::Broken { client } => d.set_item("client", client)?,
        Error::CommandFailed {
            index,
            command,
            message,
            nothing_ran,
            undone,
        } => {
            d.set_item("index", index)?;
            d.set_item("command", command)?;
            d.set_item("reply", message)?;
            d.set_item("nothing_ran", nothing_ran)?;
            d.set_item("undone", undone)?;
        }
        Error::WrongSlot {
            key,
            key_slot,
            lock_slot,
            hint,
        } => {
            d.set_item("key", key)?;
            d.set_item("key_slot", key_slot)?;
            d.set_item("lock_slot", lock_slot)?;
            d.set_item("hint", hint)?;
        }
        Error::LockKey { key } => d.set_item("key", key)?,
        Error::WrongType { key, found } | Error::OtherLayout { key, found } => {
            d.set_item("key", key)?;
            d.set_item("found", found)?;
        }
        Error::Corrupt { key, field } => {
            d.set_item("key", key)?;
            d.set_item("field", field)?;
        }
        Error::NotSetUp { node, library } => {
            d.set_item("node", node)?;
            d.set_item("library", library)?;
        }
        Error::Server(reply) => {
            d.set_item("code", reply.code())?;
            d.set_item("reply", reply.to_string())?;
        }
        Error::Connection(c) => d.set_item("kind", kind_word(c.kind()))?,
        Error::Connect { addr, source } => {
            add_details(py, source, d)?;
            d.set_item("addr", addr)?;
        }
        _ => {}
    }
    Ok(())
}

/// `e` as the exception to raise. Should the Python side of the package be missing (it
/// never is in an installed package), a `RuntimeError` with the same message.
pub(crate) fn to_py(py: Python<'_>, e: Error) -> PyErr {
    let message = e.to_string();
    let made = (|| -> PyResult<PyErr> {
        let class = py.import("cluster_rwlock.errors")?.getattr(class_of(&e))?;
        let exc = class.call((message.clone(),), Some(&details(py, &e)?))?;
        Ok(PyErr::from_value(exc))
    })();
    made.unwrap_or_else(|_| PyRuntimeError::new_err(message))
}

/// The `Closed` a wait for the lock raises once the process gives everything back on its
/// way out (at exit, or at SIGTERM with `release_on_sigterm`).
pub(crate) fn exiting(py: Python<'_>) -> PyErr {
    let message =
        "the process is exiting: its waits for the lock were withdrawn and its holds released";
    let made = (|| -> PyResult<PyErr> {
        let exc = py
            .import("cluster_rwlock.errors")?
            .getattr("Closed")?
            .call1((message,))?;
        Ok(PyErr::from_value(exc))
    })();
    made.unwrap_or_else(|_| PyRuntimeError::new_err(message))
}

/// An `InvalidConfig` for a mistake found before the configuration is built.
pub(crate) fn invalid_config(message: String) -> PyErr {
    Python::attach(|py| to_py(py, Error::InvalidConfig(message)))
}
