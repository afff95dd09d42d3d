"""Lock handles: RwLock and AsyncRwLock, whose acquires return guards."""

from typing import Any, Dict, Optional

from . import _native
from .guard import AsyncGuard, Guard


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
