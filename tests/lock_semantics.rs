//! The lock's rules, one test each, against the six-node cluster.
//!
//! The tests are in `tests/lock_semantics/`, a file per theme: the inline module below
//! names that directory, so that this file stays the test's root (its binary is
//! `lock_semantics`) and keeps `mod common;`, the helpers all the lock's tests share.

mod common;

mod lock_semantics {
    mod conversions;
    mod leases;
    mod modes;
    mod names;
    mod scoped;
    mod waiting;
}
