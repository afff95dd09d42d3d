//! Taking the lock as `--write`/`--read` and `--timeout` say: what `run` and `exec`
//! share.

use cluster_rwlock::{AnyGuard as Guard, Mode, RwLock};

use crate::code::{self, fail};
use crate::shown::escaped;

/// The lock in write mode or read, as `--write`/`--read` and `--timeout` say (`0`: one
/// attempt), or the exit code, said on stderr (busy: 75). For `run` and `exec`.
pub async fn acquire(
    lock: &RwLock,
    write: bool,
    timeout: Option<std::time::Duration>,
) -> Result<Guard, i32> {
    let mode = if write { Mode::Write } else { Mode::Read };
    let got = match timeout {
        Some(t) if t.is_zero() => lock.try_acquire(mode).await,
        Some(t) => lock.acquire_timeout(mode, t).await.map(Some),
        None => wait_on(lock, mode).await.map(Some),
    };
    match got {
        Ok(Some(g)) => Ok(g),
        Ok(None) => {
            eprintln!("cluster-rwlock: {} is busy", escaped(lock.name()));
            Err(code::BUSY)
        }
        Err(e) => Err(fail(&format!("cannot acquire {}", lock.name()), &e)),
    }
}

/// Without `--timeout`: as long as it takes, through errors that pass (a failover, a
/// replica catching up after a restart, a grant not confirmed in time), with a note on
/// stderr the first time; an error that would come again ends it.
async fn wait_on(lock: &RwLock, mode: Mode) -> cluster_rwlock::Result<Guard> {
    let mut told = false;
    loop {
        match lock.acquire(mode).await {
            Err(e) if e.is_retryable() => {
                if !told {
                    eprintln!(
                        "cluster-rwlock: {}: {e}; waiting on (pass --timeout to give up)",
                        escaped(lock.name())
                    );
                    told = true;
                }
                tokio::time::sleep(RETRY_PAUSE).await;
            }
            other => return other,
        }
    }
}

/// The pause before an acquire that failed with an error that passes is tried again.
const RETRY_PAUSE: std::time::Duration = std::time::Duration::from_millis(100);
