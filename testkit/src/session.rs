//! This process's test-bed session and the names derived from it: the session id (in
//! container names, labels, node directories), the comments on its iptables rules, and
//! the group each node runs with. A leaf: every module that starts or cuts something
//! uses these names, and none of them is needed here.

use std::sync::OnceLock;

use super::TestkitError;

/// This process's session: a random id in its container names and labels, node
/// directories and partition rules.
pub(super) fn session_id() -> &'static str {
    static ID: OnceLock<String> = OnceLock::new();
    ID.get_or_init(|| uuid::Uuid::new_v4().simple().to_string()[..12].to_string())
}

/// The comment on this session's rules.
pub(super) fn rule_tag() -> String {
    format!("cluster-rwlock-{}", session_id())
}

/// The comment on the rules of fault `kind` (`isolate`, `repl`) on the node at `port`.
pub(super) fn fault_tag(kind: &str, port: u16) -> String {
    format!("{}-{kind}-{port}", rule_tag())
}

/// The comment kind of an isolation's rules (see [`fault_tag`]).
pub(super) const ISOLATE: &str = "isolate";

/// The group the node on `port` runs with (only when the test bed runs as root: a group
/// per node needs it, and so does iptables).
pub(super) fn node_gid(port: u16) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    let root = std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0);
    root.then_some(100_000 + u32::from(port))
}

/// [`node_gid`], or the error that explains why there is none.
pub(super) fn gid_of(port: u16) -> Result<u32, TestkitError> {
    node_gid(port).ok_or_else(|| {
        TestkitError::Iptables(
            "the test bed does not run as root, so its nodes have no group of their own and iptables would refuse".into(),
        )
    })
}
