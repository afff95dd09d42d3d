//! cluster-rwlock
#![deny(missing_docs)]

#[cfg(feature = "testkit")]
pub mod testkit;
