#!/usr/bin/env bash
# test.sh - installs what is missing, fuzzes, builds with warnings as errors
# (gcc and clang), and runs every test with gcc, then again (but for four
# Unix-socket repeats) under AddressSanitizer and UBSan, and what valgrind
# adds over those under valgrind; the tests without a server once more with
# clang, and the threaded ones under ThreadSanitizer. The tests start their
# own servers on free loopback ports and stop them afterwards, also when a
# test fails.
#   scripts/test.sh            every pass, in the order below
#   scripts/test.sh PASS...    only these (format fuzz plain consumers clang
#                              sanitize valgrind tsan), e.g. to time one
#   scripts/test.sh --quick    the quick tier alone (ctest -L quick and the
#                              examples) in the gcc build: the
#                              edit-compile-test loop, no installing
# Each pass picks its tests by the labels tests/CMakeLists.txt gives each
# test where it adds it (sluice_test's TIER and flags; tests/README.md has
# the table of which test runs where).
# Each pass runs its tests in parallel (ctest -j: twice the number of CPUs
# in the gcc, clang and ASan passes, where half the tests' time is spent
# waiting on servers and timers; the number of CPUs under valgrind and
# TSan, which keep a core busy; $TEST_JOBS for every pass; a test that
# freezes or kills a server has servers of its own), and says how long it
# took and how many test cases skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
passes=(format fuzz plain consumers clang sanitize valgrind tsan)
quick=0
if [[ ${1:-} == --quick ]]; then
    [[ $# == 1 ]] || {
        echo "usage: scripts/test.sh --quick" >&2
        exit 2
    }
    quick=1
    passes=(plain)
elif [[ $# -gt 0 ]]; then
    for p in "$@"; do
        [[ " ${passes[*]} " == *" $p "* ]] || {
            echo "usage: scripts/test.sh [${passes[*]}]..." >&2
            exit 2
        }
    done
    passes=("$@")
fi
if [[ $quick == 0 ]]; then
    scripts/install-deps.sh --test
    # Every tool and toolchain feature used below, before any build: a
    # missing one stops here, naming its Debian package.
    scripts/preflight.sh
fi

jobs=$(nproc)
# ctest -j for a pass: valgrind and TSan run each test on a core; in the
# others the tests wait on servers and timers half the time (on 2 cores
# the whole run at -j2 used 31 of the 63 CPU-minutes its wall time gave;
# the gcc pass's ctest took 428 s at -j2 in a fresh root, 287 s at -j4).
test_jobs() { # PASS
    case $1 in
    valgrind | tsan) echo "${TEST_JOBS:-$jobs}" ;;
    *) echo "${TEST_JOBS:-$((2 * jobs))}" ;;
    esac
}
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
    clang-format --dry-run -Werror src/*.c src/*.h src/net/*.[ch] src/backends/*.[ch] src/features/*.[ch] \
        src/config/*.[ch] \
        src/cli/*.[ch] \
        include/*.h include/sluice/*.h tests/*.c tests/*.h examples/*.c bench/*.c \
        tests/consumers/*.c tests/consumers/*.cpp tests/fuzz/*.c
    scripts/check-readme.sh # the README's API listing is examples/quickstart.c
    # The layers: no file needs one above it, no two need each other, no
    # file of src/ over 800 lines (scripts/layers.py says how it measures).
    python3 scripts/layers.py --check
fi
if want fuzz; then
    echo "== fuzz"
    t0=$SECONDS
    # Each libFuzzer target 30 s on a core of its own (clang, ASan, UBSan),
    # as many side by side as there are cores: every seed of the corpus,
    # then new inputs. Most of a minute's coverage comes in its first
    # seconds (jsonl 234 edges at 20 s, 250 at 60 s; reply 451, 483; rule
    # all its 167 by 30 s), and the rest is the long campaign's
    # (scripts/fuzz.sh --long): the CI budget (25 minutes on 2 cores) goes
    # to the servers' tests. The rule parser and the limits files' share
    # their 30 s (the limits target parses rules too): four targets' time.
    scripts/fuzz.sh 30 rule:15 url jsonl reply limits:15
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
run() { # NAME "CTEST_LABEL_ARGS" CMAKE_ARGS...
    local name=$1 filter=$2 t0=$SECONDS
    shift 2
    want "$name" || return 0
    echo "== $name"
    build "$name" "$@"
    # Servers are per build directory; stop them whatever happens.
    trap 'tests/servers/stop-all.sh "build-'"$name"'/servers"' EXIT
    # shellcheck disable=SC2086 # the label arguments are several words
    ctest --test-dir "build-$name" --output-on-failure -j "$(test_jobs "$name")" $filter
    tests/servers/stop-all.sh "build-$name/servers"
    trap - EXIT
    skipped "build-$name"
    took "$name" "$t0"
}

# gcc: every test (--quick: the quick tier and the examples, which the
# top CMakeLists.txt labels examples), then again under ASan+UBSan and
# under valgrind.
if [[ $quick == 1 ]]; then
    run plain "-L quick|examples" -DCMAKE_BUILD_TYPE=RelWithDebInfo
else
    run plain "" -DCMAKE_BUILD_TYPE=RelWithDebInfo
fi
# That build installed, and used from C and C++ through pkg-config,
# find_package and add_subdirectory, linked shared and static; and the
# library, the CLI, the bench and the examples built as Release.
if want consumers; then
    echo "== consumers"
    t0=$SECONDS
    want plain || build plain -DCMAKE_BUILD_TYPE=RelWithDebInfo
    # A user's Release build (-O3), with warnings as errors: gcc inlines
    # more there and warns where -O2 does not (gcc 12 found a format
    # truncation in src/cli/override.c that RelWithDebInfo never showed).
    build release -DCMAKE_BUILD_TYPE=Release -DSLUICE_BUILD_TESTS=OFF
    tests/consumers/run.sh build-plain
    took consumers $t0
fi
# clang with its own warnings as errors: everything that needs no server.
CC=clang run clang "-LE server" -DCMAKE_BUILD_TYPE=RelWithDebInfo
# Under ASan and UBSan: all but the Unix-socket runs of the long random and
# threaded tests (label nosanitize).
run sanitize "-LE nosanitize" \
    -DCMAKE_BUILD_TYPE=Debug -DSLUICE_SANITIZE=address,undefined
# Under valgrind: all but the repeats that find nothing ASan and the other
# passes do not (label novalgrind; the reasons in tests/CMakeLists.txt).
# CI's budget: the whole command within 25 minutes on 2 cores. With ctest
# -j2 (the tests with short timeouts, threads or processes on one key run
# alone under valgrind and TSan: RUN_SERIAL in tests/CMakeLists.txt) this
# pass took 7 min 55 s with its build in a fresh Debian 12 root on 2
# cores with nothing else running, before it left out 35 more tests
# (about 39% of its test-seconds; tests/README.md has the table).
run valgrind "-LE novalgrind" \
    -DCMAKE_BUILD_TYPE=Debug -DSLUICE_VALGRIND=ON
# ThreadSanitizer over the tests that run threads (label tsan).
run tsan "-L tsan" \
    -DCMAKE_BUILD_TYPE=Debug -DSLUICE_SANITIZE=thread
if [[ ${#timings[@]} -gt 0 ]]; then
    echo "== times (ctest -j $(test_jobs plain), valgrind and TSan -j $(test_jobs valgrind))"
    printf '   %s\n' "${timings[@]}"
fi
echo "== all test runs passed (${passes[*]})"
