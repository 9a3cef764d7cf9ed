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
. bench/cost-lib.sh
cost_init
cost_server "$out"
url=redis://127.0.0.1:$port
fh=$(cost_count floor-hot redis-benchmark -p "$port" -P 16 -n "$n" -q EVALSHA "$floor" 1 fk 60000)
fn=$(cost_count floor-new redis-benchmark -p "$port" -P 16 -n "$n" -r 100000000 -q \
    EVALSHA "$floor" 1 "fk:__rand_int__" 60000)
printf '%-28s %9s %6s %9s %6s\n' rule hot "x" new "x"
printf '%-28s %9d %6s %9d %6s\n' "floor (INCR+PEXPIRE)" "$fh" 1.00 "$fn" 1.00
declare -A hot new
for rule in fixed:1000/1s sliding:1000/1s token:1000/1s gcra:1000/1s log:100/1s \
    fixed:1000/1s+token:1000/1s; do
    h=$(cost_count "h${rule//[^a-z0-9]/}" "$drv" "$url" "$rule" hot "$n")
    w=$(cost_count "n${rule//[^a-z0-9]/}" "$drv" "$url" "$rule" new "$n")
    hot[$rule]=$h
    new[$rule]=$w
    printf '%-28s %9d %6.2f %9d %6.2f\n' "$rule" "$h" \
        "$(echo "$h / $fh" | bc -l)" "$w" "$(echo "$w / $fn" | bc -l)"
done
c=fixed:1000/1s+token:1000/1s
printf 'the composite against its two rules alone: %.2f hot, %.2f new\n' \
    "$(echo "${hot[$c]} / (${hot[fixed:1000/1s]} + ${hot[token:1000/1s]})" | bc -l)" \
    "$(echo "${new[$c]} / (${new[fixed:1000/1s]} + ${new[token:1000/1s]})" | bc -l)"
