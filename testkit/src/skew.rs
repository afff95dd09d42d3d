//! Skewable clocks: nodes whose wall clock can be stepped at run time, as an NTP step
//! would do, through libfaketime (asked for with
//! [`StartOptions::skewable_clocks`](super::StartOptions::skewable_clocks)).
//!
//! Each node of such a cluster runs with libfaketime preloaded, reading its offset from a
//! file of its own (in its directory, or in a host directory bind-mounted into its
//! container at `/faketime`). libfaketime shifts what the node reads from `gettimeofday`,
//! `time` and `clock_gettime(CLOCK_REALTIME)`: `TIME`, key expiry, Lua. `CLOCK_MONOTONIC`
//! is left alone (`FAKETIME_DONT_FAKE_MONOTONIC=1`), as a real clock step leaves it.
//!
//! Why opt-in: libfaketime wraps every clock call of the node, which benchmarks and the
//! other tests should not pay for.
//!
//! Why `libc.so.6` is preloaded too, after libfaketime: Debian's `redis-server` takes its
//! `malloc` from the system jemalloc, which reads the clock while it initialises; the
//! first clock call makes libfaketime look the real one up with `dlsym`, which allocates,
//! which re-enters jemalloc's initialisation: the node hangs at start (libfaketime issue
//! #130). With glibc ahead of jemalloc in the lookup order, `malloc` is glibc's and the
//! loop cannot happen; jemalloc only answers the statistics calls. So a skewable node
//! allocates with glibc's malloc (its `INFO memory` allocator figures mean little).

use std::path::{Path, PathBuf};

use super::{blocking, TestCluster, TestkitError};

/// Where the images built by `scripts/*-image.sh` have libfaketime.
pub(super) const IMAGE_FAKETIME: &str = "/usr/local/lib/faketime/libfaketime.so.1";
/// The label those scripts put on an image that has libfaketime.
pub(super) const FAKETIME_LABEL: &str = "cluster-rwlock.faketime";
/// Where a container sees the host directory of its clock file.
pub(super) const CLOCK_MOUNT: &str = "/faketime";
/// The name of a node's clock file.
pub(super) const CLOCK_FILE: &str = "faketime.rc";

/// The environment of a node with a skewable clock: libfaketime at `lib`, reading its
/// offset from `file`.
pub(super) fn faketime_env(lib: &str, file: &str) -> Vec<(&'static str, String)> {
    vec![
        // glibc ahead of jemalloc: see the module's documentation
        ("LD_PRELOAD", format!("{lib}:libc.so.6")),
        ("FAKETIME_TIMESTAMP_FILE", file.to_string()),
        ("FAKETIME_DONT_FAKE_MONOTONIC", "1".into()),
        // the file is read again once the wall-clock second differs from the last read's
        // by more than this: 0 reads it once a second, so a change shows within 1 s
        ("FAKETIME_CACHE_DURATION", "0".into()),
    ]
}

/// libfaketime on this machine, for the nodes of the native backend.
pub(super) fn host_faketime() -> Result<PathBuf, TestkitError> {
    let multiarch = std::fs::read_dir("/usr/lib")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("faketime/libfaketime.so.1"));
    let fixed = ["/usr/lib/faketime", "/usr/local/lib/faketime"]
        .map(|d| Path::new(d).join("libfaketime.so.1"));
    multiarch.chain(fixed).find(|p| p.is_file()).ok_or_else(|| {
        TestkitError::Faketime(
            "libfaketime.so.1 is not in /usr/lib/*/faketime, /usr/lib/faketime or /usr/local/lib/faketime: install it (apt-get install libfaketime)".into(),
        )
    })
}

/// libfaketime's form of an offset of `ms` milliseconds: signed seconds (`+1.500`).
fn offset_text(ms: i64) -> String {
    if ms == 0 {
        return "+0".into();
    }
    let sign = if ms < 0 { '-' } else { '+' };
    let ms = ms.unsigned_abs();
    format!("{sign}{}.{:03}", ms / 1000, ms % 1000)
}

/// Writes an offset of `ms` milliseconds into the clock file `file`, by a rename, so that
/// libfaketime never reads it half written.
pub(super) fn write_offset(file: &Path, ms: i64) -> Result<(), TestkitError> {
    let fail = |e: std::io::Error| {
        TestkitError::Command(format!("writing the clock file {}: {e}", file.display()))
    };
    let next = file.with_extension("next");
    std::fs::write(&next, format!("{}\n", offset_text(ms))).map_err(fail)?;
    std::fs::rename(&next, file).map_err(fail)
}

impl TestCluster {
    /// Steps the wall clock of node `index` to `offset_ms` milliseconds ahead of the real
    /// time (behind when negative; 0 puts it right), as an NTP step would: `TIME`, key
    /// expiry and Lua's view of the time jump, its monotonic clock does not. The node
    /// sees it within a second (libfaketime reads the offset once a second); the offset
    /// replaces the one before and lasts until changed, across restarts.
    ///
    /// [`TestkitError::Unsupported`] unless the cluster was started with
    /// [`StartOptions::skewable_clocks`](super::StartOptions::skewable_clocks).
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), cluster_rwlock_testkit::TestkitError> {
    /// use cluster_rwlock_testkit::{StartOptions, TestCluster};
    ///
    /// let cluster = TestCluster::start_with(StartOptions::default().skewable_clocks(true)).await?;
    /// cluster.skew_clock(0, 2000).await?; // 2 s ahead
    /// cluster.skew_clock(1, -750).await?; // 0.75 s behind
    /// cluster.skew_clock(0, 0).await?; // right again
    /// # Ok(()) }
    /// ```
    pub async fn skew_clock(&self, index: usize, offset_ms: i64) -> Result<(), TestkitError> {
        let file = self
            .node(index)?
            .clock
            .clone()
            .ok_or(TestkitError::Unsupported(
                "skew_clock needs a cluster started with StartOptions::skewable_clocks(true)",
            ))?;
        blocking(move || write_offset(&file, offset_ms)).await?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_in_libfaketime_form() {
        assert_eq!(offset_text(0), "+0");
        assert_eq!(offset_text(2000), "+2.000");
        assert_eq!(offset_text(1500), "+1.500");
        assert_eq!(offset_text(-250), "-0.250");
        assert_eq!(offset_text(-61_005), "-61.005");
    }
}
