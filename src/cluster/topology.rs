//! The slot map: which master serves each slot, merged from the `CLUSTER NODES` views of
//! the nodes that answered.
//!
//! Views may disagree for a while: a master that was frozen and thawed, or cut off by a
//! partition, still claims its old slots until gossip reaches it. Redis settles such
//! conflicts by the config epoch (a promoted replica or the target of a slot move gets an
//! epoch above every other), and so does [`merge`]: for each slot, the claim with the
//! highest epoch in any view wins. One healthy node's view is then enough to route
//! around a stale master, whatever that master says of itself.

use crate::slot::SLOTS;

/// A node's address, as `host:port`.
pub(crate) type Addr = String;

/// One line of `CLUSTER NODES`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NodeLine {
    /// Where clients reach it; `None` for a node without an address (`noaddr`, `:0`).
    pub addr: Option<Addr>,
    pub master: bool,
    /// The config epoch (of the node, or of its master for a replica).
    pub epoch: u64,
    /// Slot ranges served (masters only), inclusive.
    pub slots: Vec<(u16, u16)>,
    /// The node's id.
    pub id: String,
    /// For a replica, its master's id.
    pub replica_of: Option<String>,
    /// Flagged `fail` or `fail?` by the node that gave this view.
    pub failing: bool,
    /// When the node that gave this view last had its `PONG` (ms, on that node's clock;
    /// 0: never, or the node itself).
    pub pong_recv_ms: u64,
}

/// Parses a `CLUSTER NODES` reply. `asked` is the address the reply came from: a node
/// that does not know its own IP yet lists itself as `:port`. Lines that cannot be read
/// are skipped; `None` when no line could be read.
pub(crate) fn parse_nodes(text: &str, asked: &str) -> Option<Vec<NodeLine>> {
    let asked_host = asked.rsplit_once(':').map_or("", |(h, _)| h);
    let mut out = Vec::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.len() < 8 {
            continue;
        }
        let flags: Vec<&str> = fields[2].split(',').collect();
        if flags.contains(&"handshake") {
            continue;
        }
        let Ok(epoch) = fields[6].parse::<u64>() else {
            continue;
        };
        let addr = parse_addr(fields[1], asked_host).filter(|_| !flags.contains(&"noaddr"));
        let master = flags.contains(&"master");
        let mut slots = Vec::new();
        if master {
            for s in &fields[8..] {
                // `[slot->-id]` and `[slot-<-id]`: a migration in progress, not ownership
                if s.starts_with('[') {
                    continue;
                }
                let range = match s.split_once('-') {
                    Some((a, b)) => a.parse::<u16>().ok().zip(b.parse::<u16>().ok()),
                    None => s.parse::<u16>().ok().map(|a| (a, a)),
                };
                if let Some((a, b)) = range.filter(|(a, b)| a <= b && *b < SLOTS) {
                    slots.push((a, b));
                }
            }
        }
        let replica_of = (!master && fields[3] != "-").then(|| fields[3].to_string());
        out.push(NodeLine {
            addr,
            master,
            epoch,
            slots,
            id: fields[0].to_string(),
            replica_of,
            failing: flags.contains(&"fail") || flags.contains(&"fail?"),
            pong_recv_ms: fields[5].parse().unwrap_or(0),
        });
    }
    (!out.is_empty()).then_some(out)
}

/// `ip:port@cport[,hostname]` to `ip:port` (`[v6]:port` kept as written).
fn parse_addr(field: &str, asked_host: &str) -> Option<Addr> {
    let hostport = field.split(['@', ',']).next()?;
    let (host, port) = hostport.rsplit_once(':')?;
    let port: u16 = port.parse().ok().filter(|p| *p != 0)?;
    let host = if host.is_empty() { asked_host } else { host };
    if host.is_empty() {
        return None;
    }
    Some(format!("{host}:{port}"))
}

/// Which node serves each slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SlotMap {
    /// Index into `masters` for each slot; `NONE` when no node serves it.
    owners: Vec<u16>,
    /// The masters that serve at least one slot, sorted.
    masters: Vec<Addr>,
    /// Every node any view listed (masters and replicas), sorted: where to ask next time.
    pub known: Vec<Addr>,
    /// For each of `masters`, its replicas that no view flags as failing, as the view that
    /// lists the most of them says ([`UNKNOWN`] for a master only a redirect told of).
    replicas: Vec<u32>,
}

const NONE: u16 = u16::MAX;

/// The replica count of a master that no view described yet.
pub(crate) const UNKNOWN: u32 = u32::MAX;

impl SlotMap {
    /// A map in which one node serves every slot (a single node, or a start-up guess).
    pub fn single(addr: Addr) -> SlotMap {
        SlotMap {
            owners: vec![0; usize::from(SLOTS)],
            masters: vec![addr.clone()],
            known: vec![addr],
            replicas: vec![0],
        }
    }

    /// The replicas of the master of `slot` that can be promoted (see the field), or
    /// [`UNKNOWN`].
    pub fn replicas_for(&self, slot: u16) -> u32 {
        self.owner_index(slot)
            .and_then(|i| self.replicas.get(i).copied())
            .unwrap_or(UNKNOWN)
    }

    /// The replicas that could be promoted of the master at `addr` (see the field), or
    /// [`UNKNOWN`] for a node that serves no slot in this map.
    pub fn replicas_of(&self, addr: &str) -> u32 {
        self.masters
            .iter()
            .position(|m| m == addr)
            .and_then(|i| self.replicas.get(i).copied())
            .unwrap_or(UNKNOWN)
    }

    /// The node that serves `slot`, if any.
    #[cfg(test)]
    pub fn owner(&self, slot: u16) -> Option<&Addr> {
        self.masters.get(self.owner_index(slot)?)
    }

    /// The index in [`masters`](Self::masters) of the node that serves `slot`.
    pub fn owner_index(&self, slot: u16) -> Option<usize> {
        let i = usize::from(*self.owners.get(usize::from(slot))?);
        (i < self.masters.len()).then_some(i)
    }

    /// The masters that serve slots.
    pub fn masters(&self) -> &[Addr] {
        &self.masters
    }

    /// Whether every slot is served.
    #[cfg(test)]
    pub fn complete(&self) -> bool {
        !self.owners.contains(&NONE)
    }

    /// Whether both maps send every slot to the same node (the list of known nodes aside).
    pub fn same_owners(&self, other: &SlotMap) -> bool {
        self.masters == other.masters && self.owners == other.owners
    }

    /// Whether both maps route alike and count the same replicas.
    pub fn same_routes(&self, other: &SlotMap) -> bool {
        self.same_owners(other) && self.replicas == other.replicas
    }

    /// The same map with `slot` served by `addr` (a `MOVED` reply says so).
    pub fn redirected(&self, slot: u16, addr: &str) -> SlotMap {
        let mut next = self.clone();
        let index = match next.masters.iter().position(|m| m == addr) {
            Some(i) => i,
            None => {
                next.masters.push(addr.to_string());
                next.replicas.push(UNKNOWN);
                next.masters.len() - 1
            }
        };
        if let (Some(o), Ok(i)) = (next.owners.get_mut(usize::from(slot)), u16::try_from(index)) {
            *o = i;
        }
        if !next.known.iter().any(|k| k == addr) {
            next.known.push(addr.to_string());
            next.known.sort();
        }
        next
    }
}

/// Merges views: each slot goes to the claim with the highest config epoch. `None` when
/// no view claims any slot.
pub(crate) fn merge(views: &[Vec<NodeLine>]) -> Option<SlotMap> {
    let mut best: Vec<Option<(u64, &str)>> = vec![None; usize::from(SLOTS)];
    let mut known: Vec<Addr> = Vec::new();
    for view in views {
        for line in view {
            let Some(addr) = line.addr.as_deref() else {
                continue;
            };
            known.push(addr.to_string());
            for &(a, b) in &line.slots {
                for slot in a..=b {
                    let cell = &mut best[usize::from(slot)];
                    if cell.is_none_or(|(e, _)| line.epoch > e) {
                        *cell = Some((line.epoch, addr));
                    }
                }
            }
        }
    }
    known.sort();
    known.dedup();
    // healthy replicas per master address, per view; the most any view lists
    let mut replicas: std::collections::HashMap<&str, u32> = std::collections::HashMap::new();
    for view in views {
        let mut counts: std::collections::HashMap<&str, u32> = std::collections::HashMap::new();
        for line in view
            .iter()
            .filter(|l| !l.master && !l.failing && l.addr.is_some())
        {
            let master = line
                .replica_of
                .as_deref()
                .and_then(|id| view.iter().find(|m| m.id == id))
                .and_then(|m| m.addr.as_deref());
            if let Some(m) = master {
                *counts.entry(m).or_default() += 1;
            }
        }
        for (m, n) in counts {
            let e = replicas.entry(m).or_default();
            *e = (*e).max(n);
        }
    }
    // the distinct owners, without a string per slot: a cluster has a handful of masters
    // (the watch runs this every second)
    let mut masters: Vec<&str> = Vec::new();
    for &(_, a) in best.iter().flatten() {
        if !masters.contains(&a) {
            masters.push(a);
        }
    }
    masters.sort_unstable();
    if masters.is_empty() {
        return None;
    }
    let mut last: Option<(&str, u16)> = None;
    let owners = best
        .iter()
        .map(|b| match b {
            Some((_, a)) => match last {
                Some((l, i)) if l == *a => i,
                _ => {
                    let i = masters
                        .binary_search(a)
                        .ok()
                        .and_then(|i| u16::try_from(i).ok())
                        .unwrap_or(NONE);
                    last = Some((a, i));
                    i
                }
            },
            None => NONE,
        })
        .collect();
    let replicas = masters
        .iter()
        .map(|m| replicas.get(m).copied().unwrap_or(0))
        .collect();
    Some(SlotMap {
        owners,
        masters: masters.into_iter().map(str::to_string).collect(),
        known,
        replicas,
    })
}

/// The target of a `MOVED <slot> <host:port>` or `ASK <slot> <host:port>` error.
pub(crate) fn redirect_target(details: &str) -> Option<(u16, Addr)> {
    let mut parts = details.split_whitespace();
    let _kind = parts.next()?;
    let slot = parts.next()?.parse().ok()?;
    let addr = parts.next()?;
    let (host, port) = addr.rsplit_once(':')?;
    let port: u16 = port.parse().ok()?;
    Some((slot, format!("{host}:{port}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    const VIEW_B: &str = "\
a1 127.0.0.1:7000@17000 master,fail - 1 1 1 disconnected 0-5460
b1 127.0.0.1:7001@17001 myself,master - 0 0 2 connected 5461-10922
c1 127.0.0.1:7002@17002 master - 0 5 3 connected 10923-16383
a2 127.0.0.1:7003@17003 master - 0 5 7 connected 0-5460
b2 127.0.0.1:7004@17004 slave b1 0 5 2 connected
c2 127.0.0.1:7005@17005 slave c1 0 5 3 connected
";
    /// What the frozen old master says of itself when it wakes up, before gossip.
    const VIEW_A_STALE: &str = "\
a1 127.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-5460
b1 127.0.0.1:7001@17001 master - 0 0 2 connected 5461-10922
c1 127.0.0.1:7002@17002 master - 0 5 3 connected 10923-16383
a2 127.0.0.1:7003@17003 slave a1 0 5 1 connected
";

    #[test]
    fn parses_lines() {
        let v = parse_nodes(VIEW_B, "127.0.0.1:7001").unwrap();
        assert_eq!(v.len(), 6);
        assert_eq!(v[0].addr.as_deref(), Some("127.0.0.1:7000"));
        assert!(v[0].master);
        assert_eq!(v[0].slots, vec![(0, 5460)]);
        assert_eq!(v[3].epoch, 7);
        assert!(!v[4].master);
        assert!(v[4].slots.is_empty());
    }

    #[test]
    fn higher_epoch_wins_over_a_stale_master() {
        let b = parse_nodes(VIEW_B, "127.0.0.1:7001").unwrap();
        let a = parse_nodes(VIEW_A_STALE, "127.0.0.1:7000").unwrap();
        for views in [vec![a.clone(), b.clone()], vec![b.clone(), a.clone()]] {
            let map = merge(&views).unwrap();
            assert_eq!(map.owner(0).unwrap(), "127.0.0.1:7003");
            assert_eq!(map.owner(5460).unwrap(), "127.0.0.1:7003");
            assert_eq!(map.owner(5461).unwrap(), "127.0.0.1:7001");
            assert_eq!(map.owner(16383).unwrap(), "127.0.0.1:7002");
            assert!(map.complete());
            assert!(!map.masters().contains(&"127.0.0.1:7000".to_string()));
            assert_eq!(map.known.len(), 6);
            // a2 replaced the failed a1 and has no replica; b1 and c1 have one each
            assert_eq!(map.replicas_for(0), 0);
            assert_eq!(map.replicas_for(5461), 1);
            assert_eq!(map.replicas_for(16383), 1);
        }
        // the stale view alone is all we can go by
        let map = merge(&[a]).unwrap();
        assert_eq!(map.owner(0).unwrap(), "127.0.0.1:7000");
        assert_eq!(map.replicas_for(0), 1);
    }

    #[test]
    fn failing_replicas_do_not_count() {
        let text = "\
m1 127.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-16383
r1 127.0.0.1:7001@17001 slave m1 0 0 1 connected
r2 127.0.0.1:7002@17002 slave,fail? m1 0 0 1 disconnected
r3 127.0.0.1:7003@17003 slave,fail m1 0 0 1 disconnected
";
        let map = merge(&[parse_nodes(text, "127.0.0.1:7000").unwrap()]).unwrap();
        assert_eq!(map.replicas_for(7), 1);
        assert_eq!(map.redirected(7, "127.0.0.1:7009").replicas_for(7), UNKNOWN);
        assert_eq!(SlotMap::single("a:1".into()).replicas_for(3), 0);
    }

    #[test]
    fn migrations_single_slots_and_garbage() {
        let text = "\
x 10.0.0.1:6379@16379,host-a myself,master - 0 0 4 connected 0-100 200 [300->-y] [400-<-z]
y :6380@16380 master - 0 0 3 connected 101-199 9-1 70000 abc
z 10.0.0.3:0@0 master,noaddr - 0 0 9 connected 201-300
short line
h 10.0.0.4:6381@16381 handshake - 0 0 0 connected
";
        let v = parse_nodes(text, "10.0.0.2:6380").unwrap();
        assert_eq!(v.len(), 3);
        assert_eq!(v[0].addr.as_deref(), Some("10.0.0.1:6379"));
        assert_eq!(v[0].slots, vec![(0, 100), (200, 200)]);
        assert_eq!(v[1].addr.as_deref(), Some("10.0.0.2:6380"));
        assert_eq!(v[1].slots, vec![(101, 199)]);
        assert_eq!(v[2].addr, None);
        let map = merge(&[v]).unwrap();
        assert_eq!(map.owner(150).unwrap(), "10.0.0.2:6380");
        assert_eq!(map.owner(200).unwrap(), "10.0.0.1:6379");
        assert_eq!(map.owner(250), None);
        // each master once, in order, whatever the order of its ranges
        assert_eq!(map.masters(), ["10.0.0.1:6379", "10.0.0.2:6380"]);
        assert!(!map.complete());
        assert!(parse_nodes("", "x:1").is_none());
        assert!(parse_nodes("garbage\n\n", "x:1").is_none());
        assert!(merge(&[]).is_none());
    }

    #[test]
    fn redirects() {
        assert_eq!(
            redirect_target("MOVED 3999 127.0.0.1:6381"),
            Some((3999, "127.0.0.1:6381".to_string()))
        );
        assert_eq!(
            redirect_target("ASK 1 ::1:7000"),
            Some((1, "::1:7000".to_string()))
        );
        assert_eq!(redirect_target("MOVED x y"), None);
        assert_eq!(redirect_target("MOVED"), None);
        let map = SlotMap::single("a:1".into()).redirected(5, "b:2");
        assert_eq!(map.owner(5).unwrap(), "b:2");
        assert_eq!(map.owner(6).unwrap(), "a:1");
        assert_eq!(map.known, vec!["a:1".to_string(), "b:2".to_string()]);
    }
}
