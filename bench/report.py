#!/usr/bin/python3
"""report.py - turns one run of bench/run.sh into the table, the JSON and
the charts: ratios to the floor (same client, same connection pattern, same
run) and to the peers.
    report.py OUT_DIR CPUS CPU_MODEL"""
import json
import os
import subprocess
import sys

out, cpus, model = sys.argv[1], sys.argv[2], sys.argv[3].strip()
cells = json.load(open(os.path.join(out, "sluice.json")))["cells"]
peers = [json.loads(l) for l in open(os.path.join(out, "peers.jsonl")) if l.strip()]
instr = {}
for line in open(os.path.join(out, "instructions.txt")):
    url, n = line.split()
    instr["mem" if url.startswith("mem") else "redis"] = int(n)

# The floor each backend is held to: a Lua backend to EVALSHA of a trivial
# script, a plain-command backend to INCR, through the same server or proxy.
FLOOR = {"redis": ("redis", "EVALSHA"), "cluster": ("redis", "EVALSHA"),
         "lua-proxy": ("twemproxy", "EVALSHA"), "multi": ("redis", "INCR"),
         "twemproxy": ("twemproxy", "INCR")}


def floor_of(c):
    if c["target"] not in FLOOR:
        return None
    tgt, what = FLOOR[c["target"]]
    for f in cells:
        if (f["kind"] == "floor" and f["target"] == tgt and f["what"] == what
                and f["mode"] == c["mode"] and f["pattern"] == "uniform"):
            return f
    return None


rows = []
for c in cells:
    f = floor_of(c) if c["kind"] == "sluice" else None
    c["floor"] = f["what"] + "@" + f["target"] if f else None
    c["ratio_to_floor"] = c["decisions_per_s"] / f["decisions_per_s"] if f else None
    rows.append(c)


def find(target, what, pattern, mode):
    for c in cells:
        if (c["target"] == target and c["what"] == what
                and c["pattern"] == pattern and c["mode"] == mode):
            return c
    return None


def peer(name, what, pattern, mode):
    for p in peers:
        if p["peer"].startswith(name) and what in p["what"] and \
                p["pattern"] == pattern and p["mode"] == mode:
            return p
    return None


lines = []
lines.append("Machine: %s CPUs (%s); Redis and nutcracker pinned to CPU 0, "
             "the load to the rest; %.2f s a cell." % (
                 cpus, model, json.load(open(os.path.join(out, "sluice.json")))["seconds_per_cell"]))
lines.append("")
lines.append("%-10s %-18s %-8s %-7s %11s %8s %8s %6s %6s %8s %7s %7s" % (
    "backend", "rule", "keys", "mode", "decisions/s", "floor", "p99 us",
    "cmds", "rtts", "usec/dec", "bytes", "admit"))
for c in rows:
    ratio = "%.2f" % c["ratio_to_floor"] if c["ratio_to_floor"] else "-"
    lines.append("%-10s %-18s %-8s %-7s %11.0f %8s %8.0f %6.2f %6.2f %8.2f %7.0f %7s" % (
        c["target"], c["what"], c["pattern"], c["mode"], c["decisions_per_s"],
        ratio if c["kind"] == "sluice" else "(floor)", c["p99_us"],
        c["commands_per_decision"], c["round_trips_per_decision"],
        c["redis_usec_per_decision"], c["memory_bytes_per_key"],
        "%.3f" % c["accuracy"] if c["accuracy"] else "-"))
lines.append("")
lines.append("Peers (same Redis, same key patterns):")
for p in peers:
    lines.append("  %-30s %-24s %-8s %-10s %9.0f/s p99 %6.0f us, Redis %.1f us and %.1f commands a decision, admitted %d of %d" % (
        p["peer"], p["what"], p["pattern"], p["mode"], p["decisions_per_s"],
        p["p99_us"], p.get("redis_usec_per_decision", 0),
        p.get("commands_per_decision", 0), p["admitted"], p["decisions"]))
lines.append("")
summary = {}
s_seq = find("redis", "fixed:1000/1s", "uniform", "seq")
s_p50 = find("redis", "fixed:1000/1s", "uniform", "pipe50")
s_c50 = find("redis", "fixed:1000/1s", "uniform", "conc50")
r_seq = peer("rate-limiter-flexible", "fixed", "uniform", "seq")
r_50 = peer("rate-limiter-flexible", "fixed", "uniform", "inflight50")
l_seq = peer("limits", "fixed", "uniform", "seq")
if s_seq and r_seq:
    summary["sluice_vs_rlf_sequential"] = s_seq["decisions_per_s"] / r_seq["decisions_per_s"]
if s_p50 and r_50:
    summary["sluice_pipelined50_vs_rlf_inflight50"] = s_p50["decisions_per_s"] / r_50["decisions_per_s"]
if s_c50 and r_50:
    summary["sluice_50threads_vs_rlf_inflight50"] = s_c50["decisions_per_s"] / r_50["decisions_per_s"]
if s_seq and l_seq:
    summary["sluice_vs_limits_sequential"] = s_seq["decisions_per_s"] / l_seq["decisions_per_s"]
summary["client_instructions_per_decision"] = instr
for k, v in summary.items():
    lines.append("%-42s %s" % (k, ("%.2f" % v) if isinstance(v, float) else v))
text = "\n".join(lines)
print(text)
open(os.path.join(out, "table.txt"), "w").write(text + "\n")
json.dump({"machine": {"cpus": cpus, "model": model}, "cells": rows,
           "peers": peers, "summary": summary},
          open(os.path.join(out, "results.json"), "w"), indent=1)

# Charts: decisions/s and p99 per backend and algorithm (uniform keys),
# sequential and 50 at once, beside the floors (grey) and the peers (red).
# mem:// is left out: it needs no network and would flatten the rest.
for mode, pmode, title in (("seq", "seq", "one connection, sequential"),
                           ("conc50", "inflight50", "50 at once")):
    dat = os.path.join(out, "chart_%s.dat" % mode)
    with open(dat, "w") as f:
        for c in rows:
            if c["pattern"] == "uniform" and c["mode"] == mode and c["target"] != "mem":
                label = c["target"] + " " + c["what"].split(":")[0]
                color = 0x999999 if c["kind"] == "floor" else 0x3c78b4
                f.write('"%s" %.0f %.0f %d\n' % (label, c["decisions_per_s"],
                                                 c["p99_us"], color))
        for p in peers:
            if p["pattern"] == "uniform" and p["mode"] == pmode:
                label = p["peer"].split()[0] + " " + p["what"].split()[0]
                f.write('"%s" %.0f %.0f %d\n' % (label, p["decisions_per_s"],
                                                 p["p99_us"], 0xc83c3c))
    for col, name, ylabel in ((2, "dps", "decisions per second"),
                              (3, "p99", "p99 latency (us)")):
        png = os.path.join(out, "%s_%s.png" % (name, mode))
        script = """
set terminal pngcairo size 1400,560 font ',9'
set output '%s'
set title '%s, uniform keys, %s: sluice (blue), floor (grey), peers (red)'
set style fill solid 0.85 border -1
set boxwidth 0.75
set xtics rotate by -55 scale 0
set ylabel '%s'
set grid ytics
set key off
set yrange [0:*]
set bmargin 9
plot '%s' using 0:%d:4:xtic(1) with boxes lc rgb variable
""" % (png, ylabel.capitalize(), title, ylabel, dat, col)
        try:
            subprocess.run(["gnuplot"], input=script.encode(), check=True)
        except (OSError, subprocess.CalledProcessError) as e:
            print("report.py: gnuplot failed for %s: %s" % (png, e), file=sys.stderr)
print("\nwrote %s/table.txt, results.json, dps_seq.png, dps_conc50.png, p99_seq.png, p99_conc50.png" % out)

# A Markdown summary for the README: one row per backend and algorithm on
# uniform keys, each mode with its ratio to the floor.
md = ["| backend | rule | seq /s (× floor) | pipe16 /s (× floor) | conc50 /s (× floor) "
      "| p99 seq µs | Redis µs/decision | cmds | round trips | bytes/key |",
      "|---|---|---|---|---|---|---|---|---|---|"]
seen = []
for c in rows:
    if c["kind"] == "sluice" and c["pattern"] == "uniform" and c["mode"] == "seq":
        seen.append((c["target"], c["what"]))
for f in [c for c in rows if c["kind"] == "floor" and c["mode"] == "seq"]:
    seen.insert(0, (f["target"], f["what"]))
for tgt, what in seen:
    cols = []
    for mode in ("seq", "pipe16", "conc50"):
        c = find(tgt, what, "uniform", mode)
        if c is None:
            cols.append("-")
        elif c["kind"] == "floor" or c.get("ratio_to_floor") is None:
            cols.append("%.0f" % c["decisions_per_s"])
        else:
            cols.append("%.0f (%.2f)" % (c["decisions_per_s"], c["ratio_to_floor"]))
    s = find(tgt, what, "uniform", "seq")
    md.append("| %s | %s | %s | %s | %s | %.0f | %.1f | %.1f | %.2f | %s |" % (
        tgt, what if s["kind"] == "sluice" else what + " (floor)", cols[0], cols[1], cols[2],
        s["p99_us"], s["redis_usec_per_decision"], s["commands_per_decision"],
        s["round_trips_per_decision"],
        "%.0f" % s["memory_bytes_per_key"] if s["memory_bytes_per_key"] else "-"))
md.append("")
md.append("| peer | keys | mode | decisions/s | p99 µs | Redis µs/decision | cmds | sluice (same keys and load) | ratio |")
md.append("|---|---|---|---|---|---|---|---|---|")
for p in peers:
    if p["mode"] == "seq":
        s = find("redis", "fixed:1000/1s", p["pattern"], "seq")
        label = "redis fixed, seq"
    else:
        s = find("redis", "fixed:1000/1s", p["pattern"], "pipe50") or \
            find("redis", "fixed:1000/1s", p["pattern"], "conc50")
        label = "redis fixed, %s" % (s["mode"] if s else "-")
    md.append("| %s %s | %s | %s | %.0f | %.0f | %.1f | %.1f | %s | %s |" % (
        p["peer"], p["what"], p["pattern"], p["mode"], p["decisions_per_s"],
        p["p99_us"], p.get("redis_usec_per_decision", 0),
        p.get("commands_per_decision", 0),
        ("%.0f /s (%s)" % (s["decisions_per_s"], label)) if s else "-",
        ("%.2f" % (s["decisions_per_s"] / p["decisions_per_s"])) if s else "-"))
open(os.path.join(out, "summary.md"), "w").write("\n".join(md) + "\n")
