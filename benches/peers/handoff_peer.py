#!/usr/bin/env python3
"""B2 for python-redis-lock: the hand-off latency between two clients, as benches/peers
measures it for cluster-rwlock: a holder holds, a waiter on another connection (and
thread) blocks in acquire(); 5 ms later the holder releases; the time from the release
call to the waiter's return. The lock's two keys share a hashtag, so both live on the
master of one slot, which this script is given.

    python3 handoff_peer.py HOST PORT COUNT

Prints one line: `p50_ms p99_ms`. Needs `pip install python-redis-lock`.
"""

import sys
import threading
import time

import redis
import redis_lock


def pct(sorted_values, p):
    rank = max(1, -(-len(sorted_values) * p // 100))
    return sorted_values[min(rank, len(sorted_values)) - 1]


def main():
    host, port, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    clients = [redis.Redis(host=host, port=port), redis.Redis(host=host, port=port)]
    name = "{b2peer}%d" % time.monotonic_ns()
    locks = [redis_lock.Lock(c, name, expire=30) for c in clients]
    locks[0].acquire()
    holder = 0
    latencies = []
    for _ in range(count):
        waiter = 1 - holder
        got = []
        t = threading.Thread(target=lambda: (locks[waiter].acquire(), got.append(time.perf_counter())))
        t.start()
        time.sleep(0.005)
        t0 = time.perf_counter()
        locks[holder].release()
        t.join()
        latencies.append((got[0] - t0) * 1000.0)
        holder = waiter
    locks[holder].release()
    latencies.sort()
    print("%.3f %.3f" % (pct(latencies, 50), pct(latencies, 99)))


if __name__ == "__main__":
    main()
