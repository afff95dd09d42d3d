//! SIGINT and SIGTERM, listened to once for the whole command: what `run`, `watch` and
//! `top` share.

use tokio::signal::unix::{signal, Signal, SignalKind};

use crate::code;

/// Listeners of SIGINT and SIGTERM, made once for the whole command (a listener made
/// later would miss a signal that came before it); the exit code when they cannot be.
pub fn stop_signals() -> Result<(Signal, Signal), i32> {
    match (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) {
        (Ok(interrupt), Ok(terminate)) => Ok((interrupt, terminate)),
        _ => {
            eprintln!("cluster-rwlock: cannot handle signals");
            Err(code::UNAVAILABLE)
        }
    }
}
