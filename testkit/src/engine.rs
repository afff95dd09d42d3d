//! The Docker endpoint the user configured, for the docker CLI and the reaper. A leaf:
//! the engine check, the nodes' removal and the reaper all use it.

use std::process::Command;
use std::sync::OnceLock;

/// The Docker endpoint as the user configured it (before the shim), read once.
pub(super) fn user_docker_host() -> &'static Option<String> {
    static HOST: OnceLock<Option<String>> = OnceLock::new();
    HOST.get_or_init(|| std::env::var("DOCKER_HOST").ok())
}

/// The docker CLI and the reaper talk to the engine directly, never through the shim:
/// they are given the user's endpoint explicitly, whatever the process environment says.
pub(super) fn docker_env(mut cmd: Command) -> Command {
    match user_docker_host() {
        Some(host) => cmd.env("DOCKER_HOST", host),
        None => cmd.env_remove("DOCKER_HOST"),
    };
    cmd
}
