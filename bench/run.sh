#!/usr/bin/env bash
# run.sh - the whole comparison in one command: builds sluice-bench, starts
# its own servers on loopback (Redis, two Redis behind nutcracker, a 6-node
# cluster), measures every backend and algorithm against the floors (a raw
# INCR, and an EVALSHA of INCR + PEXPIRE: a fixed window itself), Redis CPU
# per decision on a hot key and on new keys (16 in flight on one
# connection), the
# peers at their newest releases (rate-limiter-flexible with ioredis from
# npm, Python's limits from Debian), client instructions per decision
# under callgrind, and writes bench/out/{summary.md,table.txt,results.json,
# *.png}. Reservations (reserve_ms=100) on a hot key, beside the same
# cells without and beside rate-limiter-flexible; 4 processes on one key
# (10 s); and, on its own servers only, the capacity cells on Redis
# Clusters of 1, 3 and 6 masters started for them and stopped after.
#   bench/run.sh [--seconds S] [--target NAME=URL[|host:port,...]]...
#                [--only reserve]
#   S per cell (default 0.8). With --target, the harness measures those
#   servers instead of starting its own (a target named "redis" is also the
#   one the floors and the peers use) and flushes nothing. --only reserve:
#   the reservation and capacity cells and the one peer cell they are set
#   against, nothing else (about a minute).
set -euo pipefail
cd "$(dirname "$0")/.."
started=$(date +%s)
seconds=0.8
given=()
only=""
while (($#)); do
    case "$1" in
    --seconds) seconds=$2; shift 2 ;;
    --target) given+=(--target "$2"); shift 2 ;;
    --only)
        [[ $2 == reserve ]] || { echo "run.sh: --only takes reserve" >&2; exit 2; }
        only=$2; shift 2 ;;
    *) echo "usage: bench/run.sh [--seconds S] [--target NAME=URL]... [--only reserve]" >&2; exit 2 ;;
    esac
done
out=$(pwd)/bench/out
servers=$out/servers
mkdir -p "$out"
rm -f "$out/capacity.json"
# Debian's Python, where python3-limits and python3-redis are installed.
py=/usr/bin/python3

# What the harness needs beyond the tests: gnuplot, the peers' runtimes.
scripts/install-deps.sh --test
missing=()
for p in gnuplot-nox python3-limits python3-redis nodejs npm; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
        { [[ $p == nodejs || $p == npm ]] && command -v "${p/nodejs/node}" >/dev/null; } ||
        missing+=("$p")
done
if ((${#missing[@]})); then
    sudo=""
    [[ $(id -u) -ne 0 ]] && sudo=sudo
    echo "run.sh: installing ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# The peers' newest releases within the majors of bench/peers/package.json,
# installed in bench/peers/node_modules (again when an older one is there).
if ! (cd bench/peers && npm ls --depth=0 >/dev/null 2>&1); then
    echo "run.sh: installing rate-limiter-flexible and ioredis from npm"
    (cd bench/peers && rm -f package-lock.json &&
        npm install --no-audit --no-fund --loglevel=error >/dev/null)
fi

cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release -DSLUICE_BUILD_TESTS=OFF \
    -DSLUICE_BUILD_BENCH=ON >/dev/null
cmake --build build-bench -j "$(nproc)" --target sluice_bench >/dev/null

# Servers on CPU 0, the load on the others (when there are two or more).
# Where allowed (root), the servers and the load also run at nice -10, so
# that other work on a shared machine preempts them less: commandstats usec
# is wall time inside the command.
cpus=$(nproc)
load=()
if ((cpus >= 2)); then
    export SERVER_CPUS=0
    load=(taskset -c "1-$((cpus - 1))")
fi
if nice -n -10 true 2>/dev/null; then
    load=(nice -n -10 "${load[@]}")
fi
flush=()
if ((${#given[@]})); then
    targets=("${given[@]}")
    r=""
    for t in "${given[@]}"; do
        if [[ $t == redis=redis://* ]]; then
            hp=${t#redis=redis://}
            hp=${hp##*@}
            hp=${hp%%[/?|]*}
            r=${hp##*:}
        fi
    done
else
    trap 'tests/servers/stop-all.sh "$servers"' EXIT
    . bench/servers-lib.sh
    bench_servers "$servers" tls
    # Our own servers: emptied before each cell, so that no cell pays for
    # expiring the keys of the one before.
    flush=(--flush)
    find "$servers" -name pid -exec cat {} + | xargs renice -n -10 -p >/dev/null 2>&1 || true
fi
# No redis-benchmark replay: the Lua backend packs its numbers in a binary
# argument (NUL bytes), which a command line cannot carry. The counted
# cross-check is bench/redis-cost.sh (callgrind around the server).
replay=()

echo "== sluice-bench ($seconds s a cell; servers on CPU ${SERVER_CPUS:-any})"
"${load[@]}" build-bench/sluice-bench --seconds "$seconds" --json "$out/sluice.json" \
    ${only:+--section "$only"} "${flush[@]}" "${replay[@]}" "${targets[@]}" |
    tee "$out/sluice.txt"

# Capacity planning: the same processes on Redis Clusters of 1, 3 and 6
# masters (no replicas), started now on free ports and stopped after. Their
# masters get half the CPUs (at most 6, at least CPU 0), the load the
# others as before: on a 2-core machine all masters share one core.
if ((${#given[@]} == 0)); then
    echo "== capacity: clusters of 1, 3 and 6 masters"
    capcpus=$((cpus / 2 < 1 ? 1 : (cpus / 2 > 6 ? 6 : cpus / 2)))
    SERVER_CPUS=0-$((capcpus - 1)) bench_capacity "$servers/capacity"
    find "$servers/capacity" -name pid -exec cat {} + | xargs renice -n -10 -p >/dev/null 2>&1 || true
    "${load[@]}" build-bench/sluice-bench --seconds "$seconds" --json "$out/capacity.json" \
        --section capacity --flush "${cap_targets[@]}" | tee "$out/capacity.txt"
    tests/servers/stop-all.sh "$servers/capacity"
fi

echo "== peers on the same Redis, same key patterns"
: >"$out/peers.jsonl"
for pat in hot uniform zipf; do
    [[ -n $r ]] || break # no Redis of the peers' kind among the targets
    # --only reserve: the one cell the reservations are set against.
    [[ -z $only || $pat == hot ]] || continue
    for mode in seq inflight50; do
        [[ -z $only || $mode == inflight50 ]] || continue
        "${load[@]}" timeout 60 $py bench/peers/with_redis_cpu.py "$r" \
            node bench/peers/rlf.js "$r" "$mode" "$pat" 2 >>"$out/peers.jsonl" ||
            echo "run.sh: rate-limiter-flexible $mode $pat failed" >&2
    done
    for strat in fixed moving; do
        [[ -z $only ]] || continue
        "${load[@]}" timeout 60 $py bench/peers/with_redis_cpu.py "$r" \
            $py bench/peers/limits_bench.py "$r" "$strat" "$pat" 2 >>"$out/peers.jsonl" ||
            echo "run.sh: limits $strat $pat failed" >&2
    done
done

echo "== client instructions per decision (callgrind)"
: >"$out/instructions.txt"
for url in "mem://" ${r:+"redis://127.0.0.1:$r"}; do
    [[ -z $only ]] || continue
    counts=()
    for n in 2000 12000; do
        if log=$(timeout 120 valgrind --tool=callgrind --callgrind-out-file=/dev/null \
            build-bench/sluice-bench --instructions "$url" --decisions "$n" 2>&1); then
            counts+=("$(sed -n 's/.*Collected : \([0-9]*\).*/\1/p' <<<"$log")")
        else
            counts+=("")
        fi
    done
    if [[ -n ${counts[0]} && -n ${counts[1]} ]]; then
        echo "$url $(((counts[1] - counts[0]) / 10000))" >>"$out/instructions.txt"
    else
        echo "run.sh: callgrind on $url failed; no instruction count" >&2
    fi
done
cat "$out/instructions.txt"

# What was measured, with what: for the summary.
commit=$(git rev-parse --short HEAD)
git diff --quiet HEAD -- src lua include CMakeLists.txt cmake 2>/dev/null ||
    commit="$commit + uncommitted changes in src/, lua/, include/ or CMake"
$py - "$out/versions.json" <<PY
import json, platform, sys
v = {
    "date": "$(date -u '+%Y-%m-%d %H:%M UTC')",
    "commit": "$commit",
    "lua_sha": "$(build-bench/sluice-bench --print-command fixed:1000/1s | head -1 | cut -d' ' -f2)",
    "cpus": $(nproc),
    "cpu_model": "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')",
    "os": "$(. /etc/os-release && echo "$PRETTY_NAME"), Linux $(uname -r)",
    "redis": "Redis $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/')",
    "nutcracker": "nutcracker $(nutcracker --version 2>&1 | sed -n 's/.*nutcracker-\([^ ]*\).*/\1/p' | head -1)",
    "wall_seconds": $(($(date +%s) - started)),
    "only": "$only",
    "capacity_server_cpus": "0-$((${capcpus:-1} - 1))",
    "peers": [],
}
for l in open("$out/peers.jsonl"):
    p = json.loads(l)
    s = "%s with %s" % (p["peer"], p.get("client", "?"))
    if s not in v["peers"]:
        v["peers"].append(s)
node = "$(node --version)"
v["peers"] = [s + (" on Node " + node if "flexible" in s else " on Python " + platform.python_version())
              for s in v["peers"]]
json.dump(v, open(sys.argv[1], "w"), indent=1)
PY

$py bench/report.py "$out"
# The guarantee of reservations: no window above its limit, ever.
if grep -h '^FAIL' "$out/sluice.txt" "$out/capacity.txt" 2>/dev/null >&2; then
    echo "run.sh: FAIL: a window admitted or held more than its limit (above)" >&2
    exit 1
fi
