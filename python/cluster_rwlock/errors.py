"""The exceptions of cluster_rwlock: one class per kind a caller handles differently.

Every one is a :class:`LockError` and has ``is_retryable``: whether the same call may
succeed if made again a little later, unchanged (no answer in time, a failover, a grant
the replicas did not confirm, a lock held by others until the timeout). Classes that
are also Python's own (``TimeoutError``, ``ConnectionError``, ``ValueError``,
``PermissionError``) derive from them too, so generic handlers catch them.
"""

from typing import Any

__all__ = [
    "LockError",
    "Timeout",
    "LockLost",
    "Broken",
    "Unavailable",
    "NotReplicated",
    "UpgradeDeadlock",
    "InvalidName",
    "InvalidConfig",
    "InvalidCommand",
    "ConditionFailed",
    "CommandFailed",
    "PermissionDenied",
    "Closed",
    "ReplyError",
]


class LockError(Exception):
    """An error of the lock. ``is_retryable`` says whether trying again may succeed."""

    is_retryable: bool

    def __init__(self, message: str, *, is_retryable: bool = False, **details: Any) -> None:
        super().__init__(message)
        self.is_retryable = is_retryable
        for name, value in details.items():
            setattr(self, name, value)


class Timeout(LockError, TimeoutError):
    """The lock was not granted within the timeout (``after``, in seconds). Retryable."""

    after: float


class LockLost(LockError):
    """The hold's lease was lost (it ran out before a renewal was confirmed, or the lock
    was broken, or a failover lost it): another owner may hold the lock now. Work done
    under the hold must be treated as possibly overlapping; a fenced resource refuses its
    late writes."""


class Broken(LockError):
    """An operator broke this client (``client``, its name) on the lock while an acquire
    waited (``cluster-rwlock break --client``): its holds and its places in the queue were
    removed, and the acquire stops rather than queue again at the tail. Not retryable:
    the operator meant the client to stop."""

    client: str


class Unavailable(LockError, ConnectionError):
    """The server could not be reached or did not answer in time. Retryable."""


class NotReplicated(LockError):
    """A grant (or a guarded write: then ``written`` is true, and it was NOT undone) did
    not reach the replicas required in time (``acked`` of ``wanted``). A grant that was
    not confirmed does not count and is given back; a wait whose time ran out after such
    a refusal raises this rather than :class:`Timeout`. Retryable. ``silent`` lists the
    replicas that did not acknowledge a grant, as their master lists them (``addr``
    ``ip:port``, ``state``, ``lag``: seconds since their last acknowledgement,
    ``behind``: bytes not acknowledged; ``None`` when unknown): a replica frozen, cut
    off or in a full sync stops grants on its master until it acknowledges again or the
    master drops it (``repl-timeout``)."""

    wanted: int
    acked: int
    written: bool
    silent: list


class UpgradeDeadlock(LockError):
    """This owner holds the lock for read; asking for write would wait for itself."""


class InvalidName(LockError, ValueError):
    """The lock name is empty, too long, or has braces that cannot be what was meant."""


class InvalidConfig(LockError, ValueError):
    """A setting of ``connect()`` (or a lease) is out of range or malformed."""


class InvalidCommand(LockError, ValueError):
    """A guarded command that is refused before anything is sent: not allowed, wrong
    number of arguments, a key outside the lock's slot, or the lock's own key."""


class ConditionFailed(LockError):
    """A guarded call's condition (``index``, from 0) did not hold: the commands after
    ``otherwise()``, if any, ran instead of the others (``commit()`` returns their
    replies)."""

    index: int


class CommandFailed(LockError):
    """A guarded command (``index`` in its branch, from 0, and ``command``) failed with
    ``reply``. A guarded call is all or nothing: with ``nothing_ran`` true (always, but
    when the user may not run ``RESTORE``/``DEL``) nothing the call did stays written,
    no key it names changed, whether the failure was found before anything ran or
    (``undone`` true) the commands before it ran and what they wrote was put back. With
    ``nothing_ran`` false, putting back was refused: the commands before it stay written
    (the message says so), and none after it ran."""

    index: int
    command: str
    reply: str
    nothing_ran: bool
    undone: bool


class PermissionDenied(LockError, PermissionError):
    """The server refused a command, key or channel to this ACL user, or the lock's
    functions are not loaded and this user may not load them (run
    ``cluster-rwlock setup``)."""


class Closed(LockError):
    """The client was closed."""


class ReplyError(Exception):
    """A command's error reply (not raised). A guarded call whose command fails raises
    :class:`CommandFailed` instead (all or nothing): its replies hold none."""
