#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# test_http.sh - examples/http_server against a real Redis, driven by curl,
# every answer checked (docs/HTTP.md, "HTTP answer per status"): on
# log:3/1h+log:3/1d a client within its limit gets 200 with the
# RateLimit-Policy and RateLimit fields (the hour binds), over it 429 with
# Retry-After no earlier than RateLimit's t and an RFC 9457 problem
# (application/problem+json, parsed by Python) naming both rules, which
# both denied; a cost that can never fit gets 400, no Retry-After, a
# problem saying so; another client is limited apart. Then the same
# server on a port nothing listens on: fail=closed answers 503 and
# fail=open 200, neither with a RateLimit number, which nothing decided.
# The servers are stopped afterwards, also on failure.
#   test_http.sh HTTP_SERVER_BIN URL|@file
set -euo pipefail
bin=$1 url=$2
[[ $url == @* ]] && url=$(cat "${url#@}")
work=$(mktemp -d)
pids=()
cleanup() {
    local p
    for p in "${pids[@]}"; do
        kill "$p" 2>/dev/null || true
        wait "$p" 2>/dev/null || true
    done
    rm -rf "$work"
}
trap cleanup EXIT
free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
fail() { echo "FAIL: $*"; exit 1; }
# serve NAME URL RULES: starts the example; its port in $port
serve() {
    port=$(free_port)
    "$bin" "$2" "$port" "$3" >"$work/out.$1" 2>&1 &
    pids+=($!)
    for _ in $(seq 100); do
        grep -qs listening "$work/out.$1" && return
        sleep 0.05
    done
    cat "$work/out.$1"
    fail "$1 did not start"
}
# request KEY N [COST]: the Nth request of client KEY; its status code on
# stdout, headers in $work/h.KEY.N, body in $work/b.KEY.N
request() {
    curl -s -o "$work/b.$1.$2" -D "$work/h.$1.$2" -w '%{http_code}' \
        -H "X-Client-Key: $1" -H "X-Cost: ${3:-1}" "http://127.0.0.1:$port/"
}
header() { # header FILE NAME: its value, without the CR
    grep -i "^$2:" "$1" | head -1 | cut -d' ' -f2- | tr -d '\r'
}
# problem FILE STATUS TYPE [POLICY...]: the body is that problem
problem() {
    python3 - "$@" <<'PY' || fail "the body of $1: $(cat "$1")"
import json, sys
f, status, kind, policies = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
p = json.load(open(f))
assert p["status"] == status, p
if kind == "quota":
    assert p["type"] == ("https://iana.org/assignments/http-problem-types"
                         "#quota-exceeded"), p
    assert p["title"].startswith("Request cannot be satisfied"), p
    assert p["violated-policies"] == policies, p
else:
    assert p["type"] == "about:blank" and "violated-policies" not in p, p
PY
}

# A key prefix of this run's own, so that reruns start afresh.
sep='?'
[[ $url == *\?* ]] && sep='&'
serve redis "$url${sep}prefix=http$$:" "log:3/1h+log:3/1d"

codes=""
for n in 1 2 3 4 5; do
    codes="$codes $(request alice $n)"
done
echo "alice: $codes"
[[ $codes == " 200 200 200 429 429" ]] || fail "alice's status codes: $codes"

policy=$(header "$work/h.alice.1" RateLimit-Policy)
[[ $policy == '"default-1";q=3;w=3600, "default-2";q=3;w=86400' ]] ||
    fail "RateLimit-Policy: $policy"
for n in 1 2 3; do
    rl=$(header "$work/h.alice.$n" RateLimit)
    [[ $rl == "\"default-1\";r=$((3 - n));t=3600" ]] || fail "RateLimit $n: $rl"
    [[ -z $(header "$work/h.alice.$n" Retry-After) ]] || fail "Retry-After on a 200"
done
# Both rules are spent: the day waits longest and binds; its t is no
# later than Retry-After (draft -11, section 6).
rl=$(header "$work/h.alice.4" RateLimit)
retry=$(header "$work/h.alice.4" Retry-After)
[[ $rl =~ ^\"default-2\"\;r=0\;t=([0-9]+)$ ]] || fail "RateLimit on the 429: $rl"
t=${BASH_REMATCH[1]}
[[ $retry =~ ^[0-9]+$ ]] && ((retry >= 86390 && retry <= 86400)) ||
    fail "Retry-After on the 429: '$retry'"
((t <= retry)) || fail "t=$t past Retry-After: $retry"
echo "alice's 429: RateLimit: $rl, Retry-After: $retry"
ctype=$(header "$work/h.alice.4" Content-Type)
[[ $ctype == application/problem+json ]] || fail "the 429's Content-Type: $ctype"
problem "$work/b.alice.4" 429 quota default-1 default-2
echo "alice's 429 body: $(cat "$work/b.alice.4")"

# A cost above both limits can never fit: 400, no Retry-After.
code=$(request bob 1 5)
[[ $code == 400 ]] || fail "bob's cost of 5: $code"
[[ -z $(header "$work/h.bob.1" Retry-After) ]] || fail "Retry-After on the 400"
[[ -n $(header "$work/h.bob.1" RateLimit-Policy) ]] || fail "no policy on the 400"
problem "$work/b.bob.1" 400 quota default-1 default-2
grep -q 'can never fit' "$work/b.bob.1" || fail "the 400's detail: $(cat "$work/b.bob.1")"
echo "bob's 400 body: $(cat "$work/b.bob.1")"
code=$(request bob 2)
[[ $code == 200 ]] || fail "bob, another client: $code"
rl=$(header "$work/h.bob.2" RateLimit)
[[ $rl == '"default-1";r=2;t=3600' ]] || fail "bob's RateLimit: $rl"

# Nothing listens: the fail policy answers, and writes no number.
dead=$(free_port)
serve closed "redis://127.0.0.1:$dead?fail=closed" "fixed:3/1h"
code=$(request carol 1)
[[ $code == 503 ]] || fail "fail=closed: $code"
grep -qi '^\(RateLimit\|Retry-After\)' "$work/h.carol.1" &&
    fail "fail=closed wrote numbers: $(cat "$work/h.carol.1")"
problem "$work/b.carol.1" 503 blank
echo "fail=closed: 503, $(cat "$work/b.carol.1")"
serve open "redis://127.0.0.1:$dead?fail=open" "fixed:3/1h"
code=$(request dave 1)
[[ $code == 200 ]] || fail "fail=open: $code"
grep -qi '^\(RateLimit\|Retry-After\)' "$work/h.dave.1" &&
    fail "fail=open wrote numbers: $(cat "$work/h.dave.1")"
echo "http: 200, 429 naming every rule exceeded, 400 for a cost that never fits, 503 and 200 without numbers when nothing decided"
