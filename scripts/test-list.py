#!/usr/bin/env python3
"""test-list.py - every test of a configured build directory with its
command and its properties (labels, RUN_SERIAL, RESOURCE_LOCK, TIMEOUT,
COST, FIXTURES_*, ENVIRONMENT, ...), one line each, in ctest's order, in a
form two build directories can be compared in: a change to
tests/CMakeLists.txt that should change no test (issue 34: the tiers moved
beside the tests) shows an empty diff between the lists before and after.

    scripts/test-list.py BUILD_DIR > before.txt
    scripts/test-list.py --flavours OUT_DIR

The second configures (no build) the four flavours whose tests differ, as
scripts/test.sh configures them (build-list-plain, -valgrind, -sanitize,
-tsan; the clang pass's are the plain one's), and writes OUT_DIR/FLAVOUR.txt
for each.

Nothing is built: the properties come from `ctest --show-only=json-v1`,
which lists a test whose program is not built yet but leaves out its
command; the commands come from the CTestTestfile.cmake files, which
configuring writes. The build and source directories are written BUILD
and SRC, so that two build directories compare. A test's labels are a
set for ctest (-L and -LE match any of them, --print-labels lists each
once): they are printed sorted, each once. WORKING_DIRECTORY is the
directory of the CMakeLists.txt that added the test, as ever.
"""
import json
import os
import re
import subprocess
import sys


def commands(build):
    """name -> the add_test line's command, from every CTestTestfile.cmake
    under BUILD (the generated file quotes each argument)."""
    out = {}
    for top, _, files in os.walk(build):
        if "CTestTestfile.cmake" not in files:
            continue
        with open(os.path.join(top, "CTestTestfile.cmake")) as f:
            for line in f:
                m = re.match(r'add_test\(([^ ]+) (.*)\)$', line.rstrip("\n"))
                if m:
                    out[m.group(1).strip('"')] = m.group(2)
    return out


# The flavours, with the options scripts/test.sh gives each pass.
FLAVOURS = {
    "plain": ["-DCMAKE_BUILD_TYPE=RelWithDebInfo"],
    "valgrind": ["-DCMAKE_BUILD_TYPE=Debug", "-DSLUICE_VALGRIND=ON"],
    "sanitize": ["-DCMAKE_BUILD_TYPE=Debug",
                 "-DSLUICE_SANITIZE=address,undefined"],
    "tsan": ["-DCMAKE_BUILD_TYPE=Debug", "-DSLUICE_SANITIZE=thread"],
}
SOURCE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def flavours(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    for name, args in FLAVOURS.items():
        build = os.path.join(SOURCE, "build-list-" + name)
        subprocess.run(["cmake", "-S", SOURCE, "-B", build,
                        "-DSLUICE_WERROR=ON", "-DSLUICE_BUILD_BENCH=ON"]
                       + args, check=True, stdout=subprocess.DEVNULL)
        with open(os.path.join(out_dir, name + ".txt"), "w") as f:
            f.write(listing(build))


def listing(build):
    build = os.path.abspath(build)
    source = SOURCE
    out = subprocess.run(["ctest", "--test-dir", build,
                          "--show-only=json-v1"],
                         check=True, capture_output=True, text=True).stdout
    cmds = commands(build)

    def norm(text):
        return text.replace(build, "BUILD").replace(source, "SRC")

    lines = []
    for t in json.loads(out)["tests"]:
        props = []
        for p in sorted(t.get("properties", []), key=lambda p: p["name"]):
            value = p["value"]
            if p["name"] == "LABELS":
                value = sorted(set(value))
            props.append(f'{p["name"]}={json.dumps(value)}')
        lines.append(norm(f'{t["name"]}  COMMAND {cmds.get(t["name"], "?")}'
                          '  ' + "  ".join(props)) + "\n")
    return "".join(lines)


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--flavours":
        flavours(sys.argv[2])
    elif len(sys.argv) == 2 and not sys.argv[1].startswith("-"):
        sys.stdout.write(listing(sys.argv[1]))
    else:
        sys.exit("usage: scripts/test-list.py BUILD_DIR | --flavours OUT_DIR")


if __name__ == "__main__":
    main()
