#!/usr/bin/env bash
# cluster-cost.sh - what cluster mode adds to a decision on the server,
# counted, not timed: a redis-server under callgrind, once standalone and
# once with --cluster-enabled yes owning every slot (no replicas), and the
# instructions inside evalShaCommand per decision for the EVALSHA floor on
# new keys and for fixed:1000/1s on new and hot keys through the library.
#   bench/cluster-cost.sh [N]     N decisions a cell (default 3200)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-3200}
. bench/cost-lib.sh
cost_init

measure() { # MODE: prints floor-new, fixed-new, fixed-hot
    local mode=$1 dir=$out/$1 extra=()
    mkdir -p "$dir"
    [[ $mode == cluster ]] && extra=(--cluster-enabled yes --cluster-config-file "$dir/nodes.conf")
    cost_server "$dir" "${extra[@]}"
    if [[ $mode == cluster ]]; then
        redis-cli -p "$port" CLUSTER ADDSLOTSRANGE 0 16383 >/dev/null
        until redis-cli -p "$port" CLUSTER INFO | tr -d '\r' | grep -q '^cluster_state:ok$'; do
            sleep 0.2
        done
    fi
    printf '%-11s %9d %9d %9d\n' "$mode" \
        "$(cost_count fn redis-benchmark -p "$port" -P 16 -n "$n" -r 100000000 -q \
            EVALSHA "$floor" 1 'fk:{__rand_int__}' 60000)" \
        "$(cost_count xn "$drv" "redis://127.0.0.1:$port" fixed:1000/1s new "$n")" \
        "$(cost_count xh "$drv" "redis://127.0.0.1:$port" fixed:1000/1s hot "$n")"
    cost_stop
}
printf '%-11s %9s %9s %9s\n' mode floor-new fixed-new fixed-hot
measure standalone
measure cluster
