#!/usr/bin/python3
"""limits_bench.py - Python's limits (Debian's python3-limits) on Redis under
the same load as sluice-bench, sequentially.
    limits_bench.py PORT STRATEGY PATTERN SECONDS
    STRATEGY: fixed | moving; PATTERN: hot | uniform | zipf
Prints one JSON object."""
import bisect
import json
import os
import random
import sys
import time

import limits
import redis
from limits import parse, storage, strategies

port, strategy, pattern, seconds = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
NKEYS = 10000
rng = random.Random(42)
cdf = []
h = 0.0
for i in range(NKEYS):
    h += 1.0 / (i + 1)
    cdf.append(h)
cdf = [c / h for c in cdf]


def next_key():
    if pattern == "hot":
        return "k0"
    if pattern == "uniform":
        return "k%d" % rng.randrange(NKEYS)
    return "k%d" % bisect.bisect_left(cdf, rng.random())


store = storage.RedisStorage("redis://127.0.0.1:%s" % port)
limiter = (strategies.FixedWindowRateLimiter if strategy == "fixed"
           else strategies.MovingWindowRateLimiter)(store)
item = parse("1000/second")
prefix = "lim%d" % os.getpid()
lat = []
admitted = 0
start = time.perf_counter()
deadline = start + seconds
while time.perf_counter() < deadline:
    t0 = time.perf_counter()
    if limiter.hit(item, prefix, next_key()):
        admitted += 1
    lat.append((time.perf_counter() - t0) * 1e6)
secs = time.perf_counter() - start
lat.sort()


def pct(p):
    return lat[min(len(lat) - 1, int(len(lat) * p))] if lat else 0


print(json.dumps({
    "peer": "limits %s" % limits.__version__,
    "client": "redis-py %s" % redis.__version__,
    "what": "%s window 1000/1s" % strategy, "pattern": pattern, "mode": "seq",
    "decisions_per_s": len(lat) / secs, "p50_us": pct(0.5), "p99_us": pct(0.99),
    "p999_us": pct(0.999), "decisions": len(lat), "admitted": admitted,
    "errors": 0,
}))
