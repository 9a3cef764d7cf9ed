#!/usr/bin/env bash
# test_cli.sh - the sluice CLI end to end on one backend: exit statuses of
# check and replay, JSON Lines in and out, bad lines answered and skipped.
#   test_cli.sh SLUICE_BINARY URL|@urlfile TESTS_DIR
set -u
bin=$1
url=$2
dir=$3
[[ $url == @* ]] && url=$(cat "${url#@}")
# A fresh key prefix per run, so that Redis state never leaks between runs.
sep='?'
[[ $url == *\?* ]] && sep='&'
url="$url${sep}prefix=cli$$-$RANDOM:"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# SLUICE_WRAP (valgrind runs) goes in front of every call of the binary.
if [[ -n ${SLUICE_WRAP:-} ]]; then
    printf '#!/bin/sh\nexec %s "%s" "$@"\n' "$SLUICE_WRAP" "$bin" >"$tmp/wrapped"
    chmod +x "$tmp/wrapped"
    bin="$tmp/wrapped"
fi
pass=0
fail=0

expect_exit() { # NAME WANT CMD...
    local name=$1 want=$2
    shift 2
    "$@" >"$tmp/out" 2>"$tmp/err"
    local got=$?
    if [[ $got == "$want" ]]; then
        pass=$((pass + 1))
    else
        fail=$((fail + 1))
        echo "FAIL $name: exit $got, want $want"
        cat "$tmp/out" "$tmp/err"
    fi
}

expect_text() { # NAME FILE PATTERN
    if grep -q -- "$3" "$2"; then
        pass=$((pass + 1))
    else
        fail=$((fail + 1))
        echo "FAIL $1: no '$3' in:"
        cat "$2"
    fi
}

# check: 0 allowed, 3 denied, 2 bad arguments, 1 backend failure.
expect_exit check_allowed 0 "$bin" check --url "$url" --rule fixed:1/1h --key c1
expect_text check_allowed_says_allowed "$tmp/out" "allowed: 0 of 1 left"
if [[ $url == mem://* ]]; then
    # Each process has its own mem:// store: deny by a cost that never fits.
    expect_exit check_denied 3 "$bin" check --url "$url" --rule fixed:1/1h --key c1 --cost 2
    expect_exit check_json 3 "$bin" check --url "$url" --rule fixed:1/1h --key c1 --cost 2 --json
    expect_text check_json_line "$tmp/out" '^{"allowed": false, "limit": 1, "remaining": 1, "retry_after_ms": -1, "reset_after_ms": 0}$'
else
    expect_exit check_denied 3 "$bin" check --url "$url" --rule fixed:1/1h --key c1
    expect_text check_denied_says_retry "$tmp/out" "denied: retry in"
    expect_exit check_json 3 "$bin" check --url "$url" --rule fixed:1/1h --key c1 --json
    expect_text check_json_line "$tmp/out" '^{"allowed": false, "limit": 1, "remaining": 0, "retry_after_ms": [0-9]*, "reset_after_ms": [0-9]*}$'
    expect_exit check_peek 0 "$bin" check --url "$url" --rule log:2/1h --key c2 --peek --cost 2
    expect_exit check_peek_charged_nothing 0 "$bin" check --url "$url" --rule log:2/1h --key c2 --cost 2
    expect_exit check_peek_after_charge 3 "$bin" check --url "$url" --rule log:2/1h --key c2 --peek
fi
expect_exit check_never_fits 3 "$bin" check --url "$url" --rule fixed:2/1s --key c3 --cost 3
expect_text check_never_fits_says_so "$tmp/out" "can never fit"
expect_exit check_bad_rule 2 "$bin" check --url "$url" --rule fixed:0/1s --key c1
expect_text check_bad_rule_quotes "$tmp/err" 'limit 0'
expect_exit check_bad_cost 2 "$bin" check --url "$url" --rule fixed:1/1s --key c1 --cost 0
expect_exit check_fraction_cost 2 "$bin" check --url "$url" --rule fixed:1/1s --key c1 --cost 1.5
expect_exit check_empty_key 2 "$bin" check --url "$url" --rule fixed:1/1s --key ""
expect_exit check_long_key 2 "$bin" check --url "$url" --rule fixed:1/1s --key "$(printf 'k%.0s' $(seq 1025))"
expect_exit check_missing_rule 2 "$bin" check --url "$url" --key c1
expect_exit check_bad_url 2 "$bin" check --url "nope://x" --rule fixed:1/1s --key c1
expect_exit check_bad_port 2 "$bin" check --url "redis://127.0.0.1:99999" --rule fixed:1/1s --key c1
expect_exit check_unknown_option 2 "$bin" check --url "$url" --rule fixed:1/1s --key c1 --colour
expect_exit check_unreachable 1 "$bin" check --url "redis://127.0.0.1:1" --rule fixed:1/1s --key c1
expect_text check_unreachable_says_where "$tmp/err" "127.0.0.1:1"
expect_exit check_fail_open 0 "$bin" check --url "redis://127.0.0.1:1?fail=open" --rule fixed:1/1s --key c1
expect_text check_fail_open_reported "$tmp/err" "fail policy"
expect_exit unknown_command 2 "$bin" frobnicate
expect_exit help 0 "$bin" --help

# replay: one answer a line, errors included, in order.
expect_exit replay_runs 0 "$bin" replay --url "$url" --rule fixed:10/1s <"$dir/cli/replay.jsonl"
cp "$dir/cli/replay.expected" "$tmp/expected"
if [[ $url == twemproxy://* ]]; then
    # Lines 7 and 8 use a token bucket, which twemproxy:// refuses.
    refusal='{"error": "twemproxy: token and gcra need an atomic read-modify-write that a proxy'"'"'s plain commands cannot give; use redis:// through the proxy (the Lua backend, one EVAL per decision)"}'
    awk -v r="$refusal" 'NR == 7 || NR == 8 { print r; next } { print }' \
        "$dir/cli/replay.expected" >"$tmp/expected"
fi
if diff "$tmp/out" "$tmp/expected" >"$tmp/diff"; then
    pass=$((pass + 1))
else
    fail=$((fail + 1))
    echo "FAIL replay_output:"
    cat "$tmp/diff"
fi
expect_exit replay_bad_rule 2 "$bin" replay --url "$url" --rule "fixed:1/1s+" </dev/null
expect_exit replay_bad_url 2 "$bin" replay --url "redis://:1" </dev/null
expect_exit replay_unreachable 1 "$bin" replay --url "redis://127.0.0.1:1" </dev/null
printf '{"t": 5, "key": "k"}\n' >"$tmp/norule"
expect_exit replay_no_rule 0 "$bin" replay --url "$url" <"$tmp/norule"
expect_text replay_no_rule_says_so "$tmp/out" '{"error": "no rule'
expect_exit replay_empty_input 0 "$bin" replay --url "$url" </dev/null

echo "cli on $2: $pass passed, $fail failed"
[[ $fail == 0 ]]
