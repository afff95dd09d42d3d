//! `connect()`'s keyword arguments as a `LockConfig`: every one checked here or by the
//! configuration itself, so that a bad value is an `InvalidConfig` naming it.

use std::time::Duration;

use cluster_rwlock::{Durability, LockConfig};
use pyo3::prelude::*;

use crate::run::seconds;

/// How grants are confirmed, as Python says it: `"all"` (the default: every attached
/// replica), `"master"` (no confirmation, unsafe across failovers) or a number of
/// replicas that must confirm.
#[derive(FromPyObject)]
pub(crate) enum DurabilityArg {
    /// A number of replicas.
    Replicas(u32),
    /// `"all"` or `"master"`.
    Word(String),
}

/// `connect()`'s arguments, as a dict: `urls`, and the keywords Python was given (a key
/// left out is a default: the Python functions are the one list of the names).
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub(crate) struct Options {
    pub urls: Vec<String>,
    #[pyo3(default)]
    pub lease: Option<f64>,
    #[pyo3(default)]
    pub client_name: Option<String>,
    #[pyo3(default)]
    pub prefix: Option<String>,
    #[pyo3(default)]
    pub durability: Option<DurabilityArg>,
    #[pyo3(default)]
    pub confirm_timeout: Option<f64>,
    #[pyo3(default)]
    pub clock_margin: Option<f64>,
    #[pyo3(default)]
    pub retry_interval: Option<f64>,
    #[pyo3(default)]
    pub command_timeout: Option<f64>,
    #[pyo3(default)]
    pub notifications: Option<bool>,
    #[pyo3(default)]
    pub tls_ca_pem: Option<Vec<u8>>,
}

/// The configuration `options` describe.
pub(crate) fn config(o: Options) -> PyResult<LockConfig> {
    let invalid = |m: String| crate::errors::invalid_config(m);
    let mut c = match o.urls.as_slice() {
        [] => return Err(invalid("connect() needs at least one URL".into())),
        [one] => LockConfig::from_url(one)
            .map_err(|e| Python::attach(|py| crate::errors::to_py(py, e)))?,
        many => LockConfig::cluster(many.iter().cloned()),
    };
    if let Some(l) = seconds("lease", o.lease)? {
        c = c.lease(l);
    }
    if let Some(n) = o.client_name {
        c = c.client_name(n);
    }
    if let Some(p) = o.prefix {
        c = c.prefix(p);
    }
    let confirm =
        seconds("confirm_timeout", o.confirm_timeout)?.unwrap_or(Duration::from_millis(500));
    c = c.durability(match o.durability {
        None => Durability::AllReplicas { timeout: confirm },
        Some(DurabilityArg::Word(w)) if w == "all" => Durability::AllReplicas { timeout: confirm },
        Some(DurabilityArg::Word(w)) if w == "master" => Durability::MasterOnly,
        Some(DurabilityArg::Replicas(replicas)) => Durability::AtLeast {
            replicas,
            timeout: confirm,
        },
        Some(DurabilityArg::Word(w)) => {
            return Err(invalid(format!(
                "durability is \"all\", \"master\" or a number of replicas; got {w:?}"
            )))
        }
    });
    if let Some(m) = seconds("clock_margin", o.clock_margin)? {
        c = c.clock_margin(m);
    }
    if let Some(r) = seconds("retry_interval", o.retry_interval)? {
        c = c.retry_interval(r);
    }
    if let Some(t) = seconds("command_timeout", o.command_timeout)? {
        c = c.command_timeout(t);
    }
    if let Some(n) = o.notifications {
        c = c.notifications(n);
    }
    if let Some(pem) = o.tls_ca_pem {
        c = c.tls_ca_pem(pem);
    }
    Ok(c)
}
