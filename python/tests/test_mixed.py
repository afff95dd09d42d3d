"""Rust and Python holders of the same locks: they exclude each other, their fences
grow across both, a Python waiter is woken by a Rust release, a frozen Python holder
loses to a Rust writer and is told, a late Python write to the fenced store is refused
after a Rust writer's, and an operator's break of a client reaches its holders and
waiters whichever side breaks. The Rust side is `examples/interop.rs`; both sides
stamp their holds with the wall clock of this one machine (`time.time_ns()`)."""

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid

import pytest

import cluster_rwlock
from conftest import CHILD_TLS, queued, rust_tls, tls, waiter_for_write

SECONDS = 5


def rust(interop, seeds, *args):
    return subprocess.Popen(
        [str(interop), *args[:1], "--url", seeds[0], *rust_tls(), *args[1:]],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True,
    )


def rust_holds(proc):
    """The `HOLD` lines of a hammer as (mode, fence, start_ns, end_ns, "rust")."""
    out, _ = proc.communicate(timeout=SECONDS + 60)
    assert proc.returncode == 0, out[-500:]
    holds = []
    for line in out.splitlines():
        if line.startswith("HOLD "):
            _, mode, fence, start, end = line.split()
            holds.append((mode, int(fence), int(start), int(end), "rust"))
    return holds


def python_hammer(lock, mode, holds, until, hold_s=0.005):
    while time.monotonic() < until:
        g = lock.write(timeout=10) if mode == "write" else lock.read(timeout=10)
        start = time.time_ns()
        time.sleep(hold_s)
        end = time.time_ns()
        g.release()
        holds.append((mode, g.fence, start, end, "python"))
        time.sleep(hold_s)


def check(holds):
    """No write overlaps another hold; a grant after a write has a higher fence."""
    writes = [h for h in holds if h[0] == "write"]
    for w in writes:
        for h in holds:
            if h is not w and h[2] < w[3] and w[2] < h[3]:
                pytest.fail(f"{w} overlaps {h}")
        later = [h for h in holds if h[2] >= w[3]]
        assert all(h[1] > w[1] for h in later), f"a grant after {w} has a fence not above it"
    by_start = sorted(writes, key=lambda h: h[2])
    assert [h[1] for h in by_start] == sorted(h[1] for h in writes)


def run_mixed(client, interop, seeds, name, rust_modes, python_modes):
    procs = [rust(interop, seeds, "hammer", "--name", name, "--mode", m, "--seconds", str(SECONDS))
             for m in rust_modes]
    until = time.monotonic() + SECONDS
    holds, threads = [], []
    for m in python_modes:
        t = threading.Thread(target=python_hammer, args=(client.rwlock(name), m, holds, until))
        t.start()
        threads.append(t)
    for t in threads:
        t.join()
    for p in procs:
        holds.extend(rust_holds(p))
    check(holds)
    return holds


def test_a_rust_writer_and_python_readers_never_overlap(client, interop, seeds, name):
    holds = run_mixed(client, interop, seeds, name, ["write"], ["read", "read", "read", "write"])
    counts = {(h[4], h[0]): 0 for h in holds}
    for h in holds:
        counts[(h[4], h[0])] += 1
    assert counts.get(("rust", "write"), 0) >= 10, counts
    assert counts.get(("python", "read"), 0) >= 10, counts
    assert counts.get(("python", "write"), 0) >= 5, counts


def test_python_writers_and_rust_readers_never_overlap(client, interop, seeds, name):
    holds = run_mixed(client, interop, seeds, name, ["read", "read"], ["write", "write"])
    assert sum(1 for h in holds if h[4] == "rust") >= 10
    assert sum(1 for h in holds if h[4] == "python") >= 10


def test_a_python_waiter_is_woken_by_a_rust_release(seeds, interop, name):
    # a waiter that is not woken looks again only after 5 s
    with cluster_rwlock.connect(seeds, retry_interval=5.0, **tls()) as client:
        holder = rust(interop, seeds, "hold", "--name", name, "--mode", "write", "--for-ms", "1500")
        granted = holder.stdout.readline().split()
        assert granted[0] == "GRANTED", granted
        w = client.rwlock(name).write(timeout=10)
        got = time.time_ns()
        lines = holder.communicate(timeout=30)[0].split("\n")
        releasing = int(next(line for line in lines if line.startswith("RELEASING")).split()[1])
        assert got > releasing
        assert (got - releasing) / 1e9 < 0.5, f"woken {(got - releasing) / 1e9:.3f} s after the release"
        assert w.fence > int(granted[1])
        w.release()


FROZEN_HOLDER = textwrap.dedent("""
    import sys, time, cluster_rwlock
    %s
    seeds, name = sys.argv[1], sys.argv[2]
    client = cluster_rwlock.connect([seeds], lease=1.0, client_name="frozen", **TLS)
    w = client.rwlock(name).write(timeout=10)
    print("GRANTED", w.fence, flush=True)
    sys.stdin.readline()  # frozen here by the test, then told to look
    told = w.lost.wait(1.0)
    print("LOST", told, w.is_lost, flush=True)
    tag = name[name.index("{"):]
    try:
        w.guarded().set("late:" + tag, "x").run()
        print("GUARDED written", flush=True)
    except cluster_rwlock.LockLost:
        print("GUARDED LockLost", flush=True)
    try:
        w.release()
        print("RELEASE ok", flush=True)
    except cluster_rwlock.LockLost:
        print("RELEASE LockLost", flush=True)
""" % CHILD_TLS)


def test_a_frozen_python_holder_loses_to_a_rust_writer_and_is_told(client, interop, seeds, name):
    child = subprocess.Popen(
        [sys.executable, "-c", FROZEN_HOLDER, seeds[0], name],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        first = child.stdout.readline().split()
        assert first[0] == "GRANTED", first
        child_fence = int(first[1])
        os.kill(child.pid, signal.SIGSTOP)
        frozen_at = time.monotonic()
        writer = rust(interop, seeds, "hold", "--name", name, "--mode", "write", "--for-ms", "100")
        granted = writer.stdout.readline().split()
        waited = time.monotonic() - frozen_at
        assert granted[0] == "GRANTED", granted
        assert int(granted[1]) > child_fence
        assert waited < 6.0, f"the Rust writer waited {waited:.1f} s for a 1 s lease"
        assert writer.wait(timeout=30) == 0
        os.kill(child.pid, signal.SIGCONT)
        child.stdin.write("look\n")
        child.stdin.flush()
        out = child.communicate(timeout=30)[0].split("\n")
        assert out[0] == "LOST True True", out
        assert out[1] == "GUARDED LockLost", out
        assert out[2] == "RELEASE LockLost", out
    finally:
        if child.poll() is None:
            os.kill(child.pid, signal.SIGCONT)
            child.kill()
    tag = name[name.index("{"):]
    with client.rwlock(name).read(timeout=5) as r:
        assert r.guarded().get("late:" + tag).run() == [None]


def test_a_late_python_fenced_write_is_refused_after_a_rust_writers(client, interop, seeds, name):
    key = "report:{%s}" % uuid.uuid4().hex  # another slot than the lock's
    w = client.rwlock(name).write(timeout=5)
    assert client.fenced_set(key, w.fence, "python") == (True, w.fence)
    # the Python holder is taken for dead: an operator breaks its hold
    assert client.force_release(name)["holds_removed"] == 1
    writer = rust(interop, seeds, "hold", "--name", name, "--mode", "write", "--for-ms", "100",
                  "--fenced-key", key, "--value", "rust")
    out = writer.communicate(timeout=30)[0].split("\n")
    assert writer.returncode == 0, out
    rust_fence = int(out[0].split()[1])
    assert rust_fence > w.fence
    assert out[1] == f"FENCED true {rust_fence}", out
    # the Python holder, late, writes with its old fence: refused, the Rust value stays
    late = client.fenced_set(key, w.fence, "python, late")
    assert not late.written and late.fence == rust_fence
    assert client.fenced_get(key) == (rust_fence, b"rust")
    with pytest.raises(cluster_rwlock.LockLost):
        w.release()


def test_a_rust_operators_break_reaches_a_python_holder_and_waiter(interop, seeds, name):
    victim_name = "py-victim-" + uuid.uuid4().hex[:8]
    with cluster_rwlock.connect(seeds, client_name=victim_name, lease=0.6, **tls()) as victim:
        held = victim.rwlock(name).write(timeout=5)
        waiter, outcome = waiter_for_write(victim.rwlock(name), timeout=30)
        queued(held.lock, within=5)
        operator = rust(interop, seeds, "break", "--name", name, "--client", victim_name)
        out = operator.communicate(timeout=30)[0].split()
        assert operator.returncode == 0, out
        assert out[0] == "BROKE" and out[1] == "1" and out[3] == "1", out
        waiter.join(5)
        assert not waiter.is_alive()
        assert len(outcome) == 1 and isinstance(outcome[0], cluster_rwlock.Broken), outcome
        assert outcome[0].client == victim_name
        assert held.lost.wait(2.0), "the broken Python holder was not told within 2 s"
        with pytest.raises(cluster_rwlock.LockLost):
            held.release()
        assert held.lock.state()["holders"] == []


def test_python_breaks_a_rust_clients_holder_and_waiter(client, interop, seeds, name):
    victim_name = "rust-victim-" + uuid.uuid4().hex[:8]
    common = ["--name", name, "--mode", "write", "--client-name", victim_name,
              "--lease-ms", "1500", "--for-ms", "60000", "--timeout-ms", "60000"]
    holder = rust(interop, seeds, "hold", *common)
    waiter = None
    try:
        granted = holder.stdout.readline().split()
        assert granted[0] == "GRANTED", granted
        waiter = rust(interop, seeds, "hold", *common)
        lock = client.rwlock(name)
        queued(lock)
        state = lock.state()
        assert [h["client"] for h in state["holders"]] == [victim_name]
        assert len(state["waiting_writers"]) == 1
        broken = client.break_client(name, victim_name)
        assert broken["holds_removed"] == 1 and broken["places_removed"] == 1, broken
        assert broken["fence"] >= int(granted[1])
        out = waiter.communicate(timeout=10)[0].split("\n")
        assert waiter.returncode == 0 and out[0] == f"BROKEN {victim_name}", out
        out = holder.communicate(timeout=10)[0].split("\n")
        assert holder.returncode == 0, out
        assert out[0].startswith("LOST ") and out[1] == "RELEASE LockLost", out
        with lock.write(timeout=2) as w:
            assert w.fence > broken["fence"]
    finally:
        for p in (holder, waiter):
            if p is not None and p.poll() is None:
                p.kill()


def test_the_overlap_check_finds_what_it_is_for():
    check([("write", 1, 0, 10, "rust"), ("read", 2, 20, 30, "python"), ("read", 2, 25, 35, "rust")])
    with pytest.raises(pytest.fail.Exception):
        check([("write", 1, 0, 10, "rust"), ("read", 2, 5, 15, "python")])
    with pytest.raises(AssertionError):
        check([("write", 5, 0, 10, "rust"), ("read", 3, 20, 30, "python")])
