#!/usr/bin/env bash
# tls.sh - decisions/s over TLS against plain TCP on the same Redis (one
# server with a TLS port that requires a client certificate and a plain
# port), in turns so that both meet the same load on a shared machine:
#   bench/tls.sh [TURNS] [SECONDS]     default 7 turns of 1 s per mode
# Prints the median of each and the ratio; writes bench/out/tls.md.
set -euo pipefail
cd "$(dirname "$0")/.."
turns=${1:-7}
secs=${2:-1}
scripts/install-deps.sh --test
cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release -DSLUICE_BUILD_BENCH=ON \
    >/dev/null
cmake --build build-bench -j "$(nproc)" --target sluice_transport >/dev/null
servers=$PWD/build-bench/servers-tls
trap 'tests/servers/tls.sh stop "$servers" >/dev/null 2>&1 || true' EXIT
tests/servers/tls.sh start "$servers" >/dev/null
tls=$(cat "$servers/url")
tcp="redis://$(cat "$servers/servers")"
mkdir -p bench/out
declare -A got
for ((t = 1; t <= turns; t++)); do
    for mode in seq loop50 loop1000; do
        for tr in tcp tls; do
            url=$tcp
            [[ $tr == tls ]] && url=$tls
            got[$tr.$mode]+="$(build-bench/sluice-transport "$url" "$mode" "$secs") "
        done
    done
done
median() { tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
{
    echo "| mode | TCP /s | TLS /s | TLS ÷ TCP |"
    echo "|---|---|---|---|"
    for mode in seq loop50 loop1000; do
        a=$(echo "${got[tcp.$mode]}" | median)
        b=$(echo "${got[tls.$mode]}" | median)
        awk -v m="$mode" -v a="$a" -v b="$b" 'BEGIN { printf "| %s | %s | %s | %.2f |\n", m, a, b, b / a }'
    done
    echo
    v=$(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/')
    echo "Medians of $turns turns of ${secs} s, TCP and TLS in turns, on one Redis $v"
    echo "(its plain port and its TLS port: TLS 1.3, a client certificate);"
    echo "fixed:1000000/1s on 10,000 keys; $(date -u '+%Y-%m-%d %H:%M UTC'), $(git rev-parse --short HEAD)."
} | tee bench/out/tls.md
