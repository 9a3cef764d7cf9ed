#!/usr/bin/python3
"""with_redis_cpu.py - runs one peer benchmark and adds the Redis side of
its cost, read with INFO before and after on the same server, counted as
sluice-bench counts it: commandstats usec of the outer command (EVALSHA or
EVAL: a script's usec already holds the commands it calls, which Redis also
lists on their own), or of every command when no script ran; and the whole
process's CPU (used_cpu_sys + used_cpu_user).
    with_redis_cpu.py PORT COMMAND..."""
import json
import subprocess
import sys

import redis

HARNESS = {"info", "flushall", "flushdb", "scan", "keys", "type", "zcard",
           "llen", "ping", "auth", "select", "hello", "unlink"}
SCRIPTS = {"eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro"}


def snapshot(port):
    info = redis.Redis(port=int(port)).info("all")
    cmds = {}
    for name, v in info.items():
        if name.startswith("cmdstat_"):
            cmds[name[8:]] = (v["calls"], v["usec"])
    return cmds, info["used_cpu_sys"] + info["used_cpu_user"]


port, cmd = sys.argv[1], sys.argv[2:]
b, cpu0 = snapshot(port)
res = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
a, cpu1 = snapshot(port)
calls = usec = s_calls = s_usec = 0
for name, (c, u) in a.items():
    c0, u0 = b.get(name, (0, 0))
    if "|" in name or name in HARNESS or c - c0 <= 0:
        continue
    calls += c - c0
    usec += u - u0
    if name in SCRIPTS:
        s_calls += c - c0
        s_usec += u - u0
n = max(1, res["decisions"])
res["commands_per_decision"] = calls / n
res["outer"] = "script" if s_calls else "commands"
res["outer_calls_per_decision"] = (s_calls if s_calls else calls) / n
res["redis_usec_per_decision"] = (s_usec if s_calls else usec) / n
res["cpu_usec_per_decision"] = (cpu1 - cpu0) * 1e6 / n
print(json.dumps(res))
