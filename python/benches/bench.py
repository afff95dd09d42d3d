#!/usr/bin/env python3
"""The Python package beside python-redis-lock, in one run, on one cluster.

    python3 python/benches/bench.py                 # starts the test bed's cluster
    python3 python/benches/bench.py --url redis://127.0.0.1:7000 --seconds 5

B1, uncontended cycles (acquire + release of a free lock) per second: one thread, then
8 threads on 8 locks; cluster_rwlock with the default confirmation (`durability="all"`:
WAIT for the replicas) and with `durability="master"`, python-redis-lock (a mutex on one
node, no confirmation, no renewal unless asked) on the master of its key's slot.
The Rust client's one-task B1 on the same cluster is printed beside, so that the cost of
the binding itself shows. B2, hand-off: a holder holds, a waiter on another client (and thread) blocks in
acquire; 5 ms later the holder releases; the time from the release call to the waiter's
return (p50 and p99, ms). The locks' hand-offs run in turns, a block of each in every
one of ROUNDS rounds (the first lock of a round rotating), so that each sees the same
minutes of a noisy machine. Prints a Markdown table and one JSON line per figure.
python-redis-lock's rows need `pip install python-redis-lock`.
"""

import argparse
import json
import os
import pathlib
import subprocess
import sys
import threading
import time
import uuid

import cluster_rwlock

ROOT = pathlib.Path(__file__).resolve().parents[2]
THREADS = 8
ROUNDS = 10


def pct(values, p):
    values = sorted(values)
    rank = max(1, -(-len(values) * p // 100))
    return values[min(rank, len(values)) - 1]


def cycles_per_second(make_cycle, threads, seconds):
    """Cycles per second of `threads` threads, each running its own `make_cycle()`."""
    counts = [0] * threads
    stop = time.monotonic() + seconds
    cycles = [make_cycle(i) for i in range(threads)]

    def loop(i):
        cycle, n = cycles[i], 0
        while time.monotonic() < stop:
            cycle()
            n += 1
        counts[i] = n

    started = time.monotonic()
    ts = [threading.Thread(target=loop, args=(i,)) for i in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return sum(counts) / (time.monotonic() - started)


def handoffs(acquire_a, acquire_b, count):
    """B2: the release-to-grant latencies (ms) of `count` hand-offs between two holders;
    `acquire_x()` returns a release function."""
    holders = [acquire_a, acquire_b]
    release = holders[0]()
    who, latencies = 0, []
    for _ in range(count):
        waiter = 1 - who
        got = []
        t = threading.Thread(target=lambda: got.append((holders[waiter](), time.perf_counter())))
        t.start()
        time.sleep(0.005)
        t0 = time.perf_counter()
        release()
        t.join()
        release, at = got[0]
        latencies.append((at - t0) * 1000.0)
        who = waiter
    release()
    return latencies


def ours(seeds, seconds, durability):
    """B1 of the package, and B2's two holders (each acquire returns its release):
    (one thread, THREADS threads, holders, close)."""
    tag = uuid.uuid4().hex[:8]
    clients = [cluster_rwlock.connect(seeds, durability=durability, client_name=f"bench-{i}") for i in range(2)]

    def close():
        for c in clients:
            c.close()

    try:
        def make(i):
            lock = clients[0].rwlock(f"b1-{tag}-{i}")
            return lambda: lock.write().release()

        one = cycles_per_second(make, 1, seconds)
        many = cycles_per_second(make, THREADS, seconds)
        locks = [c.rwlock(f"b2-{tag}") for c in clients]
        return one, many, [(lambda lock=lock: lock.write().release) for lock in locks], close
    except BaseException:
        close()
        raise


def python_redis_lock(seeds, seconds):
    """As ours(); None without the package."""
    try:
        import redis
        import redis_lock
    except ImportError:
        return None
    host, port = seeds[0].split("//", 1)[1].rsplit(":", 1)
    tag = uuid.uuid4().hex[:8]
    cluster = redis.cluster.RedisCluster(host=host, port=int(port))

    def master_of(name):
        # python-redis-lock is not cluster-aware: talk to the master of the key's slot
        node = cluster.get_node_from_key(f"lock:{name}")
        return redis.Redis(host=node.host, port=node.port)

    def make(i):
        name = f"{{b1-{tag}-{i}}}"
        lock = redis_lock.Lock(master_of(name), name, expire=30)
        return lambda: (lock.acquire(), lock.release())

    one = cycles_per_second(make, 1, seconds)
    many = cycles_per_second(make, THREADS, seconds)
    name = f"{{b2-{tag}}}"
    locks = [redis_lock.Lock(master_of(name), name, expire=30) for _ in range(2)]

    def acquirer(lock):
        def acquire():
            lock.acquire()
            return lock.release
        return acquire

    return one, many, [acquirer(locks[0]), acquirer(locks[1])], cluster.close


def interleaved(holders, count):
    """B2 of each pair of `holders`, `count` hand-offs each, in ROUNDS rounds of a block
    of each (the first of a round rotating): the latencies of each pair."""
    lat = [[] for _ in holders]
    per = max(1, count // ROUNDS)
    for r in range(ROUNDS):
        for k in range(len(holders)):
            i = (r + k) % len(holders)
            lat[i].extend(handoffs(*holders[i], per))
    return lat


def interop():
    """The Rust peer (a release build: its `cycles` figure is the Rust client's)."""
    subprocess.run(["cargo", "build", "--quiet", "--release", "--example", "interop"], cwd=ROOT, check=True)
    target = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    return str(target / "release" / "examples" / "interop")


def rust_cycles(seeds, seconds, durability):
    """B1 of the Rust client, one task, on the same cluster in the same run."""
    args = [interop(), "cycles", "--url", seeds[0], "--seconds", str(max(1, round(seconds)))]
    if durability == "master":
        args += ["--durability", "master"]
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    return float(next(line for line in out.splitlines() if line.startswith("CYCLES")).split()[1])


def start_testbed():
    proc = subprocess.Popen(
        [interop(), "testbed"],
        cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    urls = []
    for line in proc.stdout:
        if line.startswith("URL "):
            urls.append(line.split()[1])
        if line.strip() == "READY" or line.startswith("ERROR"):
            break
    if not urls:
        proc.kill()
        sys.exit("the test bed did not start")
    return proc, urls


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", help="a node of a running cluster (default: start the test bed's)")
    ap.add_argument("--seconds", type=float, default=5.0, help="per B1 figure")
    ap.add_argument("--handoffs", type=int, default=200)
    args = ap.parse_args()
    testbed, seeds = (None, [args.url]) if args.url else start_testbed()
    try:
        rust = {d: rust_cycles(seeds, args.seconds, d) for d in ("all", "master")}
        setups = [
            ("cluster_rwlock (Python), default", ours(seeds, args.seconds, "all")),
            ("cluster_rwlock (Python), durability=\"master\"", ours(seeds, args.seconds, "master")),
            ("python-redis-lock 4", python_redis_lock(seeds, args.seconds)),
        ]
        present = [r for _, r in setups if r is not None]
        try:
            lats = iter(interleaved([r[2] for r in present], args.handoffs))
        finally:
            for r in present:
                r[3]()
        rows = [(who, None if r is None else (r[0], r[1], next(lats))) for who, r in setups]
    finally:
        if testbed:
            testbed.stdin.close()
            testbed.wait(timeout=120)
    print(f"\n| lock | B1 cycles/s, 1 thread | B1 cycles/s, {THREADS} threads | B2 hand-off p50 ms | p99 ms |")
    print("|---|---|---|---|---|")
    for d, c in rust.items():
        print(f"| cluster-rwlock (Rust, one task), durability=\"{d}\" | {c:,.0f} | | | |")
        print(json.dumps({"bench": "python", "who": f"cluster-rwlock (Rust) {d}", "b1_one": round(c)}))
    for who, r in rows:
        if r is None:
            print(f"| {who} | not measured (`pip install python-redis-lock`) | | | |")
            continue
        one, many, lat = r
        p50, p99 = pct(lat, 50), pct(lat, 99)
        print(f"| {who} | {one:,.0f} | {many:,.0f} | {p50:.2f} | {p99:.2f} |")
        print(json.dumps({"bench": "python", "who": who, "b1_one": round(one), "b1_many": round(many),
                          "b2_p50_ms": round(p50, 3), "b2_p99_ms": round(p99, 3)}))


if __name__ == "__main__":
    main()
