//! What a guarded call did: [`Outcome`], read from the function's reply.

#[cfg(doc)]
use super::Guarded;
use super::Reply;
use crate::error::{Error, Result};
use crate::scripts::GuardedReply;

/// What a guarded call with conditions did ([`Guarded::commit`]).
///
/// ```no_run
/// # async fn demo(guard: cluster_rwlock::WriteGuard) -> cluster_rwlock::Result<()> {
/// use cluster_rwlock::guarded::Condition;
/// let out = guard
///     .guarded()
///     .when(Condition::field("stock:{42}", "n").gt(0))
///     .command("HINCRBY", ["stock:{42}", "n", "-1"])
///     .otherwise()
///     .command("HGET", ["stock:{42}", "n"])
///     .commit()
///     .await?;
/// if !out.succeeded {
///     println!("sold out: {:?}", out.replies[0]);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Outcome {
    /// Every condition held: the commands before [`otherwise`](Guarded::otherwise)
    /// ran (always, for a call without conditions); else those after it ran.
    pub succeeded: bool,
    /// The first condition that did not hold, by its place (from 0).
    pub failed_condition: Option<u32>,
    /// The replies of the commands that ran, in order (a command that failed is
    /// [`Error::CommandFailed`] instead: all or nothing).
    pub replies: Vec<Reply>,
}

/// The outcome of a call whose then-branch and else-branch ran the commands named
/// `then` and `otherwise`, from the function's reply: a command that failed is
/// [`Error::CommandFailed`], with whether what ran before it was put back.
pub(super) fn outcome_of(
    reply: GuardedReply,
    then: &[String],
    otherwise: &[String],
) -> Result<Outcome> {
    match reply {
        GuardedReply::Refused {
            branch,
            index,
            message,
            undone,
        } => {
            let index = index.saturating_sub(1);
            let command = match branch.as_str() {
                "then" => then.get(index as usize).cloned(),
                "else" => otherwise.get(index as usize).cloned(),
                _ => Some("a condition".to_string()),
            };
            Err(Error::CommandFailed {
                index,
                command: command.unwrap_or_default(),
                message,
                nothing_ran: true,
                undone,
            })
        }
        GuardedReply::Ran {
            held,
            failed,
            replies,
        } => {
            // a command failed and what ran before it could not be put back (a user
            // refused RESTORE or DEL): it stays, and the error says so
            if let Some(index) = replies.iter().position(Result::is_err) {
                let names = if held { then } else { otherwise };
                return Err(Error::CommandFailed {
                    index: u32::try_from(index).unwrap_or(u32::MAX),
                    command: names.get(index).cloned().unwrap_or_default(),
                    message: replies[index].clone().err().unwrap_or_default(),
                    nothing_ran: false,
                    undone: false,
                });
            }
            Ok(Outcome {
                succeeded: held,
                failed_condition: (!held).then(|| failed.saturating_sub(1)),
                replies: replies
                    .into_iter()
                    .map(|r| match r {
                        Ok(v) => Reply::of(v),
                        Err(message) => Reply::Error(message),
                    })
                    .collect(),
            })
        }
    }
}
