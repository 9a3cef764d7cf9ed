#!/usr/bin/env bash
# fuzz.sh - builds the libFuzzer targets of tests/fuzz with clang, ASan and
# UBSan (in build-fuzz) and runs each on a copy of its seed corpus, so the
# repository's corpus never grows during a test run. Prints the executions
# of each target; fails on any crash, leak, undefined behaviour or hang, and
# keeps the input that caused it in build-fuzz/artifacts/.
#   scripts/fuzz.sh [SECONDS]          each target for SECONDS (default 60),
#                                      as many side by side as there are
#                                      CPUs (FUZZ_JOBS), one core each
#   scripts/fuzz.sh --long [SECONDS]   the long campaign: two workers per
#                                      target until 10 million executions
#                                      or SECONDS (default 900) have passed
#   scripts/fuzz.sh ... rule url       only these targets (rule, url,
#                                      jsonl, reply, limits)
#   scripts/fuzz.sh ... rule:30        a target for its own SECONDS
# Reproduce a failure: build-fuzz/tests/fuzz/fuzz_TARGET ARTIFACT
set -euo pipefail
cd "$(dirname "$0")/.."

long=0
seconds=""
targets=()
declare -A own=() # a target's own SECONDS (NAME:SECONDS)
for arg in "$@"; do
    name=${arg%%:*}
    name=${name#fuzz_}
    case $arg in
    --long) long=1 ;;
    [0-9]*) seconds=$arg ;;
    *)
        case $name in
        rule | url | jsonl | reply | limits) ;;
        *)
            echo "usage: scripts/fuzz.sh [--long] [SECONDS]" \
                "[rule|url|jsonl|reply|limits[:SECONDS]...]" >&2
            exit 2
            ;;
        esac
        targets+=("$name")
        [[ $arg == *:* ]] && own[$name]=${arg##*:}
        ;;
    esac
done
[[ ${#targets[@]} -gt 0 ]] || targets=(rule url jsonl reply limits)
[[ -n $seconds ]] || seconds=$((long ? 900 : 60))

echo "fuzz: building build-fuzz (clang, libFuzzer, ASan, UBSan)"
cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DSLUICE_FUZZ=ON \
    -DSLUICE_TESTS=OFF -DSLUICE_WERROR=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    >/dev/null
cmake --build build-fuzz -j "$(nproc)" --target fuzz >/dev/null

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
artifacts=$PWD/build-fuzz/artifacts
mkdir -p "$artifacts"
failed=0

# Sums the executions that the logs' final statistics report.
executions() {
    grep -h '^stat::number_of_executed_units:' "$@" 2>/dev/null |
        awk '{ n += $2 } END { print n + 0 }'
}

# fuzz_one TARGET: runs it; its report goes to stdout, and a failure
# leaves $work/TARGET.failed (and one of the script, no TARGET.done).
fuzz_one() {
    local t=$1 built bin corpus before dict common start status took after n logs
    local secs=${own[$t]:-$seconds}
    built=$PWD/build-fuzz/tests/fuzz/fuzz_$t
    # A copy runs, so that a rebuild meanwhile finds its file free.
    bin=$work/fuzz_$t
    cp "$built" "$bin"
    corpus=$work/$t
    cp -r "tests/fuzz/corpus/$t" "$corpus"
    before=$(find "$corpus" -type f | wc -l)
    dict=()
    [[ -f tests/fuzz/$t.dict ]] && dict=(-dict="$PWD/tests/fuzz/$t.dict")
    # Hangs count: no input may take 10 s.
    common=(-max_total_time="$secs" -timeout=10 -print_final_stats=1
        -artifact_prefix="$artifacts/$t-" "${dict[@]}")
    start=$(date +%s)
    status=0
    if [[ $long == 1 ]]; then
        # Two workers share the corpus; each stops at 5 million executions.
        (cd "$work" && "$bin" "${common[@]}" -jobs=2 -workers=2 \
            -runs=5000000 "$corpus" >"$work/$t.out" 2>&1) || status=$?
        logs=("$work"/fuzz-*.log)
        cat "${logs[@]}" >>"$work/$t.log"
        rm -f "${logs[@]}"
        # A worker's failure shows in its log, not in the exit status.
        grep -qE '^==[0-9]+==ERROR|^SUMMARY: |runtime error:|ERROR: libFuzzer' \
            "$work/$t.log" && status=1
    else
        "$bin" "${common[@]}" "$corpus" >"$work/$t.log" 2>&1 || status=$?
    fi
    took=$(($(date +%s) - start))
    after=$(find "$corpus" -type f | wc -l)
    n=$(executions "$work/$t.log")
    if [[ $status == 0 ]]; then
        printf 'fuzz_%-6s %12d executions in %4d s, corpus %d -> %d, no failure\n' \
            "$t" "$n" "$took" "$before" "$after"
    else
        touch "$work/$t.failed"
        printf 'fuzz_%-6s FAILED after %d executions in %d s:\n' "$t" "$n" "$took"
        grep -E -A30 '^==[0-9]+==ERROR|runtime error:|^fuzz_|deadly signal|ERROR: libFuzzer' \
            "$work/$t.log" | head -60 || tail -40 "$work/$t.log"
        ls "$artifacts" | grep "^$t-" | sed "s|^|  artifact: $artifacts/|" || true
        echo "  reproduce: $built ARTIFACT"
    fi
}

# Each target is one process on one core: with two cores two run side by
# side and every target still gets its SECONDS of a core (the whole run
# takes half as long). The long campaign's two workers per target take
# both cores already: one target at a time there.
pool=${FUZZ_JOBS:-$(nproc)}
[[ $long == 0 ]] || pool=1
for t in "${targets[@]}"; do
    while [[ $(jobs -rp | wc -l) -ge $pool ]]; do
        wait -n || true
    done
    { fuzz_one "$t" && touch "$work/$t.done"; } >"$work/$t.report" 2>&1 &
done
wait
for t in "${targets[@]}"; do
    cat "$work/$t.report"
    [[ -f $work/$t.done && ! -f $work/$t.failed ]] || failed=1
done
exit $failed
