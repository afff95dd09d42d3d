"""The exceptions of cluster_rwlock: one class per kind of the Rust client's error.

Every one is a :class:`LockError` and has ``is_retryable``: whether the same call may
succeed if made again a little later, unchanged (no answer in time, a failover, a grant
the replicas did not confirm, a lock held by others until the timeout). Classes that
are also Python's own (``TimeoutError``, ``ConnectionError``, ``ValueError``,
``PermissionError``) derive from them too, so generic handlers catch them. A kind that
refines another derives from it (:class:`InvalidOwner` from :class:`InvalidConfig`,
:class:`WriteNotReplicated` from :class:`NotReplicated`, :class:`WrongSlot` and
:class:`LockKey` from :class:`InvalidCommand`, :class:`NotSetUp` from
:class:`PermissionDenied`), so a handler of the broader kind catches it. A failure to
connect to a node is raised as the class of its cause, with the node's ``addr``
(``host:port``).
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
    "InvalidOwner",
    "WriteNotReplicated",
    "WrongSlot",
    "LockKey",
    "WrongType",
    "Corrupt",
    "OtherLayout",
    "NotSetUp",
    "Unsupported",
    "ProtocolError",
    "ServerError",
    "ConnectionFailed",
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
    """The server could not be reached or did not answer in time. Retryable. When a
    connection failed on the client's side, ``kind`` says how (``"io"``: refused, reset
    or broken; ``"timeout"``; ``"not_sent"``: nothing was sent; ``"closed"``: cancelled
    as its connection closed, it may or may not have run)."""


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
    """The server refused a command, key or channel to this ACL user (``code``:
    ``NOPERM``, or ``NOAUTH``/``WRONGPASS`` for missing or wrong credentials; ``reply``:
    the server's whole reply), or the lock's functions are not loaded and this user may
    not load them (:class:`NotSetUp`). Not retryable."""


class Closed(LockError):
    """The client was closed."""


class InvalidOwner(InvalidConfig):
    """An explicit owner token (``force_release(name, owner)``) is empty, longer than
    256 bytes, or contains whitespace."""


class WriteNotReplicated(NotReplicated):
    """A write (a guarded call, :meth:`Client.fenced_set`) RAN on the master, but too few
    replicas acknowledged it in time (``acked`` of ``wanted``; ``written`` is true): it
    stays written, nothing was undone, and a failover now may lose it. Not retryable as
    is: the same write again could apply twice (an ``HINCRBY``); read the data back
    first."""


class WrongSlot(InvalidCommand):
    """A guarded command names a key (``key``, in slot ``key_slot``) outside the lock's
    slot (``lock_slot``); ``hint`` says what would put them in one slot. Nothing was
    sent."""

    key: str
    key_slot: int
    lock_slot: int
    hint: str


class LockKey(InvalidCommand):
    """A guarded command or a fenced write names a key (``key``) that belongs to a lock:
    the hash or the release channel of any lock under the client's prefix. Writing it
    would break the lock. Nothing was sent."""

    key: str


class WrongType(LockError):
    """The key ``key`` holds a value of another type (``found``) than the call reads and
    writes: a lock's key that is not a lock hash, or a key of
    :meth:`Client.fenced_set` that is not a hash. Nothing was changed."""

    key: str
    found: str


class Corrupt(LockError):
    """The lock's hash ``key`` holds a field or value (``field``) this library did not
    write."""

    key: str
    field: str


class OtherLayout(LockError):
    """The lock's hash ``key`` was written by a client of another layout version
    (``found``). Nothing was changed: the two cannot share a lock; stop the other
    clients, or let the hash expire."""

    key: str
    found: str


class NotSetUp(PermissionDenied):
    """The lock's function library (``library``) is not loaded on the master ``node``
    (or an older revision is), and this user may not load it: run
    ``cluster-rwlock setup --url <url>`` once as a user allowed ``FUNCTION LOAD``."""

    node: str
    library: str


class Unsupported(LockError):
    """The server lacks what the lock needs (Redis Functions and sharded pub/sub: Redis
    7.0 or later, Valkey 7.2 or later)."""


class ProtocolError(LockError):
    """The server sent a reply this library cannot read, or a key read as a value of
    :meth:`Client.fenced_set` is not one. (The Rust error's ``Protocol``; named so as not
    to hide ``typing.Protocol`` under ``from cluster_rwlock import *``.)"""


class ServerError(LockError):
    """The server answered with an error other than a refused permission: the cluster
    down (``CLUSTERDOWN``), a redirect that could not be followed in time (``MOVED``), a
    script error, ... ``code`` is the reply's first word, ``reply`` the whole reply.
    Retryable when the cluster is changing hands (``CLUSTERDOWN``, ``TRYAGAIN``,
    ``READONLY``, ``MASTERDOWN``, ``LOADING``, ``MOVED``, ``ASK``)."""

    code: str
    reply: str


class ConnectionFailed(LockError, ConnectionError):
    """Talking to a node failed on the client's side in a way that would fail again:
    TLS (``kind`` ``"tls"``: a certificate refused, a handshake that did not finish) or
    a reply it could not read (``"protocol"``). Not retryable. (A node that could not be
    reached or did not answer raises :class:`Unavailable`.)"""

    kind: str


class ReplyError(Exception):
    """A command's error reply (not raised). A guarded call whose command fails raises
    :class:`CommandFailed` instead (all or nothing): its replies hold none."""
