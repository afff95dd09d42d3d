//! Instrumentation, in one place: `tracing` events and spans (cargo feature `tracing`)
//! and metrics through the `metrics` facade (cargo feature `metrics`). Without the
//! features every function here is empty and compiles away.
//!
//! The metrics and events are listed on the crate page ("Metrics and tracing").

#![cfg_attr(
    not(any(feature = "tracing", feature = "metrics")),
    allow(unused_variables)
)]

use std::time::Duration;

use crate::mode::Mode;

/// How an acquire ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ended {
    Granted,
    Busy,
    TimedOut,
    Failed,
}

impl Ended {
    #[cfg(feature = "tracing")]
    fn as_str(self) -> &'static str {
        match self {
            Ended::Granted => "granted",
            Ended::Busy => "busy",
            Ended::TimedOut => "timeout",
            Ended::Failed => "error",
        }
    }
}

/// The span an acquire runs in.
#[cfg(feature = "tracing")]
pub(crate) fn acquire_span(name: &str, mode: Mode, owner: &str) -> tracing::Span {
    // the owner token starts with the client's readable name
    tracing::debug_span!("acquire", lock = name, mode = mode.as_str(), owner)
}

/// An acquire ended: `lock` is the name when names are labelled, for metrics.
pub(crate) fn acquired(
    name: &str,
    label_name: bool,
    mode: Mode,
    waited: Duration,
    attempts: u32,
    fence: Option<u64>,
    outcome: Ended,
) {
    #[cfg(feature = "tracing")]
    tracing::debug!(
        lock = name,
        mode = mode.as_str(),
        wait_ms = waited.as_secs_f64() * 1e3,
        attempts,
        fence,
        outcome = outcome.as_str(),
        "acquire ended"
    );
    #[cfg(feature = "metrics")]
    {
        let labels = labels(name, label_name, mode);
        match outcome {
            Ended::Granted => {
                metrics::counter!("cluster_rwlock_grants_total", labels.clone()).increment(1);
                metrics::histogram!("cluster_rwlock_acquire_wait_seconds", labels)
                    .record(waited.as_secs_f64());
            }
            Ended::TimedOut => {
                metrics::counter!("cluster_rwlock_timeouts_total", labels).increment(1)
            }
            Ended::Busy | Ended::Failed => {}
        }
    }
}

/// A release handed the lock to this waiting writer (or upgrader).
pub(crate) fn handed_over(name: &str, fence: u64) {
    #[cfg(feature = "tracing")]
    tracing::debug!(lock = name, fence, "handed over by a release");
    #[cfg(feature = "metrics")]
    metrics::counter!("cluster_rwlock_handoffs_total").increment(1);
}

/// A hold was given back after `held_for`.
pub(crate) fn released(name: &str, label_name: bool, mode: Mode, held_for: Duration, ok: bool) {
    #[cfg(feature = "tracing")]
    tracing::debug!(
        lock = name,
        mode = mode.as_str(),
        held_ms = held_for.as_secs_f64() * 1e3,
        ok,
        "released"
    );
    #[cfg(feature = "metrics")]
    metrics::histogram!(
        "cluster_rwlock_hold_seconds",
        labels(name, label_name, mode)
    )
    .record(held_for.as_secs_f64());
}

/// A hold's lease was lost (`why`: the renewal found it gone, or none succeeded in time).
pub(crate) fn lost(key: &str, owner: &str, why: &'static str) {
    #[cfg(feature = "tracing")]
    tracing::warn!(key, owner, why, "lease lost");
    #[cfg(feature = "metrics")]
    metrics::counter!("cluster_rwlock_lost_total").increment(1);
}

/// An operator broke lock `name` (`owner`: only that owner's holds), removing `holds`.
pub(crate) fn forced(name: &str, owner: Option<&str>, holds: u64) {
    #[cfg(feature = "tracing")]
    tracing::warn!(name, owner, holds, "lock broken by force_release");
    #[cfg(feature = "metrics")]
    metrics::counter!("cluster_rwlock_forced_releases_total").increment(1);
    let _ = (name, owner, holds);
}

/// A renewal round renewed `locks` locks in `took`; `failed` of them could not be.
pub(crate) fn renewal_round(locks: usize, failed: usize, took: Duration) {
    #[cfg(feature = "tracing")]
    tracing::debug!(
        locks,
        failed,
        took_ms = took.as_secs_f64() * 1e3,
        "renewal round"
    );
    #[cfg(feature = "metrics")]
    metrics::counter!("cluster_rwlock_renewals_total").increment((locks - failed) as u64);
}

/// The function library was loaded again on a master that lacked it.
pub(crate) fn library_reloaded() {
    #[cfg(feature = "tracing")]
    tracing::debug!("function library loaded again where it was missing");
    #[cfg(feature = "metrics")]
    metrics::counter!("cluster_rwlock_library_reloads_total").increment(1);
}

/// A write to `key` was acknowledged by `acked` replicas of the `wanted` it needed
/// (`silent`: those that did not): a grant is undone, a renewal does not count.
pub(crate) fn not_replicated(
    key: &str,
    wanted: u32,
    acked: u32,
    silent: &[crate::replica::ReplicaStatus],
) {
    #[cfg(feature = "tracing")]
    tracing::warn!(
        key,
        wanted,
        acked,
        silent = %crate::replica::named(silent),
        "not confirmed by the replicas in time"
    );
    #[cfg(not(feature = "tracing"))]
    let _ = (key, wanted, acked, silent);
    #[cfg(feature = "metrics")]
    metrics::counter!("cluster_rwlock_not_replicated_total").increment(1);
}

/// The other masters were asked how soon the master at `master` could be replaced,
/// after a `WAIT` fell short: `within` that long from the question, or nothing vouched
/// for (`None`).
pub(crate) fn vouch(master: &str, within: Option<std::time::Duration>) {
    #[cfg(feature = "tracing")]
    match within {
        Some(d) => tracing::info!(
            master,
            within_ms = d.as_millis() as u64,
            "a silent replica: the other masters vouch for the master"
        ),
        None => tracing::warn!(
            master,
            "a silent replica: the other masters do not vouch for the master"
        ),
    }
    #[cfg(not(feature = "tracing"))]
    let _ = master;
    #[cfg(feature = "metrics")]
    metrics::counter!(
        "cluster_rwlock_vouches_total",
        "vouched" => if within.is_some() { "yes" } else { "no" }
    )
    .increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = within;
}

/// A write counts without WAIT: its master has no replica that could be promoted (all
/// failing, or none).
pub(crate) fn confirmed_alone() {
    #[cfg(feature = "tracing")]
    tracing::debug!("the master has no replica that could be promoted: no WAIT");
    #[cfg(feature = "metrics")]
    metrics::counter!("cluster_rwlock_confirmed_alone_total").increment(1);
}

/// The number of holds this process renews, counted by `n` only where a gauge takes it.
pub(crate) fn held(n: impl FnOnce() -> usize) {
    #[cfg(feature = "metrics")]
    metrics::gauge!("cluster_rwlock_held").set(n() as f64);
    #[cfg(not(feature = "metrics"))]
    let _ = n;
}

/// Acquires waiting in this process.
#[cfg(feature = "metrics")]
static WAITING: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);

/// Counts an acquire as waiting while it lives.
pub(crate) struct Waiting;

impl Waiting {
    pub fn start() -> Waiting {
        #[cfg(feature = "metrics")]
        {
            let n = WAITING.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
            metrics::gauge!("cluster_rwlock_waiting").set(n as f64);
        }
        Waiting
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        #[cfg(feature = "metrics")]
        {
            let n = WAITING.fetch_sub(1, std::sync::atomic::Ordering::Relaxed) - 1;
            metrics::gauge!("cluster_rwlock_waiting").set(n as f64);
        }
    }
}

/// The slot owners changed (a failover, a slot move).
pub(crate) fn owners_changed() {
    #[cfg(feature = "tracing")]
    tracing::warn!("slot owners changed (failover or slot move): routing follows");
}

/// The master `addr` may evict keys (`policy`): a lock's hash with them.
pub(crate) fn evicting(addr: &str, policy: &str) {
    #[cfg(feature = "tracing")]
    tracing::warn!(
        addr,
        policy,
        "this master may evict keys under memory pressure: a lock's hash with them (live holds and its last fence); run lock masters with maxmemory-policy noeviction"
    );
    #[cfg(not(feature = "tracing"))]
    let _ = (addr, policy);
}

/// A subscriber connection was made again; its channels are subscribed again.
pub(crate) fn resubscribing(node: &str, channels: usize) {
    #[cfg(feature = "tracing")]
    tracing::warn!(node, channels, "subscriber reconnected: subscribing again");
}

#[cfg(feature = "metrics")]
fn labels(name: &str, label_name: bool, mode: Mode) -> Vec<metrics::Label> {
    let mut labels = vec![metrics::Label::new("mode", mode.as_str())];
    if label_name {
        labels.push(metrics::Label::new("lock", name.to_string()));
    }
    labels
}

#[cfg(test)]
mod tests {
    /// The metric names in `text`: each `cluster_rwlock_<name>` between quotes or
    /// backticks.
    fn metric_names(text: &str, quote: char) -> std::collections::BTreeSet<String> {
        let start = format!("{quote}cluster_rwlock_");
        text.match_indices(&start)
            .filter_map(|(at, _)| {
                let name = &text[at + 1..];
                let end = name.find(quote)?;
                Some(name[..end].to_string())
            })
            .collect()
    }

    /// The crate docs' table of metrics names exactly the metrics this module emits:
    /// a metric added, renamed or removed without the docs fails here.
    #[test]
    fn the_documented_metrics_are_the_emitted_metrics() {
        let emitted = metric_names(include_str!("observe.rs"), '"');
        // the table of the crate docs' "Metrics" section (the library's name, also
        // `cluster_rwlock_...`, is elsewhere on the page)
        let docs = include_str!("lib.rs");
        let table = docs
            .split_once("//! ## Metrics\n")
            .and_then(|(_, rest)| rest.split_once("//! Labels never"))
            .map(|(table, _)| table)
            .expect("the crate docs have a Metrics section");
        let documented = metric_names(table, '`');
        assert_eq!(emitted.len(), 14, "{emitted:?}");
        assert_eq!(documented, emitted);
    }
}
