//! The names of the properties the checker checks in every state, and of the goals each
//! scenario must reach (the checker reports them by name; docs/MODEL.md explains each).

pub const EXCLUSION: &str = "no two clients believe conflicting holds";
pub const FENCE_ORDER: &str = "every grant's fence is above every believed grant's";
pub const NO_NEEDLESS_WAIT: &str = "a live waiter is refused only while another holds or \
     waits, or within the lease or claim window of what another left";
pub const REPLIES_KNOWN: &str = "every reply is one the protocol documents";
pub const GUARDED_UNDER_HOLD: &str = "a guarded write lands only under a write hold the server \
     has, from a holder no operator broke, while no other client believes a conflicting hold";
/// Reachability (each must be found, or the model is vacuous).
pub const SOME_GRANT: &str = "a grant is believed";
pub const SOME_HANDOFF: &str = "a hand-off is taken";
pub const SOME_FAILOVER_HOLD: &str = "a hold is believed after a failover";
pub const SOME_GUARDED: &str = "a guarded write lands";
pub const SOME_BROKEN_WAITER: &str = "a waiter of a broken client stops";
pub const SOME_PAST_DEAD: &str = "a waiter is granted after a dead client's turn";
pub const SOME_VOUCHED: &str = "a grant or renewal is believed on the majority's word";
