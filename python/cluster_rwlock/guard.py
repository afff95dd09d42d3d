"""Holds: Guard and AsyncGuard, and the helpers that tell a loss and end a block."""

import asyncio
import threading
from typing import Any, Awaitable, Callable, List, Optional

from . import _native
from ._exit import _held
from .errors import LockError
from .guarded import Guarded, Outcome


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


_MAKING_LOST = threading.Lock()


class Guard(_GuardBase):
    """A hold (see :class:`RwLock`): renewed while held, released by :meth:`release` or
    at the end of its ``with`` block. ``lost`` is a ``threading.Event`` set when the hold
    may have been lost. A guard collected without a release is released in the
    background."""

    def __init__(self, native: _native.NativeGuard, lock: Any) -> None:
        super().__init__(native, lock)
        self._lost: Optional[threading.Event] = None

    @property
    def lost(self) -> threading.Event:
        """A ``threading.Event`` set when the hold may have been lost (never by a
        release). Made, and watched, when first asked for: a guard whose ``lost`` is
        never read costs no watcher (``is_lost`` reads the same state)."""
        event = self._lost
        if event is None:
            with _MAKING_LOST:
                event = self._lost
                if event is None:
                    event = threading.Event()
                    self._native.on_lost(event.set)
                    # a hold lost already is told now, not when the watcher runs
                    if self._native.is_held() and self._native.is_lost():
                        event.set()
                    self._lost = event
        return event

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
