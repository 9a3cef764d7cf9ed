#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# test_http.sh - examples/http_server against a real Redis, driven by curl:
# a client within its limit gets 200, over it 429, with the RateLimit-Policy
# and RateLimit fields and, on a 429, Retry-After and an RFC 9457 problem
# body (application/problem+json, parsed by Python); another client is
# limited apart. The server is stopped afterwards, also on failure.
#   test_http.sh HTTP_SERVER_BIN URL|@file
set -euo pipefail
bin=$1 url=$2
[[ $url == @* ]] && url=$(cat "${url#@}")
work=$(mktemp -d)
pid=""
cleanup() {
    if [[ -n $pid ]]; then
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# A key prefix of this run's own, so that reruns start afresh.
sep='?'
[[ $url == *\?* ]] && sep='&'
"$bin" "$url${sep}prefix=http$$:" "$port" "log:3/1h" >"$work/out" 2>&1 &
pid=$!
for _ in $(seq 100); do
    grep -q listening "$work/out" && break
    sleep 0.05
done
grep -q listening "$work/out" || { cat "$work/out"; exit 1; }

fail() { echo "FAIL: $*"; exit 1; }
# request KEY N: the Nth request of client KEY; headers in $work/h.KEY.N
request() {
    curl -s -o "$work/b.$1.$2" -D "$work/h.$1.$2" -w '%{http_code}' \
        -H "X-Client-Key: $1" "http://127.0.0.1:$port/"
}
header() { # header FILE NAME: its value, without the CR
    grep -i "^$2:" "$1" | head -1 | cut -d' ' -f2- | tr -d '\r'
}

codes=""
for n in 1 2 3 4 5; do
    codes="$codes $(request alice $n)"
done
echo "alice: $codes"
[[ $codes == " 200 200 200 429 429" ]] || fail "alice's status codes: $codes"

policy=$(header "$work/h.alice.1" RateLimit-Policy)
[[ $policy == '"default";q=3;w=3600' ]] || fail "RateLimit-Policy: $policy"
for n in 1 2 3; do
    rl=$(header "$work/h.alice.$n" RateLimit)
    [[ $rl == "\"default\";r=$((3 - n));t=3600" ]] || fail "RateLimit $n: $rl"
    [[ -z $(header "$work/h.alice.$n" Retry-After) ]] || fail "Retry-After on a 200"
done
rl=$(header "$work/h.alice.4" RateLimit)
[[ $rl == '"default";r=0;t=3600' ]] || fail "RateLimit on the 429: $rl"
retry=$(header "$work/h.alice.4" Retry-After)
[[ $retry =~ ^[0-9]+$ ]] && ((retry >= 3590 && retry <= 3600)) ||
    fail "Retry-After on the 429: '$retry'"
echo "alice's 429: RateLimit: $rl, Retry-After: $retry"
# Its body: RFC 9457 problem details, read by Python's own JSON parser.
ctype=$(header "$work/h.alice.4" Content-Type)
[[ $ctype == application/problem+json ]] || fail "the 429's Content-Type: $ctype"
python3 - "$work/b.alice.4" <<'PY' || fail "the 429's body: $(cat "$work/b.alice.4")"
import json, sys
p = json.load(open(sys.argv[1]))
assert p["type"] == ("https://iana.org/assignments/http-problem-types"
                     "#quota-exceeded"), p
assert p["status"] == 429 and p["violated-policies"] == ["default"], p
assert p["title"].startswith("Request cannot be satisfied"), p
PY
echo "alice's 429 body: $(cat "$work/b.alice.4")"

code=$(request bob 1)
[[ $code == 200 ]] || fail "bob, another client: $code"
rl=$(header "$work/h.bob.1" RateLimit)
[[ $rl == '"default";r=2;t=3600' ]] || fail "bob's RateLimit: $rl"
echo "http: 200 within the limit, 429 over it with a problem body, the fields as the draft has them"
