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
    not confirmed does not count and is given back. Retryable."""

    wanted: int
    acked: int
    written: bool


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
    """A guarded call's condition (``index``, from 0) did not hold; nothing ran."""

    index: int


class CommandFailed(LockError):
    """A guarded command (``index``, ``command``) failed with ``reply``. With
    ``nothing_ran`` true it was found before anything ran and nothing was written; else
    the commands before it stay written and none after it ran."""

    index: int
    command: str
    reply: str
    nothing_ran: bool


class PermissionDenied(LockError, PermissionError):
    """The server refused a command, key or channel to this ACL user, or the lock's
    functions are not loaded and this user may not load them (run
    ``cluster-rwlock setup``)."""


class Closed(LockError):
    """The client was closed."""


class ReplyError(Exception):
    """A command's error reply, as it appears in :attr:`Outcome.replies` (not raised)."""
