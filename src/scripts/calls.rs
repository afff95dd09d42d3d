//! The calls: one method per function of the library, each its arguments and its typed reply.

use std::sync::atomic::Ordering;

use fred::prelude::*;

use super::reply::{attempt, code, count, int, number, optional_fence, parse_renew, status, text};
use super::transport::{fcall_args, not_replicated, Arg, Ran};
use super::{
    AttemptReply, Breaking, Confirm, Counters, GuardedCall, GuardedReply, Intent, Lane, On, Others,
    RawHolder, RawState, Released, Scripts,
};
use crate::cluster::lane::Unconfirmed;
use crate::error::{Error, Result};
use crate::mode::Mode;

impl Scripts {
    pub async fn acquire(
        &self,
        on: On<'_>,
        mode: Mode,
        owner: &str,
        hold: u64,
        lease_ms: u64,
        intent: Intent,
    ) -> Result<AttemptReply> {
        on.counters.attempts.fetch_add(1, Ordering::Relaxed);
        let args = [
            Arg::Word(mode.arg()),
            Arg::Text(owner),
            Arg::Number(hold),
            Arg::Number(lease_ms),
            Arg::Word(intent.arg()),
            // how this client counts the lease of a hold handed over (`Counted`)
            Arg::Word(intent.counts()),
            // the grant names the queue's head ticket field (`Others::Queued`)
            Arg::Word("1"),
        ];
        let ran = self.run(on, &self.acquire, &args).await?;
        granted_only_if_confirmed(
            on.target.key,
            ran,
            "acquire",
            (-1, AttemptReply::UpgradeDeadlock),
        )
    }

    /// Gives back hold `hold` of `owner`: whether it was there. `others`, as the grant
    /// said: when anyone else was there, the function's fast path is skipped (it would
    /// most likely fall through), and the queue's head ticket it named is read first.
    pub async fn release(
        &self,
        on: On<'_>,
        owner: &str,
        hold: u64,
        others: Others,
    ) -> Result<Released> {
        // the third argument, `1`, skips the function's fast path; the fourth names the
        // queue's head ticket field
        let ticket = match others {
            Others::Queued(t) => format!("t:{t}"),
            _ => String::new(),
        };
        let hinted = [
            Arg::Text(owner),
            Arg::Number(hold),
            Arg::Word("1"),
            Arg::Text(&ticket),
        ];
        let args = match others {
            Others::Nobody => &hinted[..2],
            Others::Present => &hinted[..3],
            Others::Queued(_) => &hinted[..],
        };
        let parts = status(
            on.target.key,
            self.run(on, &self.release, args).await?.value,
        )?;
        if code(&parts)? == 1 {
            return Ok(Released::Now);
        }
        Ok(Released::NotThere {
            last_fence: optional_fence(parts.get(1))?,
            broken_at: optional_fence(parts.get(2))?,
        })
    }

    /// Turns hold `from` (write, or upgradable) into hold `to` of mode `mode` (read, or
    /// upgradable from write): the new hold's fence, or `None` when `from` was gone.
    pub async fn downgrade(
        &self,
        on: On<'_>,
        owner: &str,
        from: u64,
        to: u64,
        mode: Mode,
        lease_ms: u64,
    ) -> Result<Option<u64>> {
        let args = [
            Arg::Text(owner),
            Arg::Number(from),
            Arg::Number(to),
            Arg::Number(lease_ms),
            Arg::Word(mode.arg()),
        ];
        let parts = status(
            on.target.key,
            self.run(on, &self.downgrade, &args).await?.value,
        )?;
        match code(&parts)? {
            1 => Ok(Some(number(parts.get(1))?)),
            _ => Ok(None),
        }
    }

    /// Turns upgradable hold `from` into write hold `to`; `wait`: leave the upgrade
    /// pending when readers still hold.
    pub async fn upgrade(
        &self,
        on: On<'_>,
        owner: &str,
        from: u64,
        to: u64,
        lease_ms: u64,
        wait: bool,
    ) -> Result<AttemptReply> {
        on.counters.attempts.fetch_add(1, Ordering::Relaxed);
        let args = [
            Arg::Text(owner),
            Arg::Number(from),
            Arg::Number(to),
            Arg::Number(lease_ms),
            Arg::Word(if wait { "1" } else { "0" }),
        ];
        let ran = self.run(on, &self.upgrade, &args).await?;
        granted_only_if_confirmed(on.target.key, ran, "upgrade", (2, AttemptReply::Gone))
    }

    /// Renews the named holds of each owner (and no other hold: see `lua/renew.lua`);
    /// for each owner, the ids of those it still has.
    pub async fn renew(
        &self,
        on: On<'_>,
        lease_ms: u64,
        owners: &[(&str, &[u64])],
    ) -> Result<Renewed> {
        let each: Vec<String> = owners.iter().map(|(o, ids)| renew_arg(o, ids)).collect();
        let mut args = vec![Arg::Number(lease_ms)];
        args.extend(each.iter().map(|a| Arg::Text(a)));
        let ran = self.run(on, &self.renew, &args).await?;
        let (value, replaceable_after) = ran.vouched(on.target.key)?;
        Ok(Renewed {
            present: parse_renew(on.target.key, value)?,
            replaceable_after,
        })
    }

    /// Leaves the writer queue and gives back hold `hold` if it was handed over.
    pub async fn withdraw(
        &self,
        on: On<'_>,
        owner: &str,
        hold: u64,
        upgrading_from: Option<u64>,
    ) -> Result<()> {
        let mut args = vec![Arg::Text(owner), Arg::Number(hold)];
        args.extend(upgrading_from.map(Arg::Number));
        status(
            on.target.key,
            self.run(on, &self.withdraw, &args).await?.value,
        )?;
        Ok(())
    }

    /// Removes every hold (or `only`'s), tells the waiters, raises the fence: the holds
    /// removed and the fence.
    pub async fn force_release(
        &self,
        on: On<'_>,
        only: Breaking<'_>,
    ) -> Result<(u64, Option<u64>, u64)> {
        let args = match only {
            Breaking::Everyone => vec![Arg::Word("")],
            Breaking::Owner(o) => vec![Arg::Text(o)],
            Breaking::Client(c) => vec![Arg::Text(c), Arg::Word("c")],
        };
        let parts = status(
            on.target.key,
            self.run(on, &self.force_release, &args).await?.value,
        )?;
        if code(&parts)? != 1 {
            return Err(Error::Protocol(format!(
                "force_release: code {:?}",
                parts.first()
            )));
        }
        let removed = parts
            .get(1)
            .map(int)
            .transpose()?
            .and_then(|n| u64::try_from(n).ok())
            .ok_or_else(|| Error::Protocol("force_release: no count".into()))?;
        let places = match parts.get(3) {
            Some(n) => u64::try_from(int(n)?).unwrap_or(0),
            None => 0,
        };
        Ok((removed, optional_fence(parts.get(2))?, places))
    }

    /// The fence, the holders, the queued writers and the queued readers.
    pub async fn state(&self, on: On<'_>) -> Result<RawState> {
        let parts = status(on.target.key, self.run(on, &self.state, &[]).await?.value)?;
        if code(&parts)? != 1 {
            return Err(Error::Protocol(format!("state: code {:?}", parts.first())));
        }
        let fence = optional_fence(parts.get(1))?;
        let (Some(Value::Array(held)), Some(Value::Array(queued))) = (parts.get(2), parts.get(3))
        else {
            return Err(Error::Protocol("state: missing lists".into()));
        };
        let mut holders = Vec::new();
        for chunk in held.chunks(8) {
            let [o, r, w, u, left, held_for, renewed, lease] = chunk else {
                return Err(Error::Protocol("state: short holder entry".into()));
            };
            holders.push(RawHolder {
                owner: text(o)?,
                read: count(r)?,
                write: count(w)?,
                upgradable: count(u)?,
                lease_left_ms: u64::try_from(int(left)?).unwrap_or(0),
                held_ms: u64::try_from(int(held_for)?).unwrap_or(0),
                renewed_ago_ms: u64::try_from(int(renewed)?).unwrap_or(0),
                lease_ms: u64::try_from(int(lease)?).unwrap_or(0),
            });
        }
        let queued = queued.iter().map(text).collect::<Result<Vec<_>>>()?;
        let queued_readers = match parts.get(4) {
            Some(Value::Array(readers)) => readers.iter().map(text).collect::<Result<_>>()?,
            _ => return Err(Error::Protocol("state: missing readers".into())),
        };
        Ok(RawState {
            fence,
            holders,
            queued,
            queued_readers,
        })
    }

    /// Runs a guarded call (`lua/guarded.lua`) while hold `id` of `owner` is on the
    /// server, confirmed as `on` says: the branch that ran and each command's reply (or
    /// its error's message), or the condition or command that failed (nothing the call
    /// did stays written). [`Error::LockLost`] when the hold is gone (nothing ran);
    /// [`Error::WriteNotReplicated`] when the commands ran on the master but too few
    /// replicas acknowledged them in time. The reply's code is read first: a hold found
    /// gone is `LockLost` whatever the replicas did (nothing ran to confirm).
    pub async fn guarded(
        &self,
        on: On<'_>,
        owner: &str,
        id: u64,
        call: &GuardedCall<'_>,
    ) -> Result<GuardedReply> {
        let mut args: Vec<Value> = Vec::with_capacity(3 + call.words.len());
        args.push(owner.into());
        args.push(id.to_string().into());
        args.push(
            format!(
                "{} {} {}",
                u8::from(call.writes),
                call.conditions,
                call.then
            )
            .into(),
        );
        args.extend(call.words.iter().map(|w| Value::Bytes(w.clone().into())));
        let key = on.target.key;
        let keys = call
            .keys
            .iter()
            .map(|k| Value::Bytes(k.clone().into()))
            .collect();
        let ran = self.run_with(on, &self.guarded, keys, args).await?;
        let parts = status(key, ran.value.clone())?;
        match code(&parts)? {
            1 => ran.write_confirmed(key)?,
            2 => return Err(Error::LockLost),
            -5 => {
                return Err(Error::InvalidCommand(
                    "a command writes and the hold is not a write hold".into(),
                ))
            }
            -6 => {
                return Err(Error::LockKey {
                    key: key.to_string(),
                })
            }
            -8 => {
                let (Some(branch), Some(index), Some(message)) =
                    (parts.get(1), parts.get(2), parts.get(3))
                else {
                    return Err(Error::Protocol("guarded: a short refusal".into()));
                };
                // (a fifth element, 1: the commands before it ran and were undone)
                let undone = match parts.get(4) {
                    Some(u) => int(u)? == 1,
                    None => false,
                };
                return Ok(GuardedReply::Refused {
                    branch: text(branch)?,
                    index: u32::try_from(int(index)?).unwrap_or(0),
                    message: text(message)?,
                    undone,
                });
            }
            c => return Err(Error::Protocol(format!("guarded: code {c}"))),
        }
        let (Some(held), Some(failed), Some(Value::Array(replies))) =
            (parts.get(1), parts.get(2), parts.get(3))
        else {
            return Err(Error::Protocol("guarded: no replies".into()));
        };
        let replies = replies
            .iter()
            .map(|r| match r {
                Value::Array(pair) => match (pair.first(), pair.get(1)) {
                    (Some(Value::Integer(0)), reply) => {
                        Ok(Ok(reply.cloned().unwrap_or(Value::Null)))
                    }
                    (Some(Value::Integer(1)), Some(message)) => Ok(Err(text(message)?)),
                    _ => Err(Error::Protocol("guarded: a malformed reply".into())),
                },
                _ => Err(Error::Protocol("guarded: a malformed reply".into())),
            })
            .collect::<Result<_>>()?;
        Ok(GuardedReply::Ran {
            held: int(held)? == 1,
            failed: u32::try_from(int(failed)?).unwrap_or(0),
            replies,
        })
    }

    /// Stores `value` at `on`'s key with `fence` unless a higher fence wrote there
    /// (`lua/fenced_set.lua`), confirmed as `on` says: whether it was written, and the
    /// fence that wrote last.
    pub async fn fenced_set(&self, on: On<'_>, fence: u64, value: &[u8]) -> Result<(bool, u64)> {
        let key = on.target.key;
        let args = vec![
            fence.to_string().into(),
            Value::Bytes(value.to_vec().into()),
        ];
        let ran = self
            .run_with(on, &self.fenced_set, Vec::new(), args)
            .await?;
        let parts = status(key, ran.value.clone())?;
        let last = optional_fence(parts.get(1))?
            .ok_or_else(|| Error::Protocol("fenced_set: no fence".into()))?;
        match code(&parts)? {
            // a write counts once the replicas have it
            1 => ran.write_confirmed(key).map(|_| (true, last)),
            0 => Ok((false, last)),
            c => Err(Error::Protocol(format!("fenced_set: code {c}"))),
        }
    }

    /// Renews many locks of ONE node in one pipeline (one round trip); the result for each
    /// item is what [`renew`](Self::renew) returns (an error for an item the caller should
    /// renew again on its own, e.g. after a library missing on a node restarted empty).
    pub async fn renew_pipeline(
        &self,
        lane: &Lane,
        counters: &Counters,
        items: &[RenewItem],
        confirm: Option<Confirm>,
        vouch: Option<crate::cluster::vouch::Vouch<'_>>,
    ) -> Vec<Result<Renewed>> {
        let calls: Vec<Vec<Value>> = items
            .iter()
            .map(|item| {
                let mut args: Vec<Value> = Vec::with_capacity(1 + item.owners.len());
                args.push(item.lease_ms.to_string().into());
                args.extend(
                    item.owners
                        .iter()
                        .map(|(o, ids)| Value::from(renew_arg(o, ids))),
                );
                fcall_args(&self.renew, &item.key, Vec::new(), args)
            })
            .collect();
        let (replies, unconfirmed) = self.run_many(lane, counters, calls, confirm, vouch).await;
        if let Some(u) = unconfirmed
            .as_ref()
            .filter(|u| u.replaceable_after.is_none())
        {
            crate::observe::not_replicated("(renewal)", u.wanted, u.acked, &u.silent);
        }
        // a call that failed (its connection lost, a redirect, a library missing) is its own error,
        // for the caller to send again on its own, routed afresh; one that ran counts
        // only if confirmed
        items
            .iter()
            .zip(replies)
            .map(|(item, reply)| match (reply, &unconfirmed) {
                (Ok(v), Some(u)) => match u.replaceable_after {
                    Some(at) => Ok(Renewed {
                        present: parse_renew(&item.key, v)?,
                        replaceable_after: Some(at),
                    }),
                    None => Err(Error::NotReplicated {
                        wanted: u.wanted,
                        acked: u.acked,
                        silent: u.silent.clone(),
                    }),
                },
                (Ok(v), None) => Ok(Renewed {
                    present: parse_renew(&item.key, v)?,
                    replaceable_after: None,
                }),
                (Err(e), _) => Err(e),
            })
            .collect()
    }
}

/// An attempt's outcome from its reply: a grant counts only when its writes were
/// confirmed, or the other masters vouched for its master when they were not (the
/// grant then carries until when: see `AttemptReply::Granted`); otherwise
/// [`Error::NotReplicated`]: what the function did stays on the master, for the caller
/// to undo. A refusal counts either way (a writer's place in the queue that a replica
/// misses costs it only its place, after a failover).
fn granted_only_if_confirmed(
    key: &str,
    ran: Ran,
    script: &str,
    other: (i64, AttemptReply),
) -> Result<AttemptReply> {
    let outcome = attempt(script, &status(key, ran.value)?, other)?;
    match (outcome, ran.unconfirmed) {
        (
            AttemptReply::Granted {
                fence,
                others,
                lease,
                ..
            },
            Some(Unconfirmed {
                replaceable_after: Some(at),
                ..
            }),
        ) => Ok(AttemptReply::Granted {
            fence,
            others,
            lease,
            replaceable_after: Some(at),
        }),
        (AttemptReply::Granted { .. }, Some(u)) => Err(not_replicated(key, u)),
        _ => Ok(outcome),
    }
}

/// What a renewal found: for each owner, the ids of its holds still there; and, when
/// the replicas did not confirm it, what the other masters vouched for (see
/// `AttemptReply::Granted`'s field of the same name).
#[derive(Debug)]
pub(crate) struct Renewed {
    pub present: Vec<Vec<u64>>,
    pub replaceable_after: Option<tokio::time::Instant>,
}

/// One lock's renewal in a batch: key, and each owner with the ids of its holds that
/// are to be renewed.
#[derive(Clone)]
pub(crate) struct RenewItem {
    pub key: String,
    /// The lease the holds are renewed for.
    pub lease_ms: u64,
    pub owners: Vec<(String, Vec<u64>)>,
}

/// renew.lua's argument for one owner: `<owner> <id> <id> ...`.
pub(super) fn renew_arg(owner: &str, ids: &[u64]) -> String {
    let mut arg = owner.to_string();
    for id in ids {
        arg.push(' ');
        arg.push_str(&id.to_string());
    }
    arg
}
