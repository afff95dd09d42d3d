#!/usr/bin/env python3
"""Server instructions per uncontended lock cycle, side by side, in one run.

Starts one `redis-server` (cluster mode, all slots) under valgrind's callgrind, which
counts instructions: unlike time, the count does not depend on what else the machine
is doing. Sends N uncontended cycles, pipelined, of
  - cluster-rwlock: acquire (write) + release, the scripts as the client loads them
    (assembled from src/lua in the order of the `lua!` macro in src/scripts/mod.rs);
  - floor: two scripts that make the same Redis calls as the fast paths (EXISTS, TIME,
    HSET, PEXPIRE; HMGET, DEL) with no logic around them;
  - the same floor as two Redis functions called by FCALL (what functions in place of
    EVALSHA would save);
  - rslock's cycle: SET NX PX + its unlock script (GET, DEL);
and prints the server's instructions per cycle for each (whole process: parsing,
commands, replies), round by round, and the ratios to rslock.

    python3 benches/script_cost.py [--n 2000] [--rounds 3] [--server redis-server]

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

LUA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src", "lua")
UNLOCK = 'if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) else return 0 end'
FLOOR_ACQUIRE = """
if redis.call('EXISTS', KEYS[1]) == 0 then
  local time = redis.call('TIME')
  local d = time[1] .. '000'
  redis.call('HSET', KEYS[1], 's', '3 ' .. d .. ' 1 ' .. d .. ' ' .. d .. ' 0 0 -',
    'o:' .. ARGV[2], 'w' .. ARGV[3] .. ':' .. d .. ':' .. d, 'w', ARGV[2])
  redis.call('PEXPIRE', KEYS[1], ARGV[4])
  return {1, d}
end
return {0}
"""
FLOOR_RELEASE = """
redis.call('HMGET', KEYS[1], 's', 'o:' .. ARGV[1])
redis.call('DEL', KEYS[1])
return {1}
"""


# the floor's two scripts as one library of functions (FUNCTION LOAD, FCALL)
FLOOR_FUNCTIONS = (
    "#!lua name=floor\n"
    "redis.register_function('floor_acquire', function(KEYS, ARGV)\n%s\nend)\n"
    "redis.register_function('floor_release', function(KEYS, ARGV)\n%s\nend)\n"
) % (FLOOR_ACQUIRE, FLOOR_RELEASE)


def lock_script(owner_arg, fast, file):
    """A script as `Scripts::new` builds it (PUBLISH line, then the `lua!` macro)."""
    parts = ["layout.lua", fast, "head.lua", "lib.lua", file]
    text = "\n".join(open(os.path.join(LUA, p)).read() for p in parts)
    return "local PUBLISH = 'spublish'\nlocal OWNER_ARG = %d\n%s" % (owner_arg, text)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=2000, help="cycles per round")
    ap.add_argument("--rounds", type=int, default=3)
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
        ours = (r.script_load(lock_script(2, "fast_acquire.lua", "acquire.lua")),
                r.script_load(lock_script(1, "fast_release.lua", "release.lua")))
        floor = (r.script_load(FLOOR_ACQUIRE), r.script_load(FLOOR_RELEASE))
        unlock = r.script_load(UNLOCK)
        r.execute_command("FUNCTION", "LOAD", "REPLACE", FLOOR_FUNCTIONS)

        def lock_cycles(shas, prefix, base):
            out = []
            for i in range(base, base + a.n):
                key, owner = "%s:{n%d}" % (prefix, i), "owner-%d" % i
                # as the client sends them: one key; mode, owner, hold id, lease, intent
                out.append(("EVALSHA", shas[0], 1, key, "w", owner, str(i + 1), "30000", "1"))
                out.append(("EVALSHA", shas[1], 1, key, owner, str(i + 1)))
            return out

        def function_cycles(prefix, base):
            out = []
            for i in range(base, base + a.n):
                key, owner = "%s:{n%d}" % (prefix, i), "owner-%d" % i
                out.append(("FCALL", "floor_acquire", 1, key, "w", owner, str(i + 1), "30000", "1"))
                out.append(("FCALL", "floor_release", 1, key, owner, str(i + 1)))
            return out

        def rslock_cycles(base):
            out = []
            for i in range(base, base + a.n):
                key, token = "lock{n%d}" % i, "token-%d" % i
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

        rows = {"cluster-rwlock": [], "floor (same calls, no logic)": [],
                "floor as functions (FCALL)": [], "rslock": []}
        for k in range(a.rounds):
            base = (k + 1) * 10 * a.n
            rows["cluster-rwlock"].append(per_cycle(lock_cycles(ours, "rwlock", base)))
            rows["floor (same calls, no logic)"].append(per_cycle(lock_cycles(floor, "floor", base)))
            rows["floor as functions (FCALL)"].append(per_cycle(function_cycles("ffloor", base)))
            rows["rslock"].append(per_cycle(rslock_cycles(base)))
        later = slice(1, None) if a.rounds > 1 else slice(None)
        rs = sum(rows["rslock"][later]) / len(rows["rslock"][later])
        print("| server instructions per cycle (%d cycles a round) | rounds | mean of later rounds | / rslock |" % a.n)
        print("|---|---|---|---|")
        for name, vals in rows.items():
            mean = sum(vals[later]) / len(vals[later])
            print("| %s | %s | %.0f | %.2f x |" % (name, " / ".join("%.0f" % v for v in vals), mean, mean / rs))
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    sys.exit(main())
