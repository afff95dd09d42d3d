//! `run`: hold the lock while a command runs.

use std::process::ExitStatus;
use std::time::Duration;

use cluster_rwlock::{AnyGuard as Guard, LockClient, RwLock};
use tokio::process::{Child, Command};

use crate::args::{OnLost, RunArgs};
use crate::code::{self, fail};
use crate::shown::escaped;
use crate::wait::acquire;

fn spawn(a: &RunArgs, lock: &RwLock, guard: &Guard) -> Result<Child, i32> {
    let (program, args) = a.command.split_first().ok_or(code::USAGE)?;
    Command::new(program)
        .args(args)
        .env("CLUSTER_RWLOCK_FENCE", guard.fence().to_string())
        .env("CLUSTER_RWLOCK_KEY", lock.key())
        // not CLUSTER_RWLOCK_NAME: that is the client name a `run` inside it would take
        .env("CLUSTER_RWLOCK_LOCK", &a.name)
        .env(
            "CLUSTER_RWLOCK_MODE",
            if a.write { "write" } else { "read" },
        )
        .spawn()
        .map_err(|e| {
            eprintln!("cluster-rwlock: cannot run {program}: {e}");
            match e.kind() {
                std::io::ErrorKind::NotFound => code::NOT_FOUND,
                _ => code::NOT_EXECUTABLE,
            }
        })
}

/// Sends `sig` to the child (if it still runs).
fn send(child: &Child, sig: i32) {
    if let Some(pid) = child.id().and_then(|p| i32::try_from(p).ok()) {
        // SAFETY: kill(2) with the pid of our own child and a valid signal number
        unsafe {
            libc::kill(pid, sig);
        }
    }
}

/// The shell's convention: the status, or 128 + the signal that ended it.
fn exit_code(status: ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(code::UNAVAILABLE)
}

/// Stops the child: SIGTERM, then SIGKILL after `grace` (or SIGKILL at once).
async fn stop(child: &mut Child, kill_at_once: bool, grace: Duration) -> i32 {
    if kill_at_once {
        let _ = child.start_kill();
    } else {
        send(child, libc::SIGTERM);
    }
    let status = match tokio::time::timeout(grace, child.wait()).await {
        Ok(s) => s,
        Err(_) => {
            let _ = child.start_kill();
            child.wait().await
        }
    };
    status.map(exit_code).unwrap_or(code::UNAVAILABLE)
}

pub async fn run(client: &LockClient, a: &RunArgs) -> i32 {
    let lock = match client.rwlock(&a.name) {
        Ok(l) => l,
        Err(e) => return fail("bad lock name", &e),
    };
    let (mut interrupt, mut terminate) = match crate::signals::stop_signals() {
        Ok(listeners) => listeners,
        Err(code) => return code,
    };
    // Ctrl-C while waiting: give up (nothing is left behind)
    let guard = tokio::select! {
        g = acquire(&lock, a.write, a.timeout) => g,
        _ = interrupt.recv() => return 128 + libc::SIGINT,
        _ = terminate.recv() => return 128 + libc::SIGTERM,
    };
    let guard = match guard {
        Ok(g) => g,
        Err(code) => return code,
    };
    let mut child = match spawn(a, &lock, &guard) {
        Ok(c) => c,
        Err(code) => {
            let _ = guard.release().await;
            return code;
        }
    };
    let mut lost = false;
    let status = loop {
        tokio::select! {
            s = child.wait() => break s.map(exit_code).unwrap_or(code::UNAVAILABLE),
            _ = guard.lost(), if !lost => {
                lost = true;
                eprintln!("cluster-rwlock: the lease of {} was lost", escaped(&a.name));
                match a.on_lost {
                    OnLost::Ignore => {}
                    OnLost::Term | OnLost::Kill => {
                        stop(&mut child, a.on_lost == OnLost::Kill, a.grace).await;
                        break code::LOST;
                    }
                }
            }
            _ = interrupt.recv() => break stop(&mut child, false, a.grace).await,
            _ = terminate.recv() => break stop(&mut child, false, a.grace).await,
        }
    };
    match guard.release().await {
        Ok(()) if !lost => status,
        Ok(()) | Err(cluster_rwlock::Error::LockLost) => {
            if !lost {
                eprintln!(
                    "cluster-rwlock: the lease of {} had been lost",
                    escaped(&a.name)
                );
            }
            code::LOST
        }
        // the hold expires after its lease: the command's status still counts
        Err(e) => {
            eprintln!(
                "cluster-rwlock: release of {}: {}",
                escaped(&a.name),
                escaped(&e.to_string())
            );
            status
        }
    }
}
