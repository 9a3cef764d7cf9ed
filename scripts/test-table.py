#!/usr/bin/env python3
"""test-table.py - which runs of each test program run in which pass of
scripts/test.sh, read from a configured build directory's tests and their
labels (ctest --show-only=json-v1), as the Markdown table of
tests/README.md. The passes select by label as scripts/test.sh does.

    scripts/test-table.py [BUILD_DIR]     default build-plain
"""
import json
import subprocess
import sys

# Each pass: (title, whether a test with these labels runs in it).
PASSES = [
    ("--quick", lambda l: "quick" in l or "examples" in l),
    ("gcc", lambda l: True),
    ("clang", lambda l: "server" not in l),
    ("ASan+UBSan", lambda l: "nosanitize" not in l),
    ("valgrind", lambda l: "novalgrind" not in l),
    ("TSan", lambda l: "tsan" in l),
]


def tests(build):
    out = subprocess.run(["ctest", "--test-dir", build,
                          "--show-only=json-v1"],
                         check=True, capture_output=True, text=True).stdout
    for t in json.loads(out)["tests"]:
        labels = set()
        for p in t.get("properties", []):
            if p["name"] == "LABELS":
                labels = set(p["value"])
        yield t["name"], labels


def split(name):
    """program, run: 'crossing.evalsha_tls' -> ('crossing', 'evalsha_tls');
    the servers' start and stop are not runs."""
    if name.endswith((".servers", ".servers_stop", ".start", ".stop")):
        return None
    head, _, run = name.partition(".")
    if head == "async":  # async.LOOP.BACKEND: a program a loop
        loop, _, run = run.partition(".")
        head += "." + loop
    return head, run or "-"


def cell(chosen, runs):
    if not runs or runs == ["-"]:
        return "yes" if chosen else "-"
    if not chosen:
        return "-"
    if len(chosen) == len(runs):
        return "all"
    left = [r for r in runs if r not in chosen]
    if len(left) < len(chosen) and len(left) <= 4:
        return "all but " + " ".join(left)
    return " ".join(chosen)


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build-plain"
    programs = {}
    for name, labels in tests(build):
        s = split(name)
        if s is not None:
            programs.setdefault(s[0], []).append((s[1], labels))
    print("| program | runs | " + " | ".join(p for p, _ in PASSES) + " |")
    print("|---" * (len(PASSES) + 2) + "|")
    for prog in sorted(programs):
        runs = sorted(r for r, _ in programs[prog])
        row = [prog, ("-" if runs == ["-"] else "1 run" if len(runs) == 1
                      else f"{len(runs)} runs")]
        for _, chosen in PASSES:
            row.append(cell(sorted(r for r, l in programs[prog] if chosen(l)),
                            runs))
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
