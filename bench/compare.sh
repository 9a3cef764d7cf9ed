#!/usr/bin/env bash
# compare.sh - what a change costs, before and after in one run: sluice-bench
# built at REV and at the work tree, run in turns against the same servers
# (started once, as run.sh starts them), so that both see the same machine
# and the same noise. Per cell: the median decisions/s of each over the
# rounds, their ratio (after / before), and the noise, the larger spread
# (max / min - 1) of the two binaries' own rounds: a ratio below 1 by more
# than the noise is a slowdown. Then client instructions per decision under
# callgrind for both (deterministic: no noise). Writes bench/out/compare.md.
#   bench/compare.sh REV [--rounds N] [--seconds S] [--section NAME]
#   N rounds of each (default 3), S seconds a cell (default 0.5), NAME one
#   section of sluice-bench (default throughput: every backend and
#   algorithm, blocking and pipelined).
set -euo pipefail
cd "$(dirname "$0")/.."
rev=${1:?usage: bench/compare.sh REV [--rounds N] [--seconds S] [--section NAME]}
shift
rounds=3 seconds=0.5 section=throughput
while (($#)); do
    case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --section) section=$2; shift 2 ;;
    *) echo "usage: bench/compare.sh REV [--rounds N] [--seconds S] [--section NAME]" >&2; exit 2 ;;
    esac
done
before_commit=$(git rev-parse --short "$rev^{commit}")
out=$(pwd)/bench/out/compare
servers=$out/servers
rm -rf "$out"
mkdir -p "$out"
scripts/install-deps.sh --test

# The two builds: REV in a worktree of its own, the work tree in build-bench.
tree=$(mktemp -d /tmp/sluice-compare.XXXXXX)
cleanup() {
    tests/servers/stop-all.sh "$servers" 2>/dev/null || true
    git worktree remove --force "$tree" 2>/dev/null || rm -rf "$tree"
}
trap cleanup EXIT
git worktree add --detach "$tree" "$rev" >/dev/null 2>&1
for side in before after; do
    src=$([[ $side == before ]] && echo "$tree" || pwd)
    cmake -S "$src" -B "$out/build-$side" -DCMAKE_BUILD_TYPE=Release \
        -DSLUICE_BUILD_TESTS=OFF -DSLUICE_BUILD_BENCH=ON >/dev/null
    cmake --build "$out/build-$side" -j "$(nproc)" --target sluice_bench >/dev/null
done

# Servers on CPU 0, the load on the others, as run.sh does.
load=()
if (($(nproc) >= 2)); then
    export SERVER_CPUS=0
    load=(taskset -c "1-$(($(nproc) - 1))")
fi
. bench/servers-lib.sh
bench_servers "$servers"

for ((i = 1; i <= rounds; i++)); do
    # Alternate which goes first, so that neither always meets a warmer
    # machine.
    order=(before after)
    ((i % 2 == 0)) && order=(after before)
    for side in "${order[@]}"; do
        echo "== round $i/$rounds: $side"
        "${load[@]}" "$out/build-$side/sluice-bench" --seconds "$seconds" \
            --section "$section" --flush --json "$out/$side-$i.json" \
            "${targets[@]}" >"$out/$side-$i.txt" 2>/dev/null
    done
done

echo "== client instructions per decision (callgrind)"
: >"$out/instructions.txt"
for side in before after; do
    for url in "mem://" "redis://127.0.0.1:$r"; do
        counts=()
        for n in 2000 12000; do
            log=$(valgrind --tool=callgrind --callgrind-out-file=/dev/null \
                "$out/build-$side/sluice-bench" --instructions "$url" --decisions "$n" 2>&1)
            counts+=("$(sed -n 's/.*Collected : \([0-9]*\).*/\1/p' <<<"$log")")
        done
        echo "$side $url $(((counts[1] - counts[0]) / 10000))" >>"$out/instructions.txt"
    done
done

after_commit=$(git rev-parse --short HEAD)
git diff --quiet HEAD -- src lua include CMakeLists.txt cmake ||
    after_commit="$after_commit + uncommitted changes"
python3 - "$out" "$rounds" "$before_commit" "$after_commit" "$seconds" <<'PY'
import json, statistics, sys
out, rounds, before, after, seconds = sys.argv[1], int(sys.argv[2]), *sys.argv[3:]
def cells(side, i):
    d = json.load(open("%s/%s-%d.json" % (out, side, i)))
    for c in d["cells"]:
        key = (c["target"], c["what"], c["kind"], c["pattern"], c["mode"],
               c["deny_cache"], c["metrics"])
        yield key, c["decisions_per_s"]
runs = {"before": {}, "after": {}}
for side in runs:
    for i in range(1, rounds + 1):
        for k, v in cells(side, i):
            runs[side].setdefault(k, []).append(v)
rows, slower = [], 0
for k in runs["before"]:
    b, a = runs["before"][k], runs["after"].get(k)
    if not a or min(b) <= 0 or min(a) <= 0:
        continue
    ratio = statistics.median(a) / statistics.median(b)
    noise = max(max(b) / min(b), max(a) / min(a)) - 1
    flag = "slower" if ratio < 1 - noise else ""
    slower += flag != ""
    rows.append((k, statistics.median(b), statistics.median(a), ratio, noise, flag))
ins = {}
for line in open(out + "/instructions.txt"):
    side, url, n = line.split()
    ins.setdefault(url, {})[side] = int(n)
with open(out + "/../compare.md", "w") as f:
    f.write("# Before %s, after %s: %d rounds each, %s s a cell, in turns\n\n"
            % (before, after, rounds, seconds))
    f.write("| target | rule | pattern | mode | before/s | after/s | after/before | noise | |\n")
    f.write("|---|---|---|---|---:|---:|---:|---:|---|\n")
    for k, b, a, ratio, noise, flag in rows:
        f.write("| %s | %s | %s | %s | %.0f | %.0f | %.3f | %.3f | %s |\n"
                % (k[0], k[1], k[3], k[4], b, a, ratio, noise, flag))
    ratios = [r[3] for r in rows]
    f.write("\n%d cells; after/before median %.3f (min %.3f, max %.3f); "
            "%d slower than before by more than their noise.\n\n"
            % (len(rows), statistics.median(ratios), min(ratios), max(ratios), slower))
    f.write("Client instructions per decision (callgrind, fixed:1000/1s, "
            "uniform keys):\n\n| URL | before | after | after/before |\n|---|---:|---:|---:|\n")
    for url, v in ins.items():
        f.write("| %s | %d | %d | %.3f |\n" % (url, v["before"], v["after"], v["after"] / v["before"]))
print(open(out + "/../compare.md").read())
PY
