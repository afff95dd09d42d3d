//! For operators and their tools: what the server holds for a lock, who holds it, the
//! messages its channel carries, breaking a stuck hold, the client's counters, and the
//! function library as the servers receive it.
//!
//! A lock user needs none of this: the crate root has the lock ([`RwLock`](crate::RwLock),
//! its guards, [`LockClient`](crate::LockClient)). The command line tool
//! (`cluster-rwlock inspect`, `list`, `watch`, `top`, `break`, `setup`) is built on this
//! module, and so is the Python package's `state()`.
//!
//! ```no_run
//! use cluster_rwlock::operator::LockState;
//! # async fn demo(client: cluster_rwlock::LockClient) -> cluster_rwlock::Result<()> {
//! let state: LockState = client.rwlock("orders:{42}")?.state().await?;
//! for holder in &state.holders {
//!     println!("{:?} held by {}", holder.mode, holder.owner);
//! }
//! # Ok(()) }
//! ```

pub mod library;

pub use crate::client::{ClientStats, ForceReleased};
pub use crate::keys::{client_name_of, lock_key, lock_name, MAX_NAME_LEN};
pub use crate::lock::{Holder, LockState, ReleaseMessages};
pub use crate::message::{Heard, ReleaseMessage};
pub use crate::scripts::Setup;
