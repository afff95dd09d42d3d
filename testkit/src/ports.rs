//! The block of ports a cluster runs on.

use super::TestkitError;

/// A random base port such that base..base+6, the bus ports +10000 and the TLS ports
/// +20000 are free, with a
/// lock file held on it, so that no other cluster (of this process or another; a stopped
/// node frees its ports) takes the same block while this one lives.
pub(super) fn pick_ports() -> Result<(u16, std::fs::File), TestkitError> {
    let dir = std::env::temp_dir().join("cluster-rwlock-ports");
    std::fs::create_dir_all(&dir)
        .map_err(|e| TestkitError::Command(format!("{}: {e}", dir.display())))?;
    for _ in 0..200 {
        let r = u16::from_le_bytes(
            uuid::Uuid::new_v4().as_bytes()[..2]
                .try_into()
                .unwrap_or([0, 0]),
        );
        let base = 20000 + (r % 1000) * 10;
        let Ok(file) = std::fs::File::create(dir.join(format!("{base}.lock"))) else {
            continue;
        };
        if file.try_lock().is_err() {
            continue;
        }
        let free = (0..6u16).all(|i| {
            // client, bus and TLS ports (the last used by TLS clusters only)
            [base + i, base + i + 10000, base + i + 20000]
                .iter()
                .all(|p| std::net::TcpListener::bind(("127.0.0.1", *p)).is_ok())
        });
        if free {
            return Ok((base, file));
        }
    }
    Err(TestkitError::PortsTaken(
        "no free block of 6 ports (and their bus ports) in 20000-39999".into(),
    ))
}
