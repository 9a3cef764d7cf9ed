#!/usr/bin/env bash
# demo.sh - installs what is missing, builds sluice, and shows a burst being
# limited on the embedded mem:// backend.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSLUICE_BUILD_TESTS=OFF >/dev/null
cmake --build build -j "$(nproc)" >/dev/null
build/sluice demo "$@"
