#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""layers.py - the graph of includes and calls between sluice's files, held
against the layers the code is meant to have.

A node is a unit: foo.c with its foo.h (a header without a .c is a unit of
its own). An edge A -> B means A includes a header of B, or A's object file
uses a symbol B's object file defines. Each unit has a layer (LAYERS below,
lowest first); an edge from a unit to a higher layer runs up, and a cycle
is two or more units that need each other. It compiles every C file of src/
itself (cc -c, into a temporary directory), so it needs no build directory.

    scripts/layers.py            the summary, the upward edges, the cycles
    scripts/layers.py --check    the same, exit 1 past the limits below
    scripts/layers.py --dot      the graph for graphviz
"""
import fnmatch
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(ROOT, "src")

# Lowest first; a unit takes the first pattern it matches (paths from src/,
# without extension). A file that matches none is an error: say its layer.
LAYERS = [
    ("base", ["alloc", "error", "version", "internal", "slot", "clock"]),
    ("logic", ["rule", "algo", "key", "url", "caps", "store", "options",
               "request"]),
    # Limits files read into a form (docs/LIMITS.md): it needs only the
    # base and the rules' parser (cmake/layers.cmake checks its includes),
    # so a handle may hold one (limits_file=).
    ("config", ["config/*"]),
    ("net", ["net/*", "conn"]),
    ("engine", ["engine"]),
    ("backends", ["backend", "backends/*", "plain", "slotmap", "evalsha"]),
    ("features-below", ["features/denycache", "features/reserve",
                        "features/stats", "features/prometheus",
                        "features/names", "features/policies",
                        "features/limiter_cache", "features/limiter_codec",
                        "features/http", "features/limfile",
                        "denycache", "stats", "http"]),
    ("handle", ["sluice", "pipeline", "call", "call_loop", "share", "policy",
                "limits_file", "handle"]),
    ("features", ["features/*", "limiter", "lease"]),
    ("cli", ["cli/*"]),
]

MAX_UP = 5      # upward edges allowed (each with its reason in the code)
MAX_LINES = 800  # lines in any file of src/


def layer_of(unit):
    for i, (_, pats) in enumerate(LAYERS):
        if any(fnmatch.fnmatchcase(unit, p) for p in pats):
            return i
    return None


def sources():
    out = []
    for d, _, files in os.walk(SRC):
        for f in files:
            if f.endswith((".c", ".h")):
                out.append(os.path.relpath(os.path.join(d, f), SRC))
    return sorted(out)


# Files that are one unit: the stages of one state machine, in two files
# at a seam (a decision by name's stages apart from a key's), sharing a
# private header; its table of stages names both, so counted apart they
# would be a cycle of one design.
SAME_UNIT = {"pipeline_name": "pipeline", "pipeline_stage": "pipeline"}


def unit_of(rel):
    stem = os.path.splitext(rel)[0]
    return SAME_UNIT.get(stem, stem)


INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def includes(rel, known):
    """The units whose headers rel includes (named from src/ or beside)."""
    text = open(os.path.join(SRC, rel), encoding="utf-8").read()
    found = set()
    for name in INCLUDE.findall(text):
        for cand in (name, os.path.normpath(
                os.path.join(os.path.dirname(rel), name))):
            if cand in known:
                found.add(unit_of(cand))
                break
    return found


def pkg_cflags():
    try:
        return subprocess.run(["pkg-config", "--cflags", "hiredis",
                               "hiredis_ssl", "openssl", "jansson"],
                              check=True, capture_output=True,
                              text=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        return []


def symbols(cfiles):
    """{unit: (defined, undefined)} from each file compiled alone."""
    out = {}
    flags = ["-std=c11", "-D_POSIX_C_SOURCE=200809L", "-DSLUICE_BUILDING",
             "-I" + os.path.join(ROOT, "include"), "-I" + SRC] + pkg_cflags()
    with tempfile.TemporaryDirectory() as tmp:
        for rel in cfiles:
            obj = os.path.join(tmp, rel.replace("/", "_") + ".o")
            r = subprocess.run(["cc", "-c", "-O0", "-w"] + flags +
                               [os.path.join(SRC, rel), "-o", obj],
                               capture_output=True, text=True)
            if r.returncode != 0:
                sys.exit("layers: cannot compile src/%s:\n%s" %
                         (rel, r.stderr))
            nm = subprocess.run(["nm", obj], check=True, capture_output=True,
                                text=True).stdout
            d, u = set(), set()
            for line in nm.splitlines():
                parts = line.split()
                if len(parts) == 2 and parts[0] == "U":
                    u.add(parts[1])
                elif len(parts) == 3 and parts[1] in "TDBRC":
                    d.add(parts[2])
            out[unit_of(rel)] = (d, u)
    return out


def cycles(nodes, edges):
    """Strongly connected components of two or more units (Tarjan)."""
    index, low, stack, on, comps = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return comps


def main(argv):
    files = sources()
    known = set(files)
    units = sorted({unit_of(f) for f in files})
    unknown = [u for u in units if layer_of(u) is None]
    if unknown:
        sys.exit("layers: no layer for %s: add it to LAYERS in %s" %
                 (", ".join(unknown), os.path.relpath(__file__, ROOT)))
    edges = {u: set() for u in units}
    why = {}
    for f in files:
        for b in includes(f, known):
            if b != unit_of(f):
                edges[unit_of(f)].add(b)
                why.setdefault((unit_of(f), b), "includes %s" % b)
    syms = symbols([f for f in files if f.endswith(".c")])
    owner = {}
    for u, (d, _) in syms.items():
        for s in d:
            owner[s] = u
    for u, (_, und) in syms.items():
        for s in sorted(und):
            b = owner.get(s)
            if b is not None and b != u:
                edges[u].add(b)
                if (u, b) not in why or why[(u, b)].startswith("includes"):
                    why[(u, b)] = "calls %s" % s
    if "--dot" in argv:
        print("digraph sluice {")
        for a in units:
            for b in sorted(edges[a]):
                up = layer_of(b) > layer_of(a)
                print('  "%s" -> "%s"%s;' % (a, b,
                                             " [color=red]" if up else ""))
        print("}")
        return 0
    nedges = sum(len(v) for v in edges.values())
    up = sorted((a, b) for a in units for b in edges[a]
                if layer_of(b) > layer_of(a))
    comps = cycles(units, edges)
    long_files = []
    for f in files:
        with open(os.path.join(SRC, f), encoding="utf-8") as fh:
            n = sum(1 for _ in fh)
        if n > MAX_LINES:
            long_files.append((f, n))
    print("%d units, %d edges, %d up a layer, %d cycles, %d files over %d "
          "lines" % (len(units), nedges, len(up), len(comps),
                     len(long_files), MAX_LINES))
    for a, b in up:
        print("  up: %s (%s) -> %s (%s): %s" % (
            a, LAYERS[layer_of(a)][0], b, LAYERS[layer_of(b)][0],
            why[(a, b)]))
    for c in comps:
        print("  cycle: " + " <-> ".join(c))
    for f, n in long_files:
        print("  long: src/%s, %d lines" % (f, n))
    if "--check" in argv and (len(up) > MAX_UP or comps or long_files):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
