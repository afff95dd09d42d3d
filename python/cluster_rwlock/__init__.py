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
* Phase-fair: neither readers nor writers starve (one queue, in arrival order, readers
  in groups). Waiters are woken by release messages (sharded pub/sub), not by polling.

Blocking calls release the GIL and stop on Ctrl-C (``KeyboardInterrupt``; an acquire
given up withdraws its place). Create clients after ``os.fork()``, not before. A process
that exits releases its holds and withdraws its waits on the way out, within a few
seconds in all; a service stopped by SIGTERM does too if it called
:func:`release_on_sigterm`.
"""

from . import errors
from ._exit import release_on_sigterm
from .client import AsyncClient, Client, FencedWrite, connect, connect_async
from .errors import *  # noqa: F401,F403 (the exceptions, listed once: errors.__all__)
from .guard import AsyncGuard, Guard
from .guarded import Compare, Condition, Guarded, Outcome, Word
from .lock import AsyncRwLock, RwLock
from .multi import AsyncMultiLock, MultiGuard, MultiLock

# public too, but left out of `import *`
from ._exit import EXIT_BOUND as EXIT_BOUND  # noqa: F401
from .client import Urls as Urls  # noqa: F401

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
]
__all__ += errors.__all__
