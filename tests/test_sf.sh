#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# test_sf.sh - sluice_http_fields' text parsed by an independent Structured
# Field parser: npm's structured-headers (RFC 9651), installed from npm on
# first use into the build tree (the newest release of the major in
# tests/sf/package.json), run by Node (check_sf.mjs).
#   test_sf.sh TEST_SF_FIELDS_BIN SOURCE_TESTS_DIR WORK_DIR
set -euo pipefail
bin=$1 src=$2 work=$3
mkdir -p "$work"
if ! (cd "$work" && npm ls --depth=0 structured-headers >/dev/null 2>&1); then
    cp "$src/sf/package.json" "$work/package.json"
    (cd "$work" && rm -f package-lock.json &&
        npm install --no-audit --no-fund --loglevel=error >/dev/null)
fi
"$bin" >"$work/cases.txt"
node "$src/check_sf.mjs" "$work/cases.txt" "$work"
