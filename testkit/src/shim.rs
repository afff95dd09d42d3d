//! A loopback shim in front of the Docker socket for engines older than the Docker API
//! version that testcontainers' client (bollard) speaks.
//!
//! bollard puts its API version in every request path (`/v1.53/containers/...`) and does
//! not negotiate; an engine whose newest API is older answers "client version is too new".
//! The shim listens on a private Unix socket, rewrites that path prefix to the engine's
//! version (same length, so no body or header changes) and passes everything else through
//! unchanged. The calls the test bed makes (create, start, inspect, pause, unpause, remove)
//! mean the same in both versions.

use std::path::{Path, PathBuf};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};

/// The engine's newest API version, asked with a plain HTTP/1.0 request.
pub(crate) async fn engine_api_version(socket: &Path) -> std::io::Result<String> {
    let mut stream = UnixStream::connect(socket).await?;
    stream
        .write_all(b"GET /version HTTP/1.0\r\nHost: docker\r\n\r\n")
        .await?;
    let mut reply = Vec::new();
    stream.read_to_end(&mut reply).await?;
    let text = String::from_utf8_lossy(&reply);
    let key = "\"ApiVersion\":\"";
    text.find(key)
        .and_then(|at| {
            let rest = &text[at + key.len()..];
            rest.find('"').map(|end| rest[..end].to_string())
        })
        .ok_or_else(|| {
            std::io::Error::other(format!("no ApiVersion in the engine's reply: {text}"))
        })
}

/// Starts the shim on `path`, rewriting `/v{client}/` to `/v{engine}/`. Runs until the
/// process exits.
pub(crate) fn start(
    path: PathBuf,
    engine_socket: PathBuf,
    client: &str,
    engine: &str,
) -> std::io::Result<()> {
    if client.len() != engine.len() {
        return Err(std::io::Error::other(format!(
            "cannot map Docker API {client} onto {engine}"
        )));
    }
    let from = format!(" /v{client}/").into_bytes();
    let to = format!(" /v{engine}/").into_bytes();
    let _ = std::fs::remove_file(&path);
    let listener = UnixListener::bind(&path)?;
    tokio::spawn(async move {
        while let Ok((client_side, _)) = listener.accept().await {
            let engine_socket = engine_socket.clone();
            let (from, to) = (from.clone(), to.clone());
            tokio::spawn(async move {
                if let Ok(engine_side) = UnixStream::connect(&engine_socket).await {
                    let _ = relay(client_side, engine_side, &from, &to).await;
                }
            });
        }
    });
    Ok(())
}

async fn relay(
    client: UnixStream,
    engine: UnixStream,
    from: &[u8],
    to: &[u8],
) -> std::io::Result<()> {
    let (mut client_rx, mut client_tx) = client.into_split();
    let (mut engine_rx, mut engine_tx) = engine.into_split();
    let upstream = async {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = client_rx.read(&mut buf).await?;
            if n == 0 {
                engine_tx.shutdown().await?;
                return Ok::<_, std::io::Error>(());
            }
            let chunk = &mut buf[..n];
            let mut i = 0;
            while i + from.len() <= chunk.len() {
                if &chunk[i..i + from.len()] == from {
                    chunk[i..i + from.len()].copy_from_slice(to);
                    i += from.len();
                } else {
                    i += 1;
                }
            }
            engine_tx.write_all(chunk).await?;
        }
    };
    let downstream = async {
        tokio::io::copy(&mut engine_rx, &mut client_tx).await?;
        client_tx.shutdown().await
    };
    tokio::try_join!(upstream, downstream)?;
    Ok(())
}
