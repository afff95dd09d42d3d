"""Clients: connect(), connect_async(), Client and AsyncClient, and FencedWrite."""

from typing import Any, Dict, Iterable, NamedTuple, Optional, Tuple, Union

from . import _native
from ._exit import _connected
from .guarded import Word, _word
from .lock import AsyncRwLock, RwLock
from .multi import AsyncMultiLock, MultiLock

Urls = Union[str, Iterable[str]]


def _options(arguments: Dict[str, Any]) -> Dict[str, Any]:
    """connect()'s arguments as the native module takes them: the URLs as a list, and
    only the keywords given (the native side's defaults are the Rust client's)."""
    given = {name: value for name, value in arguments.items() if value is not None}
    urls = given["urls"]
    given["urls"] = [urls] if isinstance(urls, str) else [str(u) for u in urls]
    return given


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


class FencedWrite(NamedTuple):
    """What :meth:`Client.fenced_set` did."""

    #: Whether the value was written.
    written: bool
    #: The fence that wrote last: the caller's when written, else the higher one that
    #: refused it.
    fence: int


def _released(removed: int, fence: Optional[int]) -> Dict[str, Any]:
    return {"holds_removed": removed, "fence": fence}


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

    def force_release(self, name: str, owner: Optional[str] = None) -> Dict[str, Any]:
        """Breaks the lock ``name`` (every hold, or those of ``owner``), blocking: the
        waiters are woken and the fence raised, so the broken holders' late writes are
        refused by a fenced resource. Returns ``{"holds_removed", "fence"}``."""
        return _released(*self._native.force_release(name, owner))

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

    async def force_release(self, name: str, owner: Optional[str] = None) -> Dict[str, Any]:
        """As :meth:`Client.force_release`, awaitable (it does not block the event loop)."""
        return _released(*await self._native.force_release_async(name, owner))

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
