//! Guarded commands: Redis commands on keys of the lock's slot that run only while the
//! hold is on the server. One builder, [`Guarded`]: made under a guard
//! ([`Grant::guarded`]) and run by [`run`](Guarded::run), or made and checked before the
//! lock is taken ([`Guarded::new`]) and run under a guard later
//! ([`run_under`](Guarded::run_under)).

mod commands; // the commands a guarded call may run, and their checks
mod condition; // the conditions of a guarded call
mod outcome; // what a guarded call did, from the function's reply
mod reply; // one command's reply

pub use commands::{check_command, commands, MAX_WORDS};
pub use condition::{Compare, Condition};
pub use outcome::Outcome;
pub use reply::Reply;

use super::{Grant, RwLock};
use crate::error::{Error, Result};
use crate::mode::Mode;
use commands::{check_key, checked, Checked};
use outcome::outcome_of;

/// Commands to run while a hold is on the server: add conditions with
/// [`when`](Self::when) and commands with [`command`](Self::command) (or the
/// shorthands), then run them, all in one function call on the lock's node.
///
/// Made two ways, one builder: under a guard already held ([`Grant::guarded`], a
/// `Guarded<&Grant>`), then [`run`](Self::run) or [`commit`](Self::commit); or before the
/// lock is taken ([`Guarded::new`], a `Guarded<Unbound>`), for a caller that must not wait
/// for a lock to find its commands refused (the CLI's `exec`) or that builds its call
/// once: [`check`](Self::check) it, then [`run_under`](Self::run_under) or
/// [`commit_under`](Self::commit_under) a guard of the same lock.
///
/// What is atomic: the hold's check, the conditions and the commands run as one function
/// call on one node, with nothing else in between; nothing runs if the hold is gone.
/// What is all-or-nothing: every command of the branch chosen succeeds, or the call
/// fails with [`Error::CommandFailed`] (`nothing_ran`) and NO key it names is changed,
/// neither its value nor its expiry. Most failures are found before the first command
/// runs: each is checked against the keys as they are and as the commands before it
/// leave them: the arguments it takes (before sending), its key's type (what would be
/// `WRONGTYPE`), and the value an `INCR`/`DECR`/`HINCRBY` or kin adds to (what cannot be
/// told passes: no call that would succeed is refused). For the rest (an overflow, a bad
/// option, a value written earlier in the same call), the function reads each key a
/// command writes before it runs (`DUMP` and `PEXPIRETIME`, once per key and call, none
/// for the branch's last command) and puts them back (`RESTORE`, `DEL`) when a later
/// command fails (`undone`). The application's user needs `+dump +restore +pexpiretime
/// +del` for that (docs/SECURITY.md); without, a call whose keys cannot be read fails
/// before its command runs, all the same undone.
///
/// ```no_run
/// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
/// // the lock `orders:{42}` lives in the slot of `{42}`, with the order's data
/// let guard = lock.write().await?;
/// let replies = guard
///     .guarded()
///     .set("orders:{42}:status", "paid")
///     .command("HINCRBY", ["stock:{42}", "n", "-1"])
///     .run()
///     .await?; // Error::LockLost, and nothing written, if the hold is gone
/// assert_eq!(replies[1].as_i64(), Some(9));
/// guard.release().await?;
/// # Ok(()) }
/// ```
///
/// Built before the lock is taken:
///
/// ```no_run
/// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
/// use cluster_rwlock::guarded::{Condition, Guarded};
/// let call = Guarded::new(&lock)
///     .when(Condition::field("stock:{42}", "n").gt(0))
///     .command("HINCRBY", ["stock:{42}", "n", "-1"])
///     .command("RPUSH", ["orders:{42}", "order-7"])
///     .check()?; // a mistake is found here, before waiting for the lock
/// let guard = lock.write().await?;
/// let out = call.commit_under(&guard).await?;
/// guard.release().await?;
/// println!("sold: {}", out.succeeded);
/// # Ok(()) }
/// ```
#[must_use = "nothing is sent until it is run"]
pub struct Guarded<U = Unbound> {
    /// The guard it runs under: [`Unbound`] until one is given.
    under: U,
    lock: RwLock,
    /// The mode of the hold it is built under, when known (made by [`Grant::guarded`]).
    mode: Option<Mode>,
    /// The conditions' words, each led by its count.
    conditions: Vec<Vec<u8>>,
    condition_count: u32,
    /// The then-branch's and the else-branch's words, and their commands' names.
    then: (Vec<Vec<u8>>, Vec<String>),
    otherwise: (Vec<Vec<u8>>, Vec<String>),
    in_else: bool,
    keys: Vec<Vec<u8>>,
    writes: bool,
    /// The first mistake: running returns it, sending nothing.
    refused: Option<Error>,
}

/// The guard a [`Guarded`] made by [`Guarded::new`] has not yet: it runs with
/// [`run_under`](Guarded::run_under) or [`commit_under`](Guarded::commit_under).
///
/// ```no_run
/// # fn demo(lock: cluster_rwlock::RwLock) {
/// use cluster_rwlock::guarded::{Guarded, Unbound};
/// let call: Guarded<Unbound> = Guarded::new(&lock).get("orders:{42}:status");
/// # let _ = call;
/// # }
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Unbound;

impl<U> std::fmt::Debug for Guarded<U> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Guarded")
            .field("lock", &self.lock.name())
            .field("conditions", &self.condition_count)
            .field("then", &self.then.1)
            .field("otherwise", &self.otherwise.1)
            .field("writes", &self.writes)
            .field("refused", &self.refused)
            .finish()
    }
}

impl Guarded {
    /// An empty call on `lock`'s slot, to run under a guard of `lock` later.
    ///
    /// ```no_run
    /// # fn demo(lock: cluster_rwlock::RwLock) {
    /// let call = cluster_rwlock::guarded::Guarded::new(&lock).set("orders:{42}:status", "paid");
    /// assert!(call.writes());
    /// # }
    /// ```
    pub fn new(lock: &RwLock) -> Guarded {
        Guarded::empty(Unbound, lock, None)
    }
}

impl<'a> Guarded<&'a Grant> {
    /// A call to run under `grant` (see [`Grant::guarded`]).
    pub(crate) fn bound(grant: &'a Grant) -> Guarded<&'a Grant> {
        Guarded::empty(grant, &grant.lock, Some(grant.mode()))
    }

    /// Runs the call in one function call on the lock's node, after checking there that
    /// the hold is still there and its lease, by the server's clock, has not run out,
    /// and that every condition holds: each command's reply, in order. A command that
    /// fails fails the call, with nothing it did left written (see the type's docs).
    ///
    /// Confirmed as grants are (see [`Durability`](crate::Durability)): by default the
    /// replies come back once the replicas that could be promoted have the writes, so
    /// that a confirmed write survives a failover with the hold.
    ///
    /// # Cancel safety
    /// Once sent, the commands run whether or not the future is awaited to the end; a
    /// dropped future does not tell whether they ran.
    ///
    /// # Errors
    /// - [`Error::LockLost`]: the hold is not on the server (its lease ran out, it was
    ///   broken by [`force_release`](crate::LockClient::force_release), or lost in a
    ///   failover): NOTHING ran.
    /// - [`Error::ConditionFailed`]: a condition did not hold: the else-branch ran (use
    ///   [`commit`](Self::commit) for its replies).
    /// - [`Error::CommandFailed`] with `nothing_ran`: a condition or command failed (a
    ///   key of another type, a value that is not an integer, an overflow): NOTHING the
    ///   call did stays written (`undone`: the commands before it ran and were put back).
    ///   Without `nothing_ran`, putting back failed (a user refused `RESTORE` or `DEL`):
    ///   the commands before it stay written.
    /// - [`Error::InvalidCommand`], [`Error::WrongSlot`], [`Error::LockKey`]: a command
    ///   that may not run, a write under a read hold, a key outside the lock's slot or
    ///   one that belongs to a lock: nothing was sent.
    /// - [`Error::WriteNotReplicated`]: the commands RAN on the master (nothing is
    ///   undone), but too few replicas acknowledged them in time: a failover now may lose
    ///   them (and the hold). Read the data back before writing again.
    /// - [`Error::Unavailable`]: no answer in time; the commands may or may not have run
    ///   (they are not sent again, since running them twice could write twice).
    pub async fn run(self) -> Result<Vec<Reply>> {
        let grant = self.under;
        self.run_under(grant).await
    }

    /// As [`run`](Self::run), telling which branch ran instead of failing when a
    /// condition does not hold: etcd's `Txn` commit.
    ///
    /// ```no_run
    /// # async fn demo(guard: cluster_rwlock::WriteGuard) -> cluster_rwlock::Result<()> {
    /// use cluster_rwlock::guarded::Condition;
    /// let out = guard
    ///     .guarded()
    ///     .when(Condition::field("stock:{42}", "n").gt(0))
    ///     .command("HINCRBY", ["stock:{42}", "n", "-1"])
    ///     .commit()
    ///     .await?;
    /// println!("sold: {}, left: {:?}", out.succeeded, out.replies.first());
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// As [`run`](Self::run).
    ///
    /// # Errors
    /// As [`run`](Self::run), but a condition that does not hold is no error.
    pub async fn commit(self) -> Result<Outcome> {
        let grant = self.under;
        self.commit_under(grant).await
    }

    /// As [`run`](Self::run), which now fails any call whose command failed with
    /// [`Error::CommandFailed`] itself (all or nothing): kept for the callers that used
    /// it when a command failing while running was a [`Reply::Error`].
    ///
    /// ```no_run
    /// # async fn demo(guard: cluster_rwlock::WriteGuard) -> cluster_rwlock::Result<()> {
    /// let replies = guard
    ///     .guarded()
    ///     .command("HINCRBY", ["stock:{42}", "n", "-1"])
    ///     .run_checked()
    ///     .await?; // Err(CommandFailed { command: "HINCRBY", .. }) on a bad value
    /// let left = replies[0].as_i64();
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// As [`run`](Self::run).
    ///
    /// # Errors
    /// As [`run`](Self::run), and [`Error::CommandFailed`].
    pub async fn run_checked(self) -> Result<Vec<Reply>> {
        self.run().await
    }
}

impl<U> Guarded<U> {
    /// An empty call on `lock`'s slot, to run under `under`, built under a hold of
    /// `mode` when known.
    fn empty(under: U, lock: &RwLock, mode: Option<Mode>) -> Guarded<U> {
        Guarded {
            under,
            lock: lock.clone(),
            mode,
            conditions: Vec::new(),
            condition_count: 0,
            then: (Vec::new(), Vec::new()),
            otherwise: (Vec::new(), Vec::new()),
            in_else: false,
            keys: Vec::new(),
            writes: false,
            refused: None,
        }
    }

    fn declare(&mut self, key: &[u8]) {
        if !self.keys.iter().any(|k| k == key) {
            self.keys.push(key.to_vec());
        }
    }

    /// Adds a condition, checked on the server before any command runs: the commands run
    /// only when every condition holds; when one does not, those added after
    /// [`otherwise`](Self::otherwise) run instead (none by default). [`run`](Self::run)
    /// then says [`Error::ConditionFailed`]; [`commit`](Self::commit) says which branch
    /// ran. The key must be in the lock's slot, as a command's.
    ///
    /// ```no_run
    /// # async fn demo(guard: cluster_rwlock::WriteGuard) -> cluster_rwlock::Result<()> {
    /// use cluster_rwlock::guarded::Condition;
    /// // decrement if > 0, in one call
    /// let sold = guard
    ///     .guarded()
    ///     .when(Condition::field("stock:{42}", "n").gt(0))
    ///     .command("HINCRBY", ["stock:{42}", "n", "-1"])
    ///     .command("RPUSH", ["orders:{42}", "order-7"])
    ///     .commit()
    ///     .await?
    ///     .succeeded;
    /// # Ok(()) }
    /// ```
    pub fn when(mut self, condition: Condition) -> Self {
        if self.refused.is_some() {
            return self;
        }
        if let Err(e) = check_key(&self.lock, condition.key()) {
            self.refused = Some(e);
            return self;
        }
        self.declare(condition.key());
        self.conditions
            .push(condition.words.len().to_string().into_bytes());
        self.conditions.extend(condition.words);
        self.condition_count += 1;
        self
    }

    /// The commands added from here on run when a condition does not hold (etcd's
    /// `Else`).
    ///
    /// ```no_run
    /// # async fn demo(guard: cluster_rwlock::WriteGuard) -> cluster_rwlock::Result<()> {
    /// use cluster_rwlock::guarded::Condition;
    /// let out = guard
    ///     .guarded()
    ///     .when(Condition::value("orders:{42}:status").eq("new"))
    ///     .set("orders:{42}:status", "paid")
    ///     .otherwise()
    ///     .get("orders:{42}:status")
    ///     .commit()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn otherwise(mut self) -> Self {
        self.in_else = true;
        self
    }

    /// Adds the command `name` with its arguments, keys first (`SET key value`, `HINCRBY
    /// key field n`, `DEL key key ...`). Arguments are bytes, so any value may be sent
    /// (the fence is [`Grant::fence`], known before the call: put it in any argument).
    /// The commands allowed are those on keys that neither block nor publish nor touch
    /// scripts, the cluster or the server (strings, hashes, lists, sets, sorted sets,
    /// `DEL`, `EXPIRE`, ...; see the crate docs); a command that writes needs a write
    /// hold. A command outside that set, with too few or too many arguments (or a word
    /// that must be an integer and is not), a key outside the lock's slot, or a key that
    /// belongs to a lock (the hash or release channel of ANY lock under the client's
    /// prefix: [`Error::LockKey`]) makes [`run`](Self::run) fail without sending
    /// anything; so does a command of more than [`MAX_WORDS`] words. [`check_command`] tells the
    /// same without a hold.
    ///
    /// ```no_run
    /// # async fn demo(guard: cluster_rwlock::WriteGuard) -> cluster_rwlock::Result<()> {
    /// let fence = guard.fence().to_string();
    /// guard
    ///     .guarded()
    ///     .command("HSET", ["orders:{42}", "status", "paid", "fence", fence.as_str()])
    ///     .run()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn command<I, A>(mut self, name: &str, args: I) -> Self
    where
        I: IntoIterator<Item = A>,
        A: AsRef<[u8]>,
    {
        if self.refused.is_some() {
            return self;
        }
        let args = args.into_iter().map(|a| a.as_ref().to_vec()).collect();
        match checked(&self.lock, self.mode, name, args) {
            Err(e) => self.refused = Some(e),
            Ok(Checked {
                words,
                writes,
                keys,
            }) => {
                for key in &keys {
                    self.declare(key);
                }
                self.writes |= writes;
                let branch = if self.in_else {
                    &mut self.otherwise
                } else {
                    &mut self.then
                };
                branch
                    .1
                    .push(String::from_utf8_lossy(&words[2]).into_owned());
                branch.0.extend(words);
            }
        }
        self
    }

    /// `SET key value`.
    ///
    /// ```no_run
    /// # async fn demo(guard: cluster_rwlock::WriteGuard) -> cluster_rwlock::Result<()> {
    /// guard.guarded().set("orders:{42}:status", "paid").run().await?;
    /// # Ok(()) }
    /// ```
    pub fn set(self, key: &str, value: impl AsRef<[u8]>) -> Self {
        self.command("SET", [key.as_bytes(), value.as_ref()])
    }

    /// `GET key`.
    ///
    /// ```no_run
    /// # async fn demo(guard: cluster_rwlock::ReadGuard) -> cluster_rwlock::Result<()> {
    /// let status = guard.guarded().get("orders:{42}:status").run().await?;
    /// println!("{:?}", status[0].as_str());
    /// # Ok(()) }
    /// ```
    pub fn get(self, key: &str) -> Self {
        self.command("GET", [key])
    }

    /// `DEL key`.
    ///
    /// ```no_run
    /// # async fn demo(guard: cluster_rwlock::WriteGuard) -> cluster_rwlock::Result<()> {
    /// guard.guarded().del("orders:{42}:draft").run().await?;
    /// # Ok(()) }
    /// ```
    pub fn del(self, key: &str) -> Self {
        self.command("DEL", [key])
    }

    /// Whether a command writes: the call needs a write hold.
    ///
    /// ```no_run
    /// # fn demo(lock: cluster_rwlock::RwLock) {
    /// assert!(!cluster_rwlock::guarded::Guarded::new(&lock).get("orders:{42}").writes());
    /// # }
    /// ```
    pub fn writes(&self) -> bool {
        self.writes
    }

    /// The call, or the first mistake in it (what [`run`](Self::run) would return
    /// without sending anything): check it before taking the lock.
    ///
    /// ```no_run
    /// # fn demo(lock: cluster_rwlock::RwLock) {
    /// use cluster_rwlock::guarded::Guarded;
    /// assert!(Guarded::new(&lock).command("HINCRBY", ["stock:{42}", "n"]).check().is_err());
    /// # }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidCommand`] (a command that may not run, or with the wrong number
    /// of arguments, or a word that must be a number and is not), [`Error::WrongSlot`],
    /// [`Error::LockKey`].
    pub fn check(self) -> Result<Self> {
        match self.refused {
            Some(e) => Err(e),
            None => Ok(self),
        }
    }

    /// Runs the call under `guard` (a guard of the same lock): the replies of the
    /// commands that ran ([`run`](Guarded::run)'s rules).
    ///
    /// # Cancel safety
    /// As [`run`](Guarded::run).
    ///
    /// # Errors
    /// As [`run`](Guarded::run); [`Error::InvalidCommand`] for a guard of another lock, or a
    /// command that writes under a read guard (nothing sent).
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// let call = cluster_rwlock::guarded::Guarded::new(&lock).get("orders:{42}:status").check()?;
    /// let guard = lock.read().await?;
    /// let replies = call.run_under(&guard).await?;
    /// # Ok(()) }
    /// ```
    pub async fn run_under(self, guard: &Grant) -> Result<Vec<Reply>> {
        let out = self.commit_under(guard).await?;
        match out.failed_condition {
            Some(index) => Err(Error::ConditionFailed { index }),
            None => Ok(out.replies),
        }
    }

    /// Runs the call under `guard`: which branch ran, and its replies
    /// ([`commit`](Guarded::commit)'s rules).
    ///
    /// # Cancel safety
    /// As [`run`](Guarded::run).
    ///
    /// # Errors
    /// As [`run_under`](Self::run_under), but a condition that does not hold is no error.
    ///
    /// ```no_run
    /// # async fn demo(lock: cluster_rwlock::RwLock) -> cluster_rwlock::Result<()> {
    /// use cluster_rwlock::guarded::{Condition, Guarded};
    /// let call = Guarded::new(&lock)
    ///     .when(Condition::missing("orders:{42}:paid"))
    ///     .set("orders:{42}:paid", "1");
    /// let guard = lock.write().await?;
    /// let paid_now = call.commit_under(&guard).await?.succeeded;
    /// # Ok(()) }
    /// ```
    pub async fn commit_under(self, guard: &Grant) -> Result<Outcome> {
        if let Some(e) = self.refused {
            return Err(e);
        }
        if guard.lock.key() != self.lock.key() {
            return Err(Error::InvalidCommand(format!(
                "a guarded call built for the lock {:?} run under a guard of {:?}",
                self.lock.name(),
                guard.lock.name()
            )));
        }
        if self.writes && guard.mode() != Mode::Write {
            return Err(Error::InvalidCommand(format!(
                "a command writes, and this is a {} hold (writes need a write hold)",
                guard.mode().as_str()
            )));
        }
        if self.condition_count == 0 && self.then.1.is_empty() {
            return Ok(Outcome {
                succeeded: true,
                failed_condition: None,
                replies: Vec::new(),
            });
        }
        let mut words = self.conditions;
        words.extend(self.then.0);
        words.extend(self.otherwise.0);
        let call = crate::scripts::GuardedCall {
            writes: self.writes,
            conditions: self.condition_count,
            then: u32::try_from(self.then.1.len()).unwrap_or(u32::MAX),
            keys: &self.keys,
            words: &words,
        };
        let reply = guard.hold.guarded(&call).await?;
        outcome_of(reply, &self.then.1, &self.otherwise.1)
    }
}
