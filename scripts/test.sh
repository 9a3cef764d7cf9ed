#!/usr/bin/env bash
# test.sh - installs what is missing, builds with warnings as errors (gcc and
# clang), and runs every test three times: plain, under AddressSanitizer and
# UBSan, and under valgrind; the tests without a server once more with
# clang, and the threaded ones under ThreadSanitizer. The tests start their
# own servers on free loopback ports and stop them afterwards, also when a
# test fails.
#   scripts/test.sh            every pass, in the order below
#   scripts/test.sh PASS...    only these (format fuzz plain consumers clang
#                              sanitize valgrind tsan), e.g. to time one
# Each pass runs its tests in parallel (ctest -j, $TEST_JOBS or the number
# of CPUs; a test that freezes or kills a server has servers of its own),
# and says how long it took and how many test cases skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
passes=(format fuzz plain consumers clang sanitize valgrind tsan)
if [[ $# -gt 0 ]]; then
    for p in "$@"; do
        [[ " ${passes[*]} " == *" $p "* ]] || {
            echo "usage: scripts/test.sh [${passes[*]}]..." >&2
            exit 2
        }
    done
    passes=("$@")
fi
scripts/install-deps.sh --test
# Every tool and toolchain feature used below, before any build: a
# missing one stops here, naming its Debian package.
scripts/preflight.sh

jobs=$(nproc)
tjobs=${TEST_JOBS:-$jobs}
# Whether PASS was asked for.
want() {
    [[ " ${passes[*]} " == *" $1 "* ]]
}
timings=()
# The time since the pass began, kept for the summary at the end.
took() { # NAME START
    local s=$((SECONDS - $2))
    timings+=("$(printf '%-10s %4d min %02d s' "$1" $((s / 60)) $((s % 60)))")
    echo "== $1: $((s / 60)) min $((s % 60)) s"
}

# The test cases that skipped in a ctest run (the list under cmocka's
# "[  SKIPPED ] N test(s), listed below:"), from ctest's log: a case that
# skips tests nothing, so each pass says how many did and which, and fails
# if any did: a case that does not apply to a backend is left out of its
# program's group, never skipped, so a skip is a case that should have run.
skipped() { # BUILD_DIR
    local log=$1/Testing/Temporary/LastTest.log
    [[ -f $log ]] || return 0
    awk '
        / Testing: / { test = $NF }
        /^\[  SKIPPED \] [0-9]+ test\(s\), listed below:/ { listing = 1; next }
        listing && /^\[  SKIPPED \] / { print "   " test ": " $4; n++; next }
        { listing = 0 }
        END { printf "%d\n", n > "/dev/stderr" }
    ' "$log" 2>"$1/skipped.count" >"$1/skipped.list"
    echo "== $(basename "$1" | sed 's/^build-//'): $(cat "$1/skipped.count") test cases skipped"
    cat "$1/skipped.list"
    [[ $(cat "$1/skipped.count") == 0 ]]
}

if want format; then
    echo "== format"
    clang-format --dry-run -Werror src/*.c src/*.h src/net/*.[ch] src/backends/*.[ch] src/cli/*.[ch] \
        include/*.h include/sluice/*.h tests/*.c tests/*.h examples/*.c bench/*.c \
        tests/consumers/*.c tests/consumers/*.cpp tests/fuzz/*.c
    scripts/check-readme.sh # the README's API listing is examples/quickstart.c
fi
if want fuzz; then
    echo "== fuzz"
    t0=$SECONDS
    scripts/fuzz.sh 60 # each libFuzzer target a minute, clang, ASan+UBSan
    took fuzz $t0
fi
build() { # NAME CMAKE_ARGS...
    local name=$1
    shift
    # sluice-bench too, so that it keeps building with warnings as errors.
    cmake -S . -B "build-$name" -DSLUICE_WERROR=ON -DSLUICE_BUILD_BENCH=ON \
        "$@" >/dev/null
    cmake --build "build-$name" -j "$jobs" >/dev/null
}
run() { # NAME CTEST_FILTER CMAKE_ARGS...
    local name=$1 filter=$2 t0=$SECONDS
    shift 2
    want "$name" || return 0
    echo "== $name"
    build "$name" "$@"
    # Servers are per build directory; stop them whatever happens.
    trap 'tests/servers/stop-all.sh "build-'"$name"'/servers"' EXIT
    # shellcheck disable=SC2086 # the filter is several words, or none
    ctest --test-dir "build-$name" --output-on-failure -j "$tjobs" $filter
    tests/servers/stop-all.sh "build-$name/servers"
    trap - EXIT
    skipped "build-$name"
    took "$name" "$t0"
}

# gcc: every test, then again under ASan+UBSan and under valgrind.
run plain "" -DCMAKE_BUILD_TYPE=RelWithDebInfo
# That build installed, and used from C and C++ through pkg-config,
# find_package and add_subdirectory, linked shared and static.
if want consumers; then
    echo "== consumers"
    t0=$SECONDS
    want plain || build plain -DCMAKE_BUILD_TYPE=RelWithDebInfo
    tests/consumers/run.sh build-plain
    took consumers $t0
fi
# clang with its own warnings as errors: everything that needs no server.
CC=clang run clang "-LE redis" -DCMAKE_BUILD_TYPE=RelWithDebInfo
# Under ASan and UBSan the Unix-socket runs of the long random and threaded
# tests are left out (the transport differs from TCP in connect() alone;
# every test runs on the Unix socket in the gcc pass, and the tables here).
run sanitize "-E ^(model|concurrency|differential|cli)\.[a-z]+_unix\$" \
    -DCMAKE_BUILD_TYPE=Debug -DSLUICE_SANITIZE=address,undefined
# Under valgrind, the threaded tests of a backend run once, not again for
# each transport (Unix socket, TLS): those transports' code runs there in
# every other test, and the repeats took five minutes. The Unix-socket
# runs differ from TCP in connect() alone: under valgrind they are left
# to the plain and ASan runs. The CLI's tests start the binary about a
# hundred times each (a TLS handshake each time on TLS: 110 s under
# valgrind): they run on mem:// and redis:// here, on every backend in the
# other passes. The plain backends' threaded tests (80 s each under
# valgrind, which runs one thread at a time) are left to ASan and TSan.
# The long tables and random runs (conformance, differential, invariants)
# run over TLS on the TLS cluster only: OpenSSL under valgrind made each
# four times slower than over TCP (185 s for the two single-server
# backends), and the single-server TLS path runs in every other test.
# CI's budget: the whole run under 45 minutes (one CI machine took 38 min
# to the end of this pass when the tests ran one at a time). With ctest
# -j2 (the tests with short timeouts, threads or processes on one key run
# alone under valgrind and TSan: RUN_SERIAL in tests/CMakeLists.txt) this
# pass took 7 min 55 s with its build in a fresh Debian 12 root on 2
# cores with nothing else running (the whole command: 25 min 38 s).
# The frozen-server deadline tests run here on
# redis://, twemproxy:// (the plain backends' path) and the TLS cluster
# (TLS and the cluster's); the other five differ from those in nothing the
# deadline touches, and each costs 6-15 s here plus its servers.
run valgrind "-E (concurrency|partial|lease)\.[a-z]+_tls\$|\.[a-z_]+_unix\$|^cli\.(multi|twemproxy|evalsha_proxy|cluster)|^cli\.[a-z]+_tls\$|^concurrency\.(multi|twemproxy)\$|^(conformance|differential|invariants)\.(evalsha|multi)_tls\$|^deadline\.(multi|evalsha_proxy|cluster|evalsha_tls|multi_tls|(cluster|tls)\.(start|stop))\$" \
    -DCMAKE_BUILD_TYPE=Debug -DSLUICE_VALGRIND=ON
# ThreadSanitizer over the tests that run threads: handles of one
# mem://NAME store in several threads, the cluster client under a load
# from several threads, one handle shared by threads on each backend, and
# the host name lookups on their own threads.
run tsan "-R unit\.test_memory|faults\.cluster|concurrency\.|denycache\.memory|stats\.memory|partial\.memory|lease\.memory|deadline\.dns" \
    -DCMAKE_BUILD_TYPE=Debug -DSLUICE_SANITIZE=thread
if [[ ${#timings[@]} -gt 0 ]]; then
    echo "== times (ctest -j $tjobs)"
    printf '   %s\n' "${timings[@]}"
fi
echo "== all test runs passed (${passes[*]})"
