#!/usr/bin/python3
"""report.py - turns one run of bench/run.sh into bench/out/summary.md,
table.txt, results.json and the charts: every figure set beside the floor
measured in the same run (same client, same connection pattern, same key
pattern), and each target of the issue "Lean server-side decisions" beside
its measure, met or missed; and the reservation cells (issue 22) with
their ratios, capacity.json's clusters of 1, 3 and 6 masters among them.
    report.py OUT_DIR"""
import json
import os
import subprocess
import sys

out = sys.argv[1]
run = json.load(open(os.path.join(out, "sluice.json")))
cells = run["cells"]
# The capacity cells: a run of their own on the clusters started for them.
if os.path.exists(os.path.join(out, "capacity.json")):
    cells += json.load(open(os.path.join(out, "capacity.json")))["cells"]
peers = [json.loads(l) for l in open(os.path.join(out, "peers.jsonl")) if l.strip()]
versions = json.load(open(os.path.join(out, "versions.json")))
instr = {}
for line in open(os.path.join(out, "instructions.txt")):
    url, n = line.split()
    instr["mem" if url.startswith("mem") else "redis"] = int(n)

RULES = ["fixed:1000/1s", "sliding:1000/1s", "log:100/1s", "token:1000/1s",
         "gcra:1000/1s", "fixed:1000/1s+token:1000/1s"]
COMPOSITE = RULES[5]
BACKENDS = ["redis", "lua-proxy", "cluster", "multi", "twemproxy"]
LUA = {"redis", "lua-proxy", "cluster"}
# Where each backend's floors are measured: the same server, or the same
# servers through the same proxy. The cluster is held to plain Redis: an
# EVALSHA costs a cluster node what it costs a lone server.
FLOOR_AT = {"redis": "redis", "multi": "redis", "cluster": "redis",
            "lua-proxy": "twemproxy", "twemproxy": "twemproxy"}
# Redis CPU per decision, at most this many times the floor's.
CPU_TARGET = {"fixed": 1.5, "sliding": 1.5, "token": 2.5, "gcra": 2.5, "log": 3.0}


def algo(rule):
    return rule.split(":")[0]


def find(target, what, pattern, mode, section=None):
    for c in cells:
        if (c["target"] == target and c["what"] == what and c["pattern"] == pattern
                and c["mode"] == mode and (section is None or c["section"] == section)):
            return c
    return None


for i, c in enumerate(cells):
    c["index"] = i


def floor_cells(target, what, pattern, mode):
    at = FLOOR_AT.get(target, target)
    return [c for c in cells if c["kind"] == "floor" and c["target"] == at
            and c["what"] == what and c["pattern"] == pattern and c["mode"] == mode]


def floor_cell(target, what, pattern, mode, near=None):
    """The floor for a cell of target: the mean of the floor measurements
    nearest before and after the cell `near` in the run (the machine
    drifts), or of all of them."""
    fs = floor_cells(target, what, pattern, mode)
    if not fs:
        return None
    if near is not None:
        before = [f for f in fs if f["index"] < near["index"]]
        after = [f for f in fs if f["index"] > near["index"]]
        fs = before[-1:] + after[:1]
    avg = dict(fs[0])
    for k in ("decisions_per_s", "redis_usec_per_decision", "usec_per_call",
              "cpu_usec_per_decision", "cpu_usec_per_decision_masters"):
        avg[k] = sum(f[k] for f in fs) / len(fs)
    avg["measurements"] = [f["redis_usec_per_decision"] for f in fs]
    return avg


def cpu_of(c):
    """Whole-process CPU per decision; a cluster's counts its masters, the
    node a key lives on, as a lone server counts itself."""
    return c["cpu_usec_per_decision_masters"] if c["target"] == "cluster" \
        else c["cpu_usec_per_decision"]


def ratio(a, b):
    return a / b if a is not None and b else None


# Ratios of every cell to its floors.
for c in cells:
    c["ratio_to_floor"] = None
    if c["kind"] != "sluice" or c["target"] not in FLOOR_AT:
        continue
    if c["section"] == "rcpu":
        if c.get("pair_usec_per_decision"):
            # The EVALSHA floor run in turns with this cell.
            f = {"redis_usec_per_decision": c["pair_usec_per_decision"],
                 "cpu_usec_per_decision": c["pair_cpu_usec_per_decision"]}
        else:
            f = floor_cell(c["target"], "EVALSHA", c["pattern"], c["mode"], c)
        fi = floor_cell(c["target"], "INCR", c["pattern"], c["mode"], c)
        if f:
            c["floor"] = "EVALSHA@" + FLOOR_AT[c["target"]]
            c["redis_usec_ratio_to_floor"] = ratio(c["redis_usec_per_decision"],
                                                   f["redis_usec_per_decision"])
            c["cpu_ratio_to_floor"] = ratio(cpu_of(c), f["cpu_usec_per_decision"])
        if fi:
            c["redis_usec_ratio_to_incr"] = ratio(c["redis_usec_per_decision"],
                                                  fi["redis_usec_per_decision"])
    else:
        what = "EVALSHA" if c["target"] in LUA else "INCR"
        # 50 threads on one shared handle: against the floor's 50 threads.
        fmode = "conc50" if c["mode"] == "shared50" else c["mode"]
        f = floor_cell(c["target"], what, "uniform", fmode, c)
        fe = floor_cell(c["target"], "EVALSHA", "uniform", fmode, c)
        if f and c["pattern"] == "uniform":
            c["floor"] = what + "@" + FLOOR_AT[c["target"]]
            c["ratio_to_floor"] = ratio(c["decisions_per_s"], f["decisions_per_s"])
        if fe and c["pattern"] == "uniform":
            c["cpu_ratio_to_floor"] = ratio(cpu_of(c), fe["cpu_usec_per_decision"])
            c["redis_usec_ratio_to_floor"] = ratio(c["redis_usec_per_decision"],
                                                   fe["redis_usec_per_decision"])


def fmt(v, spec="%.2f"):
    return "-" if v is None else spec % v


# ---- the targets ----
targets = []


def target(backend, rule, what, measured, limit, kind, note="", judged=None):
    """kind "max": every measured value (of those named in judged, if
    given) at most limit; "min": at least."""
    vals = [v for k, v in measured if v is not None and (judged is None or k in judged)]
    if not vals:
        met = None
    elif kind == "max":
        met = all(v <= limit for v in vals)
    else:
        met = all(v >= limit for v in vals)
    targets.append({"backend": backend, "rule": rule, "target": what,
                    "limit": limit, "kind": kind,
                    "measured": {k: v for k, v in measured}, "met": met,
                    "note": note})


def rcpu(backend, rule, pattern, mode="pipe16"):
    return find(backend, rule, pattern, mode, "rcpu")


for b in BACKENDS:
    for rule in RULES:
        if rule == COMPOSITE:
            parts = RULES[0], RULES[3]
            ms = []
            for pat in ("hot", "new"):
                c, x, y = rcpu(b, rule, pat), rcpu(b, parts[0], pat), rcpu(b, parts[1], pat)
                if c and x and y:
                    ms.append((pat, ratio(c["redis_usec_per_decision"],
                                          x["redis_usec_per_decision"] + y["redis_usec_per_decision"])))
            if ms:
                target(b, rule, "Redis µs/decision ≤ 0.9 × sum of its two rules alone",
                       ms, 0.9, "max")
            continue
        ms = []
        for pat in ("hot", "new"):
            c = rcpu(b, rule, pat)
            if c and c.get("redis_usec_ratio_to_floor") is not None:
                ms.append((pat, c["redis_usec_ratio_to_floor"]))
        if ms:
            lim = CPU_TARGET[algo(rule)]
            note, judged = "", None
            if algo(rule) == "log":
                # The target is set at 100 live entries: the hot key's.
                hot = rcpu(b, rule, "hot")
                note = "hot key: %d live entries; judged on it" % hot["log_entries"] if hot else ""
                judged = ["hot"]
            target(b, rule, "Redis µs/decision ≤ %.1f × floor (16 in flight)" % lim,
                   ms, lim, "max", note, judged)

for b in ("redis", "lua-proxy"):
    for rule in RULES:
        ms = {}
        for mode in ("seq", "conc50", "pipe16"):
            c = find(b, rule, "uniform", mode, "throughput")
            ms[mode] = c["ratio_to_floor"] if c else None
        if all(v is None for v in ms.values()):
            continue
        through = " through nutcracker" if b == "lua-proxy" else ""
        target(b, rule, "decisions/s ≥ 0.9 × EVALSHA floor%s, one connection" % through,
               [("seq", ms["seq"])], 0.9, "min")
        target(b, rule, "decisions/s ≥ 0.9 × EVALSHA floor%s, 50 connections" % through,
               [("conc50", ms["conc50"])], 0.9, "min")
        target(b, rule, "decisions/s ≥ 0.7 × EVALSHA floor%s, 16 in flight" % through,
               [("pipe16", ms["pipe16"])], 0.7, "min")

for rule in RULES:
    us, cpu = [], []
    for pat in ("hot", "new"):
        c, r = rcpu("cluster", rule, pat), rcpu("redis", rule, pat)
        # Each set against the floor measured next to it, so that the
        # machine's drift between the two does not count.
        if c and r:
            us.append((pat, ratio(c.get("redis_usec_ratio_to_floor"),
                                  r.get("redis_usec_ratio_to_floor"))))
            cpu.append((pat, ratio(c.get("cpu_ratio_to_floor"), r.get("cpu_ratio_to_floor"))))
    if us:
        target("cluster", rule, "Redis µs/decision ≤ 1.1 × redis:// (per node)",
               us, 1.1, "max", "each as its ratio to the floor run in turns with it")
        target("cluster", rule, "whole-process CPU/decision of the masters ≤ 1.1 × redis://",
               cpu, 1.1, "max", "each master also feeds its replica")

for b in BACKENDS:
    for rule in ("fixed:1000/1s", "gcra:1000/1s"):
        c = find(b, rule, "uniform", "seq", "throughput")
        if c and c["memory_bytes_per_key"]:
            target(b, rule, "MEMORY USAGE per limited key ≤ 100 bytes",
                   [("bytes", c["memory_bytes_per_key"])], 100, "max")


# One connection engine: 50 callers on one connection against
# rate-limiter-flexible's 50 in flight on one connection (ioredis), and the
# shared handle's Redis CPU against 50 threads with their own handles.
for p in peers:
    if p["mode"] != "inflight50" or "rate-limiter-flexible" not in p["peer"]:
        continue
    for modes, who in ((("shared50",), "50 threads on one handle"),
                       (("loop50", "loop1000"), "one thread on libevent, 50 and 1,000 in flight")):
        ms = []
        for mode in modes:
            c = find("redis", RULES[0], p["pattern"], mode, "peers")
            if c and p["decisions_per_s"]:
                ms.append((mode, c["decisions_per_s"] / p["decisions_per_s"]))
        if ms:
            target("redis", RULES[0], "%s: decisions/s ≥ 2.5 × rate-limiter-flexible "
                   "(50 in flight on its one connection), %s keys" % (who, p["pattern"]),
                   ms, 2.5, "min")
for rule in RULES:
    sh, own = (find("redis", rule, "uniform", m, "throughput") for m in ("shared50", "conc50"))
    if sh and own and cpu_of(own):
        target("redis", rule, "whole-process Redis CPU/decision of 50 threads on one "
               "handle ≤ 1/3 × 50 threads with their own",
               [("ratio", cpu_of(sh) / cpu_of(own))], 1 / 3, "max")

# The local deny cache: one process hammering a key denied for the hour,
# the same cell with the cache off and on.
dc = [c for c in cells if c["section"] == "denycache" and c["target"] == "redis"]
dc_off = next((c for c in dc if not c.get("deny_cache")), None)
dc_on = next((c for c in dc if c.get("deny_cache")), None)
if dc_off and dc_on and dc_off["decisions_per_s"]:
    target("redis", dc_on["what"], "a hot denied key: decisions/s with deny_cache=4096 "
           "≥ 10 × without (%.0f against %.0f)" % (dc_on["decisions_per_s"],
                                                  dc_off["decisions_per_s"]),
           [("ratio", dc_on["decisions_per_s"] / dc_off["decisions_per_s"])], 10, "min")

# The handle's counters on the hot path: one process, uniform keys, the
# same cell with metrics=0 and with them. Their cost is per call (two clock
# reads, a few atomic adds): held to 100 ns a decision where it shows, in
# process; on Redis it is shown as a ratio, within the run's noise.
for tgt in ("mem", "redis"):
    mc = [c for c in cells if c["section"] == "metrics" and c["target"] == tgt]
    m_off = next((c for c in mc if c.get("metrics") is False), None)
    m_on = next((c for c in mc if c.get("metrics") is True), None)
    if not (m_off and m_on and m_off["decisions_per_s"] and m_on["decisions_per_s"]):
        continue
    ns = 1e9 / m_on["decisions_per_s"] - 1e9 / m_off["decisions_per_s"]
    target(tgt, m_on["what"], "the counters' cost per decision ≤ 100 ns "
           "(%.0f/s with them, %.0f/s with metrics=0, ×%.2f)" % (
               m_on["decisions_per_s"], m_off["decisions_per_s"],
               m_on["decisions_per_s"] / m_off["decisions_per_s"]),
           [("ns", ns)], 100, "max", judged=None if tgt == "mem" else [])


# ---- reservations (issue 22) ----
RESERVE_BACKENDS = ["redis", "multi", "twemproxy", "lua-proxy", "cluster", "tls", "mem"]
HOT_RULE = "fixed:1000000000/1s"
PROC_RULE = "fixed:10000/1s"
PROC_CAP = 1000  # c: reserve_share's default 10 % of PROC_RULE's limit
# Paced cells (issue 31): (demand as a multiple of the limit, processes).
PACED = [(0.9, 1), (0.9, 4), (1.5, 4)]


def rsv(target, what, pattern, mode, reserve, section="reserve", pace=0, procs=None):
    for c in cells:
        if (c["section"] == section and c["target"] == target and c["what"] == what
                and c["pattern"] == pattern and c["mode"] == mode
                and bool(c.get("reserve_ms")) == reserve
                and abs(c.get("pace", 0) - pace) < 1e-9
                and (procs is None or c.get("processes") == procs)):
            return c
    return None


def paced(target, pace, procs):
    return rsv(target, PROC_RULE, "hot", "proc4x8", True, pace=pace, procs=procs)


def lost_per_window(c):
    """Units charged in each full window and not admitted in it (the
    server's counter less the admissions of every handle), or, where the
    counter cannot be read (mem://, a store of the process's own), the
    handles' lapsed units over the cell's windows."""
    got = [ch - adm for _w, adm, ch, *_r in c.get("windows", []) if ch >= 0]
    if got:
        return got, "server"
    return [c["reserve_lapsed"] / max(1, c["seconds"])], "stats"


def per_rtt(c):
    """Decisions per round trip, by the handles' own counters."""
    return c["decisions"] / c["stats_round_trips"] if c and c.get("stats_round_trips") else None


def local_share(c):
    return c["reserve_admitted"] / c["decisions"] if c and c["decisions"] else None


def noise(*cs):
    """The larger spread of the cells' own turns, (max - min) / mean of
    each one's decisions/s (as bench/compare.sh takes its rounds')."""
    sp = []
    for c in cs:
        t = c.get("turn_decisions_per_s", []) if c else []
        if len(t) > 1 and sum(t):
            sp.append((max(t) - min(t)) / (sum(t) / len(t)))
    return max(sp) if sp else None


rsv_floor = next((c for c in cells if c["section"] == "reserve" and c["kind"] == "floor"
                  and c["what"] == "EVALSHA"), None)
rsv_cpu = next((c for c in cells if c["section"] == "reserve" and c["what"] == "CPU"), None)
rlf_hot = next((p for p in peers if "rate-limiter-flexible" in p["peer"]
                and p["mode"] == "inflight50" and p["pattern"] == "hot"), None)
for b in RESERVE_BACKENDS:
    for mode in ("shared50", "loop1000"):
        off, on = rsv(b, HOT_RULE, "hot", mode, False), rsv(b, HOT_RULE, "hot", mode, True)
        if not on or not on["decisions"] or b == "mem":
            continue  # mem:// makes no round trip to save
        who = "50 threads on one handle" if mode == "shared50" else "1,000 in flight on libevent"
        judged = None if mode == "shared50" else []  # the targets: 50 in flight
        if off:
            target(b, HOT_RULE, "reservations, one hot key, %s: decisions/s ≥ 10 × "
                   "without (same cell, in turns)" % who,
                   [("ratio", ratio(on["decisions_per_s"], off["decisions_per_s"]))],
                   10, "min", judged=judged)
        if rlf_hot and b == "redis":
            target(b, HOT_RULE, "reservations, one hot key, %s: decisions/s ≥ 10 × "
                   "rate-limiter-flexible (50 in flight, its hot-key cell)" % who,
                   [("ratio", ratio(on["decisions_per_s"], rlf_hot["decisions_per_s"]))],
                   10, "min", judged=judged)
        target(b, HOT_RULE, "reservations, one hot key, %s: ≥ 50 decisions a round trip" % who,
               [("decisions/rtt", per_rtt(on))], 50, "min", judged=judged)
        if rsv_floor:
            target(b, HOT_RULE, "reservations, one hot key, %s: Redis µs/decision ≤ 1/20 × "
                   "the EVALSHA floor's (hot key, 16 in flight: %.2f µs)" % (
                       who, rsv_floor["redis_usec_per_decision"]),
                   [("ratio", ratio(on["redis_usec_per_decision"],
                                    rsv_floor["redis_usec_per_decision"]))],
                   1 / 20, "max", judged=judged)
for b in RESERVE_BACKENDS:
    on = rsv(b, HOT_RULE, "hot", "shared50", True)
    off = rsv(b, HOT_RULE, "hot", "shared50", False)
    if on and on.get("local_decisions") and off and b != "mem":
        # A local admission waits for no round trip of another thread's
        # longer than that round trip: its p99.9 beside the round trips
        # of the same cell without reservations, measured in turns.
        target(b, HOT_RULE, "reservations, 50 threads on one handle: admissions from a "
               "reservation, p99.9 ≤ the p99 of the same cell without, in turns "
               "(%.0f µs)" % off["p99_us"],
               [("p99.9 µs", on["p999_local_us"]), ("p99 µs", on["p99_local_us"])],
               off["p99_us"], "max", judged=["p99.9 µs"])
        target(b, HOT_RULE, "reservations, 50 threads on one handle: no call timed out",
               [("timeouts", on.get("timeouts", 0))], 0, "max")
proc = rsv("redis", PROC_RULE, "hot", "proc4x8", True)
proc_fail = []
if proc and proc.get("windows"):
    lim = proc["window_limit"]
    for w, adm, charged, *_r in proc["windows"]:
        if adm > lim or charged > lim:
            proc_fail.append("window %d: admitted %d, charged %d > %d" % (w, adm, charged, lim))
    target("redis", PROC_RULE, "4 processes × 8 threads on one key, reserve_ms=100: every "
           "full window admits at most %d (admitted, and charged on the server)" % lim,
           [("most", max(max(a, c) for _, a, c, *_r in proc["windows"]))], lim, "max")
    target("redis", PROC_RULE, "4 processes × 8 threads on one key: every full window "
           "admits at least 97 %% of %d" % lim,
           [("least share", min(a for _, a, *_r in proc["windows"]) / lim)], 0.97, "min")
for b in RESERVE_BACKENDS:
    for pace, procs in PACED:
        c = paced(b, pace, procs)
        if not c or not c.get("decisions"):
            continue
        who = "%.1f× the limit, paced, %s" % (
            pace, "one handle of 8 threads" if procs == 1 else "%d processes × 8 threads" % procs)
        wins = c.get("windows", [])
        lim = c["window_limit"]
        for w, adm, charged, *_r in wins:
            if adm > lim or charged > lim:
                proc_fail.append("%s %s window %d: admitted %d, charged %d > %d" % (
                    b, who, w, adm, charged, lim))
        if wins:
            target(b, PROC_RULE, "reserve_ms=100, %s: every full window admits at most %d" % (
                who, lim), [("most", max(max(a, ch) for _, a, ch, *_r in wins))], lim, "max")
        if pace < 1:
            target(b, PROC_RULE, "reserve_ms=100, %s: never denied" % who,
                   [("denied", c["decisions"] - c["admitted"])], 0, "max")
        lost, how = lost_per_window(c)
        target(b, PROC_RULE, "reserve_ms=100, %s: units lost to lapses ≤ 2c = %d a window, "
               "all handles together" % (who, 2 * PROC_CAP),
               [("most", max(lost))], 2 * PROC_CAP, "max",
               note="" if how == "server" else "the handle's lapsed units a window, on average")
        if pace > 1 and wins:
            # Of the limit, or of what was asked in the window when the
            # machine kept the load from asking that much (the requests
            # it dropped behind schedule).
            target(b, PROC_RULE, "reserve_ms=100, %s: every full window admits ≥ 97 %% of %d "
                   "(or of what it was asked, if less)" % (who, lim),
                   [("least share", min(a / max(1, min(lim, a + (r[1] if len(r) > 1 else 0)))
                                        for _, a, *r in wins))], 0.97, "min",
                   note="%d requests dropped behind schedule" % c.get("skipped", 0)
                   if c.get("skipped") else "")
cold_off, cold_on = (rsv("redis", RULES[0], "uniform", "shared50", x) for x in (False, True))
if cold_off and cold_on and cold_off["decisions_per_s"]:
    nz = noise(cold_off, cold_on) or 0
    target("redis", RULES[0], "uniform keys (10,000), 50 threads on one handle: with "
           "reserve_ms=100 within noise of without (|ratio − 1| ≤ the larger spread of "
           "either cell's 4 turns, %.3f)" % nz,
           [("|ratio - 1|", abs(cold_on["decisions_per_s"] / cold_off["decisions_per_s"] - 1))],
           nz, "max")


def verdict(t):
    return "-" if t["met"] is None else ("met" if t["met"] else "**missed**")


def measured_text(t):
    m = t["measured"]
    if list(m) == ["bytes"]:
        return "%.0f" % m["bytes"]
    if len(m) == 1:
        return fmt(list(m.values())[0])
    return ", ".join("%s %s" % (k, fmt(v)) for k, v in m.items())


# ---- the Markdown summary ----
md = []
v = versions
md.append("# sluice bench: %s" % v.get("date", ""))
md.append("")
md.append("- Machine: %s CPUs (%s), %s; Redis and nutcracker pinned to CPU 0, "
          "the load to the others; %.2f s a cell; whole run %s s." % (
              v.get("cpus"), v.get("cpu_model"), v.get("os"), run["seconds_per_cell"],
              v.get("wall_seconds", "?")))
md.append("- Built from %s; Lua script %s." % (v.get("commit"), v.get("lua_sha")))
if v.get("only"):
    md.append("- `run.sh --only %s`: the reservation and capacity cells and the one peer "
              "cell they are set against; the other tables are empty." % v["only"])
md.append("- Servers: %s; %s." % (v.get("redis"), v.get("nutcracker")))
md.append("- Peers: %s." % "; ".join(v.get("peers", [])))
md.append("- Floors: `INCR`, and `EVALSHA` of `%s` (ARGV[1] = 2000), a fixed-window "
          "counter itself. Ratios are to the floor measured in this run under the "
          "same mode and key pattern: for Redis CPU, the EVALSHA floor run in turns "
          "with the cell (%.2f s each, in 4 turns of a quarter, alternating, so that "
          "both meet the same load on a shared machine); otherwise the mean of the "
          "floor's measurements nearest before and after the cell." % (
              run.get("floor_script", ""), run["seconds_per_cell"]))
md.append("- Redis µs/decision: `INFO commandstats` usec of the outer command "
          "(`cmdstat_evalsha`, `cmdstat_eval`) before and after, per decision: a "
          "script's usec already holds the commands it calls, which Redis also lists "
          "on their own, so these are not added. Plain backends (`redis+multi://`, "
          "`twemproxy://`): the sum over their commands (`MULTI`, `EXEC`, `WATCH` "
          "included). Whole-process CPU: `INFO cpu` used_cpu_sys + used_cpu_user "
          "before and after, per decision (a cluster's masters only). Harness "
          "commands (INFO, FLUSHALL, SCRIPT LOAD, ...) are never counted; every "
          "server is flushed before each cell.")
md.append("- Key patterns: `hot` one key; `new` a key never seen by each decision "
          "(a new window or bucket: the first-charge path); `uniform` 10,000 keys.")
md.append("")

md.append("## Against the targets")
md.append("")
judged = [t for t in targets if t["met"] is not None]
md.append("%d of %d met. Ratios to the floor measured in this run; Redis CPU with 16 in "
          "flight on one connection, on a hot key and on new keys." % (
              sum(1 for t in judged if t["met"]), len(judged)))
md.append("")
md.append("| backend | rule | target | measured | |")
md.append("|---|---|---|---|---|")
for t in targets:
    md.append("| %s | %s | %s | %s%s | %s |" % (
        t["backend"], t["rule"], t["target"], measured_text(t),
        " (%s)" % t["note"] if t["note"] else "", verdict(t)))
md.append("")

# The reservation cells.
if any(c["section"] in ("reserve", "capacity") for c in cells):
    md.append("## Reservations")
    md.append("")
    if proc_fail:
        md.append("**FAIL: a window admitted more than its limit: %s**" % "; ".join(proc_fail))
        md.append("")
    md.append("One hot key on `%s` (never denies in a cell), each cell without and with "
              "`reserve_ms=100` in the URL, the two in 4 turns of a quarter each, "
              "alternating (same weather). shared50: 50 threads on one handle; loop1000: "
              "one thread on libevent, 1,000 in flight. Decisions a round trip: decisions ÷ "
              "the handles' `sluice_stats` round_trips. Local: `reserve_admitted` ÷ "
              "decisions. Redis µs: commandstats usec of the commands sent (EVALSHA; the "
              "plain backends' own commands) ÷ decisions, beside the EVALSHA floor's on a "
              "hot key with 16 in flight in this run%s. × rlf: ÷ rate-limiter-flexible's "
              "hot-key cell with 50 in flight on the same Redis in this run%s." % (
                  HOT_RULE,
                  " (%.2f µs)" % rsv_floor["redis_usec_per_decision"] if rsv_floor else "",
                  " (%.0f /s)" % rlf_hot["decisions_per_s"] if rlf_hot else " (not run)"))
    md.append("")
    md.append("| backend | mode | without /s | with /s | × without | × rlf | decisions/rtt "
              "without, with | local | Redis µs/decision without, with | with ÷ floor | "
              "p99 µs without, with | local p99, p99.9, slowest µs | timeouts | "
              "units granted, refunded, lapsed |")
    md.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for b in RESERVE_BACKENDS:
        for mode in ("shared50", "loop1000"):
            off, on = rsv(b, HOT_RULE, "hot", mode, False), rsv(b, HOT_RULE, "hot", mode, True)
            if not off and not on:
                continue
            md.append("| %s | %s | %s | %s | %s | %s | %s, %s | %s | %s, %s | %s | %s, %s | "
                      "%s | %s | %s |" % (
                b, mode, fmt(off and off["decisions_per_s"], "%.0f"),
                fmt(on and on["decisions_per_s"], "%.0f"),
                fmt(ratio(on and on["decisions_per_s"], off and off["decisions_per_s"]), "%.1f"),
                fmt(ratio(on and on["decisions_per_s"],
                          rlf_hot and rlf_hot["decisions_per_s"]), "%.1f"),
                fmt(per_rtt(off), "%.1f"), fmt(per_rtt(on), "%.1f"),
                fmt(local_share(on) and 100 * local_share(on), "%.1f %%"),
                fmt(off and off["redis_usec_per_decision"], "%.3f"),
                fmt(on and on["redis_usec_per_decision"], "%.4f"),
                fmt(ratio(on and on["redis_usec_per_decision"],
                          rsv_floor and rsv_floor["redis_usec_per_decision"]), "%.4f"),
                fmt(off and off["p99_us"], "%.0f"), fmt(on and on["p99_us"], "%.0f"),
                "%s, %s, %s" % (fmt(on and on.get("p99_local_us"), "%.0f"),
                                fmt(on and on.get("p999_local_us"), "%.0f"),
                                fmt(on and on.get("local_max_us"), "%.0f"))
                if on and on.get("local_decisions") else "-",
                "%s, %s" % (off.get("timeouts", 0) if off else "-",
                            on.get("timeouts", 0) if on else "-"),
                "%d, %d, %d" % (on["reserve_granted"], on["reserve_refunded"],
                                on["reserve_lapsed"]) if on else "-"))
    md.append("")
    if rsv_cpu:
        md.append("Their control, the same 50 threads without the library (each bumps a "
                  "counter of its own between two clock readings, no lock): p99 %.0f µs, "
                  "p99.9 %.0f µs, slowest %.0f µs. A busy thread on this machine may wait that "
                  "long for a core, whatever it calls: the slowest admissions above are "
                  "bounded by it, not by the library." % (
                      rsv_cpu["p99_us"], rsv_cpu["p999_us"], rsv_cpu.get("slowest_us", 0)))
        md.append("")
    if cold_off and cold_on:
        md.append("Uniform keys (10,000, `%s`), 50 threads on one handle on `redis://`, "
                  "the cold path: %.0f /s without, %.0f /s with `reserve_ms=100` "
                  "(× %.3f; the larger spread of either cell's own 4 turns %s; local %s)." % (
                      RULES[0], cold_off["decisions_per_s"], cold_on["decisions_per_s"],
                      cold_on["decisions_per_s"] / cold_off["decisions_per_s"]
                      if cold_off["decisions_per_s"] else 0,
                      fmt(noise(cold_off, cold_on), "%.3f"),
                      fmt(local_share(cold_on) and 100 * local_share(cold_on), "%.2f %%")))
        md.append("")
    if proc:
        md.append("4 processes × 8 threads, each process one handle with `reserve_ms=100`, "
                  "one key, `%s`, %.0f s on `redis://`: %.0f decisions/s, %.1f decisions a "
                  "round trip, local %s. Per full window (index = the handle's clock in ms ÷ "
                  "1000): admitted, summed over the processes, and the window's counter read "
                  "on the server right after it ended (charged: what the window holds, "
                  "units held and lapsed included)." % (
                      PROC_RULE, proc["seconds"], proc["decisions_per_s"],
                      per_rtt(proc) or 0,
                      fmt(local_share(proc) and 100 * local_share(proc), "%.1f %%")))
        md.append("")
        md.append("| window | admitted | share of %d | charged on the server |" % proc["window_limit"])
        md.append("|---|---|---|---|")
        for w, adm, charged, *_r in proc.get("windows", []):
            md.append("| %d | %d%s | %.2f %% | %s |" % (
                w, adm, " **FAIL**" if adm > proc["window_limit"] else "",
                100.0 * adm / proc["window_limit"],
                "not read" if charged < 0 else "%d%s" % (
                    charged, " **FAIL**" if charged > proc["window_limit"] else "")))
        md.append("")
    rows = [(b, pace, procs, paced(b, pace, procs)) for b in RESERVE_BACKENDS
            for pace, procs in PACED]
    rows = [r for r in rows if r[3] and r[3].get("decisions")]
    if rows:
        md.append("Paced demand on one key, `%s`, `reserve_ms=100` (h = 100 ms, c = %d): "
                  "each of 8 threads of each process asks at its share of the demand, "
                  "evenly spaced (a thread the machine kept from its schedule drops the requests "
                  "it missed: no window is asked more than the pace), %.0f s from "
                  "a window's start. Denied: every denial of the cell. Per full window: "
                  "admitted (all processes), and lost = the window's counter read on the "
                  "server after it ended less the admissions (units charged and never "
                  "used: lapsed, or held at the end); mem:// (one process's store, one "
                  "handle) from the handle's lapsed units, a window on average." % (
                      PROC_RULE, PROC_CAP, rows[0][3]["seconds"]))
        md.append("")
        md.append("| backend | demand | processes | denied | dropped behind schedule | "
                  "asked per window | admitted per window | "
                  "lost per window | lapsed a handle and window (stats) | local |")
        md.append("|---|---|---|---|---|---|---|---|---|---|")
        for b, pace, procs, c in rows:
            lost, how = lost_per_window(c)
            md.append("| %s | %.1f× | %d | %d of %d | %d | %s | %s | %s | %.0f | %s |" % (
                b, pace, procs, c["decisions"] - c["admitted"], c["decisions"],
                c.get("skipped", 0),
                ", ".join("%d" % (a + (r[1] if len(r) > 1 else 0))
                          for _w, a, *r in c.get("windows", [])) or "-",
                ", ".join("%d" % a for _w, a, *_r in c.get("windows", [])) or "-",
                ", ".join("%.0f" % x for x in lost) + ("" if how == "server" else " (stats)"),
                c["reserve_lapsed"] / max(1, procs * c["seconds"]),
                fmt(local_share(c) and 100 * local_share(c), "%.1f %%")))
        md.append("")
    cap = [c for c in cells if c["section"] == "capacity"]
    if cap:
        md.append("### Capacity planning: 1, 3 and 6 masters")
        md.append("")
        md.append("The same 4 processes × 8 threads on 64 keys spread over the slots "
                  "(`%s` each), on Redis Clusters of 1, 3 and 6 masters without replicas, "
                  "without and with `reserve_ms=100`, in turns. Redis µs/decision: the sum "
                  "over the masters of commandstats usec ÷ decisions; CPU: their "
                  "used_cpu_sys + used_cpu_user ÷ decisions. **This machine has %s CPUs; the "
                  "masters ran on CPUs %s and the load on the others: with fewer cores than "
                  "masters plus load, as on a 2-core machine, the figures are bounded by the "
                  "cores, not by the masters, and do not show how throughput grows with "
                  "nodes.**" % (PROC_RULE, v.get("cpus"), v.get("capacity_server_cpus", "0")))
        md.append("")
        md.append("| masters | without /s | with /s | × | Redis µs/decision without, with | "
                  "CPU µs/decision without, with | decisions/rtt with | local |")
        md.append("|---|---|---|---|---|---|---|---|")
        for name in ("cap1", "cap3", "cap6"):
            off = rsv(name, PROC_RULE, "keys64", "proc4x8", False, "capacity")
            on = rsv(name, PROC_RULE, "keys64", "proc4x8", True, "capacity")
            if not off and not on:
                continue
            x = on or off
            md.append("| %s | %s | %s | %s | %s, %s | %s, %s | %s | %s |" % (
                x.get("masters") or name[3:], fmt(off and off["decisions_per_s"], "%.0f"),
                fmt(on and on["decisions_per_s"], "%.0f"),
                fmt(ratio(on and on["decisions_per_s"], off and off["decisions_per_s"]), "%.1f"),
                fmt(off and off["redis_usec_per_decision"], "%.3f"),
                fmt(on and on["redis_usec_per_decision"], "%.3f"),
                fmt(off and off["cpu_usec_per_decision_masters"], "%.2f"),
                fmt(on and on["cpu_usec_per_decision_masters"], "%.2f"),
                fmt(per_rtt(on), "%.1f"),
                fmt(local_share(on) and 100 * local_share(on), "%.1f %%")))
        md.append("")

md.append("## Redis CPU per decision, 16 in flight on one connection")
md.append("")
md.append("sluice-bench's own `pipe16` (`sluice_acquire_many` of 16): the library "
          "sends what it sends in use, the clock runs, windows roll over and logs "
          "prune. µs = Redis µs/decision (outer command); calls = outer calls per "
          "decision; CPU = whole-process CPU µs/decision; × = ratio to the EVALSHA "
          "floor run in turns with the cell (× INCR: to the raw INCR floor measured "
          "on its own). conc50 CPU: 50 connections, uniform keys, against the floor "
          "in that mode. The floor rows: the floors measured on their own.")
md.append("")
md.append("| backend | rule | hot µs | × | new µs | × | floor µs in turns (hot, new) | "
          "× INCR (hot, new) | calls | hot CPU | × | new CPU | × | conc50 CPU | × |")
md.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for at in ("redis", "twemproxy"):
    for what in ("EVALSHA", "INCR"):
        h, n = floor_cell(at, what, "hot", "pipe16"), floor_cell(at, what, "new", "pipe16")
        c50 = floor_cell(at, what, "uniform", "conc50")
        if not h or not n:
            continue
        md.append("| %s | %s (floor) | %s | | %s | | | | %.2f | %s | | %s | | %s | |" % (
            at, what, "/".join("%.2f" % x for x in h["measurements"]),
            "/".join("%.2f" % x for x in n["measurements"]),
            h["outer_calls_per_decision"], fmt(h["cpu_usec_per_decision"]),
            fmt(n["cpu_usec_per_decision"]),
            fmt(c50["cpu_usec_per_decision"] if c50 else None)))
for b in BACKENDS:
    for rule in RULES:
        h, n = rcpu(b, rule, "hot"), rcpu(b, rule, "new")
        c50 = find(b, rule, "uniform", "conc50", "throughput")
        if not h or not n:
            continue
        md.append("| %s | %s | %s | %s | %s | %s | %s, %s | %s, %s | %.2f | %s | %s | %s | %s | %s | %s |" % (
            b, rule + (" (%d entries)" % h["log_entries"] if h["log_entries"] else ""),
            fmt(h["redis_usec_per_decision"]), fmt(h.get("redis_usec_ratio_to_floor")),
            fmt(n["redis_usec_per_decision"]), fmt(n.get("redis_usec_ratio_to_floor")),
            fmt(h.get("pair_usec_per_decision") or None),
            fmt(n.get("pair_usec_per_decision") or None),
            fmt(h.get("redis_usec_ratio_to_incr"), "%.1f"),
            fmt(n.get("redis_usec_ratio_to_incr"), "%.1f"),
            n["outer_calls_per_decision"],
            fmt(cpu_of(h)), fmt(h.get("cpu_ratio_to_floor")),
            fmt(cpu_of(n)), fmt(n.get("cpu_ratio_to_floor")),
            fmt(cpu_of(c50) if c50 else None),
            fmt(c50.get("cpu_ratio_to_floor") if c50 else None)))
md.append("")

replays = [c for c in cells if c["mode"] == "replay16"]
if replays:
    md.append("## The same, replayed by redis-benchmark")
    md.append("")
    md.append("`redis-benchmark -c 1 -P 16 -n N` sends the exact command the library "
              "wrote for one request (`sluice-bench --print-command RULE` shows it), "
              "N times, as the issue measured; on new keys `-r` puts a random number "
              "in place of `__rand_int__` in the key. The arguments are frozen, the "
              "request's time among them: a hot key stays in one window (no roll-over, "
              "no pruning, a token bucket never refills). A cross-check of the table "
              "above on plain Redis, with a client that costs next to nothing.")
    md.append("")
    md.append("| rule | hot µs/call | × | new µs/call | × | hot CPU | × | new CPU | × | decisions/s hot, new |")
    md.append("|---|---|---|---|---|---|---|---|---|---|")
    for rule in ["EVALSHA"] + RULES:
        h, n = find("redis", rule, "hot", "replay16"), find("redis", rule, "new", "replay16")
        fh = floor_cell("redis", "EVALSHA", "hot", "replay16", None if rule == "EVALSHA" else h)
        fn = floor_cell("redis", "EVALSHA", "new", "replay16", None if rule == "EVALSHA" else n)
        if not h or not n or not fh or not fn:
            continue
        if rule == "EVALSHA":
            h, n = fh, fn
        md.append("| %s | %.2f | %s | %.2f | %s | %.2f | %s | %.2f | %s | %.0f, %.0f |" % (
            rule + (" (floor)" if h["kind"] == "floor" else ""),
            h["usec_per_call"], fmt(ratio(h["usec_per_call"], fh["usec_per_call"])),
            n["usec_per_call"], fmt(ratio(n["usec_per_call"], fn["usec_per_call"])),
            h["cpu_usec_per_decision"],
            fmt(ratio(h["cpu_usec_per_decision"], fh["cpu_usec_per_decision"])),
            n["cpu_usec_per_decision"],
            fmt(ratio(n["cpu_usec_per_decision"], fn["cpu_usec_per_decision"])),
            h["decisions_per_s"], n["decisions_per_s"]))
    md.append("")

md.append("## Throughput, uniform keys (10,000)")
md.append("")
md.append("× = ratio to the floor in the same mode: `EVALSHA` for the Lua backends "
          "(`redis://`, through nutcracker, cluster), `INCR` for the plain ones. "
          "Redis µs and bytes/key from the sequential cell.")
md.append("")
md.append("shared50: the same 50 threads as conc50 on one shared handle (one "
          "connection; calls made while a round trip is in flight go out together), "
          "against the floor's conc50 (50 connections).")
md.append("")
md.append("loop50, loop1000: one thread, one handle attached to libevent "
          "(`sluice_acquire_async`), 50 or 1,000 decisions in flight.")
md.append("")
md.append("| backend | rule | seq /s (×) | pipe16 /s (×) | conc50 /s (×) | shared50 /s (×) | "
          "loop50 /s | loop1000 /s | "
          "p99 seq µs | Redis µs/decision | cmds | round trips | bytes/key |")
md.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
rows = []
for at in ("twemproxy", "redis"):
    for what in ("EVALSHA", "INCR"):
        if find(at, what, "uniform", "seq", "throughput"):
            rows.append((at, what))
for b in BACKENDS + ["tls", "mem"]:
    for rule in RULES:
        if find(b, rule, "uniform", "seq", "throughput"):
            rows.append((b, rule))
for tgt, what in rows:
    cols = []
    for mode in ("seq", "pipe16", "conc50", "shared50", "loop50", "loop1000"):
        c = find(tgt, what, "uniform", mode, "throughput")
        if c is None:
            cols.append("-")
        elif c["kind"] == "floor" or c.get("ratio_to_floor") is None:
            cols.append("%.0f" % c["decisions_per_s"])
        else:
            cols.append("%.0f (%.2f)" % (c["decisions_per_s"], c["ratio_to_floor"]))
    s = find(tgt, what, "uniform", "seq", "throughput")
    md.append("| %s | %s | %s | %s | %s | %s | %s | %s | %.0f | %.1f | %.1f | %.2f | %s |" % (
        tgt, what if s["kind"] == "sluice" else what + " (floor)", cols[0], cols[1], cols[2],
        cols[3], cols[4], cols[5],
        s["p99_us"], s["redis_usec_per_decision"], s["commands_per_decision"],
        s["round_trips_per_decision"],
        "%.0f" % s["memory_bytes_per_key"] if s["memory_bytes_per_key"] else "-"))
md.append("")

md.append("## TLS against plain TCP")
md.append("")
md.append("`redis://` `fixed:1000/1s`, uniform keys: `tls` is a server that requires "
          "a client certificate (TLS 1.3, the test run's CA), `redis` plain TCP; "
          "the same run, but single cells at different times: `bench/tls.sh` "
          "measures both on one server in turns, which is the figure to quote.")
md.append("")
md.append("| mode | TLS /s | TCP /s | TLS ÷ TCP |")
md.append("|---|---|---|---|")
for mode in ("seq", "pipe16", "conc50", "shared50", "loop50", "loop1000"):
    t, r = (find(x, RULES[0], "uniform", mode, "throughput") for x in ("tls", "redis"))
    if t and r:
        md.append("| %s | %.0f | %.0f | %.2f |" % (mode, t["decisions_per_s"],
                                                  r["decisions_per_s"],
                                                  t["decisions_per_s"] / r["decisions_per_s"]))
md.append("")

md.append("## Peers, same Redis, same key patterns")
md.append("")
md.append("| peer | keys | mode | decisions/s | p99 µs | Redis µs/decision | CPU µs/decision | "
          "cmds | sluice redis:// fixed (same keys and load) | ratio |")
md.append("|---|---|---|---|---|---|---|---|---|---|")
for p in peers:
    if p["mode"] == "seq":
        s = find("redis", "fixed:1000/1s", p["pattern"], "seq")
    else:
        # 50 callers at once on one connection: sluice's 50 threads on one
        # shared handle (pipe50, one thread batching 50, if not run).
        s = (find("redis", "fixed:1000/1s", p["pattern"], "loop50")
             or find("redis", "fixed:1000/1s", p["pattern"], "shared50")
             or find("redis", "fixed:1000/1s", p["pattern"], "pipe50"))
    md.append("| %s (%s) %s | %s | %s | %.0f | %.0f | %.1f | %.1f | %.1f | %s | %s |" % (
        p["peer"], p.get("client", ""), p["what"], p["pattern"], p["mode"],
        p["decisions_per_s"], p["p99_us"], p.get("redis_usec_per_decision", 0),
        p.get("cpu_usec_per_decision", 0), p.get("commands_per_decision", 0),
        ("%.0f /s, %.1f µs (%s)" % (s["decisions_per_s"], s["redis_usec_per_decision"],
                                    s["mode"])) if s else "-",
        ("%.2f" % (s["decisions_per_s"] / p["decisions_per_s"])) if s else "-"))
md.append("")
md.append("Client instructions per decision (callgrind, `fixed:1000/1s`, 10,000 keys): "
          + ", ".join("%s %s" % (k, "{:,}".format(n)) for k, n in instr.items()) + ".")
md.append("")
open(os.path.join(out, "summary.md"), "w").write("\n".join(md))

# ---- every cell, as text ----
lines = ["%-10s %-28s %-7s %-8s %-10s %11s %7s %8s %6s %6s %8s %6s %8s %6s %6s %7s %7s" % (
    "backend", "rule", "keys", "mode", "section", "decisions/s", "x floor", "p99 us",
    "cmds", "calls", "us/dec", "x", "cpu/dec", "x", "rtts", "bytes", "admit")]
for c in cells:
    lines.append("%-10s %-28s %-7s %-8s %-10s %11.0f %7s %8.0f %6.2f %6.2f %8.2f %6s %8.2f %6s %6.2f %7.0f %7s" % (
        c["target"], c["what"], c["pattern"], c["mode"], c["section"], c["decisions_per_s"],
        fmt(c.get("ratio_to_floor")) if c["kind"] == "sluice" else "(floor)",
        c["p99_us"], c["commands_per_decision"], c["outer_calls_per_decision"],
        c["redis_usec_per_decision"], fmt(c.get("redis_usec_ratio_to_floor")),
        cpu_of(c), fmt(c.get("cpu_ratio_to_floor")), c["round_trips_per_decision"],
        c["memory_bytes_per_key"], "%.3f" % c["accuracy"] if c["accuracy"] else "-"))
lines.append("")
for p in peers:
    lines.append("%-45s %-24s %-8s %-10s %9.0f/s p99 %6.0f us, Redis %.1f us, CPU %.1f us, %.1f commands a decision, admitted %d of %d" % (
        p["peer"] + " (" + p.get("client", "") + ")", p["what"], p["pattern"], p["mode"],
        p["decisions_per_s"], p["p99_us"], p.get("redis_usec_per_decision", 0),
        p.get("cpu_usec_per_decision", 0), p.get("commands_per_decision", 0),
        p["admitted"], p["decisions"]))
open(os.path.join(out, "table.txt"), "w").write("\n".join(lines) + "\n")
json.dump({"versions": versions, "seconds_per_cell": run["seconds_per_cell"],
           "floor_script": run.get("floor_script"), "targets": targets,
           "cells": cells, "peers": peers,
           "client_instructions_per_decision": instr},
          open(os.path.join(out, "results.json"), "w"), indent=1)

# ---- charts ----
# Decisions/s and p99 per backend and algorithm (uniform keys), sequential
# and 50 at once, beside the floors (grey) and the peers (red); mem:// is
# left out: it needs no network and would flatten the rest.
for mode, pmode, title in (("seq", "seq", "one connection, sequential"),
                           ("conc50", "inflight50", "50 at once")):
    dat = os.path.join(out, "chart_%s.dat" % mode)
    with open(dat, "w") as f:
        seen = set()
        for c in cells:
            if (c["pattern"] == "uniform" and c["mode"] == mode and c["target"] != "mem"
                    and c["section"] == "throughput"):
                label = c["target"] + " " + "+".join(r.split(":")[0] for r in c["what"].split("+"))
                if c["kind"] == "floor":
                    # The floors run before and after the rest.
                    label += " (end)" if label in seen else " (start)"
                    seen.add(label.replace(" (start)", ""))
                color = 0x999999 if c["kind"] == "floor" else 0x3c78b4
                f.write('"%s" %.0f %.0f %d\n' % (label, c["decisions_per_s"], c["p99_us"], color))
        for p in peers:
            if p["pattern"] == "uniform" and p["mode"] == pmode:
                label = p["peer"].split()[0] + " " + p["what"].split()[0]
                f.write('"%s" %.0f %.0f %d\n' % (label, p["decisions_per_s"], p["p99_us"], 0xc83c3c))
    for col, name, ylabel in ((2, "dps", "decisions per second"), (3, "p99", "p99 latency (us)")):
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

# Redis CPU per decision as a ratio to the EVALSHA floor, hot and new keys,
# beside each algorithm's target.
dat = os.path.join(out, "chart_rcpu.dat")
with open(dat, "w") as f:
    for b in BACKENDS:
        for rule in RULES[:5]:
            h, n = rcpu(b, rule, "hot"), rcpu(b, rule, "new")
            if h and n and h.get("redis_usec_ratio_to_floor") and n.get("redis_usec_ratio_to_floor"):
                f.write('"%s %s" %.3f %.3f %.1f\n' % (
                    b, algo(rule), h["redis_usec_ratio_to_floor"],
                    n["redis_usec_ratio_to_floor"], CPU_TARGET[algo(rule)]))
png = os.path.join(out, "redis_cpu.png")
script = """
set terminal pngcairo size 1400,560 font ',9'
set output '%s'
set title 'Redis usec per decision / EVALSHA INCR+PEXPIRE floor, 16 in flight: hot key (blue), new keys (orange), target (black)'
set style data histogram
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set xtics rotate by -55 scale 0
set ylabel 'times the floor (log scale)'
set logscale y
set grid ytics mytics
set key off
set yrange [0.25:*]
set bmargin 9
plot '%s' using 2:xtic(1) lc rgb '#3c78b4', '' using 3 lc rgb '#e08c28', '' using 4 lc rgb '#000000'
""" % (png, dat)
try:
    subprocess.run(["gnuplot"], input=script.encode(), check=True)
except (OSError, subprocess.CalledProcessError) as e:
    print("report.py: gnuplot failed for %s: %s" % (png, e), file=sys.stderr)

print(open(os.path.join(out, "summary.md")).read())
print("wrote %s/summary.md, table.txt, results.json, dps_seq.png, dps_conc50.png, "
      "p99_seq.png, p99_conc50.png, redis_cpu.png" % out)
