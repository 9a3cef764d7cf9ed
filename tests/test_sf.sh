#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# test_sf.sh - sluice_http_fields' text (test_sf_fields' cases) parsed by
# Structured Field parsers that share nothing with sluice: check_sf.py (RFC
# 9651, written from the RFC) always; with --npm also npm's
# structured-headers under Node (check_sf.mjs), installed from the npm
# registry into WORK_DIR on first use (the newest release of the major in
# tests/sf/package.json): where the registry is reachable, which the test
# run does not assume.
#   test_sf.sh TEST_SF_FIELDS_BIN SOURCE_TESTS_DIR WORK_DIR [--npm]
set -euo pipefail
bin=$1 src=$2 work=$3 npm=${4:-}
mkdir -p "$work"
"$bin" >"$work/cases.txt"
python3 "$src/check_sf.py" "$work/cases.txt"
if [[ $npm == --npm ]]; then
    if ! (cd "$work" && npm ls --depth=0 structured-headers >/dev/null 2>&1); then
        cp "$src/sf/package.json" "$work/package.json"
        (cd "$work" && rm -f package-lock.json &&
            npm install --no-audit --no-fund --loglevel=error >/dev/null)
    fi
    node "$src/check_sf.mjs" "$work/cases.txt" "$work"
fi
