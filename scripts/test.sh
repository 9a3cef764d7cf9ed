#!/usr/bin/env bash
# test.sh - installs what is missing, builds with warnings as errors, and runs
# every test three times: plain, under AddressSanitizer and UBSan, and under
# valgrind. The tests start their own servers on free loopback ports and stop
# them afterwards, also when a test fails.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --test

jobs=$(nproc)

echo "== format"
clang-format --dry-run -Werror src/*.c src/*.h src/backends/*.c src/cli/*.c \
    include/*.h tests/*.c tests/*.h examples/*.c bench/*.c
run() { # NAME CMAKE_ARGS...
    local name=$1
    shift
    echo "== $name"
    cmake -S . -B "build-$name" -DSLUICE_WERROR=ON "$@" >/dev/null
    cmake --build "build-$name" -j "$jobs" >/dev/null
    # Servers are per build directory; stop them whatever happens.
    trap 'tests/servers/stop-all.sh "build-'"$name"'/servers"' EXIT
    ctest --test-dir "build-$name" --output-on-failure
    tests/servers/stop-all.sh "build-$name/servers"
    trap - EXIT
}

run plain -DCMAKE_BUILD_TYPE=RelWithDebInfo
run sanitize -DCMAKE_BUILD_TYPE=Debug -DSLUICE_SANITIZE=address,undefined
run valgrind -DCMAKE_BUILD_TYPE=Debug -DSLUICE_VALGRIND=ON
echo "== all test runs passed"
