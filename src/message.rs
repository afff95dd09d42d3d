//! The release messages: what a release publishes on a lock's channel
//! ([`RwLock::channel`](crate::RwLock::channel)), read by the library's waiters and by
//! anyone who watches a lock.

use std::fmt;

/// What a release message says: who may proceed. Releases publish only when someone
/// waits (an uncontended release publishes nothing), with `SPUBLISH` on servers that
/// have it (Redis 7 and later, Valkey), else with `PUBLISH`; the library's own
/// subscription follows the lock's slot through failovers and slot moves, and
/// [`RwLock::release_messages`](crate::RwLock::release_messages) hands its messages on.
///
/// ```
/// use cluster_rwlock::operator::ReleaseMessage;
///
/// assert_eq!(ReleaseMessage::parse("r"), ReleaseMessage::Readers);
/// let m = ReleaseMessage::parse("g job-17 5 123");
/// assert_eq!(
///     m,
///     ReleaseMessage::HandedOver { owner: "job-17".into(), hold: 5, fence: 123 }
/// );
/// assert_eq!(m.to_string(), "handed to waiting writer job-17 (hold 5, fence 123)");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReleaseMessage {
    /// `*`: the lock is free, and the readers first in the queue may enter (a waiter
    /// whose turn it is not tries again, and keeps its place).
    Free,
    /// `r`: readers hold, and the readers first in the queue may join them (no writer
    /// holds, nor waits before them).
    Readers,
    /// `g <owner> <hold> <fence>`: the lock was handed to the first queued writer,
    /// `owner`, as its hold `hold` with fence `fence`.
    HandedOver {
        /// The owner token of the writer.
        owner: String,
        /// The id of the hold the writer was given.
        hold: u64,
        /// Its fence.
        fence: u64,
    },
    /// `x <holds> <fence>`, or `x <holds> <fence> <client>`: an operator broke the lock
    /// ([`LockClient::force_release`](crate::LockClient::force_release)): `holds` holds
    /// were removed and the fence was raised to `fence`; with a client name, the holds
    /// and the places in the queue of that client were
    /// ([`LockClient::break_client`](crate::LockClient::break_client)), and its waiters
    /// stop with [`Error::Broken`](crate::Error::Broken). Sent before the message of the
    /// release itself (a hand-off to a queued writer, say), whether or not anyone waits.
    Broken {
        /// How many holds were removed.
        holds: u64,
        /// The raised fence: every later grant's is above it (0: the lock never had one).
        fence: u64,
        /// The client broken, for a break of one client's holds and places.
        client: Option<String>,
    },
    /// A payload this version does not read (waiters then look for themselves).
    Unknown(String),
}

impl ReleaseMessage {
    /// Reads a message's payload; never fails (see [`Unknown`](Self::Unknown)).
    ///
    /// ```
    /// # use cluster_rwlock::operator::ReleaseMessage;
    /// assert_eq!(ReleaseMessage::parse("*"), ReleaseMessage::Free);
    /// assert!(matches!(ReleaseMessage::parse("g x"), ReleaseMessage::Unknown(_)));
    /// ```
    pub fn parse(payload: &str) -> ReleaseMessage {
        match payload {
            "*" => ReleaseMessage::Free,
            "r" => ReleaseMessage::Readers,
            p => {
                let granted = p.strip_prefix("g ").and_then(|rest| {
                    let mut parts = rest.split(' ');
                    let owner = parts.next().filter(|o| !o.is_empty())?.to_string();
                    let hold = parts.next()?.parse().ok()?;
                    let fence = parts.next()?.parse().ok()?;
                    parts
                        .next()
                        .is_none()
                        .then_some(ReleaseMessage::HandedOver { owner, hold, fence })
                });
                let broken = p.strip_prefix("x ").and_then(|rest| {
                    let mut parts = rest.split(' ');
                    let holds = parts.next()?.parse().ok()?;
                    let fence = parts.next()?.parse().ok()?;
                    let client = match parts.next() {
                        None => None,
                        Some(c) if !c.is_empty() => Some(c.to_string()),
                        Some(_) => return None,
                    };
                    parts.next().is_none().then_some(ReleaseMessage::Broken {
                        holds,
                        fence,
                        client,
                    })
                });
                granted
                    .or(broken)
                    .unwrap_or_else(|| ReleaseMessage::Unknown(p.to_string()))
            }
        }
    }
}

impl fmt::Display for ReleaseMessage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReleaseMessage::Free => {
                f.write_str("released: free; the readers first in line may enter")
            }
            ReleaseMessage::Readers => {
                f.write_str("released: readers hold; the readers first in line may join them")
            }
            ReleaseMessage::HandedOver { owner, hold, fence } => write!(
                f,
                "handed to waiting writer {owner} (hold {hold}, fence {fence})"
            ),
            ReleaseMessage::Broken {
                holds,
                fence,
                client: None,
            } => write!(
                f,
                "broken by an operator: {holds} hold(s) removed, fence raised to {fence}"
            ),
            ReleaseMessage::Broken {
                holds,
                fence,
                client: Some(client),
            } => write!(
                f,
                "client {client} broken by an operator: {holds} hold(s) and its places in the queue removed, fence raised to {fence}"
            ),
            ReleaseMessage::Unknown(m) => write!(f, "message {m:?}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_payload_reads_as_a_message() {
        assert_eq!(ReleaseMessage::parse("*"), ReleaseMessage::Free);
        assert_eq!(ReleaseMessage::parse("r"), ReleaseMessage::Readers);
        assert_eq!(
            ReleaseMessage::parse("g job-17 5 123"),
            ReleaseMessage::HandedOver {
                owner: "job-17".into(),
                hold: 5,
                fence: 123
            }
        );
        assert_eq!(
            ReleaseMessage::parse("x 2 99"),
            ReleaseMessage::Broken {
                holds: 2,
                fence: 99,
                client: None
            }
        );
        assert_eq!(
            ReleaseMessage::parse("x 0 99 worker-7@host-b"),
            ReleaseMessage::Broken {
                holds: 0,
                fence: 99,
                client: Some("worker-7@host-b".into())
            }
        );
        for bad in [
            "x",
            "x 1",
            "x 1 2 ",
            "x 1 2 a b",
            "x a 2",
            "",
            "g",
            "g x",
            "g x 1",
            "g x y 1",
            "g  1 2",
            "g a 1 2 3",
            "?",
        ] {
            assert_eq!(
                ReleaseMessage::parse(bad),
                ReleaseMessage::Unknown(bad.into()),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn messages_read_as_sentences() {
        assert!(ReleaseMessage::Free.to_string().contains("free"));
        assert!(ReleaseMessage::Readers.to_string().contains("readers"));
        assert!(ReleaseMessage::parse("g job-1 5 77")
            .to_string()
            .contains("job-1"));
        assert!(ReleaseMessage::parse("x 1 5")
            .to_string()
            .starts_with("broken"));
        assert!(ReleaseMessage::parse("g x")
            .to_string()
            .starts_with("message"));
    }
}

/// What a watcher of a lock hears next
/// ([`ReleaseMessages::next`](crate::operator::ReleaseMessages::next)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Heard {
    /// A release message.
    Message(ReleaseMessage),
    /// Messages may have been missed: the subscription was placed again (a failover, a
    /// slot move, a lost connection), or the reader fell behind. Look at the lock's
    /// state ([`RwLock::state`](crate::RwLock::state)).
    Gap,
}
