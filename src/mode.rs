//! The mode of a hold: read, write or upgradable.

/// Mode of a hold.
///
/// ```no_run
/// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
/// let s = lock.state().await?;
/// if s.mode == Some(cluster_rwlock::Mode::Write) {
///     println!("someone writes");
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Mode {
    /// Shared.
    Read,
    /// Exclusive.
    Write,
    /// Shared with readers, exclusive among upgradable readers and writers; can become
    /// write without another writer in between.
    Upgradable,
}

impl Mode {
    /// `"read"`, `"write"` or `"upgradable"`: the label of metrics and traces.
    ///
    /// ```
    /// assert_eq!(cluster_rwlock::Mode::Write.as_str(), "write");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Read => "read",
            Mode::Write => "write",
            Mode::Upgradable => "upgradable",
        }
    }

    /// The letter the functions take (`ARGV`).
    pub(crate) fn arg(self) -> &'static str {
        match self {
            Mode::Read => "r",
            Mode::Write => "w",
            Mode::Upgradable => "u",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_and_script_letters() {
        assert_eq!(
            [Mode::Read, Mode::Write, Mode::Upgradable].map(Mode::as_str),
            ["read", "write", "upgradable"]
        );
        assert_eq!(
            [Mode::Read, Mode::Write, Mode::Upgradable].map(Mode::arg),
            ["r", "w", "u"]
        );
    }
}
