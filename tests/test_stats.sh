#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# test_stats.sh - a handle's counters on one backend (test_stats, under
# $SLUICE_WRAP when set), then its Prometheus text parsed by Debian's
# prometheus_client (check_prometheus.py).
#   test_stats.sh TEST_STATS_BIN URL|@file TESTS_DIR
set -euo pipefail
bin=$1 url=$2 dir=$3
out=$(mktemp)
trap 'rm -f "$out"' EXIT
# shellcheck disable=SC2086 # the wrapper is several words, or none
${SLUICE_WRAP:-} "$bin" "$url" "$out"
# Debian's Python, where python3-prometheus-client is installed.
py=python3
[[ -x /usr/bin/python3 ]] && py=/usr/bin/python3
"$py" "$dir/check_prometheus.py" "$out"
