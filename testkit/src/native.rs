//! Node processes of the native backend.

use std::os::unix::process::CommandExt as _;
use std::process::{Command, Stdio};

use super::reaper::tell_reaper;
use super::secure::SecureConf;
use super::server_args::node_args;
use super::session::node_gid;
use super::{skew, Server, TestkitError};

/// SIGKILLs a node process (thawed first: a stopped process would stay a zombie) and
/// reaps it.
pub(super) fn stop_child(child: &mut std::process::Child) {
    let _ = signal(child.id(), "CONT");
    let _ = child.kill();
    let _ = child.wait();
}

pub(super) fn signal(pid: u32, sig: &str) -> Result<(), TestkitError> {
    let status = Command::new("kill")
        .args([format!("-{sig}"), pid.to_string()])
        .status()
        .map_err(|e| TestkitError::Command(e.to_string()))?;
    if status.success() {
        Ok(())
    } else {
        Err(TestkitError::Command(format!("kill -{sig} {pid} failed")))
    }
}

/// Starts the node on `port` with its files in `dir`; with a skewable clock read from the
/// file `clock`, when given.
pub(super) fn spawn_native(
    server: Server,
    port: u16,
    dir: &std::path::Path,
    clock: Option<&std::path::Path>,
    conf: Option<&SecureConf>,
) -> Result<std::process::Child, TestkitError> {
    let binary = server.binary()?;
    let log = std::fs::File::create(dir.join("redis.log"))
        .map_err(|e| TestkitError::Command(e.to_string()))?;
    let conf_dir = conf.map(|c| c.dir.display().to_string());
    let mut command = Command::new(&binary);
    // a group of the node's own, so that a partition can drop what it sends
    if let Some(gid) = node_gid(port) {
        command.gid(gid);
    }
    if let Some(file) = clock {
        let lib = skew::host_faketime()?;
        command.envs(skew::faketime_env(
            &lib.display().to_string(),
            &file.display().to_string(),
        ));
    }
    let child = command
        .args(node_args(
            port,
            &dir.display().to_string(),
            conf.zip(conf_dir.as_deref()),
        ))
        .stdin(Stdio::null())
        .stdout(log.try_clone().map_err(|e| TestkitError::Command(e.to_string()))?)
        .stderr(log)
        .spawn()
        .map_err(|e| match (e.kind(), server) {
            (std::io::ErrorKind::NotFound, Server::Redis) => TestkitError::ServerMissing {
                server,
                how: format!(
                    "{} is not on PATH: install Debian's redis-server (apt-get install redis-server), or use the docker backend",
                    binary.display()
                ),
            },
            _ => TestkitError::Command(format!("cannot start {}: {e}", binary.display())),
        })?;
    tell_reaper(&format!("pid:{}", child.id()));
    Ok(child)
}
