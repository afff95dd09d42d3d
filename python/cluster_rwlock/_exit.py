"""The way out: holds and clients given back at interpreter exit or on SIGTERM."""

import atexit
import signal
import weakref
from typing import Any

from . import _native

# What is still held and still connected when the interpreter exits: released and closed
# then, so that a process that ends without releasing does not leave its holds on the
# server until their leases run out. Each guard and each client adds itself when made.
_held: "weakref.WeakSet[Any]" = weakref.WeakSet()
_connected: "weakref.WeakSet[Any]" = weakref.WeakSet()

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
