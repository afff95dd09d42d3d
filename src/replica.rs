//! A master's replicas as the master itself lists them (`INFO replication`): what a
//! grant's `WAIT` waits for, and what an [`Error::NotReplicated`](crate::Error) names
//! when it came back short.

use std::time::Duration;

/// One replica as its master lists it in `INFO replication`
/// (`slave0:ip=..,port=..,state=..,offset=..,lag=..`): its address, its state, how long
/// since it last acknowledged and how far behind it is. A grant on that master waits
/// for every replica listed there (`docs/GUARANTEES.md`): one that acknowledges nothing
/// (frozen, its link cut, in a full sync) stops grants on its master until it
/// acknowledges again or the master drops it (`repl-timeout`).
///
/// ```
/// use cluster_rwlock::error::ReplicaStatus;
/// let info = "role:master\r\nmaster_repl_offset:5000\r\n\
///     slave0:ip=10.0.0.4,port=6379,state=online,offset=4200,lag=12\r\n";
/// let replicas = ReplicaStatus::parse_info(info);
/// assert_eq!(replicas[0].addr, "10.0.0.4:6379");
/// assert_eq!(replicas[0].lag_secs, Some(12));
/// assert_eq!(replicas[0].behind, Some(800));
/// assert!(replicas[0].is_silent(ReplicaStatus::SILENT_AFTER));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReplicaStatus {
    /// Its address as the master lists it, `ip:port`.
    pub addr: String,
    /// Its state: `online`, or during a full sync `wait_bgsave` or `send_bulk` (it
    /// acknowledges nothing meanwhile).
    pub state: String,
    /// Seconds since its last acknowledgement (the field `lag`; a replica in sync
    /// acknowledges every second), when the master gave it.
    pub lag_secs: Option<u64>,
    /// Bytes of the replication stream it has not acknowledged (the master's
    /// `master_repl_offset` less its `offset`), when both were given.
    pub behind: Option<u64>,
}

impl ReplicaStatus {
    /// The silence past which [`is_silent`](Self::is_silent) calls a replica that is
    /// online not acknowledging (it acknowledges every second when in sync).
    ///
    /// ```
    /// assert_eq!(cluster_rwlock::error::ReplicaStatus::SILENT_AFTER.as_secs(), 2);
    /// ```
    pub const SILENT_AFTER: std::time::Duration = Duration::from_secs(2);

    /// The replicas a master's reply to `INFO replication` lists, in its order; none
    /// for a reply that is not a master's (or that lists none). Fields it cannot read
    /// are left `None`.
    ///
    /// ```
    /// let none = cluster_rwlock::error::ReplicaStatus::parse_info("role:slave\r\n");
    /// assert!(none.is_empty());
    /// ```
    pub fn parse_info(info: &str) -> Vec<ReplicaStatus> {
        listed(info).map(|(_, r)| r).unwrap_or_default()
    }

    /// Whether it is not acknowledging: a state other than `online` (a full sync), or no
    /// acknowledgement for longer than `after`.
    ///
    /// ```
    /// # fn demo(r: &cluster_rwlock::error::ReplicaStatus) {
    /// if r.is_silent(cluster_rwlock::error::ReplicaStatus::SILENT_AFTER) {
    ///     eprintln!("grants on its master wait for {r}");
    /// }
    /// # }
    /// ```
    pub fn is_silent(&self, after: Duration) -> bool {
        self.state != "online" || self.lag_secs.is_some_and(|s| s > after.as_secs())
    }
}

impl std::fmt::Display for ReplicaStatus {
    /// `10.0.0.4:6379 (online, last ACK 12 s ago, 800 bytes behind)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}", self.addr, self.state)?;
        if let Some(s) = self.lag_secs {
            write!(f, ", last ACK {s} s ago")?;
        }
        if let Some(b) = self.behind {
            write!(f, ", {b} bytes behind")?;
        }
        f.write_str(")")
    }
}

/// The replicas listed in a master's `INFO replication` (`slaveN:` or `replicaN:` lines
/// with a `state=`), in any state: in sync (`online`), or still loading their first
/// copy. With the master's offset. `None` for a reply that is not a master's.
pub(crate) fn listed(info: &str) -> Option<(Option<u64>, Vec<ReplicaStatus>)> {
    let mut master = false;
    let mut offset = None;
    let mut fields_of = Vec::new();
    for line in info.lines() {
        let line = line.trim();
        if line == "role:master" {
            master = true;
        }
        let Some((name, fields)) = line.split_once(':') else {
            continue;
        };
        if name == "master_repl_offset" {
            offset = fields.parse::<u64>().ok();
        }
        let numbered = |p: &str| {
            name.strip_prefix(p)
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        };
        if (numbered("slave") || numbered("replica")) && fields.contains("state=") {
            fields_of.push(fields);
        }
    }
    if !master {
        return None;
    }
    let replicas = fields_of
        .into_iter()
        .map(|fields| {
            let field = |k: &str| {
                fields
                    .split(',')
                    .find_map(|kv| kv.split_once('=').filter(|(n, _)| *n == k))
                    .map(|(_, v)| v)
            };
            let number = |k: &str| field(k).and_then(|v| v.parse::<u64>().ok());
            let ip = field("ip").unwrap_or("?");
            let addr = match field("port") {
                // an IPv6 address in brackets, as a host:port is written
                Some(port) if ip.contains(':') => format!("[{ip}]:{port}"),
                Some(port) => format!("{ip}:{port}"),
                None => ip.to_string(),
            };
            let acked = number("offset");
            ReplicaStatus {
                addr,
                state: field("state").unwrap_or("?").to_string(),
                lag_secs: number("lag"),
                behind: offset.zip(acked).map(|(m, a)| m.saturating_sub(a)),
            }
        })
        .collect();
    Some((offset, replicas))
}

/// Of the replicas a master listed after a `WAIT` that came back `short` of the
/// acknowledgements it needed: those that did not acknowledge, at least `short` of them.
/// `WAIT` does not say which; a replica that acknowledged the write has acknowledged
/// at least its offset, so those that acknowledged least are named: every one not
/// `online` or behind the master when none acknowledged, else the `short` least.
pub(crate) fn silent(
    mut replicas: Vec<ReplicaStatus>,
    short: u32,
    none_acked: bool,
) -> Vec<ReplicaStatus> {
    // least acknowledged first: a full sync, then the most bytes behind, the longest silent
    replicas.sort_by_key(|r| {
        (
            r.state == "online",
            std::cmp::Reverse(r.behind),
            std::cmp::Reverse(r.lag_secs),
        )
    });
    let behind = replicas
        .iter()
        .filter(|r| r.state != "online" || r.behind.is_some_and(|b| b > 0))
        .count();
    let keep = usize::try_from(short)
        .unwrap_or(usize::MAX)
        .max(if none_acked { behind } else { 0 });
    replicas.truncate(keep);
    replicas
}

/// The replicas of an error's message: `; not acknowledging: a (..), b (..)`, or
/// nothing when none is known.
pub(crate) fn named(replicas: &[ReplicaStatus]) -> String {
    if replicas.is_empty() {
        return String::new();
    }
    let list: Vec<String> = replicas.iter().map(ToString::to_string).collect();
    format!("; not acknowledging: {}", list.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    const INFO: &str = "# Replication\r\nrole:master\r\nconnected_slaves:3\r\n\
        slave0:ip=127.0.0.1,port=7004,state=online,offset=120,lag=0\r\n\
        slave1:ip=127.0.0.1,port=7005,state=wait_bgsave,offset=0,lag=0\r\n\
        slave2:ip=::1,port=7006,state=online,offset=90,lag=7\r\n\
        master_failover_state:no-failover\r\nmaster_repl_offset:120\r\n";

    #[test]
    fn a_masters_replicas_are_read_with_their_silence() {
        let r = ReplicaStatus::parse_info(INFO);
        assert_eq!(r.len(), 3);
        assert_eq!(r[0].addr, "127.0.0.1:7004");
        assert_eq!((r[0].lag_secs, r[0].behind), (Some(0), Some(0)));
        assert_eq!(r[1].state, "wait_bgsave");
        assert_eq!(r[2].addr, "[::1]:7006");
        assert_eq!(r[2].behind, Some(30));
        let silent: Vec<bool> = r
            .iter()
            .map(|r| r.is_silent(ReplicaStatus::SILENT_AFTER))
            .collect();
        assert_eq!(silent, [false, true, true]);
        assert_eq!(
            r[2].to_string(),
            "[::1]:7006 (online, last ACK 7 s ago, 30 bytes behind)"
        );
        // a field missing or unreadable is unknown, not 0
        let odd = ReplicaStatus::parse_info("role:master\nreplica0:ip=a,state=online,lag=x\n");
        assert_eq!(odd[0].addr, "a");
        assert_eq!((odd[0].lag_secs, odd[0].behind), (None, None));
        assert_eq!(odd[0].to_string(), "a (online)");
        assert!(ReplicaStatus::parse_info("role:slave\r\nslave0:state=online\r\n").is_empty());
    }

    #[test]
    fn those_that_acknowledged_least_are_named() {
        let all = || ReplicaStatus::parse_info(INFO);
        let addrs = |v: Vec<ReplicaStatus>| v.into_iter().map(|r| r.addr).collect::<Vec<_>>();
        // one short of three: the one in a full sync
        assert_eq!(addrs(silent(all(), 1, false)), ["127.0.0.1:7005"]);
        assert_eq!(
            addrs(silent(all(), 2, false)),
            ["127.0.0.1:7005", "[::1]:7006"]
        );
        // none acknowledged: every one behind, even if only one was needed
        assert_eq!(
            addrs(silent(all(), 1, true)),
            ["127.0.0.1:7005", "[::1]:7006"]
        );
        assert!(named(&[]).is_empty());
        assert_eq!(
            named(&silent(all(), 1, false)),
            "; not acknowledging: 127.0.0.1:7005 (wait_bgsave, last ACK 0 s ago, 120 bytes behind)"
        );
    }
}
