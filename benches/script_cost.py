#!/usr/bin/env python3
"""Server instructions per uncontended lock cycle, side by side, in one run.

Starts one `redis-server` (cluster mode, all slots) under valgrind's callgrind, which
counts instructions: unlike time, the count does not depend on what else the machine
is doing. Sends N uncontended cycles, pipelined, each on a lock's tombstone (every key
had one cycle before the counted one, as in B1, where a task takes its lock again and
again), of
  - cluster-rwlock: acquire (write) + release, FCALLs of the function library as the
    client loads it (assembled from src/lua in the order of `library_text!` in
    src/scripts/library.rs);
  - floor: two functions that make the same Redis calls as the fast paths (HGET, TIME,
    HSET; HGET, HSET) with no logic around them;
  - rslock's cycle: SET NX PX + its unlock script (GET, DEL);
and prints the server's instructions per cycle for each (whole process: parsing,
commands, replies), round by round, and the ratios to rslock. Then the release that
hands a lock over to the writer queued first, while another writer waits behind it
(the contended hand-off of B4), told the queue's head ticket field by its grant (as the
client sends it) and not told (`1` alone), each on keys of its own, in the same rounds.

    python3 benches/script_cost.py [--n 2000] [--rounds 3] [--locks L] [--server redis-server]

With --locks L, the cycles go round L locks, each taken by an owner of its own (B1's
tasks: 32); by default every cycle is on a lock, and by an owner, of its own.

Needs valgrind, a redis-server (or valkey-server) binary and the `redis` package
(`pip install redis`). The first round includes warm-up effects; compare the later ones.
"""

import argparse
import glob
import os
import subprocess
import sys
import tempfile
import time

import redis

HERE = os.path.dirname(os.path.abspath(__file__))
LUA = os.path.join(HERE, "..", "src", "lua")
LIBRARY_RS = os.path.join(HERE, "..", "src", "scripts", "library.rs")
UNLOCK = 'if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) else return 0 end'
# layout 4's fast paths' calls on a tombstone, no logic: one library of two functions,
# the same file that benches/peers runs as its floor
FLOOR_FUNCTIONS = open(os.path.join(HERE, "floor.lua")).read()


def library():
    """The library as `LIBRARY` in src/scripts/library.rs is built: its first lines, then
    the files its `library_text!` macro includes, in that order."""
    import re
    files = re.findall(r'include_str!\("\.\./lua/([a-z_]+\.lua)"\)', open(LIBRARY_RS).read())
    head = "#!lua name=cluster_rwlock_4\nlocal PREFIX = 'rwlock4_'\nlocal GENERAL_ONLY = false\n"
    return head + "\n".join(open(os.path.join(LUA, f)).read() for f in files)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=2000, help="cycles per round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--locks", type=int, default=None,
                    help="locks the cycles go round (default: one lock, and one owner, per cycle)")
    ap.add_argument("--server", default="redis-server")
    ap.add_argument("--port", type=int, default=7394)
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="script-cost-")
    server = subprocess.Popen(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=%s/out.%%p" % work,
         a.server, "--port", str(a.port), "--save", "", "--appendonly", "no",
         "--cluster-enabled", "yes", "--cluster-config-file", "%s/nodes.conf" % work],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def instructions():
        """Instructions since the last call (callgrind dumps and zeroes its counters)."""
        subprocess.run(["callgrind_control", "-d", str(server.pid)],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        for _ in range(100):
            dumps = sorted(glob.glob("%s/out.%d.*" % (work, server.pid)), key=os.path.getmtime)
            if dumps:
                for line in open(dumps[-1]):
                    if line.startswith(("totals:", "summary:")):
                        os.remove(dumps[-1])
                        return int(line.split()[1])
            time.sleep(0.1)
        raise SystemExit("no callgrind dump")

    try:
        r = redis.Redis(port=a.port)
        for _ in range(600):
            try:
                r.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.1)
        r.execute_command("CLUSTER", "ADDSLOTSRANGE", 0, 16383)
        for _ in range(300):
            if b"cluster_state:ok" in r.execute_command("CLUSTER", "INFO"):
                break
            time.sleep(0.1)
        r.execute_command("FUNCTION", "LOAD", "REPLACE", library())
        r.execute_command("FUNCTION", "LOAD", "REPLACE", FLOOR_FUNCTIONS)
        unlock = r.script_load(UNLOCK)

        def lock_of(i, base):
            """The lock of cycle i of a round from `base`: its own, or with --locks, one of
            L taken by the same owner each time (a B1 task takes its own lock again and
            again)."""
            return i if a.locks is None else base + (i - base) % a.locks

        def lock_cycles(names, prefix, base):
            out = []
            for i in range(base, base + a.n):
                j = lock_of(i, base)
                key, owner = "%s:{n%d}" % (prefix, j), "owner-%d" % j
                # as the client sends them: one key; mode, owner, hold id, lease, intent
                out.append(("FCALL", names[0], 1, key, "w", owner, str(i + 1), "30000", "1"))
                out.append(("FCALL", names[1], 1, key, owner, str(i + 1)))
            return out

        def rslock_cycles(base):
            out = []
            for i in range(base, base + a.n):
                j = lock_of(i, base)
                key, token = "lock{n%d}" % j, "token-%d" % j
                out.append(("SET", key, token, "NX", "PX", "30000"))
                out.append(("EVALSHA", unlock, 1, key, token))
            return out

        def per_cycle(commands):
            instructions()
            for b in range(0, len(commands), 200):
                pipe = r.pipeline(transaction=False)
                for c in commands[b:b + 200]:
                    pipe.execute_command(*c)
                replies = pipe.execute()
                # every acquire granted and every release done, or the figure means nothing
                assert all(x in (True, 1) or (isinstance(x, list) and x[0] == 1) for x in replies), replies[:4]
            return instructions() / a.n

        ours = ("rwlock4_acquire", "rwlock4_release")
        floor = ("floor_acquire", "floor_release")
        rows = {"cluster-rwlock": [], "floor (same calls, no logic)": [], "rslock": []}
        for k in range(a.rounds):
            base = (k + 1) * 10 * a.n
            # a first cycle on every key leaves the tombstone the counted one starts from
            per_cycle(lock_cycles(ours, "rwlock", base))
            rows["cluster-rwlock"].append(per_cycle(lock_cycles(ours, "rwlock", base)))
            per_cycle(lock_cycles(floor, "floor", base))
            rows["floor (same calls, no logic)"].append(per_cycle(lock_cycles(floor, "floor", base)))
            rows["rslock"].append(per_cycle(rslock_cycles(base)))
        def handoffs(prefix, base, told):
            """Per key, the steps that lead to a hand-off's release and that release:
            owner-1 holds, owner-2 and owner-3 queue, owner-1's release hands the lock to
            owner-2, whose attempt takes it, told that owner-3 (ticket 1) is next; then
            owner-2's release, which hands the lock to owner-3. Counted together, key by
            key (apart, the setup's claim window would run out under valgrind before the
            release, which would then scan the hash): the two variants differ only in
            that release."""
            setup, counted = [], []
            for i in range(base, base + a.n):
                key = "%s:{h%d}" % (prefix, i)
                setup.append(("FCALL", "rwlock4_acquire", 1, key, "w", "owner-1", "1", "30000", "1", "1", "1"))
                setup.append(("FCALL", "rwlock4_acquire", 1, key, "w", "owner-2", "2", "30000", "1", "1", "1"))
                setup.append(("FCALL", "rwlock4_acquire", 1, key, "w", "owner-3", "3", "30000", "1", "1", "1"))
                setup.append(("FCALL", "rwlock4_release", 1, key, "owner-1", "1", "1"))
                setup.append(("FCALL", "rwlock4_acquire", 1, key, "w", "owner-2", "2", "30000", "3", "2", "1"))
                hint = ("1", "t:1") if told else ("1",)
                setup.append(("FCALL", "rwlock4_release", 1, key, "owner-2", "2") + hint)
            instructions()
            replies = []
            for b in range(0, len(setup), 198):
                pipe = r.pipeline(transaction=False)
                for c in setup[b:b + 198]:
                    pipe.execute_command(*c)
                replies += pipe.execute()
            count = instructions() / a.n
            # the take names owner-3's ticket (the hint the release is given), and the
            # release finds its hold
            assert all(x[2] == b"t:1" for x in replies[4::6]), replies[:6]
            assert all(x == [1] for x in replies[5::6]), replies[:6]
            return count

        hand = {"told the head (t:1)": [], "not told": []}
        for k in range(a.rounds):
            base = (k + 1) * 10 * a.n
            hand["told the head (t:1)"].append(handoffs("told", base, True))
            hand["not told"].append(handoffs("plain", base, False))
        later = slice(1, None) if a.rounds > 1 else slice(None)
        rs = sum(rows["rslock"][later]) / len(rows["rslock"][later])
        where = "each on a lock of its own" if a.locks is None else "on %d locks" % a.locks
        print("| server instructions per cycle (%d cycles a round, %s) | rounds | mean of later rounds | / rslock |" % (a.n, where))
        print("|---|---|---|---|")
        for name, vals in rows.items():
            mean = sum(vals[later]) / len(vals[later])
            print("| %s | %s | %.0f | %.2f x |" % (name, " / ".join("%.0f" % v for v in vals), mean, mean / rs))
        print()
        print("| server instructions per hand-off: the steps before it and its release (%d a round) | rounds | mean of later rounds |" % a.n)
        print("|---|---|---|")
        for name, vals in hand.items():
            mean = sum(vals[later]) / len(vals[later])
            print("| %s | %s | %.0f |" % (name, " / ".join("%.0f" % v for v in vals), mean))
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    sys.exit(main())
