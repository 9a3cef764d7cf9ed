#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# test_gateway.sh - examples/gateway (one handle opened with
# examples/gateway.yml) against a redis-server of the test's own, driven by
# curl, every answer checked by its code and X-Sluice-Status (the result's
# status): on an empty Redis the file's limiters are defined at their
# first decision (api: a burst of 5, a partner's own rules, an allow-listed
# probe without RateLimit fields, a deny-listed bot's 403 problem; login:
# 3 then 429 and the penalty; llm: a cost past the burst 400, tokens
# counted; hot: 40 requests on one connection, some admitted from
# reservations); /metrics passes `promtool
# check metrics`; SIGHUP with a bad file keeps the last good one and says
# why, with a good one changes login's fail policy. Then Redis is killed:
# each limiter answers by its fail policy (503 for fail=closed, 200
# without RateLimit numbers for fail=open; the probe still allow-listed
# from the rules read last); then it comes back EMPTY (no dump): the
# answers are decisions again, by the file's limits defined anew (rules
# and overrides in Redis again), and no request, in any phase, was
# answered by anything but a decision or its limiter's fail policy.
#   test_gateway.sh GATEWAY_BIN LIMITS_FILE
set -euo pipefail
bin=$1 limits=$2
work=$(mktemp -d)
pids=()
cleanup() {
    local p
    for p in "${pids[@]}"; do
        kill -9 "$p" 2>/dev/null || true
        { wait "$p" || true; } 2>/dev/null
    done
    rm -rf "$work"
}
trap cleanup EXIT
fail() {
    echo "FAIL: $*"
    echo "--- gateway's stderr:"
    cat "$work/gw.err" || true
    exit 1
}
free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
rport=$(free_port)
gport=$(free_port)
start_redis() { # empty: no dump is written or read
    rm -f "$work/redis.pid"
    redis-server --port "$rport" --bind 127.0.0.1 --save "" --appendonly no \
        --dir "$work" --daemonize yes --pidfile "$work/redis.pid" \
        --logfile "$work/redis.log"
    for _ in $(seq 100); do
        if [[ $(redis-cli -p "$rport" ping 2>/dev/null) == PONG && -s $work/redis.pid ]]; then
            rpid=$(cat "$work/redis.pid")
            pids+=("$rpid")
            return
        fi
        sleep 0.05
    done
    fail "redis-server did not start"
}
start_redis
cp "$limits" "$work/limits.yml"
# Rules read again every 100 ms, so that an empty Redis is seen soon; a
# first decision on an empty Redis (a define: up to five round trips) has
# 2 s, on a loaded machine under the sanitizers.
"$bin" "redis://127.0.0.1:$rport?timeout_ms=2000&connect_timeout_ms=1000&rules_cache_ms=100" \
    "$gport" "$work/limits.yml" >"$work/gw.out" 2>"$work/gw.err" &
gpid=$!
pids+=("$gpid")
for _ in $(seq 100); do
    grep -qs listening "$work/gw.out" && break
    sleep 0.05
done
grep -qs listening "$work/gw.out" || fail "the gateway did not start"

n=0
# req PATH CLIENT [COST]: one request; code in $code, the result's status
# in $st, headers in $work/h, body in $work/b. Every answer is logged.
req() {
    n=$((n + 1))
    code=$(curl -s -o "$work/b" -D "$work/h" -w '%{http_code}' \
        -H "X-Client-Key: $2" -H "X-Cost: ${3:-1}" "http://127.0.0.1:$gport$1")
    st=$(grep -i '^X-Sluice-Status:' "$work/h" | cut -d' ' -f2 | tr -d '\r' || true)
    echo "$n $1 $2 ${3:-1}: $code $st" >>"$work/log"
}
# expect NAME CODE STATUS PATH CLIENT [COST]
expect() {
    local name=$1 want_code=$2 want_st=$3
    shift 3
    req "$@"
    [[ $code == "$want_code" && $st =~ ^($want_st)$ ]] ||
        fail "$name: $* answered $code, status '$st' (expected $want_code, $want_st); body: $(cat "$work/b")"
}
no_numbers() { # NAME: the answer carries no RateLimit field
    ! grep -qi '^RateLimit' "$work/h" || fail "$1: RateLimit numbers: $(cat "$work/h")"
}
problem() { # NAME STATUS TYPE: the body is that RFC 9457 problem
    grep -qi '^Content-Type: application/problem+json' "$work/h" ||
        fail "$1: not a problem: $(cat "$work/h")"
    python3 - "$work/b" "$2" "$3" <<'PY' || fail "$1: the body: $(cat "$work/b")"
import json, sys
p = json.load(open(sys.argv[1]))
assert p["status"] == int(sys.argv[2]), p
assert p["type"] == sys.argv[3], p
PY
}
field() { # NAME FIELD REGEX: the answer's FIELD is exactly REGEX
    local v
    v=$(grep -i "^$2:" "$work/h" | head -1 | cut -d' ' -f2- | tr -d '\r' || true)
    [[ $v =~ ^($3)$ ]] || fail "$1: $2 is '$v', expected $3; $(cat "$work/h")"
}
violated() { # NAME RULE: the problem names RULE among the violated
    python3 - "$work/b" "$2" <<'PY' || fail "$1: the body: $(cat "$work/b")"
import json, sys
p = json.load(open(sys.argv[1]))
assert sys.argv[2] in p["violated-policies"], p
PY
}
failure='connect|io|timeout' # the fail policy's statuses: the failure

# ---- Redis up and empty: the file's limiters defined at first use.
for i in 1 2 3 4 5; do
    expect "api $i" 200 ok /api/x c
    # The rules that decided it (the limiter's composite, by name): both
    # rules in the policy field, the bucket binding with 5 - i left.
    field "api $i" RateLimit-Policy '"api-1";q=5;w=300, "api-2";q=1000;w=86400'
    field "api $i" RateLimit "\"api-1\";r=$((5 - i));t=[0-9]+"
done
expect "api over" 429 ok /api/x c
field "api over" RateLimit '"api-1";r=0;t=[0-9]+'
field "api over" Retry-After '[0-9]+'
problem "api over" 429 https://iana.org/assignments/http-problem-types#quota-exceeded
violated "api over" api-1
for i in 1 2 3 4 5 6 7; do expect "partner $i" 200 ok /api/x partner; done
# The partner's own rules (its override) decided, not the limiter's.
field "partner 7" RateLimit-Policy '"api-1";q=50;w=300, "api-2";q=10000;w=86400'
field "partner 7" RateLimit '"api-1";r=43;t=[0-9]+'
expect "probe" 200 allowlisted /api/x probe
no_numbers probe
expect "bad-bot" 403 denylisted /api/x bad-bot
no_numbers bad-bot
problem bad-bot 403 about:blank
for i in 1 2 3; do expect "login $i" 200 ok /login acct1; done
expect "login over" 429 'ok|cached' /login acct1
expect "login blocked" 429 'ok|cached' /login acct1
expect "llm never fits" 400 ok /llm/x u1 5000
field "llm never fits" RateLimit-Policy '"llm";q=4000;qu="tokens";w=720'
field "llm never fits" RateLimit '"llm";r=4000;t=[0-9]+'
! grep -qi '^Retry-After' "$work/h" || fail "llm never fits: a Retry-After"
problem "llm never fits" 400 https://iana.org/assignments/http-problem-types#quota-exceeded
expect "llm tokens" 200 ok /llm/x u1 3000
expect "llm over" 429 ok /llm/x u1 3000
# 40 requests on one connection (a hot key: 4 or more within the hold).
urls=()
for i in $(seq 40); do urls+=(-o /dev/null "http://127.0.0.1:$gport/hot/x"); done
curl -s -D "$work/hot" -H "X-Client-Key: h" "${urls[@]}"
[[ $(grep -c '^HTTP/1.1 200 ' "$work/hot") == 40 ]] || fail "hot: $(cat "$work/hot")"
grep -i '^X-Sluice-Status:' "$work/hot" | tr -d '\r' | sed 's/^/hot: /' >>"$work/log"
! grep -i '^X-Sluice-Status:' "$work/hot" | grep -qvE ' (ok|reserved)'$'\r''?$' ||
    fail "hot: $(cat "$work/hot")"
reserved=$(grep -ci '^X-Sluice-Status: reserved' "$work/hot" || true)
n=$((n + 40))
((reserved > 0)) || fail "hot: no answer from a reservation in 40"
expect "no route" 404 '' /nowhere c
[[ $(redis-cli -p "$rport" exists 'sluice:lim:{3:api}:rules') == 1 ]] ||
    fail "api's rules are not stored"
[[ $(redis-cli -p "$rport" hlen 'sluice:lim:{3:api}:over') == 3 ]] ||
    fail "api's overrides are not stored"
curl -s "http://127.0.0.1:$gport/metrics" >"$work/metrics"
promtool check metrics <"$work/metrics" || fail "promtool: $(head -c 2000 "$work/metrics")"
grep -q 'limiter="api"' "$work/metrics" || fail "no counters for api"

# ---- SIGHUP: a bad file keeps the last good one, a good one applies.
printf 'version: 1\nlimiters:\n  - {name: api, rule: "fixed:1/1m"}\n' >"$work/limits.yml"
kill -HUP "$gpid"
for _ in $(seq 100); do
    grep -qs 'limits not reloaded' "$work/gw.err" && break
    sleep 0.05
done
grep -q "limits not reloaded: limits_file=$work/limits.yml: $work/limits.yml:3:17: unknown key \"rule\"" "$work/gw.err" ||
    fail "the bad file's reload was not reported"
expect "api after a bad reload" 429 ok /api/x c # the last good file's
sed 's/policy: {fail: closed, deny_cache: true, http_name: login}/policy: {fail: open, http_name: login}/' \
    "$limits" >"$work/limits.yml"
grep -q 'fail: open, http_name: login' "$work/limits.yml" || fail "sed"
kill -HUP "$gpid"
for _ in $(seq 100); do
    grep -qs 'limits reloaded' "$work/gw.err" && break
    sleep 0.05
done
grep -q 'limits reloaded' "$work/gw.err" || fail "the good file's reload was not reported"

# ---- Redis killed: each limiter's fail policy answers.
kill -9 "$rpid"
for _ in $(seq 100); do
    redis-cli -p "$rport" ping >/dev/null 2>&1 || break
    sleep 0.05
done
sleep 0.2
expect "api down" 200 "$failure" /api/x c2 # fail=open: admitted
no_numbers "api down"
expect "login down" 200 "$failure" /login acct2 # open since the reload
no_numbers "login down"
expect "llm down" 503 "$failure" /llm/x u2 # fail=closed
no_numbers "llm down"
problem "llm down" 503 about:blank
expect "probe down" 200 allowlisted /api/x probe # the rules read last
expect "bad-bot down" 403 denylisted /api/x bad-bot

# ---- Redis back, EMPTY: decisions again, the limits defined anew.
start_redis
for i in $(seq 100); do
    req /api/x c3
    [[ $code == 200 && $st =~ ^($failure)$ ]] ||
        [[ $code == 200 && $st == ok ]] ||
        fail "api while Redis came back: $code '$st'"
    [[ $st == ok ]] && break
    sleep 0.05
done
[[ $st == ok ]] || fail "no decision after Redis came back"
sleep 0.2 # past rules_cache_ms: the rules are read, found missing
for i in 2 3 4 5; do expect "api again $i" 200 ok /api/x c3; done
expect "api again over" 429 ok /api/x c3
expect "bad-bot again" 403 denylisted /api/x bad-bot
expect "probe again" 200 allowlisted /api/x probe
for i in 1 2 3; do expect "login again $i" 200 ok /login acct3; done
expect "login again over" 429 'ok|cached' /login acct3
expect "llm again" 200 ok /llm/x u3 3000
[[ $(redis-cli -p "$rport" exists 'sluice:lim:{3:api}:rules') == 1 ]] ||
    fail "api's rules were not defined again"
[[ $(redis-cli -p "$rport" hlen 'sluice:lim:{3:api}:over') == 3 ]] ||
    fail "api's overrides were not defined again"
[[ $(redis-cli -p "$rport" exists 'sluice:lim:{5:login}:rules') == 1 ]] ||
    fail "login's rules were not defined again"

# No answer but a decision or a fail policy's: no 500, no nolimiter.
! grep -E ': (500|502) |nolimiter' "$work/log" || fail "answers above"
kill -TERM "$gpid"
wait "$gpid" || fail "the gateway did not stop cleanly"
[[ -z ${GATEWAY_LOG:-} ]] || cp "$work/log" "$GATEWAY_LOG"
echo "gateway: $n answers checked, $reserved from reservations"
