//! The extension module `cluster_rwlock._native`: the Rust lock, called from Python.
//!
//! The Python package (`cluster_rwlock/`) gives the API people use (context managers,
//! `async with`, the guarded-call builder, typed exceptions); this module gives it the
//! lock itself, so that Python runs the same client as Rust services: the same owner
//! tokens, renewals, confirmations, loss signals and hand-offs, not a second copy of them.
//!
//! Layers, one way: `lib` (the module) -> `client` (connect, locks) -> `guard` (holds,
//! guarded calls) -> `run` (the runtime; waiting with Ctrl-C honoured) -> `errors`.
#![deny(missing_docs)]

mod client;
mod errors;
mod guard;
mod options;
mod run;

use pyo3::prelude::*;

/// The module: its classes, its two ways to connect, and the give-back at exit.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<client::NativeClient>()?;
    m.add_class::<client::NativeLock>()?;
    m.add_class::<client::NativeMulti>()?;
    m.add_class::<guard::NativeGuard>()?;
    m.add_function(wrap_pyfunction!(client::connect, m)?)?;
    m.add_function(wrap_pyfunction!(client::connect_async, m)?)?;
    m.add_function(wrap_pyfunction!(client::give_back_all, m)?)?;
    Ok(())
}
