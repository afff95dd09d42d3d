"""Several locks taken as one: MultiLock, AsyncMultiLock and their MultiGuard."""

import asyncio
import threading
from typing import Any, Dict, List, Optional

from . import _native
from .errors import LockError, LockLost
from .guard import AsyncGuard, Guard, _end_block, _end_block_async, _setter, _told


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
