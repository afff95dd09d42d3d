//! The fenced resource: one record per lock name, outside the lock's cluster (served by
//! the controller over a loopback socket), written by holders with their fence.
//!
//! Its rule is the one a user's resource would apply: a write access is accepted when its
//! fence is at least every fence accepted so far for that name; a read access (read or
//! upgradable) when its fence is at least every fence of an accepted write. A lower fence
//! means a newer conflicting grant has already touched the record: the access is refused
//! and counted. `--broken-fence` accepts everything, to show the checker finds what the
//! rule prevents.
//!
//! Protocol, one line each way: `<hold> <fence> <R|U|W> <late 0|1> <owner> <name>` and
//! `1` (accepted) or `0` (refused).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

use crate::history::{now, Event, Mode};

#[derive(Default)]
struct Record {
    /// Highest fence of an accepted write.
    max_write: u64,
    /// Highest fence of any accepted access.
    max_any: u64,
}

#[derive(Default)]
struct State {
    records: HashMap<String, Record>,
    log: Vec<Event>,
}

/// The resource's server side.
pub struct Resource {
    state: Arc<Mutex<State>>,
    addr: std::net::SocketAddr,
}

/// Whether an access of `mode` with `fence` is accepted by `record`, which it updates.
fn admit(record: &mut Record, mode: Mode, fence: u64, broken: bool) -> bool {
    let ok = broken
        || match mode {
            Mode::W => fence >= record.max_any,
            Mode::R | Mode::U => fence >= record.max_write,
        };
    if ok {
        record.max_any = record.max_any.max(fence);
        if mode == Mode::W {
            record.max_write = record.max_write.max(fence);
        }
    }
    ok
}

fn parse(line: &str) -> Option<(u64, u64, Mode, bool, String, String)> {
    let mut p = line.split(' ');
    let hold = p.next()?.parse().ok()?;
    let fence = p.next()?.parse().ok()?;
    let mode = match p.next()? {
        "R" => Mode::R,
        "U" => Mode::U,
        "W" => Mode::W,
        _ => return None,
    };
    let late = p.next()? == "1";
    let owner = p.next()?.to_string();
    let name = p.next()?.to_string();
    Some((hold, fence, mode, late, owner, name))
}

impl Resource {
    /// Starts serving on a free loopback port.
    pub async fn start(broken: bool) -> std::io::Result<Resource> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(Mutex::new(State::default()));
        let shared = state.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let _ = stream.set_nodelay(true);
                tokio::spawn(serve(stream, shared.clone(), broken));
            }
        });
        Ok(Resource { state, addr })
    }

    /// Where it listens.
    pub fn addr(&self) -> std::net::SocketAddr {
        self.addr
    }

    /// Every access so far, in the order the resource handled them.
    pub fn log(&self) -> Vec<Event> {
        self.state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .log
            .clone()
    }
}

async fn serve(stream: TcpStream, state: Arc<Mutex<State>>, broken: bool) {
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let Some((hold, fence, mode, late, owner, name)) = parse(&line) else {
            let _ = write.write_all(b"?\n").await;
            continue;
        };
        let accepted = {
            let mut st = state.lock().unwrap_or_else(|e| e.into_inner());
            let accepted = admit(
                st.records.entry(name.clone()).or_default(),
                mode,
                fence,
                broken,
            );
            // logged under the lock: the log's order is the order of the decisions
            st.log.push(Event::Access {
                name,
                hold,
                owner,
                mode,
                fence,
                at: now(),
                late,
                accepted,
            });
            accepted
        };
        if write
            .write_all(if accepted { b"1\n" } else { b"0\n" })
            .await
            .is_err()
        {
            return;
        }
    }
}

/// A holder's connection to the resource.
pub struct Conn {
    lines: tokio::io::Lines<BufReader<tokio::net::tcp::OwnedReadHalf>>,
    write: tokio::net::tcp::OwnedWriteHalf,
}

impl Conn {
    /// Connects to the resource at `addr`.
    pub async fn connect(addr: &str) -> std::io::Result<Conn> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let (read, write) = stream.into_split();
        Ok(Conn {
            lines: BufReader::new(read).lines(),
            write,
        })
    }

    /// Writes the record of `name` under `fence`; whether the resource accepted it.
    pub async fn access(
        &mut self,
        hold: u64,
        fence: u64,
        mode: Mode,
        late: bool,
        owner: &str,
        name: &str,
    ) -> std::io::Result<bool> {
        let m = match mode {
            Mode::R => "R",
            Mode::U => "U",
            Mode::W => "W",
        };
        let line = format!("{hold} {fence} {m} {} {owner} {name}\n", u8::from(late));
        self.write.write_all(line.as_bytes()).await?;
        match self.lines.next_line().await? {
            Some(l) if l == "1" => Ok(true),
            Some(l) if l == "0" => Ok(false),
            other => Err(std::io::Error::other(format!(
                "resource answered {other:?}"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lower_fences_are_refused_by_conflicting_modes_only() {
        let mut r = Record::default();
        assert!(admit(&mut r, Mode::R, 10, false));
        assert!(admit(&mut r, Mode::R, 9, false), "readers share");
        assert!(
            !admit(&mut r, Mode::W, 9, false),
            "a write older than a read"
        );
        assert!(admit(&mut r, Mode::W, 20, false));
        assert!(admit(&mut r, Mode::W, 20, false), "the same hold again");
        assert!(
            !admit(&mut r, Mode::R, 11, false),
            "a read older than a write"
        );
        assert!(!admit(&mut r, Mode::U, 19, false));
        assert!(admit(&mut r, Mode::U, 21, false));
        assert!(admit(&mut r, Mode::W, 1, true), "broken: everything");
    }

    #[test]
    fn lines_parse() {
        let p = parse("7 123 W 1 own:1 orders:{1}").unwrap();
        assert_eq!(
            p,
            (7, 123, Mode::W, true, "own:1".into(), "orders:{1}".into())
        );
        assert!(parse("7 x W 0 o n").is_none());
        assert!(parse("7 1 X 0 o n").is_none());
        assert!(parse("7 1 W 0 o").is_none());
    }
}
