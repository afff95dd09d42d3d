//! The Docker engine: the docker CLI, the engine check (with the API shim for old
//! engines) and the server's image.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use super::engine::{docker_env, user_docker_host};
use super::reaper::tell_reaper;
use super::session::session_id;
use super::skew::FAKETIME_LABEL;
use super::{shim, Server, TestkitError};

pub(super) async fn docker_cli(args: Vec<String>) -> Result<String, TestkitError> {
    let out = tokio::task::spawn_blocking(move || {
        docker_env(Command::new("docker"))
            .args(&args)
            .stdin(Stdio::null())
            .output()
    })
    .await
    .map_err(|e| TestkitError::Command(e.to_string()))?
    .map_err(|e| TestkitError::DockerUnavailable(format!("cannot run the docker CLI: {e}")))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(TestkitError::Command(
            String::from_utf8_lossy(&out.stderr).trim().to_string(),
        ))
    }
}

/// Checks the engine and, when it is older than testcontainers' client, puts the shim in
/// front of it. Done once per process.
pub(super) async fn prepare_docker() -> Result<(), TestkitError> {
    static READY: tokio::sync::OnceCell<()> = tokio::sync::OnceCell::const_new();
    READY
        .get_or_try_init(|| async {
            let socket = match user_docker_host() {
                Some(h) if h.starts_with("unix://") => PathBuf::from(&h["unix://".len()..]),
                Some(_) => return Ok(()), // a TCP engine: used as it is
                None => PathBuf::from("/var/run/docker.sock"),
            };
            let engine = shim::engine_api_version(&socket).await.map_err(|e| {
                TestkitError::DockerUnavailable(format!("{}: {e}", socket.display()))
            })?;
            let ours = testcontainers::bollard::API_DEFAULT_VERSION;
            let client = format!("{}.{}", ours.major_version, ours.minor_version);
            let older = {
                let parse = |v: &str| -> (u32, u32) {
                    let mut it = v.split('.').map(|p| p.parse().unwrap_or(0));
                    (it.next().unwrap_or(0), it.next().unwrap_or(0))
                };
                parse(&engine) < parse(&client)
            };
            if older {
                let path = std::env::temp_dir()
                    .join(format!("cluster-rwlock-docker-{}.sock", session_id()));
                tell_reaper(&format!("dir:{}", path.display()));
                shim::start(path.clone(), socket, &client, &engine)
                    .map_err(|e| TestkitError::DockerUnavailable(format!("API shim: {e}")))?;
                point_testcontainers_at(&format!("unix://{}", path.display()));
            }
            Ok(())
        })
        .await
        .map(|_| ())
}

/// Makes sure the server's image exists (building it with its script when missing) and,
/// for `skewable` clocks, that it has libfaketime (its script rebuilds an image of its own
/// that lacks it; another image is refused with how to get one).
pub(super) async fn ensure_image(server: Server, skewable: bool) -> Result<(), TestkitError> {
    let image = &server.image();
    let ready = || async {
        match faketime_label(image).await {
            Ok(label) => !skewable || label.is_some(),
            Err(_) => false, // no such image
        }
    };
    if !ready().await {
        // one build at a time in this process (the script takes a lock of the machine
        // for other processes); a test that waited here looks again before building
        static BUILD: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
        let _one = BUILD.lock().await;
        if !ready().await {
            build_image(server, image).await?;
        }
    }
    if skewable && faketime_label(image).await?.is_none() {
        return Err(TestkitError::Faketime(format!(
            "the image {image} has none (no label {FAKETIME_LABEL}): rebuild the test bed's image with `FORCE=1 {}`, or use an image that has it",
            server.image_script().0
        )));
    }
    Ok(())
}

/// The image's libfaketime label (`None` when it has none); an error when there is no
/// such image.
async fn faketime_label(image: &str) -> Result<Option<String>, TestkitError> {
    let format = format!("{{{{ index .Config.Labels \"{FAKETIME_LABEL}\" }}}}");
    let out = docker_cli(vec![
        "image".into(),
        "inspect".into(),
        "--format".into(),
        format,
        image.into(),
    ])
    .await?;
    let label = out.trim();
    Ok((!label.is_empty() && label != "<no value>").then(|| label.to_string()))
}

/// Runs the server's image script, which builds `image`.
async fn build_image(server: Server, image: &str) -> Result<(), TestkitError> {
    let (script, variable) = server.image_script();
    let image_owned = image.to_string();
    let out = tokio::task::spawn_blocking(move || {
        docker_env(Command::new("bash"))
            .arg(script)
            .env(variable, &image_owned)
            .output()
    })
    .await
    .map_err(|e| TestkitError::Command(e.to_string()))?;
    match out {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(TestkitError::ImageMissing {
            image: image.into(),
            reason: String::from_utf8_lossy(&o.stderr).trim().to_string(),
        }),
        Err(e) => Err(TestkitError::ImageMissing {
            image: image.into(),
            reason: e.to_string(),
        }),
    }
}

/// Points testcontainers at `host` (the shim). The only place where the test bed changes
/// its own environment; called once per process, from [`prepare_docker`]'s once-cell,
/// before the first container is requested.
///
/// Why the environment: testcontainers 0.28 makes one Docker client per process, when the
/// first container is requested, from a configuration it reads itself: `DOCKER_HOST`, or
/// `~/.testcontainers.properties` with its feature `properties-config` (off here). That
/// configuration is private to the crate and it takes no client or host from outside.
/// The properties file belongs to the user and is read by every process of theirs (its
/// `tc.host` would even outrank their `DOCKER_HOST`), while the shim lives and dies with
/// this process; so the variable it is. Nothing else depends on it: the docker CLI and the
/// reaper get the user's own endpoint from [`docker_env`].
///
/// It cannot run before every thread has started (the test harness and the caller's
/// runtime run first; the engine check before it needs the test bed's runtime). The
/// standard library serialises its own reads and writes of the environment, so what is
/// left is C code calling `getenv` at that very moment, on the first start of a process.
fn point_testcontainers_at(host: &str) {
    // the user's endpoint is kept before it is replaced (the CLI and the reaper use it)
    let _ = user_docker_host();
    std::env::set_var("DOCKER_HOST", host);
}
