#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""test_faults.py - the fail policies with Redis killed and frozen, on a
redis-server of the test's own, and the worker never blocked: one worker
serves zones with fail=open, closed, error (the default) and fallback.
Killed: open admits without RateLimit numbers, closed answers 503 with
an about:blank problem, error 500, fallback decides in the worker (its
fields, a 429 past the limit); started again: decisions again. Frozen
(SIGSTOP): a limited request costs its timeout_ms and is answered by its
policy; a location without a limit keeps its latency, measured against a
control nginx without the module's limits beside it, in the same loop,
while sixteen limited requests wait on the frozen server; four clients
that go away while their decisions wait end their requests (499), and the
late answers find them gone (the worker serves on).

    test_faults.py --module SO --work DIR
"""
import os
import signal
import socket
import statistics
import threading
import time

import kit

ns = kit.args()
TIMEOUT_MS = 1000 * kit.SCALE
PREFIX = "ngxf%d:" % os.getpid()

CONF = """
sluice_backend r "redis://127.0.0.1:%(port)d?timeout_ms=%(t)d&connect_timeout_ms=%(t)d&prefix=%(prefix)s";
sluice_zone $http_x_client zone=open rules=fixed:100/1h fail=open;
sluice_zone $http_x_client zone=closed rules=fixed:100/1h fail=closed;
sluice_zone $http_x_client zone=error rules=fixed:100/1h;
sluice_zone $http_x_client zone=fallback rules=fixed:4/1h fail=fallback;
server {
    listen 127.0.0.1:PORT0;
    add_header X-Result $sluice_result always;
    location /open { sluice_limit zone=open; OK; }
    location /closed { sluice_limit zone=closed; OK; }
    location /error { sluice_limit zone=error; OK; }
    location /fallback { sluice_limit zone=fallback; OK; }
    location /free { OK; }
}
"""

CONTROL = """
server {
    listen 127.0.0.1:PORT0;
    location /free { OK; }
}
"""


def get(n, path, client="c1"):
    return n.get(path, headers={"X-Client": client}, timeout=30)


def healthy(n, client):
    for path in ("/open", "/closed", "/error", "/fallback"):
        a = get(n, path, client)
        kit.check(a.status == 200 and a.header("X-Result") == "ok" and
                  a.all("RateLimit"), "%s with Redis up: %r" % (path, a))


def killed(n):
    a = get(n, "/open")
    kit.check(a.status == 200 and not a.all("RateLimit") and
              a.header("X-Result") in ("connect", "io"), a)
    a = get(n, "/closed")
    kit.check(a.status == 503 and not a.all("RateLimit") and
              not a.header("Retry-After"), a)
    p = a.problem()
    kit.check(p["type"] == "about:blank" and p["status"] == 503, p)
    a = get(n, "/error")
    kit.check(a.status == 500, a)
    # The fallback store decides in the worker: a fresh client, 4 admitted.
    for i in range(4):
        a = get(n, "/fallback", "fb")
        kit.check(a.status == 200 and a.all("RateLimit") and
                  kit.ratelimit(a)[1][0][1]["r"] == 3 - i, a)
    a = get(n, "/fallback", "fb")
    kit.check(a.status == 429 and a.header("Retry-After"), a)


def until_decided(n, client, seconds):
    deadline = time.time() + seconds
    while time.time() < deadline:
        a = get(n, "/error", client)
        if a.status == 200 and a.header("X-Result") == "ok":
            return
        time.sleep(0.1)
    raise kit.Fail("no decision %d s after Redis came back" % seconds)


def frozen(n, control, pid):
    """Sixteen limited requests wait on the frozen server while /free is
    asked of the nginx under test and of the control, in turn."""
    os.kill(pid, signal.SIGSTOP)
    try:
        waits = []
        lock = threading.Lock()

        def limited(i):
            path = "/open" if i % 2 == 0 else "/closed"
            t = time.monotonic()
            try:
                a = get(n, path, "frozen%d" % i)
                w = (path, a.status, a.header("X-Result"), a.elapsed)
            except Exception as e:  # noqa: BLE001 (a failure, checked)
                w = (path, 0, repr(e), time.monotonic() - t)
            with lock:
                waits.append(w)

        threads = [threading.Thread(target=limited, args=(i,))
                   for i in range(16)]
        t0 = time.monotonic()
        for t in threads:
            t.start()
        # Clients that go away while their decisions wait: the requests
        # end (499), and the decisions' late answers find them gone.
        for i in range(4):
            s = socket.create_connection(("127.0.0.1", n.ports[0]))
            s.sendall(b"GET /open HTTP/1.1\r\nHost: x\r\nX-Client: gone%d"
                      b"\r\n\r\n" % i)
            s.close()
        time.sleep(0.1)
        test_ms, control_ms = [], []
        while time.monotonic() - t0 < TIMEOUT_MS / 1000.0 * 0.8:
            test_ms.append(get(n, "/free").elapsed * 1000)
            control_ms.append(get(control, "/free").elapsed * 1000)
        for t in threads:
            t.join()
    finally:
        os.kill(pid, signal.SIGCONT)
    print("while Redis was frozen: /free %d times: median %.1f ms, max %.1f "
          "ms; control nginx: median %.1f ms, max %.1f ms; limited requests "
          "%.0f..%.0f ms (timeout_ms=%d)" %
          (len(test_ms), statistics.median(test_ms), max(test_ms),
           statistics.median(control_ms), max(control_ms),
           min(w[3] for w in waits) * 1000, max(w[3] for w in waits) * 1000,
           TIMEOUT_MS))
    # The limited requests waited for the frozen server (so it was frozen
    # while /free was asked), about their timeout, and got their policy.
    kit.check(len(waits) == 16, "%d answers of 16" % len(waits))
    for path, status, result, elapsed in waits:
        kit.check(elapsed * 1000 >= TIMEOUT_MS * 0.9,
                  "%s answered in %.0f ms, before its timeout" %
                  (path, elapsed * 1000))
        kit.check(result == "timeout" and
                  status == (200 if path == "/open" else 503),
                  "%s while frozen: %d %s" % (path, status, result))
    kit.check(len(test_ms) >= 3, "only %d requests to /free" % len(test_ms))
    with open(n.access_log) as f:
        gone = [ln for ln in f if ln.startswith("499 ")]
    kit.check(len(gone) == 4, "the requests of clients gone: %r" % gone)
    # /free was not held by the frozen decisions: a worker that blocked on
    # them would hold it for up to timeout_ms.
    kit.check(statistics.median(test_ms) <=
              statistics.median(control_ms) + 50 and
              max(test_ms) <= max(control_ms) + TIMEOUT_MS / 4,
              "/free took %r ms while Redis was frozen, the control %r" %
              (test_ms, control_ms))


def main():
    port, pid, _ = kit.start_redis(ns, "redis")
    n = kit.Nginx(ns, "nginx", CONF % {"port": port, "t": TIMEOUT_MS,
                                       "prefix": PREFIX}).start()
    control = kit.Nginx(ns, "control", CONTROL).start()
    healthy(n, "c1")
    # Killed: refused connections.
    os.kill(pid, signal.SIGKILL)
    time.sleep(0.2)
    killed(n)
    # Started again, empty, on the same port.
    port, pid, _ = kit.start_redis(ns, "redis", port)
    until_decided(n, "back", 5 * kit.SCALE)
    healthy(n, "c2")
    workers = n.workers()
    frozen(n, control, pid)
    until_decided(n, "thawed", 5 * kit.SCALE)
    kit.check(n.workers() == workers, "workers %r, then %r" %
              (workers, n.workers()))
    healthy(n, "c3")
    for x in (n, control):
        kit.check(x.stop(), "nginx did not stop")
        kit.check(not x.log_problems(), "%s" % x.log_problems())
        if ns.valgrind:
            kit.check(not x.valgrind_errors(),
                      "\n".join(x.valgrind_errors()))


kit.run(main)
