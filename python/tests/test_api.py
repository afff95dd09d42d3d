"""The Python API on its own: holds, fences, timeouts, errors, guarded calls, loss,
upgrade and downgrade, Ctrl-C, and a guard dropped without a release."""

import gc
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid

import pytest

import cluster_rwlock
from cluster_rwlock import Condition
from conftest import CHILD_TLS, queued, tls, waiter_for_write


def test_a_write_excludes_every_other_hold_and_fences_grow(client, name):
    lock, other = client.rwlock(name), client.rwlock(name)
    with lock.write(timeout=5) as w:
        assert w.mode == "write" and w.is_held and not w.is_lost
        assert other.try_write() is None
        assert other.try_read() is None
        assert lock.try_read() is None  # the same handle: a hold of its own, excluded
        first = w.fence
        state = lock.state()
        assert state["mode"] == "write" and state["fence"] == first
        assert [h["owner"].split(":")[0] for h in state["holders"]] == [lock.owner]
    assert not w.is_held
    with other.write(timeout=5) as w2:
        assert w2.fence > first


def test_readers_share_and_keep_writers_out(client, name):
    a, b, writer = client.rwlock(name), client.rwlock(name), client.rwlock(name)
    r1, r2 = a.read(timeout=5), b.read(timeout=5)
    assert writer.try_write() is None
    assert len(a.state()["holders"]) == 2
    r1.release()
    r2.release()
    r2.release()  # a second release does nothing
    w = writer.try_write()
    assert w is not None
    w.release()


def test_a_timeout_is_typed_and_retryable(client, name):
    holder, waiter = client.rwlock(name), client.rwlock(name)
    with holder.write(timeout=5):
        started = time.monotonic()
        with pytest.raises(cluster_rwlock.Timeout) as caught:
            waiter.write(timeout=0.3)
        assert time.monotonic() - started >= 0.3
    e = caught.value
    assert e.is_retryable and isinstance(e, TimeoutError) and e.after == pytest.approx(0.3)
    # the waiter's place was withdrawn: nobody waits any more
    assert holder.state()["waiting_writers"] == []


def test_bad_input_gets_a_typed_error(client, seeds):
    for bad in ["", "a{b", "x" * 100_000]:
        with pytest.raises(cluster_rwlock.InvalidName) as caught:
            client.rwlock(bad)
        assert isinstance(caught.value, ValueError) and not caught.value.is_retryable
    with pytest.raises(cluster_rwlock.InvalidConfig):
        cluster_rwlock.connect(seeds, lease=0.001)
    with pytest.raises(cluster_rwlock.InvalidConfig):
        cluster_rwlock.connect(seeds, durability="sometimes")
    with pytest.raises(ValueError):
        client.rwlock("ok:{x}").write(timeout=-1)
    with pytest.raises(ValueError):
        client.rwlock("ok:{x}").write(timeout=float("nan"))
    with pytest.raises(cluster_rwlock.Unavailable) as caught:
        cluster_rwlock.connect("redis://127.0.0.1:1", command_timeout=1)
    assert caught.value.is_retryable


def test_guarded_calls_run_only_under_the_hold(client, name):
    tag = name[name.index("{"):]
    lock = client.rwlock(name)
    stock, orders = f"stock:{tag}", f"orders:{tag}"
    with lock.write(timeout=5) as w:
        assert w.guarded().hset(stock, "n", 2).set(f"status:{tag}", "open").run() == [1, b"OK"]
        sell = lambda: (w.guarded()  # noqa: E731
                        .when(Condition.field(stock, "n").gt(0))
                        .hincr_by(stock, "n", -1)
                        .rpush(orders, "order")
                        .otherwise()
                        .set(f"soldout:{tag}", 1)
                        .commit())
        assert [sell().succeeded for _ in range(3)] == [True, True, False]
        last = sell()
        assert last.failed_condition == 0 and last.replies == [b"OK"]
        with pytest.raises(cluster_rwlock.ConditionFailed) as caught:
            w.guarded().when(Condition.missing(stock)).set(stock, 1).run()
        assert caught.value.index == 0
        # a command that would fail fails the call before anything runs
        with pytest.raises(cluster_rwlock.CommandFailed) as failed:
            w.guarded().set(f"a:{tag}", "1").command("INCR", f"status:{tag}").run()
        assert failed.value.nothing_ran and failed.value.index == 1
        assert not failed.value.undone
        # one that fails only while running (an overflow) raises too, from run() and
        # commit() alike, and what ran before it is undone: all or nothing
        big = f"big:{tag}"
        for send in (lambda g: g.run(), lambda g: g.commit()):
            with pytest.raises(cluster_rwlock.CommandFailed) as failed:
                send(w.guarded().set(f"a:{tag}", "2").set(big, 2**63 - 1).command("INCR", big))
            assert (failed.value.index, failed.value.command) == (2, "INCR")
            assert failed.value.nothing_ran and failed.value.undone
            assert "overflow" in failed.value.reply
            assert w.guarded().get(f"a:{tag}").get(big).run() == [None, None]
        # refused before sending: a key of another slot, the lock's own key, arity
        with pytest.raises(cluster_rwlock.InvalidCommand):
            w.guarded().set("elsewhere:{other}", "x").run()
        with pytest.raises(cluster_rwlock.InvalidCommand):
            w.guarded().command("HSET", lock.key, "f", "v").run()
        with pytest.raises(cluster_rwlock.InvalidCommand):
            w.guarded().command("HINCRBY", stock, "n").run()
        with pytest.raises(TypeError):
            w.guarded().set(stock, 1.5)
    with lock.read(timeout=5) as r:
        assert r.guarded().hget(stock, "n").get(f"a:{tag}").command("LLEN", orders).run() == [b"0", None, 2]
        with pytest.raises(cluster_rwlock.InvalidCommand):
            r.guarded().set(f"a:{tag}", "x").run()  # writes need a write hold
    with pytest.raises(ValueError):
        r.guarded().get(stock).run()  # released


def test_a_lost_hold_is_told_and_writes_nothing(client, name):
    tag = name[name.index("{"):]
    lock = client.rwlock(name, lease=0.6)
    assert lock.lease == pytest.approx(0.6)
    w = lock.write(timeout=5)
    time.sleep(1.5)  # renewed meanwhile: still held
    assert not w.is_lost and not w.lost.is_set()
    assert client.force_release(name)["holds_removed"] == 1
    assert w.lost.wait(2.0), "the holder was not told within 2 s"
    assert w.is_lost
    with pytest.raises(cluster_rwlock.LockLost):
        w.guarded().set(f"late:{tag}", "x").run()
    with pytest.raises(cluster_rwlock.LockLost):
        w.release()
    with client.rwlock(name).read(timeout=5) as r:
        assert r.guarded().get(f"late:{tag}").run() == [None]
        assert r.fence > w.fence


def test_upgrade_and_downgrade_let_no_writer_in_between(client, name):
    lock, other = client.rwlock(name), client.rwlock(name)
    u = lock.upgradable_read(timeout=5)
    assert other.try_upgradable_read() is None
    r = other.read(timeout=5)  # readers share with an upgradable read
    with pytest.raises(cluster_rwlock.Timeout):
        u.upgrade(timeout=0.3)  # the reader is still in
    assert u.is_held
    r.release()
    w = u.upgrade(timeout=5)
    assert w.mode == "write" and not u.is_held and w.fence > u.fence
    with pytest.raises(ValueError):
        u.upgrade()  # spent
    with pytest.raises(ValueError):
        w.upgrade()  # only an upgradable read upgrades
    back = w.downgrade()
    assert back.mode == "read" and other.try_write() is None and other.try_read() is not None
    back.release()


def test_a_guard_dropped_without_release_is_released(client, name):
    lock, other = client.rwlock(name), client.rwlock(name)
    lock.write(timeout=5)  # not kept
    gc.collect()
    w = other.write(timeout=5)
    w.release()


def test_ctrl_c_stops_a_blocked_acquire_and_withdraws_its_place(client, name, seeds):
    lock = client.rwlock(name)
    child_code = textwrap.dedent(f"""
        import sys, cluster_rwlock
        {CHILD_TLS}
        client = cluster_rwlock.connect({seeds!r}, client_name="ctrlc", **TLS)
        lock = client.rwlock({name!r})
        print("WAITING", flush=True)
        try:
            lock.write()
        except KeyboardInterrupt:
            print("INTERRUPTED", flush=True)
            client.close()
            sys.exit(0)
        print("GRANTED", flush=True)
    """)
    with lock.write(timeout=5):
        child = subprocess.Popen([sys.executable, "-c", child_code], stdout=subprocess.PIPE, text=True)
        assert child.stdout.readline().strip() == "WAITING"
        deadline = time.monotonic() + 10
        while not lock.state()["waiting_writers"] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert lock.state()["waiting_writers"], "the child never queued"
        sent = time.monotonic()
        child.send_signal(signal.SIGINT)
        assert child.stdout.readline().strip() == "INTERRUPTED"
        assert time.monotonic() - sent < 1.0
        assert child.wait(timeout=10) == 0
        assert lock.state()["waiting_writers"] == []


def test_the_asyncio_api(seeds, name):
    import asyncio

    async def main():
        async with await cluster_rwlock.connect_async(seeds, client_name="pytest-async", **tls()) as client:
            inside, overlaps, fences = [0], [0], []

            async def writer():
                lock = client.rwlock(name)
                for _ in range(5):
                    async with lock.write(timeout=10) as w:
                        inside[0] += 1
                        overlaps[0] += inside[0] > 1
                        fences.append(w.fence)
                        await asyncio.sleep(0.005)
                        inside[0] -= 1

            await asyncio.gather(*(writer() for _ in range(4)))
            assert overlaps[0] == 0 and fences == sorted(fences) and len(set(fences)) == 20

            lock, other = client.rwlock(name), client.rwlock(name)
            r = await lock.read()
            assert isinstance(r.lost, asyncio.Event) and not r.lost.is_set()
            assert await other.try_write() is None
            # cancelling an acquire withdraws its place
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(other.write(), 0.3)
            deadline = asyncio.get_running_loop().time() + 2
            while other.state()["waiting_writers"] and asyncio.get_running_loop().time() < deadline:
                await asyncio.sleep(0.05)
            assert other.state()["waiting_writers"] == []  # the place was withdrawn
            with pytest.raises(cluster_rwlock.Timeout):
                await other.write(timeout=0.2)
            tag = name[name.index("{"):]
            assert await r.guarded().get(f"k:{tag}").run() == [None]
            await r.release()
            async with other.write(timeout=5) as w:
                outcome = await w.guarded().when(Condition.missing(f"k:{tag}")).set(f"k:{tag}", "v").commit()
                assert outcome.succeeded and outcome.replies == [b"OK"]
                assert w.fence > r.fence

    asyncio.run(main())


@pytest.mark.parametrize("ending", ["return", "raise", "sys.exit(3)"])
def test_a_process_that_exits_holding_gives_its_holds_back(client, name, seeds, ending):
    child_code = textwrap.dedent(f"""
        import sys, cluster_rwlock
        {CHILD_TLS}
        client = cluster_rwlock.connect({seeds!r}, client_name="exits", **TLS)
        held = [client.rwlock({name!r}).write(timeout=5), client.rwlock({name!r}).try_read()]
        print("HELD", flush=True)
        def end():
            {ending}
        end()
        if {ending!r} == "raise":
            raise RuntimeError("an exit right after an error")
    """).replace("            raise\n", "            raise RuntimeError('boom')\n")
    child = subprocess.run([sys.executable, "-c", child_code], capture_output=True, text=True, timeout=60)
    assert child.stdout.startswith("HELD"), child.stderr
    lock = client.rwlock(name)
    assert lock.state()["holders"] == []  # at once, not after the 30 s lease
    assert lock.try_write() is not None


def test_an_encrypted_connection_is_encrypted_or_fails_and_secrets_stay_out(seeds):
    if tls() or seeds[0].startswith("rediss://"):
        pytest.skip("the cluster speaks TLS: this is checked on a plaintext one")
    host_port = seeds[0].split("//", 1)[1]
    # the test bed speaks plaintext: asked for TLS, the client fails, never falls back
    with pytest.raises(cluster_rwlock.LockError) as caught:
        cluster_rwlock.connect("rediss://" + host_port, command_timeout=2)
    assert not isinstance(caught.value, cluster_rwlock.InvalidConfig), caught.value
    # a password in the URL appears in no error
    for url in ["redis://app:s3cr3t-pw@127.0.0.1:1", "rediss://app:s3cr3t-pw@" + host_port]:
        with pytest.raises(cluster_rwlock.LockError) as caught:
            cluster_rwlock.connect(url, command_timeout=2)
        assert "s3cr3t-pw" not in str(caught.value) and "s3cr3t-pw" not in repr(caught.value)


def test_several_locks_at_once_in_any_order_without_deadlock(client, seeds):
    import threading
    import uuid

    tag = uuid.uuid4().hex[:8]
    a, b = f"multi-a:{{{tag}a}}", f"multi-b:{{{tag}b}}"  # two slots
    assert client.rwlock(a).slot != client.rwlock(b).slot
    inside, overlaps, errors = [0], [0], []

    def worker(order):
        try:
            multi = client.multi([(n, "write") for n in order])
            for _ in range(20):
                with multi.lock(timeout=20) as held:
                    inside[0] += 1
                    overlaps[0] += inside[0] > 1
                    assert set(held.fences) == {a, b} and not held.is_lost
                    time.sleep(0.002)
                    inside[0] -= 1
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(o,)) for o in ([a, b], [b, a])]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "deadlocked"
    assert errors == [] and overlaps[0] == 0

    single = client.rwlock(a).write(timeout=5)
    multi = client.multi([(b, "read"), (a, "write")])
    assert multi.try_lock() is None
    with pytest.raises(cluster_rwlock.Timeout):
        multi.lock(timeout=0.3)
    assert client.rwlock(b).state()["holders"] == []  # none stays held
    single.release()
    held = multi.lock(timeout=5)
    assert held.fences[a] > single.fence
    assert client.rwlock(a).try_read() is None and client.rwlock(b).try_read() is not None
    held.release()
    with pytest.raises(cluster_rwlock.InvalidName):
        client.multi([("", "read")])

    async def on_asyncio():
        async with await cluster_rwlock.connect_async(seeds, **tls()) as ac:
            async with ac.multi([(a, "write"), (b, "write")]).lock(timeout=5) as h:
                assert set(h.fences) == {a, b} and isinstance(h.lost, asyncio.Event)

    import asyncio
    asyncio.run(on_asyncio())


def _child(code, **kwargs):
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs)


def _granted_in(lock, timeout=15.0):
    """How long a new writer of `lock` waits (its lease is 10 s: a hand-off to a dead
    waiter would keep it waiting about that long)."""
    started = time.monotonic()
    with lock.write(timeout=timeout):
        return time.monotonic() - started


@pytest.mark.parametrize("ending", ["return", "ctrl-c in join"])
def test_a_process_that_exits_while_waiting_withdraws_its_place(client, name, seeds, ending):
    lock = client.rwlock(name, lease=10)
    child = _child(f"""
        import signal, sys, threading, cluster_rwlock
        {CHILD_TLS}
        client = cluster_rwlock.connect({seeds!r}, client_name="exits-waiting", lease=10, **TLS)
        waiter = threading.Thread(target=client.rwlock({name!r}).write, daemon=True)
        waiter.start()
        print("WAITING", flush=True)
        if {ending!r} == "return":
            sys.stdin.readline()
        else:
            waiter.join()
    """)
    with lock.write(timeout=5):
        assert child.stdout.readline().strip() == "WAITING", child.stderr.read()
        queued(lock)
        if ending == "return":
            child.stdin.write("\n")
            child.stdin.flush()
        else:
            child.send_signal(signal.SIGINT)
        _, err = child.communicate(timeout=30)
        assert ending != "return" or (child.returncode == 0 and err == ""), err
        assert lock.state()["waiting_writers"] == []  # withdrawn on the way out
    waited = _granted_in(client.rwlock(name, lease=10))
    assert waited < 2.0, f"a writer waited {waited:.1f} s for a lock handed to a process that had exited"


class _BlackHole:
    """A TCP proxy to 127.0.0.1:`port` that, once cut, forwards nothing and answers
    nothing: its connections stay open, new ones are accepted and never served."""

    def __init__(self, port):
        import socket
        import threading

        self._socket, self._target, self.cut = socket, port, threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._kept = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        import threading

        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            self._kept.append(conn)
            if self.cut.is_set():
                continue
            up = self._socket.create_connection(("127.0.0.1", self._target))
            self._kept.append(up)
            for a, b in ((conn, up), (up, conn)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, src, dst):
        while True:
            try:
                data = src.recv(65536)
                if not data:
                    return
                if not self.cut.is_set():
                    dst.sendall(data)
            except OSError:
                return

    def close(self):
        for s in [self._listener, *self._kept]:
            s.close()


@pytest.fixture
def lone_redis(tmp_path):
    """A standalone redis-server of this test's own (a single node, not a cluster)."""
    import shutil
    import socket

    server = shutil.which("redis-server")
    if server is None:
        pytest.skip("no redis-server on this machine")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([server, "--port", str(port), "--save", "", "--appendonly", "no",
                             "--dir", str(tmp_path)], stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if time.monotonic() > deadline:
                proc.kill()
                pytest.fail("redis-server did not start")
            time.sleep(0.05)
    yield port
    proc.kill()
    proc.wait()


def test_an_exit_with_the_server_unreachable_is_bounded(lone_redis):
    proxy = _BlackHole(lone_redis)
    try:
        child = _child(f"""
            import sys, cluster_rwlock
            client = cluster_rwlock.connect("redis://127.0.0.1:{proxy.port}", client_name="cut-off")
            held = [client.rwlock("a:{{a}}").write(timeout=5), client.rwlock("b:{{b}}").read(timeout=5)]
            print("HELD", flush=True)
            sys.stdin.readline()
        """)
        assert child.stdout.readline().strip() == "HELD", child.stderr.read()
        proxy.cut.set()
        started = time.monotonic()
        child.stdin.write("\n")
        child.stdin.flush()
        try:
            child.wait(timeout=20)
        except subprocess.TimeoutExpired:
            child.kill()
            pytest.fail("the exit took over 20 s")
        took = time.monotonic() - started
        assert took < 5.0, f"the exit took {took:.1f} s"
    finally:
        proxy.close()


def test_release_on_sigterm_gives_everything_back_and_exits_143(client, name, seeds):
    waited_for = name.replace("py-", "py-w-")
    lock, other = client.rwlock(name, lease=10), client.rwlock(waited_for, lease=10)
    child = _child(f"""
        import signal, threading, time, cluster_rwlock
        {CHILD_TLS}
        signal.signal(signal.SIGTERM, lambda *_: print("PREVIOUS", flush=True))
        cluster_rwlock.release_on_sigterm()
        client = cluster_rwlock.connect({seeds!r}, client_name="terminated", lease=10, **TLS)
        held = client.rwlock({name!r}).write(timeout=5)
        # a thread that is not a daemon waits: it must not keep the process alive
        threading.Thread(target=client.rwlock({waited_for!r}).write).start()
        print("HELD", flush=True)
        time.sleep(60)
    """)
    with other.write(timeout=5):
        assert child.stdout.readline().strip() == "HELD", child.stderr.read()
        queued(other)
        assert lock.try_write() is None
        sent = time.monotonic()
        child.send_signal(signal.SIGTERM)
        out, err = child.communicate(timeout=20)
        assert child.returncode == 143, err
        assert out.strip() == "PREVIOUS"
        waited = _granted_in(lock)
        assert time.monotonic() - sent < 2.0 and waited < 1.0, f"a writer waited {waited:.1f} s"
        assert other.state()["waiting_writers"] == []
    assert _granted_in(other) < 2.0


def test_a_loss_a_call_finds_is_told_at_once(client, name):
    tag = name[name.index("{"):]
    lock = client.rwlock(name)  # the default lease: no renewal for 10 s to find the loss
    w = lock.write(timeout=5)
    assert client.force_release(name)["holds_removed"] == 1
    with pytest.raises(cluster_rwlock.LockLost):
        w.guarded().set(f"late:{tag}", "x").run()
    assert w.is_lost and w.lost.is_set() and "lost" in repr(w)
    # a release that finds the hold gone says so, and sets the event too
    w = lock.write(timeout=5)
    assert client.force_release(name)["holds_removed"] == 1
    with pytest.raises(cluster_rwlock.LockLost):
        w.release()
    assert w.is_lost and w.lost.is_set() and "lost" in repr(w)


def test_a_cancelled_upgrade_tells_its_guard_at_once(client, seeds, name):
    import asyncio

    async def main():
        async with await cluster_rwlock.connect_async(seeds, **tls()) as ac:
            u = await ac.rwlock(name).upgradable_read(timeout=5)
            reader = client.rwlock(name).read(timeout=5)  # keeps the upgrade waiting
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(u.upgrade(), 0.3)
            # the upgradable hold went with the cancelled upgrade: not believed a moment more
            assert not u.is_held and u.is_lost and u.lost.is_set() and "lost" in repr(u)
            reader.release()
            deadline = time.monotonic() + 2
            while (w := client.rwlock(name).try_write()) is None and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            assert w is not None, "the cancelled upgrade left a hold or a place behind"
            w.release()

    asyncio.run(main())


def test_the_async_clients_force_release_is_awaited(client, seeds, name):
    import asyncio

    async def main():
        async with await cluster_rwlock.connect_async(seeds, **tls()) as ac:
            w = client.rwlock(name).write(timeout=5)
            ticks = 0

            async def tick():
                nonlocal ticks
                while True:
                    ticks += 1
                    await asyncio.sleep(0)

            ticker = asyncio.ensure_future(tick())
            broken = await ac.force_release(name)  # an awaitable: the loop runs meanwhile
            ticker.cancel()
            assert broken["holds_removed"] == 1 and broken["fence"] is not None
            assert ticks > 0, "force_release blocked the event loop"
            with pytest.raises(cluster_rwlock.LockLost):
                w.release()

    asyncio.run(main())


def test_the_fenced_store_keeps_the_highest_fence(client, seeds, name):
    tag = name[name.index("{"):]
    key = "fenced:{%s}" % uuid.uuid4().hex  # another slot than the lock's
    assert client.fenced_get(key) is None
    assert client.fenced_set(key, 5, "five") == cluster_rwlock.FencedWrite(True, 5)
    late = client.fenced_set(key, 3, b"three")
    assert not late.written and late.fence == 5
    assert client.fenced_get(key) == (5, b"five")
    assert client.fenced_set(key, 5, b"again").written  # an equal fence writes again
    assert client.fenced_set(key, 9, 42) == (True, 9)
    assert client.fenced_get(key) == (9, b"42")
    # a lock's own key is refused before anything is sent
    lock = client.rwlock(name)
    with pytest.raises(cluster_rwlock.LockKey) as caught:
        client.fenced_set(lock.key, 1, "x")
    e = caught.value
    assert isinstance(e, cluster_rwlock.InvalidCommand) and isinstance(e, ValueError)
    assert e.key == lock.key and not e.is_retryable
    # a key of another type is left as it is; a hash that is not a fenced value is named
    with lock.write(timeout=5) as w:
        w.guarded().set(f"plain:{tag}", "x").hset(f"half:{tag}", "fence", "1").run()
    with pytest.raises(cluster_rwlock.WrongType) as caught:
        client.fenced_set(f"plain:{tag}", 1, "y")
    assert caught.value.key == f"plain:{tag}" and caught.value.found == "string"
    with pytest.raises(cluster_rwlock.ProtocolError):
        client.fenced_get(f"half:{tag}")
    with lock.read(timeout=5) as r:
        assert r.guarded().get(f"plain:{tag}").run() == [b"x"]

    async def main():
        async with await cluster_rwlock.connect_async(seeds, **tls()) as ac:
            assert await ac.fenced_set(key, 8, "old") == (False, 9)
            assert await ac.fenced_set(key, 10, b"ten") == (True, 10)
            assert await ac.fenced_get(key) == (10, b"ten")
            assert await ac.fenced_get(key + ":none") is None
            with pytest.raises(cluster_rwlock.LockKey):
                await ac.fenced_set(lock.key, 1, "x")

    import asyncio
    asyncio.run(main())


def test_holders_carry_their_client_name(client, seeds, name):
    other = cluster_rwlock.connect(seeds, client_name="holder-b", **tls())
    try:
        a, b = client.rwlock(name).read(timeout=5), other.rwlock(name).read(timeout=5)
        holders = {h["owner"]: h for h in client.rwlock(name).state()["holders"]}
        assert holders[a.owner]["client"] == "pytest"
        assert holders[b.owner]["client"] == "holder-b"
        a.release()
        b.release()
    finally:
        other.close()


def test_break_client_takes_a_clients_holds_and_places(client, seeds, name):
    victim_name = "victim-" + uuid.uuid4().hex[:8]
    victim = cluster_rwlock.connect(seeds, client_name=victim_name, lease=0.6, **tls())
    try:
        held = victim.rwlock(name).write(timeout=5)
        waiter, outcome = waiter_for_write(victim.rwlock(name), timeout=20)
        lock = client.rwlock(name)
        queued(lock, within=5)
        state = lock.state()
        assert [h["client"] for h in state["holders"]] == [victim_name]
        assert len(state["waiting_writers"]) == 1
        with pytest.raises(cluster_rwlock.InvalidConfig):
            client.break_client(name, "no spaces allowed")
        nobody = client.break_client(name, "someone-else")
        assert nobody["holds_removed"] == 0 and nobody["places_removed"] == 0
        broken = client.break_client(name, victim_name)
        assert broken["holds_removed"] == 1 and broken["places_removed"] == 1
        assert broken["fence"] >= held.fence
        waiter.join(5)
        assert not waiter.is_alive()
        assert len(outcome) == 1 and isinstance(outcome[0], cluster_rwlock.Broken), outcome
        assert outcome[0].client == victim_name and not outcome[0].is_retryable
        assert held.lost.wait(2.0), "the broken holder was not told within 2 s"
        with pytest.raises(cluster_rwlock.LockLost):
            held.release()
        with lock.write(timeout=2) as w:
            assert w.fence > broken["fence"]
    finally:
        victim.close()

    async def main():
        async with await cluster_rwlock.connect_async(seeds, client_name=victim_name, **tls()) as ac:
            r = await ac.rwlock(name).read(timeout=5)
            broken = await ac.break_client(name, victim_name)
            assert broken["holds_removed"] == 1 and broken["places_removed"] == 0
            assert broken["fence"] >= r.fence
            with pytest.raises(cluster_rwlock.InvalidName):
                await ac.break_client("", victim_name)

    import asyncio
    asyncio.run(main())


# Every kind of the Rust client's error (src/error.rs) and the class it is raised as.
RUST_KINDS = {
    "InvalidName": "InvalidName", "InvalidConfig": "InvalidConfig",
    "InvalidOwner": "InvalidOwner", "Timeout": "Timeout",
    "UpgradeDeadlock": "UpgradeDeadlock", "LockLost": "LockLost", "Broken": "Broken",
    "NotReplicated": "NotReplicated", "WriteNotReplicated": "WriteNotReplicated",
    "LockKey": "LockKey", "WrongType": "WrongType", "Corrupt": "Corrupt",
    "OtherLayout": "OtherLayout", "NotSetUp": "NotSetUp", "Unsupported": "Unsupported",
    "Protocol": "ProtocolError", "Closed": "Closed", "Unavailable": "Unavailable",
    "InvalidCommand": "InvalidCommand", "WrongSlot": "WrongSlot",
    "CommandFailed": "CommandFailed", "ConditionFailed": "ConditionFailed",
    "Server": "ServerError", "Connection": "ConnectionFailed",
    "Connect": None,  # raised as the class of its cause, with `addr`
}


def test_every_rust_error_kind_has_a_class():
    import pathlib
    import re

    source = pathlib.Path(__file__).resolve().parents[2] / "src" / "error.rs"
    if source.exists():
        body = source.read_text().split("pub enum Error {", 1)[1].split("\n}\n", 1)[0]
        variants = re.findall(r"^    ([A-Z][A-Za-z]*)\b", body, re.M)
        assert sorted(variants) == sorted(RUST_KINDS), "a kind of the Rust error has no class here"
    for kind, cls in RUST_KINDS.items():
        if cls is None:
            continue
        c = getattr(cluster_rwlock, cls)
        assert issubclass(c, cluster_rwlock.LockError) and c.__doc__, kind
        assert cls in cluster_rwlock.errors.__all__
    e = cluster_rwlock.errors
    assert issubclass(e.InvalidOwner, e.InvalidConfig)
    assert issubclass(e.WriteNotReplicated, e.NotReplicated)
    assert issubclass(e.WrongSlot, e.InvalidCommand) and issubclass(e.LockKey, e.InvalidCommand)
    assert issubclass(e.NotSetUp, e.PermissionDenied)
    assert issubclass(e.ConnectionFailed, ConnectionError)


def test_errors_are_raised_as_their_own_kind(client, name):
    with pytest.raises(cluster_rwlock.InvalidOwner) as caught:
        client.force_release(name, "an owner with spaces")
    assert isinstance(caught.value, cluster_rwlock.InvalidConfig)
    with client.rwlock(name).write(timeout=5) as w:
        elsewhere = "k:{%s}" % uuid.uuid4().hex
        with pytest.raises(cluster_rwlock.WrongSlot) as caught:
            w.guarded().set(elsewhere, "x").run()
    e = caught.value
    assert e.key == elsewhere and e.lock_slot == w.lock.slot and e.key_slot != e.lock_slot
    assert e.hint and isinstance(e, cluster_rwlock.InvalidCommand)
