#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""check_prometheus.py - parses the text sluice_stats_prometheus wrote
(tests/test_stats.c) with Debian's prometheus_client, an independent
parser, and checks its families, types, labels and values against the
expectations the test wrote on the first line; with --page, the page of
several handles sluice_metrics_page wrote.
    check_prometheus.py FILE
    check_prometheus.py --page FILE"""
import sys

from prometheus_client.parser import text_string_to_metric_families

page = sys.argv[1] == "--page"
text = open(sys.argv[-1]).read()
first = text.splitlines()[0]
assert first.startswith("# expect "), first
expect = dict(kv.split("=") for kv in first[len("# expect "):].split())
expect = {k: float(v) for k, v in expect.items()}

fams = {f.name: f for f in text_string_to_metric_families(text)}
for name, kind in (("sluice_decisions", "counter"), ("sluice_near_limit", "counter"),
                   ("sluice_peeks", "counter"), ("sluice_resets", "counter"),
                   ("sluice_refunds", "counter"),
                   ("sluice_deny_cache_hits", "counter"),
                   ("sluice_failures", "counter"),
                   ("sluice_fail_policy_answers", "counter"),
                   ("sluice_backend_requests", "counter"),
                   ("sluice_round_trips", "counter"),
                   ("sluice_call_duration_seconds", "histogram")):
    assert name in fams, "missing family %s (have %s)" % (name, sorted(fams))
    assert fams[name].type == kind, (name, fams[name].type)
# Each family's HELP and TYPE once (the parser would take a second one).
for line in text.splitlines():
    if line.startswith("# HELP "):
        assert text.count(line.split(" ")[2].join(["# HELP ", " "])) == 1, line


def value(fam, **labels):
    for s in fams[fam].samples:
        if s.name.endswith("_total") and all(s.labels.get(k) == v
                                             for k, v in labels.items()):
            return s.value
    raise AssertionError("no sample %s %s" % (fam, labels))


def check_page():
    """Three handles: "api" (limiters "login", ODD_NAME and "missing"),
    'admin "x"' (limiter "login" and requests by key), "off" (metrics=0:
    no sample)."""
    odd = 'b\\\\"\\xff\\x0a\u00e9'  # as test_stats.c's ODD_NAME is encoded
    samples = [x for f in fams.values() for x in f.samples]
    handles = {s.labels.get("handle") for s in samples}
    assert handles == {"api", 'admin "x"'}, handles
    for name in ("sluice_limiter_decisions", "sluice_limiter_deny_cache_hits",
                 "sluice_limiter_reserve_admitted",
                 "sluice_limiter_shadow_admitted", "sluice_limiter_listed",
                 "sluice_limiter_fail_policy_answers",
                 "sluice_limiter_failures"):
        assert fams[name].type == "counter", name
        for s in fams[name].samples:
            assert ("limiter" in s.labels) != ("limiter_overflow" in s.labels), s
    limiters = {(s.labels["handle"], s.labels.get("limiter"))
                for s in fams["sluice_limiter_decisions"].samples}
    assert limiters == {("api", "login"), ("api", odd), ("api", "missing"),
                        ('admin "x"', "login")}, limiters
    d = "sluice_limiter_decisions"
    assert value(d, handle="api", limiter="login", outcome="allowed") == expect["login_allowed"]
    assert value(d, handle="api", limiter="login", outcome="denied") == expect["login_denied"]
    assert value("sluice_limiter_deny_cache_hits", handle="api", limiter="login") == expect["login_hits"]
    assert value(d, handle="api", limiter=odd, outcome="allowed") == expect["odd_allowed"]
    assert value("sluice_limiter_failures", handle="api", limiter="missing",
                 status="nolimiter") == expect["missing"]
    assert value(d, handle='admin "x"', limiter="login", outcome="allowed") == expect["admin_login_allowed"]
    assert value("sluice_decisions", handle='admin "x"', outcome="allowed") == expect["admin_allowed"]
    assert value("sluice_decisions", handle='admin "x"', outcome="denied") == expect["admin_denied"]
    # Two histograms, each cumulative to its count.
    for h in ("api", 'admin "x"'):
        b = [s.value for s in fams["sluice_call_duration_seconds"].samples
             if s.name.endswith("_bucket") and s.labels["handle"] == h]
        c = [s.value for s in fams["sluice_call_duration_seconds"].samples
             if s.name.endswith("_count") and s.labels["handle"] == h]
        assert b == sorted(b) and c == [b[-1]], (h, b, c)
    print("prometheus page: %d families, %d samples of %d handles, parsed and "
          "as expected" % (len(fams), len(samples), len(handles)))


if page:
    check_page()
    sys.exit(0)

handle = 'api "v1"'
for s in (x for f in fams.values() for x in f.samples):
    assert s.labels.get("handle") == handle, s
assert value("sluice_decisions", handle=handle, outcome="allowed") == expect["allowed"]
assert value("sluice_decisions", handle=handle, outcome="denied") == expect["denied"]
assert value("sluice_deny_cache_hits", handle=handle) == expect["hits"]
assert value("sluice_failures", handle=handle, status="key") == expect["key"]
# The histogram: cumulative, ending at +Inf with the count.
buckets = [s for s in fams["sluice_call_duration_seconds"].samples
           if s.name.endswith("_bucket")]
les = [float(s.labels["le"]) for s in buckets]
assert les == sorted(les) and les[-1] == float("inf"), les
counts = [s.value for s in buckets]
assert counts == sorted(counts), counts
count = [s.value for s in fams["sluice_call_duration_seconds"].samples
         if s.name.endswith("_count")][0]
assert counts[-1] == count == expect["calls"], (counts[-1], count, expect)
print("prometheus text: %d families, %d samples, parsed and as expected"
      % (len(fams), sum(len(f.samples) for f in fams.values())))
