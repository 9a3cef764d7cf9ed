#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""test_shared.py - the point of the module: two nginx instances (two
workers each) sharing one limit admit it once between them, not twice.
Sixteen clients at once send 2.5 times the limit to both; exactly the
limit is answered 200, every other request 429; and on the servers (each
master, read directly, past any proxy) the windows of the zone's key hold
exactly the limit, every key with a TTL.

    test_shared.py --module SO --work DIR --url URL --servers @FILE
"""
import os
import threading

import kit

ns = kit.args([(("--url",), {"required": True}),
               (("--servers",), {"required": True})])
URL = kit.read_url(ns.url)
SEP = "&" if "?" in URL else "?"
PREFIX = "ngxs%d:" % os.getpid()
LIMIT = 300
CLIENTS = 16

CONF = """
sluice_backend b "%s%sprefix=%s&timeout_ms=%d";
sluice_zone "everyone" zone=shared rules=fixed:%d/1h;
server {
    listen 127.0.0.1:PORT0;
    location /hit { sluice_limit zone=shared; OK; }
}
""" % (URL, SEP, PREFIX, 2000 * kit.SCALE, LIMIT)


# The data nodes' password, where the URL names one (the Sentinel
# fixture's): for redis-cli, never printed.
AUTH = []
if "://:" in URL and "@" in URL:
    AUTH = ["-a", URL.split("://:", 1)[1].split("@", 1)[0],
            "--no-auth-warning"]


def cli(host, port, *cmd):
    return kit.redis_cli(port, *AUTH, *cmd, host=host)


def masters():
    with open(ns.servers[1:] if ns.servers.startswith("@")
              else ns.servers) as f:
        nodes = [ln.strip() for ln in f if ln.strip()]
    out = []
    for node in nodes:
        host, port = node.rsplit(":", 1)
        role = cli(host, port, "ROLE").split("\n")
        if role and role[0] == "master":
            out.append((host, port))
    return out


def counted():
    """The sum of the zone's fixed windows on every master, and the keys
    without a TTL."""
    total, no_ttl = 0, []
    for host, port in masters():
        keys = cli(host, port, "--scan", "--pattern", PREFIX + "*").split()
        for k in keys:
            ttl = int(cli(host, port, "PTTL", k))
            if ttl < 0:
                no_ttl.append(k)
            if ":fixed:" in k:
                total += int(cli(host, port, "GET", k))
    return total, no_ttl


def main():
    a = kit.Nginx(ns, "a", CONF, workers=2).start()
    b = kit.Nginx(ns, "b", CONF, workers=2).start()
    codes = {}
    lock = threading.Lock()
    per_client = LIMIT * 5 // 2 // CLIENTS

    def client(i):
        for j in range(per_client):
            n = a if (i + j) % 2 == 0 else b
            r = n.get("/hit", timeout=30)
            with lock:
                codes[r.status] = codes.get(r.status, 0) + 1

    threads = [threading.Thread(target=client, args=(i,))
               for i in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    sent = per_client * CLIENTS
    print("%d requests to two nginx (2 workers each) on %s: %r" %
          (sent, URL.split("://")[0] + "://", codes))
    kit.check(codes.get(200) == LIMIT and codes.get(429) == sent - LIMIT,
              "admitted %r of a limit of %d" % (codes, LIMIT))
    total, no_ttl = counted()
    print("counted on the servers: %d" % total)
    kit.check(total == LIMIT, "the servers count %d, not %d" %
              (total, LIMIT))
    kit.check(not no_ttl, "keys without a TTL: %r" % no_ttl)
    for n in (a, b):
        kit.check(n.stop(), "nginx did not stop")
        kit.check(not n.log_problems(), "%s" % n.log_problems())
        if ns.valgrind:
            kit.check(not n.valgrind_errors(),
                      "\n".join(n.valgrind_errors()))


kit.run(main)
