#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""test_reload.py - no request left hanging and no socket leaked when nginx
reloads, loses a worker or shuts down, on a redis-server of the test's
own: six clients loop on a limited location (a connection a request, each
bounded by a client timeout) while nginx -s reload runs three times (each
old worker gone before the next); every request answered 200, no alert
in the error log (an exiting worker logs each socket it left open), and
the new workers hold as many sockets as fresh ones. Then a worker is
killed (SIGKILL) under the load: the master starts another, and requests
succeed again. Last, Redis frozen with six requests in flight and nginx
told to quit (SIGQUIT, graceful): every one is answered by its fail
policy at its timeout, and nginx exits.

    test_reload.py --module SO --work DIR
"""
import os
import signal
import threading
import time

import kit

ns = kit.args()
TIMEOUT_MS = 1000 * kit.SCALE
CONF = """
sluice_backend r "redis://127.0.0.1:%(port)d?timeout_ms=%(t)d&prefix=ngxr%(pid)d:";
sluice_zone $http_x_client zone=z rules=fixed:1000000/1h fail=open;
server {
    listen 127.0.0.1:PORT0;
    add_header X-Result $sluice_result always;
    location /lim { sluice_limit zone=z; OK; }
}
"""


class Load:
    """Clients looping on /lim until stopped: their answers and errors."""

    def __init__(self, n, clients=6):
        self.n, self.stop_flag = n, False
        self.codes, self.errors = {}, []
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self.loop, args=(i,))
                        for i in range(clients)]
        for t in self.threads:
            t.start()

    def loop(self, i):
        while not self.stop_flag:
            try:
                a = self.n.get("/lim", headers={"X-Client": "c%d" % i},
                               timeout=10)
                with self.lock:
                    self.codes[a.status] = self.codes.get(a.status, 0) + 1
            except Exception as e:  # noqa: BLE001 (each is counted)
                with self.lock:
                    self.errors.append((time.monotonic(), repr(e)))

    def stop(self):
        self.stop_flag = True
        for t in self.threads:
            t.join(60)
            kit.check(not t.is_alive(), "a client hangs")


def sockets(pid):
    n = 0
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            if os.readlink("/proc/%d/fd/%s" % (pid, fd)).startswith(
                    "socket:"):
                n += 1
        except OSError:
            pass
    return n


def settle(n, old, seconds=15):
    """Waits until the workers in old are gone and new ones serve."""
    deadline = time.time() + seconds * kit.SCALE
    while time.time() < deadline:
        now = n.workers()
        if now and not set(now) & set(old):
            return now
        time.sleep(0.1)
    raise kit.Fail("old workers %r still there: %r" % (old, n.workers()))


def reloads(n):
    time.sleep(0.5 * kit.SCALE)
    fresh = {w: sockets(w) for w in n.workers()}
    load = Load(n)
    for _ in range(3):
        time.sleep(1)
        old = n.workers()
        n.reload()
        settle(n, old)
    time.sleep(1)
    load.stop()
    print("reloads under load: %r, %d errors" % (load.codes, len(load.errors)))
    kit.check(not load.errors, "requests failed: %r" % load.errors[:5])
    kit.check(list(load.codes) == [200], "answers: %r" % load.codes)
    time.sleep(0.5 * kit.SCALE)
    now = {w: sockets(w) for w in n.workers()}
    kit.check(sorted(now.values()) == sorted(fresh.values()),
              "sockets of fresh workers %r, after three reloads and the "
              "load %r" % (fresh, now))
    kit.check(not n.log_problems(), "the error log: %r" % n.log_problems())


def worker_death(n):
    load = Load(n)
    time.sleep(0.5)
    victim = n.workers()[0]
    os.kill(victim, signal.SIGKILL)
    killed_at = time.monotonic()
    time.sleep(1.5)
    load.codes.clear()
    time.sleep(1)
    load.stop()
    late = [e for t, e in load.errors if t > killed_at + 1.0]
    print("a worker killed under load: %d requests failed at the kill, "
          "then %r" % (len(load.errors) - len(late), load.codes))
    kit.check(victim not in n.workers() and len(n.workers()) == 2,
              "workers after the kill: %r" % n.workers())
    kit.check(not late and load.codes.get(200, 0) > 0 and
              list(load.codes) == [200],
              "after the kill: %r, errors %r" % (load.codes, late))


def quit_in_flight(n, pid):
    os.kill(pid, signal.SIGSTOP)
    try:
        answers = []
        lock = threading.Lock()

        def one(i):
            try:
                a = n.get("/lim", headers={"X-Client": "q%d" % i},
                          timeout=30)
                with lock:
                    answers.append((a.status, a.header("X-Result")))
            except Exception as e:  # noqa: BLE001
                with lock:
                    answers.append((0, repr(e)))

        threads = [threading.Thread(target=one, args=(i,)) for i in range(6)]
        for t in threads:
            t.start()
        time.sleep(0.3 * kit.SCALE)
        n.proc.send_signal(signal.SIGQUIT)
        for t in threads:
            t.join(60)
        master = n.proc
        master.wait(30 * kit.SCALE)
    finally:
        os.kill(pid, signal.SIGCONT)
    print("quit with 6 requests waiting on a frozen Redis: %r" % answers)
    kit.check(answers == [(200, "timeout")] * 6, "answers: %r" % answers)


def main():
    port, pid, _ = kit.start_redis(ns, "redis")
    n = kit.Nginx(ns, "nginx", CONF % {"port": port, "t": TIMEOUT_MS,
                                       "pid": os.getpid()}, workers=2)
    n.start()
    reloads(n)
    worker_death(n)
    quit_in_flight(n, pid)
    problems = [ln for ln in n.log_problems()
                if "exited on signal 9" not in ln]
    kit.check(not problems, "the error log: %r" % problems)
    n.stop()
    if ns.valgrind:
        kit.check(not n.valgrind_errors(), "\n".join(n.valgrind_errors()))


kit.run(main)
