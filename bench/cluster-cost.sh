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
scripts/install-deps.sh --test
build=build-cost
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSLUICE_BUILD_BENCH=ON \
    -DSLUICE_BUILD_TESTS=OFF >/dev/null
cmake --build "$build" --target sluice_cost_driver -j "$(nproc)" >/dev/null
drv=$build/sluice-cost-driver
out=$(mktemp -d)
vpid=
trap '[[ -n $vpid ]] && kill "$vpid" 2>/dev/null; rm -rf "$out"' EXIT

measure() { # MODE: prints floor-new, fixed-new, fixed-hot
    local mode=$1 port extra=() floor dir=$out/$1
    mkdir -p "$dir"
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    [[ $mode == cluster ]] && extra=(--cluster-enabled yes --cluster-config-file "$dir/nodes.conf")
    (cd "$dir" && exec valgrind --tool=callgrind --callgrind-out-file="$dir/cg.%p" \
        redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
        "${extra[@]}" >/dev/null 2>&1) &
    vpid=$!
    for _ in $(seq 100); do
        redis-cli -p "$port" PING >/dev/null 2>&1 && break
        sleep 0.2
    done
    if [[ $mode == cluster ]]; then
        redis-cli -p "$port" CLUSTER ADDSLOTSRANGE 0 16383 >/dev/null
        until redis-cli -p "$port" CLUSTER INFO | tr -d '\r' | grep -q '^cluster_state:ok$'; do
            sleep 0.2
        done
    fi
    floor=$(redis-cli -p "$port" SCRIPT LOAD \
        "local n = redis.call('INCR', KEYS[1]) redis.call('PEXPIRE', KEYS[1], ARGV[1]) return n")
    count() { # NAME CMD...
        local name=$1 f ir
        shift
        "$@" >/dev/null 2>&1
        callgrind_control -z "$vpid" >/dev/null 2>&1
        "$@" >/dev/null
        callgrind_control -d "$name" "$vpid" >/dev/null 2>&1
        sleep 0.5
        f=$(grep -lx "desc: Trigger: dump $name" "$dir"/cg.*.* | head -1)
        ir=$(callgrind_annotate --inclusive=yes "$f" 2>/dev/null |
            awk '/evalShaCommand/ {gsub(",", "", $1); print $1; exit}')
        echo $((ir / n))
    }
    printf '%-11s %9d %9d %9d\n' "$mode" \
        "$(count fn redis-benchmark -p "$port" -P 16 -n "$n" -r 100000000 -q \
            EVALSHA "$floor" 1 'fk:{__rand_int__}' 60000)" \
        "$(count xn "$drv" "redis://127.0.0.1:$port" fixed:1000/1s new "$n")" \
        "$(count xh "$drv" "redis://127.0.0.1:$port" fixed:1000/1s hot "$n")"
    redis-cli -p "$port" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
    wait "$vpid" 2>/dev/null || true
    vpid=
}
printf '%-11s %9s %9s %9s\n' mode floor-new fixed-new fixed-hot
measure standalone
measure cluster
