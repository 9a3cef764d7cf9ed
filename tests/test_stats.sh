#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# test_stats.sh - a handle's counters on one backend (test_stats, under
# $SLUICE_WRAP when set), then the Prometheus text it wrote: one handle's
# and a page of several, each checked by promtool (Debian's prometheus
# package) and parsed by Debian's prometheus_client
# (check_prometheus.py); and two handles' texts one after the other, which
# promtool must refuse (what the page is for: this shows that the check
# can fail).
#   test_stats.sh TEST_STATS_BIN URL|@file TESTS_DIR
set -euo pipefail
bin=$1 url=$2 dir=$3
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# shellcheck disable=SC2086 # the wrapper is several words, or none
${SLUICE_WRAP:-} "$bin" "$url" "$out"
for f in prom.txt page.txt; do
    if ! promtool check metrics <"$out/$f" >"$out/promtool.log" 2>&1; then
        echo "promtool check metrics refused $f:" >&2
        cat "$out/promtool.log" >&2
        exit 1
    fi
done
if promtool check metrics <"$out/concatenated.txt" >"$out/promtool.log" 2>&1; then
    echo "promtool accepted two handles' texts one after the other" >&2
    exit 1
fi
grep -q 'second HELP line' "$out/promtool.log" || {
    cat "$out/promtool.log" >&2
    exit 1
}
echo "promtool: prom.txt and page.txt valid; concatenated.txt refused" \
    "($(head -c 200 "$out/promtool.log"))"
# Debian's Python, where python3-prometheus-client is installed.
py=python3
[[ -x /usr/bin/python3 ]] && py=/usr/bin/python3
"$py" "$dir/check_prometheus.py" "$out/prom.txt"
"$py" "$dir/check_prometheus.py" --page "$out/page.txt"
