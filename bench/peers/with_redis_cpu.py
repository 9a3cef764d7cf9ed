#!/usr/bin/python3
"""with_redis_cpu.py - runs one peer benchmark and adds the Redis side of
its cost: commands and commandstats usec per decision, read with INFO
before and after on the same server.
    with_redis_cpu.py PORT COMMAND..."""
import json
import subprocess
import sys

import redis


def stats(port):
    info = redis.Redis(port=int(port)).info("commandstats")
    calls = usec = 0
    for name, v in info.items():
        if name.split("_", 1)[-1] in ("info", "config", "memory", "scan"):
            continue
        calls += v["calls"]
        usec += v["usec"]
    return calls, usec


port, cmd = sys.argv[1], sys.argv[2:]
c0, u0 = stats(port)
res = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
c1, u1 = stats(port)
n = max(1, res["decisions"])
res["commands_per_decision"] = (c1 - c0) / n
res["redis_usec_per_decision"] = (u1 - u0) / n
print(json.dumps(res))
