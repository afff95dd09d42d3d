"""A distributed read/write lock for Redis Cluster and Valkey, shared with Rust services.

Many readers or one writer of a shared resource, across processes, machines and
languages: a Python service and a Rust service that name the same lock exclude each
other, because both run the same client (this package is a binding of the Rust crate
``cluster-rwlock``) against the same server-side functions.

    import cluster_rwlock

    client = cluster_rwlock.connect("redis://127.0.0.1:7000", client_name="model-server")
    lock = client.rwlock("orders:{42}")
    with lock.write(timeout=5) as w:
        w.guarded().set("orders:{42}:status", "paid").run()   # only while held
        print("fence", w.fence)

    async with (await cluster_rwlock.connect_async("redis://127.0.0.1:7000")).rwlock("orders:{42}").read():
        ...

Guarantees (the Rust client's; see the crate's docs/GUARANTEES.md):

* Each hold has an owner token; its lease (``lease=``, default 30 s) is renewed every
  third of it while held, and runs by the server's clock.
* A grant is believed only once the replicas confirmed it (``durability="all"``, the
  default); ``durability="master"`` skips that (faster, unsafe across failovers).
* The holder is TOLD when its hold may be lost (``guard.lost`` is set,
  ``guard.is_lost`` is true) before anyone else can be granted the lock: stop and do
  not commit. Every grant has a ``fence`` that only grows; a resource that refuses
  fences lower than it has seen refuses a late holder's writes. Guarded calls write only
  while the hold is on the server.
* Writers are preferred and readers queued before a writer go in before it: neither
  starves. Waiters are woken by release messages (sharded pub/sub), not by polling.

Blocking calls release the GIL and stop on Ctrl-C (``KeyboardInterrupt``; an acquire
given up withdraws its place). Create clients after ``os.fork()``, not before. A process
that exits releases its holds and withdraws its waits on the way out, within a few
seconds in all; a service stopped by SIGTERM does too if it called
:func:`release_on_sigterm`.
"""

import asyncio
import atexit
import signal
import threading
import weakref
from typing import Any, Awaitable, Callable, Dict, Iterable, List, NamedTuple, Optional, Tuple, Union

from . import _native
from . import errors
from .errors import *  # noqa: F401,F403 (the exceptions, listed once: errors.__all__)
from .errors import LockError, LockLost
from .guarded import Compare, Condition, Guarded, Outcome, Word, _word

__all__ = [
    "connect",
    "connect_async",
    "release_on_sigterm",
    "Client",
    "AsyncClient",
    "RwLock",
    "AsyncRwLock",
    "MultiLock",
    "AsyncMultiLock",
    "MultiGuard",
    "Guard",
    "AsyncGuard",
    "Guarded",
    "Condition",
    "Compare",
    "Outcome",
    "Word",
    "FencedWrite",
] + errors.__all__

Urls = Union[str, Iterable[str]]

# What is still held and still connected when the interpreter exits: released and closed
# then, so that a process that ends without releasing does not leave its holds on the
# server until their leases run out.
_held: "weakref.WeakSet[_GuardBase]" = weakref.WeakSet()
_connected: "weakref.WeakSet[_ClientBase]" = weakref.WeakSet()

#: How long, in all, the way out may take to give everything back (seconds): the
#: releases, the withdrawals and the closes run at once; past this, what is left ends
#: with its lease on the server (the cluster is unreachable, or too slow).
EXIT_BOUND = 2.5


def _give_back(park: bool) -> None:
    """Every wait for the lock in flight given up (its place withdrawn; new ones raise
    :class:`Closed`), every hold released and every client closed, within
    ``EXIT_BOUND``. ``park``: the waits given up never return (at interpreter exit only
    daemon threads are left, which the exit ends) rather than raise ``Closed``."""
    try:
        _native.give_back_all([g._native for g in list(_held)], [c._native for c in list(_connected)], EXIT_BOUND, park)
    except Exception:
        pass  # the leases end what could not be given back


@atexit.register
def _give_back_at_exit() -> None:
    _give_back(park=True)


def release_on_sigterm() -> None:
    """Makes SIGTERM (``docker stop``, Kubernetes, systemd) give everything back and
    exit. By default SIGTERM ends the process at once, without ``atexit``: its holds stay
    on the server until their leases end (30 s by default), and its places in the queues
    until a hand-off to them lapses. With this handler, SIGTERM calls the handler set
    before it (a Python one, if any), then withdraws every wait in flight (each raises
    :class:`Closed` in its thread), releases every hold and closes every client (within
    ``EXIT_BOUND``), and exits with status 143 (128 + SIGTERM) by raising
    ``SystemExit(143)`` in the main thread. Call it from the main thread, once, at start.

    >>> import cluster_rwlock
    >>> cluster_rwlock.release_on_sigterm()
    """
    previous = signal.getsignal(signal.SIGTERM)

    def on_sigterm(signum: int, frame: Any) -> None:
        if callable(previous):
            previous(signum, frame)
        _give_back(park=False)
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_sigterm)


def _options(arguments: Dict[str, Any]) -> Dict[str, Any]:
    """connect()'s arguments as the native module takes them: the URLs as a list, and
    only the keywords given (the native side's defaults are the Rust client's)."""
    given = {name: value for name, value in arguments.items() if value is not None}
    urls = given["urls"]
    given["urls"] = [urls] if isinstance(urls, str) else [str(u) for u in urls]
    return given


def _setter(event: Any) -> Callable[[], None]:
    """What sets `event` from any thread: `threading.Event.set`, or, for an
    `asyncio.Event`, a call made on the loop running now (nothing once it is closed)."""
    if not isinstance(event, asyncio.Event):
        return event.set  # type: ignore[no-any-return]
    loop = asyncio.get_running_loop()

    def told() -> None:
        try:
            loop.call_soon_threadsafe(event.set)
        except RuntimeError:
            pass  # the loop is closed: nobody is left to tell

    return told


def _told(guard: Any) -> None:
    """Sets ``guard.lost`` now if its native guard is lost: a call that found the loss (a
    guarded call or a release answered ``LockLost``, an upgrade that took the hold with
    it) tells at once, not when a watcher's callback gets the GIL. Called on the thread
    (or loop) the event belongs to."""
    if guard._native.is_lost() and not guard.lost.is_set():
        guard.lost.set()


def _end_block(release: Callable[[], None], exc_type: Any) -> None:
    """The release at the end of a `with` block: a lost hold raises `LockLost` there,
    unless the block raised (its own exception is the one to see)."""
    if exc_type is None:
        release()
        return
    try:
        release()
    except LockError:
        pass


async def _end_block_async(release: Callable[[], Awaitable[None]], exc_type: Any) -> None:
    """As `_end_block`, for `async with`."""
    if exc_type is None:
        await release()
        return
    try:
        await release()
    except LockError:
        pass


def _outcome(ran: Any, commit: bool) -> Any:
    succeeded, failed_condition, replies = ran
    return Outcome(succeeded, failed_condition, replies) if commit else replies


def connect(
    urls: Urls,
    *,
    lease: Optional[float] = None,
    client_name: Optional[str] = None,
    prefix: Optional[str] = None,
    durability: Union[str, int, None] = None,
    confirm_timeout: Optional[float] = None,
    clock_margin: Optional[float] = None,
    retry_interval: Optional[float] = None,
    command_timeout: Optional[float] = None,
    notifications: Optional[bool] = None,
    tls_ca_pem: Optional[bytes] = None,
) -> "Client":
    """Connects to a cluster (``redis://`` or ``rediss://`` seed URLs; one URL may also
    be a single node) and checks it, blocking.

    ``lease`` (seconds, default 30) is each hold's lease; ``client_name`` is written in
    owner tokens (``inspect``, ``top`` and ``break --client`` show and use it);
    ``durability`` is ``"all"`` (default: every attached replica confirms each grant),
    ``"master"`` or a number of replicas; ``confirm_timeout`` bounds that wait (default
    0.5 s). ``tls_ca_pem`` trusts a CA for ``rediss://``: a ``rediss://`` connection is
    encrypted or fails, never plaintext. Raises :class:`InvalidConfig`,
    :class:`Unavailable`, :class:`PermissionDenied` (the functions are not loaded and
    this user may not load them: run ``cluster-rwlock setup``)."""
    return Client(_native.connect(_options(locals())))


async def connect_async(
    urls: Urls,
    *,
    lease: Optional[float] = None,
    client_name: Optional[str] = None,
    prefix: Optional[str] = None,
    durability: Union[str, int, None] = None,
    confirm_timeout: Optional[float] = None,
    clock_margin: Optional[float] = None,
    retry_interval: Optional[float] = None,
    command_timeout: Optional[float] = None,
    notifications: Optional[bool] = None,
    tls_ca_pem: Optional[bytes] = None,
) -> "AsyncClient":
    """As :func:`connect`, for asyncio: the client's locks are :class:`AsyncRwLock`."""
    return AsyncClient(await _native.connect_async(_options(locals())))


class _ClientBase:
    def __init__(self, native: _native.NativeClient) -> None:
        self._native = native
        _connected.add(self)

    @property
    def client_name(self) -> str:
        """The client name in this client's owner tokens."""
        return self._native.client_name

    @property
    def lease(self) -> float:
        """The client's lease, in seconds."""
        return self._native.lease

    def force_release(self, name: str, owner: Optional[str] = None) -> Dict[str, Any]:
        """Breaks the lock ``name`` (every hold, or those of ``owner``), blocking: the
        waiters are woken and the fence raised, so the broken holders' late writes are
        refused by a fenced resource. Returns ``{"holds_removed", "fence"}``."""
        removed, fence = self._native.force_release(name, owner)
        return {"holds_removed": removed, "fence": fence}


class FencedWrite(NamedTuple):
    """What :meth:`Client.fenced_set` did."""

    #: Whether the value was written.
    written: bool
    #: The fence that wrote last: the caller's when written, else the higher one that
    #: refused it.
    fence: int


def _broken(removed: int, fence: Optional[int], places: int) -> Dict[str, Any]:
    return {"holds_removed": removed, "fence": fence, "places_removed": places}


class Client(_ClientBase):
    """A connected client (see :func:`connect`). Thread-safe; one per process is enough.
    ``with connect(...) as client:`` closes it at the end."""

    def rwlock(self, name: str, *, lease: Optional[float] = None) -> "RwLock":
        """The lock ``name``: a handle whose every acquire is a hold of its own. Put the
        resource's ``{hashtag}`` in the name to keep its keys in the lock's slot
        (guarded calls need it). ``lease`` overrides the client's for its holds.
        Raises :class:`InvalidName`."""
        native = self._native.rwlock(name)
        return RwLock(native if lease is None else native.with_lease(lease))

    def multi(self, members: Iterable[Tuple[str, str]]) -> "MultiLock":
        """Several locks taken together, in any slots, without deadlock: ``members`` are
        ``(name, mode)`` pairs, mode ``"read"``, ``"write"`` or ``"upgradable"``. Raises
        :class:`InvalidName`."""
        return MultiLock(self._native.multi([(str(n), str(m)) for n, m in members]))

    def break_client(self, name: str, client_name: str) -> Dict[str, Any]:
        """Breaks every hold the client named ``client_name`` (the ``client_name`` of
        its :func:`connect`) has on the lock ``name``, blocking, and takes its places in
        the queue out, so that the lock is not handed to another thread of the same
        stuck process: a waiter of that client still running stops with
        :class:`Broken`. The other waiters are woken and the fence raised, as by
        :meth:`force_release`; holds taken under an explicit owner token stay.
        ``lock.state()`` before it tells who would go (each holder's ``client``).
        Returns ``{"holds_removed", "fence", "places_removed"}``. Raises
        :class:`InvalidName`, or :class:`InvalidConfig` for a name no client may have.

        >>> client.break_client("orders:{42}", "worker-7@host-b")
        {'holds_removed': 1, 'fence': 18, 'places_removed': 2}
        """
        return _broken(*self._native.break_client(name, client_name))

    def fenced_set(self, key: str, fence: int, value: Word) -> FencedWrite:
        """Stores ``value`` (bytes, or a str as UTF-8, or an int as its digits) at
        ``key`` with ``fence``, blocking, unless a higher fence wrote there: a holder
        that lost its lock and writes late with its old fence cannot overwrite what a
        later holder wrote. For data outside the lock's slot (guarded calls are for data
        in it), written by code that has only the fence. ``key`` is a hash of two
        fields, ``fence`` and ``value``; an equal fence may write again. Confirmed by the
        replicas as a grant is (``durability``). Once sent, the write lands even if the
        caller is interrupted.

        Returns a :class:`FencedWrite`: ``written``, and the ``fence`` that wrote last
        (the caller's, or the higher one that refused it). Raises :class:`WrongType`
        when ``key`` holds something else than a hash (nothing is touched),
        :class:`LockKey` when ``key`` is a lock's own key (nothing is sent),
        :class:`WriteNotReplicated` when the value was written on the master (and
        stays) but too few replicas acknowledged it in time, :class:`Unavailable`.

        >>> with lock.write(timeout=5) as w:
        ...     report = compute()
        ...     if not client.fenced_set("report:latest", w.fence, report).written:
        ...         print("a newer holder wrote the report; ours is dropped")
        """
        written, last = self._native.fenced_set(key, fence, _word(value))
        return FencedWrite(written, last)

    def fenced_get(self, key: str) -> Optional[Tuple[int, bytes]]:
        """The value :meth:`fenced_set` stored at ``key`` and the fence that wrote it,
        blocking: ``(fence, value)``, or ``None`` when there is none. Raises
        :class:`ProtocolError` when ``key`` is not a value of :meth:`fenced_set`,
        :class:`WrongType` when it is not a hash."""
        return self._native.fenced_get(key)

    def close(self) -> int:
        """Gives back what dropped holds left, then closes; returns how many give-backs
        were still unsent (those holds end with their lease)."""
        return self._native.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class AsyncClient(_ClientBase):
    """A connected client for asyncio (see :func:`connect_async`). ``async with`` closes
    it at the end."""

    def rwlock(self, name: str, *, lease: Optional[float] = None) -> "AsyncRwLock":
        """As :meth:`Client.rwlock`, for asyncio."""
        native = self._native.rwlock(name)
        return AsyncRwLock(native if lease is None else native.with_lease(lease))

    def multi(self, members: Iterable[Tuple[str, str]]) -> "AsyncMultiLock":
        """As :meth:`Client.multi`, for asyncio."""
        return AsyncMultiLock(self._native.multi([(str(n), str(m)) for n, m in members]))

    async def break_client(self, name: str, client_name: str) -> Dict[str, Any]:
        """As :meth:`Client.break_client`, awaitable."""
        return _broken(*await self._native.break_client_async(name, client_name))

    async def fenced_set(self, key: str, fence: int, value: Word) -> FencedWrite:
        """As :meth:`Client.fenced_set`, awaitable. Once sent, the write lands even if
        the task is cancelled."""
        written, last = await self._native.fenced_set_async(key, fence, _word(value))
        return FencedWrite(written, last)

    async def fenced_get(self, key: str) -> Optional[Tuple[int, bytes]]:
        """As :meth:`Client.fenced_get`, awaitable."""
        got: Optional[Tuple[int, bytes]] = await self._native.fenced_get_async(key)
        return got

    async def close(self) -> int:
        """As :meth:`Client.close`."""
        unsent: int = await self._native.close_async()
        return unsent

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()


class _LockBase:
    def __init__(self, native: _native.NativeLock) -> None:
        self._native = native

    @property
    def name(self) -> str:
        """The lock's name."""
        return self._native.name

    @property
    def key(self) -> str:
        """The Redis key of the lock's hash."""
        return self._native.key

    @property
    def slot(self) -> int:
        """The cluster slot of the lock and of its ``{hashtag}``'s keys."""
        return self._native.slot

    @property
    def owner(self) -> str:
        """The owner token of this handle's holds."""
        return self._native.owner

    @property
    def lease(self) -> float:
        """The lease of this handle's holds, in seconds."""
        return self._native.lease

    def same_slot_as(self, key: str) -> bool:
        """Whether ``key`` is in the lock's slot (guarded calls may name it)."""
        return self._native.same_slot_as(key)

    def state(self) -> Dict[str, Any]:
        """Who holds and who waits, read from the server (blocking): ``mode``, ``fence``,
        ``holders`` (each ``owner``; ``client``, the client name in the owner token,
        as ``cluster-rwlock inspect --json`` shows it and :meth:`Client.break_client`
        takes it, ``None`` for an explicit owner token; ``mode``, ``holds``,
        ``lease_left``, ``renewed_ago``, ``overdue``), ``waiting_writers``,
        ``waiting_readers``."""
        state: Dict[str, Any] = self._native.state()
        return state

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


def _granted(native: Optional[_native.NativeGuard]) -> _native.NativeGuard:
    # (a blocking acquire returns a guard or raises)
    assert native is not None
    return native


class RwLock(_LockBase):
    """A lock handle (see :meth:`Client.rwlock`). Every acquire blocks the calling
    thread with the GIL released, stops on Ctrl-C, and returns a :class:`Guard`, which
    is a context manager: ``with lock.write(timeout=5) as w: ...``. ``timeout=None``
    waits until granted. Raises :class:`Timeout`, :class:`NotReplicated`,
    :class:`Unavailable` (all retryable), :class:`UpgradeDeadlock` (``write`` while this
    handle's owner holds read), :class:`Broken` (an operator broke this client on the
    lock while it waited)."""

    def read(self, timeout: Optional[float] = None) -> "Guard":
        """A read hold: shared with other readers."""
        return Guard(_granted(self._native.acquire("read", True, timeout)), self)

    def write(self, timeout: Optional[float] = None) -> "Guard":
        """A write hold: excludes every other hold."""
        return Guard(_granted(self._native.acquire("write", True, timeout)), self)

    def upgradable_read(self, timeout: Optional[float] = None) -> "Guard":
        """An upgradable read: shared with readers, exclusive among upgradable readers
        and writers; :meth:`Guard.upgrade` makes it write with no writer in between."""
        return Guard(_granted(self._native.acquire("upgradable", True, timeout)), self)

    def _try(self, mode: str) -> Optional["Guard"]:
        native = self._native.acquire(mode, False, None)
        return None if native is None else Guard(native, self)

    def try_read(self) -> Optional["Guard"]:
        """A read hold if granted at once, else ``None``."""
        return self._try("read")

    def try_write(self) -> Optional["Guard"]:
        """A write hold if granted at once, else ``None``."""
        return self._try("write")

    def try_upgradable_read(self) -> Optional["Guard"]:
        """An upgradable read hold if granted at once, else ``None``."""
        return self._try("upgradable")

    def with_lease(self, lease: float) -> "RwLock":
        """The same lock, with its own lease (seconds) for holds taken through the new
        handle."""
        return RwLock(self._native.with_lease(lease))


class _Acquiring:
    """An acquire for asyncio: ``await`` it for the guard, or ``async with`` it to hold
    for the block (released at its end)."""

    def __init__(self, lock: "AsyncRwLock", mode: str, timeout: Optional[float]) -> None:
        self._lock, self._mode, self._timeout = lock, mode, timeout
        self._guard: Optional[AsyncGuard] = None

    async def _acquire(self) -> "AsyncGuard":
        native = await self._lock._native.acquire_async(self._mode, True, self._timeout)
        return AsyncGuard(native, self._lock)

    def __await__(self) -> Any:
        return self._acquire().__await__()

    async def __aenter__(self) -> "AsyncGuard":
        self._guard = await self._acquire()
        return self._guard

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        assert self._guard is not None
        await self._guard.__aexit__(exc_type, exc, tb)


class AsyncRwLock(_LockBase):
    """A lock handle for asyncio (see :meth:`AsyncClient.rwlock`):
    ``async with lock.read(timeout=5) as r:`` or ``r = await lock.read()``. Cancelling
    an acquire withdraws its place. Raises as :class:`RwLock`."""

    def read(self, timeout: Optional[float] = None) -> _Acquiring:
        """A read hold: shared with other readers."""
        return _Acquiring(self, "read", timeout)

    def write(self, timeout: Optional[float] = None) -> _Acquiring:
        """A write hold: excludes every other hold."""
        return _Acquiring(self, "write", timeout)

    def upgradable_read(self, timeout: Optional[float] = None) -> _Acquiring:
        """An upgradable read hold (see :meth:`RwLock.upgradable_read`)."""
        return _Acquiring(self, "upgradable", timeout)

    async def _try(self, mode: str) -> Optional["AsyncGuard"]:
        native = await self._native.acquire_async(mode, False, None)
        return None if native is None else AsyncGuard(native, self)

    async def try_read(self) -> Optional["AsyncGuard"]:
        """A read hold if granted at once, else ``None``."""
        return await self._try("read")

    async def try_write(self) -> Optional["AsyncGuard"]:
        """A write hold if granted at once, else ``None``."""
        return await self._try("write")

    async def try_upgradable_read(self) -> Optional["AsyncGuard"]:
        """An upgradable read hold if granted at once, else ``None``."""
        return await self._try("upgradable")

    def with_lease(self, lease: float) -> "AsyncRwLock":
        """As :meth:`RwLock.with_lease`."""
        return AsyncRwLock(self._native.with_lease(lease))


class _GuardBase:
    def __init__(self, native: _native.NativeGuard, lock: Any) -> None:
        self._native = native
        self._lock = lock
        _held.add(self)

    @property
    def fence(self) -> int:
        """The fencing token of this grant: greater than every fence granted before for
        this lock. Hand it to the resource, which refuses lower fences than it has seen."""
        return self._native.fence

    @property
    def mode(self) -> str:
        """``"read"``, ``"write"`` or ``"upgradable"``."""
        return self._native.mode

    @property
    def owner(self) -> str:
        """The owner token of the hold."""
        return self._native.owner

    @property
    def lock(self) -> Any:
        """The lock handle this hold was taken through."""
        return self._lock

    @property
    def is_lost(self) -> bool:
        """Whether the hold may have been lost: true from the moment the client can no
        longer be sure (its lease, less the clock margin, ran out before a renewal was
        confirmed; the lock was broken; a failover lost it), which is before anyone else
        can be granted the lock. Then stop: do not commit work done under it."""
        return self._native.is_lost()

    @property
    def is_held(self) -> bool:
        """Whether this guard still holds (not released, upgraded or downgraded)."""
        return self._native.is_held()

    def __repr__(self) -> str:
        state = "lost" if self.is_lost else ("held" if self.is_held else "released")
        return f"{type(self).__name__}({self._lock.name!r}, {self.mode}, fence={self.fence}, {state})"


class Guard(_GuardBase):
    """A hold (see :class:`RwLock`): renewed while held, released by :meth:`release` or
    at the end of its ``with`` block. ``lost`` is a ``threading.Event`` set when the hold
    may have been lost. A guard collected without a release is released in the
    background."""

    def __init__(self, native: _native.NativeGuard, lock: Any) -> None:
        super().__init__(native, lock)
        self.lost = threading.Event()
        native.on_lost(_setter(self.lost))

    def release(self) -> None:
        """Releases the hold now (a second call does nothing). Raises :class:`LockLost`
        when the hold was lost before: work done under it may have overlapped another
        holder's (then ``lost`` is set too)."""
        try:
            self._native.release()
        except LockError:
            _told(self)
            raise

    def guarded(self) -> "Guarded[Any]":
        """A guarded call under this hold (see :class:`Guarded`); one answered
        :class:`LockLost` sets ``lost``."""

        def runner(then: List[Any], other: Optional[List[Any]], commit: bool) -> Any:
            try:
                return _outcome(self._native.guarded(then, other, commit), commit)
            except LockError:
                _told(self)
                raise

        return Guarded(runner)

    def upgrade(self, timeout: Optional[float] = None) -> "Guard":
        """An upgradable read made write, with no writer in between; returns the write
        guard (this one is spent). On :class:`Timeout`, this guard still holds; on
        another error, or Ctrl-C, its hold went with the call: it is lost (``lost`` set)."""
        try:
            return Guard(self._native.upgrade(timeout), self._lock)
        except BaseException:
            _told(self)
            raise

    def downgrade(self) -> "Guard":
        """A write hold made read, with no writer in between; returns the read guard
        (this one is spent). On an error, this one is lost, as for :meth:`upgrade`."""
        try:
            return Guard(self._native.downgrade(), self._lock)
        except BaseException:
            _told(self)
            raise

    def __enter__(self) -> "Guard":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        _end_block(self.release, exc_type)


class AsyncGuard(_GuardBase):
    """A hold for asyncio: as :class:`Guard`, with awaitable methods, and ``lost`` an
    ``asyncio.Event`` of the loop that acquired it."""

    def __init__(self, native: _native.NativeGuard, lock: Any) -> None:
        super().__init__(native, lock)
        self.lost = asyncio.Event()
        native.on_lost(_setter(self.lost))

    async def release(self) -> None:
        """As :meth:`Guard.release`."""
        try:
            await self._native.release_async()
        except LockError:
            _told(self)
            raise

    def guarded(self) -> "Guarded[Any]":
        """A guarded call under this hold; ``run()`` and ``commit()`` are awaitables."""

        async def runner(then: List[Any], other: Optional[List[Any]], commit: bool) -> Any:
            try:
                return _outcome(await self._native.guarded_async(then, other, commit), commit)
            except LockError:
                _told(self)
                raise

        return Guarded(runner)

    async def _change(self, changing: Awaitable[Any]) -> "AsyncGuard":
        try:
            return AsyncGuard(await changing, self._lock)
        except asyncio.CancelledError:
            # the call is dropped on the client's runtime a moment later: wait for it, so
            # that `is_lost` and `lost` tell what it left from now on
            self._native.settled(0.5)
            _told(self)
            raise
        except BaseException:
            _told(self)
            raise

    async def upgrade(self, timeout: Optional[float] = None) -> "AsyncGuard":
        """As :meth:`Guard.upgrade`; cancelled (``asyncio.wait_for``, a task cancelled)
        after it took the hold, this guard is lost at once (``lost`` set): the hold went
        back with the call."""
        return await self._change(self._native.upgrade_async(timeout))

    async def downgrade(self) -> "AsyncGuard":
        """As :meth:`Guard.downgrade` (and cancelled, as :meth:`upgrade`)."""
        return await self._change(self._native.downgrade_async())

    async def __aenter__(self) -> "AsyncGuard":
        return self

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        await _end_block_async(self.release, exc_type)


class MultiGuard:
    """Every member of a :class:`MultiLock` held: ``guards`` (one :class:`Guard` or
    :class:`AsyncGuard` per member, in the order taken), ``fences`` (name to fence),
    ``lost`` (an event set when ANY member's hold may be lost). Released by
    :meth:`release` or at the end of its ``with`` / ``async with`` block."""

    def __init__(self, guards: List[Any]) -> None:
        self.guards = guards
        self.fences: Dict[str, int] = {g.lock.name: g.fence for g in guards}
        self.lost: Any = guards[0].lost if len(guards) == 1 else _any_event(guards)

    @property
    def is_lost(self) -> bool:
        """Whether any member's hold may have been lost."""
        return any(g.is_lost for g in self.guards)

    def _release_all(self) -> None:
        errors = []
        for g in self.guards:
            try:
                g._native.release()
            except LockError as e:
                _told(g)
                errors.append(e)
        if errors:
            if isinstance(errors[0], LockLost):
                self.lost.set()
            raise errors[0]

    def release(self) -> None:
        """Releases every member (blocking); raises the first member's error (e.g.
        :class:`LockLost`) after trying them all."""
        self._release_all()

    async def release_async(self) -> None:
        """Releases every member, concurrently; raises as :meth:`release`."""
        results = await asyncio.gather(*(g._native.release_async() for g in self.guards), return_exceptions=True)
        for g, r in zip(self.guards, results):
            if isinstance(r, LockError):
                _told(g)
        for r in results:
            if isinstance(r, BaseException):
                if isinstance(r, LockLost):
                    self.lost.set()
                raise r

    def __enter__(self) -> "MultiGuard":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        _end_block(self.release, exc_type)

    async def __aenter__(self) -> "MultiGuard":
        return self

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        await _end_block_async(self.release_async, exc_type)


def _any_event(guards: List[Any]) -> Any:
    """An event of the guards' kind set when any of theirs is."""
    event: Any = asyncio.Event() if isinstance(guards[0], AsyncGuard) else threading.Event()
    told = _setter(event)
    for g in guards:
        g._native.on_lost(told)
    return event


class MultiLock:
    """Several locks taken as one (see :meth:`Client.multi`): each in its own slot, in
    an order every client uses, so that two clients asking for the same locks never wait
    for each other in a cycle; not every member held in time means none stays held."""

    def __init__(self, native: _native.NativeMulti) -> None:
        self._native = native

    @property
    def names(self) -> List[str]:
        """The members' names, in the order they are taken."""
        return self._native.names()

    def lock(self, timeout: Optional[float] = None) -> MultiGuard:
        """Takes every member, blocking (at most ``timeout`` seconds in all). Raises
        :class:`Timeout` (none stays held), and as :meth:`RwLock.write`."""
        natives = self._native.lock(True, timeout)
        assert natives is not None
        return MultiGuard([Guard(n, _Named(n)) for n in natives])

    def try_lock(self) -> Optional[MultiGuard]:
        """Every member if granted at once, else ``None`` (none stays held)."""
        natives = self._native.lock(False, None)
        return None if natives is None else MultiGuard([Guard(n, _Named(n)) for n in natives])

    def with_lease(self, lease: float) -> "MultiLock":
        """The same members with their own lease (seconds)."""
        return MultiLock(self._native.with_lease(lease))


class _AcquiringAll:
    def __init__(self, multi: "AsyncMultiLock", timeout: Optional[float]) -> None:
        self._multi, self._timeout = multi, timeout
        self._guard: Optional[MultiGuard] = None

    async def _acquire(self) -> MultiGuard:
        natives = await self._multi._native.lock_async(True, self._timeout)
        return MultiGuard([AsyncGuard(n, _Named(n)) for n in natives])

    def __await__(self) -> Any:
        return self._acquire().__await__()

    async def __aenter__(self) -> MultiGuard:
        self._guard = await self._acquire()
        return self._guard

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        assert self._guard is not None
        await self._guard.__aexit__(exc_type, exc, tb)


class AsyncMultiLock:
    """As :class:`MultiLock`, for asyncio: ``async with multi.lock(timeout=5) as held:``
    or ``held = await multi.lock()``."""

    def __init__(self, native: _native.NativeMulti) -> None:
        self._native = native

    @property
    def names(self) -> List[str]:
        """The members' names, in the order they are taken."""
        return self._native.names()

    def lock(self, timeout: Optional[float] = None) -> _AcquiringAll:
        """Takes every member (at most ``timeout`` seconds in all)."""
        return _AcquiringAll(self, timeout)

    async def try_lock(self) -> Optional[MultiGuard]:
        """Every member if granted at once, else ``None``."""
        natives = await self._native.lock_async(False, None)
        return None if natives is None else MultiGuard([AsyncGuard(n, _Named(n)) for n in natives])

    def with_lease(self, lease: float) -> "AsyncMultiLock":
        """As :meth:`MultiLock.with_lease`."""
        return AsyncMultiLock(self._native.with_lease(lease))


class _Named:
    """What a member's guard says of its lock: its name."""

    def __init__(self, native: _native.NativeGuard) -> None:
        self.name = native.lock_name
