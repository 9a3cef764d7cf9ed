#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""test_directives.py - every directive of the module on one nginx (one
worker: mem:// keeps its state in the worker), checked with Python's HTTP
client and curl, the RateLimit fields parsed by tests/check_sf.py: the
answers within a limit and past it (429, the fields, Retry-After, the RFC
9457 problem), clients apart, an empty key not counted, several limits in
a location (all must admit), the cost (a variable; 0 not counted; not a
number: 400; never fits: 400 without Retry-After), sluice_limit_status,
sluice_headers off, the dry run, the variables, inheritance, error_page,
an internal redirect counted once, a named limiter from a limits file,
HEAD, 40 clients at once on one key admitted exactly the limit, a
backend's reservations and deny cache, and five HTTP/2 streams at once on
one connection.

    test_directives.py --module SO --work DIR [--url URL]
"""
import os
import subprocess
import threading

import kit

ns = kit.args([(("--url",), {"default": "mem://"})])
URL = kit.read_url(ns.url)
SEP = "&" if "?" in URL else "?"
PREFIX = "ngxd%d:" % os.getpid()
LIMITS = os.path.join(ns.work, "limits.yml")
with open(LIMITS, "w") as f:
    f.write("""version: 1
limiters:
  - name: api
    rules: "fixed:3/1h"
    policy: {http_name: api-by-name}
    overrides:
      - {client: vip, rules: unlimited}
      - {client: bot, rules: deny}
""")
os.chmod(LIMITS, 0o644)

VARS = """add_header X-Status $sluice_status always;
          add_header X-Result $sluice_result always;
          add_header X-Limit $sluice_limit always;
          add_header X-Rule $sluice_rule always;
          add_header X-Remaining $sluice_remaining always;
          add_header X-Retry-After $sluice_retry_after always;"""

CONF = """
sluice_backend b "%(url)s%(sep)sprefix=%(prefix)s&limits_file=%(limits)s";
sluice_backend fast "%(url)s%(sep)sprefix=%(prefix)s&reserve_ms=1000&deny_cache=100";
sluice_zone $http_x_client zone=perclient backend=b rules=fixed:3/1h;
sluice_zone $http_x_client zone=wide backend=b rules=fixed:5/1h;
sluice_zone $http_x_client zone=narrow backend=b rules=fixed:2/1h;
sluice_zone $http_x_client zone=budget backend=b rules=fixed:5/1h unit=tokens;
sluice_zone "all" zone=crowd backend=b rules=fixed:25/1h;
sluice_zone $http_x_client zone=named backend=b limiter=api;
sluice_zone $http_x_client zone=srv backend=b rules=fixed:2/1h;
sluice_zone "hot" zone=hot backend=fast rules=fixed:100000/1h;
sluice_zone $http_x_client zone=once backend=fast rules=fixed:1/1h;
server {
    listen 127.0.0.1:PORT0;
    %(vars)s
    location /parent { sluice_limit zone=srv;
        location /parent/inherited { OK; }
        location /parent/own { sluice_limit zone=perclient; OK; } }
    location /one { sluice_limit zone=perclient; OK; }
    location /free { OK; }
    location /two { sluice_limit zone=wide; sluice_limit zone=narrow;
                    OK; }
    location /wide { sluice_limit zone=wide; OK; }
    location /cost { sluice_limit zone=budget cost=$http_x_cost;
                     OK; }
    location /status503 { sluice_limit zone=perclient;
                          sluice_limit_log_level warn;
                          sluice_limit_status 503; OK; }
    location /quiet { sluice_limit zone=perclient; sluice_headers off;
                      OK; }
    location /dry { sluice_limit zone=perclient; sluice_limit_dry_run on;
                    OK; }
    location /page { sluice_limit zone=perclient;
                     error_page 429 /too-many.html; OK; }
    location = /too-many.html { }
    location /redirect { sluice_limit zone=perclient;
                         try_files /nonexistent @target; }
    location @target { sluice_limit zone=perclient; OK; }
    location /named { sluice_limit zone=named; OK; }
    location /crowd { sluice_limit zone=crowd; OK; }
    location /hot { sluice_limit zone=hot; OK; }
    location /up { sluice_limit zone=perclient;
                   proxy_set_header X-Left $sluice_remaining;
                   proxy_pass http://127.0.0.1:PORT0/echo; }
    location /echo { return 200 "left $http_x_left\n"; }
    location /once { sluice_limit zone=once; OK; }
}
server {
    listen 127.0.0.1:PORT1 http2;
    location /h2 { sluice_limit zone=perclient; OK; }
}
""" % {"url": URL, "sep": SEP, "prefix": PREFIX, "limits": LIMITS,
       "vars": VARS}


def get(n, path, client=None, **kw):
    h = dict(kw.pop("headers", {}))
    if client is not None:
        h["X-Client"] = client
    return n.get(path, headers=h, **kw)


def fields(a, name):
    """The answer's own policy and limit (policy name), parsed."""
    policies, limits, ra = kit.ratelimit(a)
    kit.check(name in policies, "no policy %r: %r" % (name, a))
    mine = [p for nm, p in limits if nm == name]
    kit.check(len(mine) == 1, "RateLimit for %r: %r" % (name, a))
    return policies[name], mine[0], ra


def within_and_past(n):
    # Within the limit: 200, the fields, r counting down; the variables.
    for i in range(3):
        a = get(n, "/one", "alice")
        kit.check(a.status == 200 and a.body == b"ok\n", a)
        pol, lim, ra = fields(a, "perclient")
        kit.check(pol == {"q": 3, "w": 3600}, "policy %r" % pol)
        kit.check(lim["r"] == 2 - i and 0 < lim["t"] <= 3600, lim)
        kit.check(ra is None, "Retry-After on an admission: %r" % a)
        kit.check(a.header("X-Status") == "PASSED" and
                  a.header("X-Result") == "ok" and
                  a.header("X-Limit") == "perclient" and
                  a.header("X-Rule") == "fixed:3/3600000ms" and
                  a.header("X-Remaining") == str(2 - i) and
                  not a.header("X-Retry-After"), a)
    # Past it: 429, the fields, Retry-After no earlier than t, the problem.
    a = get(n, "/one", "alice")
    kit.check(a.status == 429, a)
    pol, lim, ra = fields(a, "perclient")
    kit.check(lim["r"] == 0 and ra is not None and 0 < lim["t"] <= ra, a)
    p = a.problem()
    kit.check(p["status"] == 429 and p["type"] == kit.QUOTA and
              p["violated-policies"] == ["perclient"], p)
    kit.check(a.header("X-Status") == "REJECTED" and
              a.header("X-Retry-After") == str(ra) and
              a.header("X-Remaining") == "0", a)
    # The same through curl.
    code, head, body = kit.curl(n.ports[0], "/one", "-H", "X-Client: alice")
    kit.check(code == 429 and "RateLimit-Policy:" in head and
              "application/problem+json" in head and
              "quota-exceeded" in body, (code, head, body))
    # HEAD: the status and fields, no body.
    a = get(n, "/one", "alice", method="HEAD")
    kit.check(a.status == 429 and a.body == b"" and
              a.header("Retry-After"), a)
    # Another client is limited apart; a request without a key is not.
    a = get(n, "/one", "bob")
    kit.check(a.status == 200 and fields(a, "perclient")[1]["r"] == 2, a)
    for _ in range(5):
        a = get(n, "/one")
        kit.check(a.status == 200 and not a.all("RateLimit") and
                  not a.header("X-Status"), a)
    # A location without a limit of its own inherits its parent's.
    for i in range(2):
        a = get(n, "/parent/inherited", "carol")
        kit.check(a.status == 200 and
                  fields(a, "srv")[1]["r"] == 1 - i, a)
    a = get(n, "/parent/inherited", "carol")
    kit.check(a.status == 429 and
              a.problem()["violated-policies"] == ["srv"], a)
    # ... but one with its own does not (the parent's zone is not asked).
    a = get(n, "/parent/own", "carol")
    kit.check(a.status == 200 and not [1 for nm, _ in kit.ratelimit(a)[1]
                                       if nm == "srv"], a)


def several(n):
    # Both admit twice; the third is denied by narrow, the one with 2.
    for i in range(2):
        a = get(n, "/two", "dave")
        kit.check(a.status == 200, a)
        kit.check(fields(a, "wide")[1]["r"] == 4 - i and
                  fields(a, "narrow")[1]["r"] == 1 - i, a)
        kit.check(a.header("X-Limit") == "narrow", a)  # the least left
    a = get(n, "/two", "dave")
    kit.check(a.status == 429 and
              a.problem()["violated-policies"] == ["narrow"] and
              a.header("X-Limit") == "narrow", a)
    # All or nothing, as limit_req: wide admitted the refused request,
    # and gave it back (its 5 less the 2 served and this one: 2 left; 1
    # had it stayed charged).
    a = get(n, "/wide", "dave")
    kit.check(a.status == 200 and fields(a, "wide")[1]["r"] == 2, a)


def cost(n):
    a = get(n, "/cost", "erin", headers={"X-Cost": "2"})
    pol, lim, _ = fields(a, "budget")
    kit.check(a.status == 200 and lim["r"] == 3 and pol.get("qu") ==
              "tokens", a)
    a = get(n, "/cost", "erin", headers={"X-Cost": "0"})  # not counted
    kit.check(a.status == 200 and not a.all("RateLimit"), a)
    a = get(n, "/cost", "erin")                           # empty: 1
    kit.check(a.status == 200 and fields(a, "budget")[1]["r"] == 2, a)
    a = get(n, "/cost", "erin", headers={"X-Cost": "lots"})
    kit.check(a.status == 400 and a.header("X-Status") == "ERROR", a)
    a = get(n, "/cost", "erin", headers={"X-Cost": "6"})  # never fits
    kit.check(a.status == 400 and a.header("Retry-After") is None, a)
    p = a.problem()
    kit.check(p["status"] == 400 and p["type"] == kit.QUOTA and
              "never" in p.get("detail", ""), p)
    a = get(n, "/cost", "erin", headers={"X-Cost": "3"})  # fits later
    kit.check(a.status == 429 and a.header("Retry-After"), a)


def answers(n):
    for _ in range(3):
        kit.check(get(n, "/status503", "frank").status == 200, "503 case")
    a = get(n, "/status503", "frank")
    kit.check(a.status == 503 and a.problem()["status"] == 503, a)
    # sluice_limit_log_level: its denials logged at warn, the others at
    # error (the default).
    with open(n.error_log) as f:
        lines = [ln for ln in f if "limiting requests" in ln]
    kit.check([ln for ln in lines if "[warn]" in ln and "/status503" in ln]
              and not [ln for ln in lines if "[warn]" in ln and
                       "/status503" not in ln] and
              [ln for ln in lines if "[error]" in ln and "/one" in ln],
              "log levels: %r" % lines)
    # sluice_headers off: no fields, the problem still.
    for _ in range(3):
        a = get(n, "/quiet", "gina")
        kit.check(a.status == 200 and not a.all("RateLimit") and
                  not a.all("RateLimit-Policy"), a)
    a = get(n, "/quiet", "gina")
    kit.check(a.status == 429 and not a.header("Retry-After") and
              a.problem()["status"] == 429, a)
    # The dry run: decided, counted, never denied; a denial's fields
    # without Retry-After.
    for i in range(5):
        a = get(n, "/dry", "hank")
        kit.check(a.status == 200 and a.body == b"ok\n", a)
        if i < 3:
            kit.check(a.header("X-Status") == "PASSED", a)
        else:
            kit.check(a.header("X-Status") == "REJECTED_DRY_RUN" and
                      a.header("X-Result") == "shadowed" and
                      fields(a, "perclient")[1]["r"] == 0 and
                      a.header("Retry-After") is None, a)
    # error_page: nginx's page for the status, with the fields.
    for _ in range(3):
        get(n, "/page", "ivan")
    a = get(n, "/page", "ivan")
    kit.check(a.status == 429 and a.body == b"slow down\n" and
              fields(a, "perclient")[1]["r"] == 0, a)
    # An internal redirect (try_files, after the limits) to another
    # limited location counts once.
    for i in range(3):
        a = get(n, "/redirect", "judy")
        kit.check(a.status == 200 and a.body == b"ok\n" and
                  fields(a, "perclient")[1]["r"] == 2 - i, a)
    a = get(n, "/redirect", "judy")
    kit.check(a.status == 429, a)


def named(n):
    # The limits file's api: its rules and its HTTP name.
    for i in range(3):
        a = get(n, "/named", "kim")
        kit.check(a.status == 200, a)
        pol, lim, _ = fields(a, "api-by-name")
        kit.check(pol == {"q": 3, "w": 3600} and lim["r"] == 2 - i, a)
    a = get(n, "/named", "kim")
    kit.check(a.status == 429 and
              a.problem()["violated-policies"] == ["api-by-name"], a)
    # Its overrides: an allow-listed client, no fields; a deny-listed, 403.
    for _ in range(5):
        a = get(n, "/named", "vip")
        kit.check(a.status == 200 and not a.all("RateLimit") and
                  a.header("X-Result") == "allowlisted", a)
    a = get(n, "/named", "bot")
    kit.check(a.status == 403 and a.problem()["type"] == "about:blank", a)


def crowd(n):
    # 40 clients at once on one key of 25: exactly 25 admitted.
    codes = []
    lock = threading.Lock()

    def one():
        a = get(n, "/crowd")
        with lock:
            codes.append(a.status)

    threads = [threading.Thread(target=one) for _ in range(40)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    kit.check(codes.count(200) == 25 and codes.count(429) == 15,
              "40 at once on a limit of 25: %d admitted, %d denied" %
              (codes.count(200), codes.count(429)))


def backend_options(n):
    # Reservations (reserve_ms=): a hot key's admissions come from units
    # the worker holds; the deny cache (deny_cache=): a denial repeated
    # without a round trip.
    results = [get(n, "/hot").header("X-Result") for _ in range(40)]
    kit.check(set(results) <= {"ok", "reserved"} and
              results.count("reserved") > 0, "hot key: %r" % results)
    results = [get(n, "/once", "lee") for _ in range(3)]
    kit.check([a.status for a in results] == [200, 429, 429] and
              results[1].header("X-Result") == "ok" and
              results[2].header("X-Result") == "cached" and
              results[2].header("Retry-After"),
              "deny cache: %r" % results)


def upstream(n):
    # The variables reach an upstream: what the decision left.
    for i in range(2):
        a = get(n, "/up", "mo")
        kit.check(a.status == 200 and a.body == b"left %d\n" % (2 - i), a)


def http2(n):
    # HTTP/2 (cleartext, prior knowledge): five streams at once on one
    # connection, each waiting for its decision; three admitted.
    url = "http://127.0.0.1:%d/h2" % n.ports[1]
    p = subprocess.run(["curl", "-s", "--http2-prior-knowledge",
                        "--parallel", "--parallel-immediate", "-H",
                        "X-Client: h2", "-w",
                        "%{http_version} %{http_code}\n"] +
                       ["-o", "/dev/null", url] * 5,
                       stdout=subprocess.PIPE, text=True, timeout=60)
    answers = sorted(p.stdout.split("\n")[:-1])
    kit.check(answers == ["2 200"] * 3 + ["2 429"] * 2,
              "five HTTP/2 streams: %r" % answers)


def main():
    n = kit.Nginx(ns, "nginx", CONF, ports=2).start()
    within_and_past(n)
    several(n)
    cost(n)
    answers(n)
    named(n)
    crowd(n)
    backend_options(n)
    upstream(n)
    http2(n)
    # A location without a limit answers without fields or variables.
    a = get(n, "/free", "alice")
    kit.check(a.status == 200 and a.body == b"ok\n" and
              not a.all("RateLimit") and not a.header("X-Status"), a)
    kit.check(n.stop(), "nginx did not stop")
    kit.check(not n.log_problems(), "the error log: %s" % n.log_problems())
    if ns.valgrind:
        kit.check(not n.valgrind_errors(), "\n".join(n.valgrind_errors()))


kit.run(main)
