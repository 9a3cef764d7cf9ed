# SPDX-License-Identifier: BSD-3-Clause
"""kit.py - what the nginx module's tests share: nginx (Debian's
/usr/sbin/nginx) started with the module on free loopback ports, in a
prefix of its own under the run's servers directory (its master's pid in
a file named pid, so that tests/servers/stop-all.sh stops what a killed
test leaves), stopped at exit whatever happens (the master also dies with
the test: PR_SET_PDEATHSIG); redis-server of a test's own; requests by
Python's http.client (a connection each, Connection: close) and by curl;
and the RateLimit fields parsed by tests/check_sf.py's RFC 9651 parser,
which shares no code with sluice.

Every test program takes:
    --module SO --work DIR [--nginx BIN] [--valgrind] [test args]
"""
import argparse
import atexit
import ctypes
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import traceback

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
import check_sf  # noqa: E402  (tests/check_sf.py)

QUOTA = "https://iana.org/assignments/http-problem-types#quota-exceeded"
# How much slower nginx runs here (valgrind): waits are scaled by it.
SCALE = 1


class Fail(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Fail(what)


def args(extra=None):
    """The common arguments, and a test's own (a list of add_argument
    calls' (args, kwargs))."""
    global SCALE
    p = argparse.ArgumentParser()
    p.add_argument("--module", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--nginx", default="/usr/sbin/nginx")
    p.add_argument("--valgrind", action="store_true")
    for a, kw in extra or []:
        p.add_argument(*a, **kw)
    ns = p.parse_args()
    if ns.valgrind:
        SCALE = 20
    shutil.rmtree(ns.work, ignore_errors=True)
    os.makedirs(ns.work)
    os.chmod(ns.work, 0o755)
    return ns


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def read_url(url):
    """A URL, or @FILE holding one (the fixtures' url files)."""
    if url.startswith("@"):
        with open(url[1:]) as f:
            return f.read().strip()
    return url


def _die_with_parent():
    # The master ends (fast shutdown: its workers too) when the test
    # process dies, even by SIGKILL at a ctest timeout.
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)


_live = []


def _stop_all():
    for n in list(_live):
        n.stop()


atexit.register(_stop_all)
signal.signal(signal.SIGTERM, lambda *a: sys.exit(1))


class Nginx:
    """One nginx: its configuration's http{} body given by the test, its
    ports PORT0, PORT1, ... free loopback ports written in; OK serves
    html/ok.txt ("ok\\n") after the limits."""

    def __init__(self, ns, name, http_body, workers=1, ports=1,
                 main_extra=""):
        self.ns = ns
        self.dir = os.path.join(ns.work, name)
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(os.path.join(self.dir, "logs"))
        os.chmod(self.dir, 0o755)
        self.ports = [free_port() for _ in range(ports)]
        self.conf = os.path.join(self.dir, "nginx.conf")
        self.error_log = os.path.join(self.dir, "logs", "error.log")
        self.access_log = os.path.join(self.dir, "logs", "access.log")
        self.proc = None
        body = http_body.replace("OK;", "try_files /ok.txt =404;")
        for i, p in enumerate(self.ports):
            body = body.replace("PORT%d" % i, str(p))
        user = "user root root;\n" if os.geteuid() == 0 else ""
        temp = "".join(
            "%s_temp_path %s;\n" % (t, os.path.join(self.dir, t))
            for t in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
        # The locations serve files (try_files: after the limits, in the
        # content phases; `return` would answer in the rewrite phase,
        # before any limit is asked, as it does before limit_req).
        html = os.path.join(self.dir, "html")
        os.makedirs(html)
        os.chmod(html, 0o755)
        for name, text in (("ok.txt", "ok\n"),
                           ("too-many.html", "slow down\n")):
            with open(os.path.join(html, name), "w") as f:
                f.write(text)
            os.chmod(os.path.join(html, name), 0o644)
        with open(self.conf, "w") as f:
            f.write("load_module %s;\n%sworker_processes %d;\n"
                    "error_log %s info;\npid %s;\n%s\n"
                    "events { worker_connections 512; }\n"
                    "http {\nroot %s;\ndefault_type text/plain;\n%s"
                    "log_format sluice '$status $sluice_status "
                    "$sluice_result $sluice_limit $sluice_remaining';\n"
                    "access_log %s sluice;\n%s\n}\n" %
                    (os.path.abspath(ns.module), user, workers,
                     self.error_log, os.path.join(self.dir, "nginx.pid"),
                     main_extra, html, temp, self.access_log, body))

    def cmd(self, *extra):
        c = [self.ns.nginx, "-p", self.dir, "-c", self.conf]
        return c + list(extra)

    def test_config(self):
        """nginx -t: (exit status, its output)."""
        p = subprocess.run(self.cmd("-t"), stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=60)
        return p.returncode, p.stdout

    def start(self):
        c = self.cmd("-g", "daemon off; master_process on;")
        if self.ns.valgrind:
            c = ["valgrind", "--quiet", "--trace-children=no",
                 "--leak-check=full", "--show-leak-kinds=definite",
                 "--errors-for-leak-kinds=definite",
                 "--suppressions=%s" % os.path.join(HERE, "nginx.supp"),
                 "--log-file=%s/valgrind.%%p" % self.dir] + c
        self.out = open(os.path.join(self.dir, "stderr"), "w")
        self.proc = subprocess.Popen(c, stdout=self.out, stderr=self.out,
                                     preexec_fn=_die_with_parent)
        _live.append(self)
        with open(os.path.join(self.dir, "pid"), "w") as f:
            f.write("%d\n" % self.proc.pid)
        deadline = time.time() + 10 * SCALE
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise Fail("nginx exited at start: %s" % self.log_tail())
            if all(self.listening(p) for p in self.ports) and \
                    len(self.workers()) > 0:
                return self
            time.sleep(0.05)
        raise Fail("nginx did not start: %s" % self.log_tail())

    def listening(self, port):
        try:
            socket.create_connection(("127.0.0.1", port), 1).close()
            return True
        except OSError:
            return False

    def workers(self):
        """The pids of the master's children (its workers)."""
        if self.proc is None:
            return []
        kids = []
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                with open("/proc/%s/stat" % d) as f:
                    st = f.read()
            except OSError:
                continue
            # pid (comm) state ppid ...: comm may hold spaces
            fields = st[st.rindex(")") + 2:].split()
            if int(fields[1]) == self.proc.pid:
                kids.append(int(d))
        return sorted(kids)

    def reload(self):
        subprocess.run(self.cmd("-s", "reload"), check=True, timeout=60,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def stop(self, how=signal.SIGTERM, wait=30):
        """Stops the master (SIGTERM: fast, SIGQUIT: graceful); True when it
        exited within wait seconds."""
        if self.proc is None:
            return True
        ok = True
        if self.proc.poll() is None:
            kids = self.workers()
            self.proc.send_signal(how)
            try:
                self.proc.wait(wait * SCALE)
            except subprocess.TimeoutExpired:
                ok = False
                self.proc.kill()
                self.proc.wait()
            for k in kids:  # a worker its master left behind
                try:
                    os.kill(k, signal.SIGKILL)
                except OSError:
                    pass
        self.proc = None
        if self in _live:
            _live.remove(self)
        try:
            os.unlink(os.path.join(self.dir, "pid"))
        except OSError:
            pass
        self.out.close()
        return ok

    def log_tail(self, n=30):
        text = ""
        for f in (os.path.join(self.dir, "stderr"), self.error_log):
            try:
                with open(f) as fh:
                    text += "".join(fh.readlines()[-n:])
            except OSError:
                pass
        return text

    def log_problems(self):
        """Lines of the error log at alert, crit or emerg, and the sockets
        an exiting worker left open."""
        try:
            with open(self.error_log) as f:
                lines = f.readlines()
        except OSError:
            return []
        return [ln for ln in lines if "[alert]" in ln or "[crit]" in ln or
                "[emerg]" in ln or "open socket" in ln]

    def valgrind_errors(self):
        out = []
        for f in os.listdir(self.dir):
            if f.startswith("valgrind."):
                with open(os.path.join(self.dir, f)) as fh:
                    text = fh.read()
                if text.strip():
                    out.append("%s:\n%s" % (f, text))
        return out

    def get(self, path, port=0, headers=None, method="GET", timeout=10):
        return request(self.ports[port], path, headers, method, timeout)


class Answer:
    def __init__(self, status, headers, body, elapsed):
        self.status = status
        self.headers = headers  # [(name, value)], as sent
        self.body = body
        self.elapsed = elapsed

    def header(self, name):
        vals = [v for k, v in self.headers if k.lower() == name.lower()]
        return vals[0] if vals else None

    def all(self, name):
        return [v for k, v in self.headers if k.lower() == name.lower()]

    def problem(self):
        check(self.header("Content-Type") == "application/problem+json",
              "not a problem: %s %s" % (self.status, self.headers))
        return json.loads(self.body)

    def __repr__(self):
        return "%d %s %r" % (self.status, self.headers, self.body[:300])


def request(port, path, headers=None, method="GET", timeout=10):
    h = {"Connection": "close"}
    h.update(headers or {})
    t0 = time.monotonic()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout * SCALE)
    try:
        c.request(method, path, headers=h)
        r = c.getresponse()
        body = r.read()
        return Answer(r.status, r.getheaders(), body, time.monotonic() - t0)
    finally:
        c.close()


def curl(port, path, *extra):
    """curl's view of an answer: (status, headers text, body)."""
    p = subprocess.run(["curl", "-s", "-i", "-w", "\n%{http_code}", *extra,
                        "http://127.0.0.1:%d%s" % (port, path)],
                       stdout=subprocess.PIPE, timeout=30)
    head, _, rest = p.stdout.decode().partition("\r\n\r\n")
    body, _, code = rest.rpartition("\n")
    return int(code), head, body


def ratelimit(answer):
    """The RateLimit fields, parsed: ({policy: params} of RateLimit-Policy
    (every line), [(policy, params)] of RateLimit, Retry-After or None)."""
    policies = {}
    for line in answer.all("RateLimit-Policy"):
        for name, params in check_sf.Parser(line).list():
            check(isinstance(name, str) and not isinstance(
                name, check_sf.Token), "a policy name not a String: %r" % line)
            check(isinstance(params.get("q"), int) and params["q"] > 0,
                  "q not a positive Integer: %r" % line)
            if "w" in params:
                check(isinstance(params["w"], int) and params["w"] > 0,
                      "w not a positive Integer: %r" % line)
            check(name not in policies, "policy %r twice" % name)
            policies[name] = params
    limits = []
    for line in answer.all("RateLimit"):
        for name, params in check_sf.Parser(line).list():
            check(name in policies, "RateLimit names %r, which no "
                  "RateLimit-Policy lists: %r" % (name, answer))
            for k in ("r", "t"):
                check(isinstance(params.get(k), int) and params[k] >= 0,
                      "%s not a non-negative Integer: %r" % (k, line))
            limits.append((name, params))
    ra = answer.header("Retry-After")
    if ra is not None:
        check(ra.isdigit(), "Retry-After %r" % ra)
        ra = int(ra)
    return policies, limits, ra


def start_redis(ns, name, port=None):
    """A redis-server of the test's own, empty, on a free port (or port,
    to start it again): (port, pid, dir)."""
    d = os.path.join(ns.work, name)
    os.makedirs(d, exist_ok=True)
    port = port or free_port()
    try:
        os.unlink(os.path.join(d, "redis.pid"))
    except OSError:
        pass
    subprocess.run(["redis-server", "--port", str(port), "--bind",
                    "127.0.0.1", "--save", "", "--appendonly", "no",
                    "--daemonize", "yes", "--dir", d, "--pidfile",
                    os.path.join(d, "redis.pid"), "--logfile",
                    os.path.join(d, "redis.log")], check=True)
    for _ in range(100):
        if redis_cli(port, "PING") == "PONG" and \
                os.path.exists(os.path.join(d, "redis.pid")):
            with open(os.path.join(d, "redis.pid")) as f:
                pid = int(f.read())
            shutil.copy(os.path.join(d, "redis.pid"), os.path.join(d, "pid"))
            atexit.register(_kill, pid)
            return port, pid, d
        time.sleep(0.05)
    raise Fail("redis-server did not start")


def _kill(pid):
    for sig in (signal.SIGCONT, signal.SIGKILL):
        try:
            os.kill(pid, sig)
        except OSError:
            pass


def redis_cli(port, *cmd, host="127.0.0.1"):
    p = subprocess.run(["redis-cli", "-h", host, "-p", str(port), *cmd],
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                       text=True, timeout=30)
    return p.stdout.strip()


def run(main):
    """Runs main(); a Fail or an exception is the test's failure, with the
    nginx logs of what it started."""
    try:
        main()
    except Exception as e:  # noqa: BLE001 (every failure is reported)
        if not isinstance(e, Fail):
            traceback.print_exc()
        print("FAIL: %s: %s" % (type(e).__name__, e))
        for n in list(_live):
            print("--- %s's logs:\n%s" % (n.dir, n.log_tail()))
        raise SystemExit(1)
    print("ok")
