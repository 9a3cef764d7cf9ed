#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""check_prometheus.py - parses the text sluice_stats_prometheus wrote
(tests/test_stats.c) with Debian's prometheus_client, an independent
parser, and checks its families, types, labels and values against the
expectations the test wrote on the first line.
    check_prometheus.py FILE"""
import sys

from prometheus_client.parser import text_string_to_metric_families

text = open(sys.argv[1]).read()
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


def value(fam, **labels):
    for s in fams[fam].samples:
        if s.name.endswith("_total") and all(s.labels.get(k) == v
                                             for k, v in labels.items()):
            return s.value
    raise AssertionError("no sample %s %s" % (fam, labels))


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
