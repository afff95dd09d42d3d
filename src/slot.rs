//! Cluster hash slots, computed locally by Redis's rules.

/// Number of hash slots in a Redis Cluster.
///
/// ```
/// assert!(cluster_rwlock::slot::key_slot(b"any") < cluster_rwlock::slot::SLOTS);
/// ```
pub const SLOTS: u16 = 16384;

/// The hash slot of `key`: CRC16 (XMODEM) of the key, or of its hashtag, modulo 16384.
///
/// The hashtag is what lies between the first `{` and the next `}`, when that is at least
/// one byte; otherwise the whole key is hashed. Agrees with `CLUSTER KEYSLOT`.
///
/// ```
/// use cluster_rwlock::slot::key_slot;
/// assert_eq!(key_slot(b"foo"), 12182);
/// assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"{user1000}.followers"));
/// assert_eq!(key_slot(b"foo{}{bar}"), key_slot(b"foo{}{bar}")); // empty tag: whole key
/// ```
pub fn key_slot(key: &[u8]) -> u16 {
    crc16::State::<crc16::XMODEM>::calculate(hashtag(key)) % SLOTS
}

/// The part of `key` that is hashed.
///
/// ```
/// use cluster_rwlock::slot::hashtag;
/// assert_eq!(hashtag(b"rwlock:{orders}"), b"orders");
/// assert_eq!(hashtag(b"a{}b"), b"a{}b");
/// ```
pub fn hashtag(key: &[u8]) -> &[u8] {
    if let Some(open) = key.iter().position(|&b| b == b'{') {
        if let Some(len) = key[open + 1..].iter().position(|&b| b == b'}') {
            if len > 0 {
                return &key[open + 1..open + 1 + len];
            }
        }
    }
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_match_redis_for_known_keys() {
        // values from CLUSTER KEYSLOT
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"bar"), 5061);
        assert_eq!(key_slot(b""), 0);
        assert_eq!(
            key_slot(b"{user1000}.following"),
            key_slot(b"{user1000}.followers")
        );
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
    }

    #[test]
    fn the_hashtag_rule_is_redis_rule() {
        assert_eq!(hashtag(b"a{b}c"), b"b");
        assert_eq!(
            hashtag(b"a{}c"),
            b"a{}c",
            "an empty tag hashes the whole key"
        );
        assert_eq!(hashtag(b"a{b"), b"a{b");
        assert_eq!(hashtag(b"{a}{b}"), b"a", "the first tag counts");
        assert_eq!(hashtag(b"}{a}"), b"a");
    }
}
