//! The function half of the transport: every function call, and every renewal pipeline,
//! goes through here: one `FCALL` argument vector, one way to the node (the connection's
//! lane, or straight to the connection when there is nothing to confirm), one reload of
//! a library the server lacks, one reading of a call's confirmation. The connection half
//! is `cluster::lane`.

use std::sync::atomic::{AtomicU64, Ordering};

use fred::prelude::*;
use fred::types::{ClusterHash, CustomCommand};

use super::library::is_function_missing;
use super::{Confirm, Gather, Lane, Scripts};
use crate::cluster::lane::Unconfirmed;
use crate::cluster::vouch::Vouch;
use crate::error::{Error, Result};

/// Counters of what the client sent, for benchmarks and diagnostics.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub attempts: AtomicU64,
    pub round_trips: AtomicU64,
    pub reloads: AtomicU64,
}

/// The lock a call is about: its key, the function's first `KEYS` entry (the functions name
/// the release channel, `<key>:released`, themselves: same slot, one key less to send).
#[derive(Clone, Copy)]
pub(crate) struct Target<'a> {
    pub key: &'a str,
    /// How the function's writes are confirmed by replicas (`None`: not at all).
    pub confirm: Option<Confirm>,
}

/// Where a function call goes: the connection to the node that serves the lock's slot, the
/// client's counters, and the lock (its key, and how the call is confirmed).
#[derive(Clone, Copy)]
pub(crate) struct On<'a> {
    /// The connection (to load the library where the server lacks it).
    pub client: &'a Client,
    /// The connection's lane, which function calls take when confirmation is in use (see
    /// `cluster::lane`).
    pub lane: &'a Lane,
    /// Nothing is ever confirmed on this client (`Durability::MasterOnly`): a call
    /// without `ASKING` goes straight to the connection, which keeps many in flight
    /// (there is no `WAIT` to share, and a lane would only serialize the batches).
    pub direct: bool,
    /// The node is the target of an `ASK`: `ASKING` goes right before the call, in
    /// the same pipeline.
    pub asking: bool,
    pub counters: &'a Counters,
    pub target: Target<'a>,
    /// The batch being built that the call goes in (see [`Gather`]): through the lane
    /// even when it could go straight to the connection.
    pub gather: Option<&'a Gather>,
    /// For a grant or a renewal: whom to ask when its `WAIT` falls short (a silent
    /// replica) how soon the master could be replaced (see `cluster::vouch`).
    pub vouch: Option<Vouch<'a>>,
}

/// What a function call brought back: its reply, and whether its writes were confirmed
/// when confirmation was asked for (`unconfirmed`: replicas wanted, those that
/// acknowledged, those that did not). Each call decides what an unconfirmed reply means: a grant that does
/// not count, a refusal that does not matter.
pub(crate) struct Ran {
    pub value: Value,
    pub unconfirmed: Option<Unconfirmed>,
}

impl Ran {
    /// The reply, when its writes were confirmed (or none was asked for), with what the
    /// other masters vouched for when they were not (`Some`: see
    /// `Unconfirmed::replaceable_after`); else [`Error::NotReplicated`].
    pub(super) fn vouched(self, key: &str) -> Result<(Value, Option<tokio::time::Instant>)> {
        match self.unconfirmed {
            None => Ok((self.value, None)),
            Some(Unconfirmed {
                replaceable_after: Some(at),
                ..
            }) => Ok((self.value, Some(at))),
            Some(u) => Err(not_replicated(key, u)),
        }
    }

    /// For a call whose writes ran and stay (a guarded call, a fenced write): `Ok` when
    /// confirmed, else [`Error::WriteNotReplicated`] (nothing is undone).
    pub(super) fn write_confirmed(&self, key: &str) -> Result<()> {
        match &self.unconfirmed {
            None => Ok(()),
            Some(u) => {
                crate::observe::not_replicated(key, u.wanted, u.acked, &u.silent);
                Err(Error::WriteNotReplicated {
                    wanted: u.wanted,
                    acked: u.acked,
                })
            }
        }
    }
}

pub(super) fn not_replicated(key: &str, u: Unconfirmed) -> Error {
    crate::observe::not_replicated(key, u.wanted, u.acked, &u.silent);
    Error::NotReplicated {
        wanted: u.wanted,
        acked: u.acked,
        silent: u.silent,
    }
}

/// The arguments of `FCALL` for `function` on `key` (then `extra_keys`), with `args`.
pub(super) fn fcall_args(
    function: &Value,
    key: &str,
    extra_keys: impl IntoIterator<Item = Value, IntoIter: ExactSizeIterator>,
    args: impl IntoIterator<Item = Value, IntoIter: ExactSizeIterator>,
) -> Vec<Value> {
    let (extra_keys, args) = (extra_keys.into_iter(), args.into_iter());
    let mut call: Vec<Value> = Vec::with_capacity(3 + extra_keys.len() + args.len());
    let keys = i64::try_from(1 + extra_keys.len()).unwrap_or(i64::MAX);
    call.extend([function.clone(), keys.into(), key.into()]);
    call.extend(extra_keys);
    call.extend(args);
    call
}

/// One argument of a function call, in the form that costs least to send: a word the
/// library fixes (sent without a copy), a number (its digits written by the encoder, no
/// text made first), or text (copied once).
#[derive(Clone, Copy)]
pub(super) enum Arg<'a> {
    Word(&'static str),
    Number(u64),
    Text(&'a str),
}

impl Arg<'_> {
    fn value(self) -> Value {
        match self {
            Arg::Word(w) => Value::from_static_str(w),
            // (above i64, which no hold id or lease reaches, as text: the same digits)
            Arg::Number(n) => {
                i64::try_from(n).map_or_else(|_| Value::from(n.to_string()), Value::Integer)
            }
            Arg::Text(t) => Value::from(t),
        }
    }
}

impl Scripts {
    /// [`run_with`](Self::run_with), with no key but the lock's: the call's arguments are
    /// made from `args` for each sending (there is a second only where the library had to
    /// be loaded), so that nothing is copied for a sending that may never happen.
    pub(super) fn run<'a>(
        &'a self,
        on: On<'a>,
        function: &'a Value,
        args: &'a [Arg<'a>],
    ) -> futures_util::future::BoxFuture<'a, Result<Ran>> {
        let key = on.target.key;
        self.send(on, move || {
            fcall_args(function, key, Vec::new(), args.iter().map(|a| a.value()))
        })
    }

    /// `FCALL` of `function` on the lock's key and `extra_keys` (`KEYS[2..]`), with
    /// `args`, both cloned for each sending (the guarded calls and fenced writes, whose
    /// arguments come as values; the lock's own calls go through [`run`](Self::run)).
    pub(super) fn run_with<'a>(
        &'a self,
        on: On<'a>,
        function: &'a Value,
        extra_keys: Vec<Value>,
        args: Vec<Value>,
    ) -> futures_util::future::BoxFuture<'a, Result<Ran>> {
        let key = on.target.key;
        self.send(on, move || {
            fcall_args(function, key, extra_keys.clone(), args.clone())
        })
    }

    /// The `FCALL` that `call` makes, sent: through the connection's lane, with `ASKING`
    /// before it when the node is the target of an `ASK`, and confirmed by the `WAIT` of
    /// the batch it goes in when the call asks for confirmation (what the function did
    /// stays on the master when too few replicas acknowledged: see [`Ran`]); straight to
    /// the connection when there is nothing to confirm on this client and nothing to put
    /// before it (`Durability::MasterOnly`: the connection keeps many calls in flight,
    /// where a lane would only serialize the batches). Loads the library again where the
    /// server lacks it (a node restarted empty, a new master after a reshard), and makes
    /// the call again with `call` to send it once more.
    ///
    /// Boxed: the client's futures are deep types, and every acquire, renewal and release
    /// future holds one; behind a box they add one pointer to the futures above, not their
    /// whole layout (which brought users' futures near the compiler's query depth limit).
    /// One allocation per round trip.
    fn send<'a, F>(
        &'a self,
        on: On<'a>,
        call: F,
    ) -> futures_util::future::BoxFuture<'a, Result<Ran>>
    where
        F: Fn() -> Vec<Value> + Send + 'a,
    {
        Box::pin(async move {
            let t = &on.target;
            let direct = on.direct && t.confirm.is_none() && !on.asking && on.gather.is_none();
            for first in [true, false] {
                let sending = call();
                on.counters.round_trips.fetch_add(1, Ordering::Relaxed);
                let (reply, unconfirmed) = if direct {
                    let fcall = CustomCommand::new_static("FCALL", ClusterHash::FirstKey, false);
                    (on.client.custom::<Value, Value>(fcall, sending).await, None)
                } else {
                    let mut batch = match on.gather {
                        Some(gather) => {
                            gather
                                .send(on.lane, on.asking, t.confirm, vec![sending])
                                .await
                        }
                        None => on.lane.send(on.asking, t.confirm, vec![sending]).await,
                    };
                    let mut unconfirmed = batch.unconfirmed(t.confirm);
                    let Some(reply) = batch.replies.pop() else {
                        return Err(Error::Protocol("a function call: missing reply".into()));
                    };
                    if let (Some(u), Some(vouch), Ok(_)) = (&mut unconfirmed, on.vouch, &reply) {
                        u.replaceable_after = vouch.ask().await;
                    }
                    (reply, unconfirmed)
                };
                match reply {
                    Err(e) if first && is_function_missing(&e) => {
                        on.counters.reloads.fetch_add(1, Ordering::Relaxed);
                        crate::observe::library_reloaded();
                        on.counters.round_trips.fetch_add(1, Ordering::Relaxed);
                        let addr = on.client.client_config().server.hosts();
                        let addr = addr.first().map(|h| h.to_string()).unwrap_or_default();
                        self.library.ensure(on.client, &addr).await?;
                    }
                    Err(e) => return Err(Error::from_client(e)),
                    Ok(value) => return Ok(Ran { value, unconfirmed }),
                }
            }
            Err(Error::Protocol(
                "a function not found after loading its library".into(),
            ))
        })
    }

    /// Many function calls to ONE node in one pipeline through `lane` (one round
    /// trip), confirmed by one `WAIT` when `confirm` asks for it: each call's reply, or
    /// its own error (a call that failed on its own, its connection lost, a redirect,
    /// the library missing, is the caller's to send again alone), and the replicas wanted and
    /// acknowledged when the batch was not confirmed (with what `vouch` said, when given).
    pub(super) async fn run_many(
        &self,
        lane: &Lane,
        counters: &Counters,
        calls: Vec<Vec<Value>>,
        confirm: Option<Confirm>,
        vouch: Option<Vouch<'_>>,
    ) -> (Vec<Result<Value>>, Option<Unconfirmed>) {
        let count = calls.len();
        counters.round_trips.fetch_add(1, Ordering::Relaxed);
        let batch = lane.send(false, confirm, calls).await;
        let mut unconfirmed = batch.unconfirmed(confirm);
        if let (Some(u), Some(vouch)) = (&mut unconfirmed, vouch) {
            if batch.replies.iter().any(|r| r.is_ok()) {
                u.replaceable_after = vouch.ask().await;
            }
        }
        let mut replies: Vec<Result<Value>> = batch
            .replies
            .into_iter()
            .map(|r| r.map_err(Error::from_client))
            .collect();
        replies.resize_with(count, || {
            Err(Error::Protocol("a pipeline: missing reply".into()))
        });
        (replies, unconfirmed)
    }
}
