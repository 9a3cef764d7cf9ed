#!/usr/bin/env bash
# redis-cost.sh - what a decision costs Redis, counted, not timed: a
# redis-server runs under callgrind, and for each rule (one hot key, then
# keys never seen) the instructions inside evalShaCommand are divided by the
# decisions. Counts do not move with the machine's load, unlike the
# microseconds of INFO commandstats. The floor is the EVALSHA of INCR +
# PEXPIRE, itself a fixed window.
#   bench/redis-cost.sh [N]     N decisions a cell (default 3200)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-3200}
scripts/install-deps.sh --test
build=build-cost
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSLUICE_BUILD_BENCH=ON \
    -DSLUICE_BUILD_TESTS=OFF >/dev/null
cmake --build "$build" --target sluice_cost_driver -j "$(nproc)" >/dev/null
drv=$build/sluice-cost-driver
out=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
valgrind --tool=callgrind --callgrind-out-file="$out/cg.%p" \
    redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
    >/dev/null 2>&1 &
vpid=$!
trap 'redis-cli -p "$port" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
      wait "$vpid" 2>/dev/null || true
      rm -rf "$out"' EXIT
for _ in $(seq 100); do
    redis-cli -p "$port" PING >/dev/null 2>&1 && break
    sleep 0.2
done
floor=$(redis-cli -p "$port" SCRIPT LOAD \
    "local n = redis.call('INCR', KEYS[1]) redis.call('PEXPIRE', KEYS[1], ARGV[1]) return n")

count() { # NAME CMD...: instructions per decision inside evalShaCommand
    local name=$1 f ir
    shift
    "$@" >/dev/null 2>&1 # warm up: the hot key reaches its steady state
    callgrind_control -z "$vpid" >/dev/null 2>&1
    "$@" >/dev/null
    callgrind_control -d "$name" "$vpid" >/dev/null 2>&1
    sleep 0.5
    f=$(grep -lx "desc: Trigger: dump $name" "$out"/cg.*.* | head -1)
    ir=$(callgrind_annotate --inclusive=yes "$f" 2>/dev/null |
        awk '/evalShaCommand/ {gsub(",", "", $1); print $1; exit}')
    echo $((ir / n))
}
url=redis://127.0.0.1:$port
fh=$(count floor-hot redis-benchmark -p "$port" -P 16 -n "$n" -q EVALSHA "$floor" 1 fk 60000)
fn=$(count floor-new redis-benchmark -p "$port" -P 16 -n "$n" -r 100000000 -q \
    EVALSHA "$floor" 1 "fk:__rand_int__" 60000)
printf '%-28s %9s %6s %9s %6s\n' rule hot "x" new "x"
printf '%-28s %9d %6s %9d %6s\n' "floor (INCR+PEXPIRE)" "$fh" 1.00 "$fn" 1.00
declare -A hot new
for rule in fixed:1000/1s sliding:1000/1s token:1000/1s gcra:1000/1s log:100/1s \
    fixed:1000/1s+token:1000/1s; do
    h=$(count "h${rule//[^a-z0-9]/}" "$drv" "$url" "$rule" hot "$n")
    w=$(count "n${rule//[^a-z0-9]/}" "$drv" "$url" "$rule" new "$n")
    hot[$rule]=$h
    new[$rule]=$w
    printf '%-28s %9d %6.2f %9d %6.2f\n' "$rule" "$h" \
        "$(echo "$h / $fh" | bc -l)" "$w" "$(echo "$w / $fn" | bc -l)"
done
c=fixed:1000/1s+token:1000/1s
printf 'the composite against its two rules alone: %.2f hot, %.2f new\n' \
    "$(echo "${hot[$c]} / (${hot[fixed:1000/1s]} + ${hot[token:1000/1s]})" | bc -l)" \
    "$(echo "${new[$c]} / (${new[fixed:1000/1s]} + ${new[token:1000/1s]})" | bc -l)"
