//! The block of ports a cluster runs on.
//!
//! Every port of a block lies below 32768, where Linux's ephemeral range begins
//! (`net.ipv4.ip_local_port_range`, 32768-60999 by default): a node that is stopped and
//! started again binds the same ports, and a port in the ephemeral range can meanwhile be
//! taken by any outgoing connection of the machine as its local port (a restarted TLS
//! node once failed with "Address already in use" that way).

use super::TestkitError;

/// The lowest base port of a block.
const FIRST_BASE: u16 = 2000;
/// How many blocks of ten there are: bases 2000..=11990, bus ports (+10000) up to 21995,
/// TLS ports (+20000) up to 31995.
const BLOCKS: u16 = 1000;

/// A random base port such that base..base+6, the bus ports +10000 and the TLS ports
/// +20000 are free, with a lock file held on it, so that no other cluster (of this process
/// or another; a stopped node frees its ports) takes the same block while this one lives.
pub(crate) fn pick_ports() -> Result<(u16, std::fs::File), TestkitError> {
    let dir = std::env::temp_dir().join("cluster-rwlock-ports");
    std::fs::create_dir_all(&dir)
        .map_err(|e| TestkitError::Command(format!("{}: {e}", dir.display())))?;
    for _ in 0..200 {
        let r = u16::from_le_bytes(
            uuid::Uuid::new_v4().as_bytes()[..2]
                .try_into()
                .unwrap_or([0, 0]),
        );
        let base = FIRST_BASE + (r % BLOCKS) * 10;
        let Ok(file) = std::fs::File::create(dir.join(format!("{base}.lock"))) else {
            continue;
        };
        if file.try_lock().is_err() {
            continue;
        }
        let free = block(base).all(|p| std::net::TcpListener::bind(("127.0.0.1", p)).is_ok());
        if free {
            return Ok((base, file));
        }
    }
    Err(TestkitError::PortsTaken(format!(
        "no free block of 6 ports (with their bus and TLS ports) in {FIRST_BASE}-{}",
        FIRST_BASE + BLOCKS * 10 - 1
    )))
}

/// Every port of the block at `base`: client, bus and TLS ports (the last used by TLS
/// clusters only).
fn block(base: u16) -> impl Iterator<Item = u16> {
    (0..6u16).flat_map(move |i| [base + i, base + i + 10000, base + i + 20000])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first port of Linux's default ephemeral range, which no block reaches.
    const EPHEMERAL_START: u32 = 32768;

    #[test]
    fn every_block_stays_below_the_ephemeral_range() {
        let last_base = FIRST_BASE + (BLOCKS - 1) * 10;
        let highest = block(last_base).max().unwrap();
        assert!(u32::from(highest) < EPHEMERAL_START, "{highest}");
        assert!(block(FIRST_BASE).min().unwrap() >= 1024);
    }
}
