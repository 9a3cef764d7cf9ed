#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""test_status.py - sluice_status, the Prometheus page of every worker
together: two workers answer a zone of 20 on redis:// (after a zone on
mem:// that admits all, so the page has two handles) until both have
served requests; then the page, asked repeatedly (of either worker),
counts every request of both (the zone's outcomes at once, the handle's
decisions within the flush of a second), passes `promtool check metrics`,
and after nginx -s reload still counts them (the shared zone goes on) and
the requests after it.

    test_status.py --module SO --work DIR --url URL
"""
import os
import re
import subprocess
import time

import kit

ns = kit.args([(("--url",), {"required": True})])
URL = kit.read_url(ns.url)
SEP = "&" if "?" in URL else "?"
LIMIT = 20

CONF = """
sluice_backend b "%s%sprefix=ngxm%d:";
sluice_backend m mem://;
sluice_zone "one" zone=z backend=b rules=fixed:%d/1h;
sluice_zone "all" zone=wide backend=m rules=fixed:1000000/1h;
server {
    listen 127.0.0.1:PORT0;
    location /hit { sluice_limit zone=wide; sluice_limit zone=z;
                    add_header X-Worker $pid always; OK; }
    location /metrics { sluice_status; add_header X-Worker $pid; }
}
""" % (URL, SEP, os.getpid(), LIMIT)

SAMPLE = re.compile(r'^([a-z_]+)\{([^}]*)\} (\d+)$')


def page(n):
    a = n.get("/metrics")
    kit.check(a.status == 200 and a.header("Content-Type") ==
              "text/plain; version=0.0.4", a)
    text = a.body.decode()
    p = subprocess.run(["promtool", "check", "metrics"], input=text,
                       text=True, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT)
    # promtool's lint wants no _total on counters of its own choosing;
    # what it must not find is an invalid page.
    kit.check(p.returncode == 0 or "error" not in p.stdout.lower(),
              "promtool: %s\n%s" % (p.stdout, text))
    kit.check("parse" not in p.stdout.lower(), p.stdout)
    values = {}
    for line in text.splitlines():
        m = SAMPLE.match(line)
        if m:
            values[(m.group(1), m.group(2))] = int(m.group(3))
    return a.header("X-Worker"), values, text


def expect(n, passed, rejected, seconds=5):
    """The page, of both workers, says it within seconds (the handles'
    counters are flushed every second)."""
    deadline = time.time() + seconds * kit.SCALE
    want = {
        ("sluice_nginx_requests_total", 'zone="z",outcome="passed"'): passed,
        ("sluice_nginx_requests_total", 'zone="z",outcome="rejected"'):
            rejected,
        ("sluice_decisions_total", 'handle="b",outcome="allowed"'): passed,
        ("sluice_decisions_total", 'handle="b",outcome="denied"'): rejected,
        ("sluice_decisions_total", 'handle="m",outcome="allowed"'):
            passed + rejected,
        ("sluice_nginx_requests_total", 'zone="wide",outcome="passed"'):
            passed + rejected,
    }
    seen = set()
    while True:
        worker, values, text = page(n)
        got = {k: values.get(k) for k in want}
        if got == want:
            seen.add(worker)
            if len(seen) == len(n.workers()):
                return
        elif time.time() > deadline:
            raise kit.Fail("the page of worker %s says %r, not %r:\n%s" %
                           (worker, got, want, text))
        time.sleep(0.05)


def hits(n, at_least):
    workers, sent = set(), 0
    while sent < at_least or len(workers) < 2:
        a = n.get("/hit")
        kit.check(a.status in (200, 429), a)
        workers.add(a.header("X-Worker"))
        sent += 1
        kit.check(sent < 2000, "one worker took every request")
    return sent


def main():
    n = kit.Nginx(ns, "nginx", CONF, workers=2).start()
    sent = hits(n, 30)
    expect(n, LIMIT, sent - LIMIT)
    old = n.workers()
    n.reload()
    deadline = time.time() + 15 * kit.SCALE
    while set(n.workers()) & set(old) and time.time() < deadline:
        time.sleep(0.1)
    more = hits(n, 5)
    expect(n, LIMIT, sent + more - LIMIT)
    print("%d requests on two workers, a reload, %d more: the page counts "
          "them all" % (sent, more))
    kit.check(n.stop(), "nginx did not stop")
    kit.check(not n.log_problems(), "%s" % n.log_problems())
    if ns.valgrind:
        kit.check(not n.valgrind_errors(), "\n".join(n.valgrind_errors()))


kit.run(main)
