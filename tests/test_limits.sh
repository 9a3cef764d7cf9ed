#!/usr/bin/env bash
# test_limits.sh - `sluice limiter apply FILE` and `sluice limiter export`
# end to end on one backend (docs/LIMITS.md): apply to an empty prefix,
# again (no change), a changed rule and override (exactly those lines),
# --dry-run (changes nothing), --prune, a file with a fault (nothing
# applied, its line and column named), export then apply (no change), a
# limiter with a keep-alive, binary names, standard input. On mem://, whose
# store lives in the process, each call starts empty.
#   test_limits.sh SLUICE_BINARY URL|@urlfile
set -u
bin=$1
url=$2
[[ $url == @* ]] && url=$(cat "${url#@}")
sep='?'
[[ $url == *\?* ]] && sep='&'
base="$url${sep}timeout_ms=2000"
[[ $url == *timeout_ms=* ]] && base="$url"
# A fresh key prefix per run (and a second one: an empty backend).
url="$base&prefix=lim$$-$RANDOM:"
url2="$base&prefix=lim$$-$RANDOM-b:"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [[ -n ${SLUICE_WRAP:-} ]]; then
    printf '#!/bin/sh\nexec %s "%s" "$@"\n' "$SLUICE_WRAP" "$bin" >"$tmp/wrapped"
    chmod +x "$tmp/wrapped"
    bin="$tmp/wrapped"
fi
pass=0
fail=0

ok() {
    pass=$((pass + 1))
}

bad() { # NAME WHY FILE...
    fail=$((fail + 1))
    echo "FAIL $1: $2"
    shift 2
    [[ $# -gt 0 ]] && cat "$@"
}

# Runs the binary; its output must be WANT exactly (and its exit status
# WANT_EXIT).
expect_out() { # NAME WANT_EXIT WANT CMD...
    local name=$1 want_exit=$2 want=$3 got
    shift 3
    "$@" >"$tmp/out" 2>"$tmp/err"
    got=$?
    printf '%s' "$want" >"$tmp/want"
    [[ -n $want ]] && printf '\n' >>"$tmp/want"
    if [[ $got != "$want_exit" ]]; then
        bad "$name" "exit $got, want $want_exit" "$tmp/out" "$tmp/err"
    elif ! diff "$tmp/want" "$tmp/out" >"$tmp/diff"; then
        bad "$name" "output differs (< want, > got):" "$tmp/diff" "$tmp/err"
    else
        ok
    fi
}

expect_err() { # NAME PATTERN
    if grep -q -- "$2" "$tmp/err"; then
        ok
    else
        bad "$1" "no '$2' on standard error:" "$tmp/err"
    fi
}

cat >"$tmp/limits.yaml" <<'EOF'
# the service's limits
version: 1
limiters:
  - name: api
    rules: "sliding:100/1m+fixed:2000/1h"
    policy: {fail: open, deny_cache: true}
    overrides:
      - {client: vip-1, rules: unlimited}
      - {client: bad-bot, rules: deny}
      - {client: partner, rules: "fixed:10000/1h"}
      - {client_hex: "ff00", rules: deny}
  - name_hex: "c3a9ff"
    rules: fixed:5/1s
  - name: login
    rules: gcra:5/1m,burst=2
EOF
added='{"limiter": "api", "change": "added", "rules": "sliding:100/60000ms+fixed:2000/3600000ms", "keepalive_ms": 0}
{"limiter": "api", "client": "bad-bot", "change": "added", "override": "deny"}
{"limiter": "api", "client": "partner", "change": "added", "override": "fixed:10000/3600000ms"}
{"limiter": "api", "client": "vip-1", "change": "added", "override": "unlimited"}
{"limiter": "api", "client_hex": "ff00", "change": "added", "override": "deny"}
{"limiter": "login", "change": "added", "rules": "gcra:5/60000ms,burst=2", "keepalive_ms": 0}
{"limiter_hex": "c3a9ff", "change": "added", "rules": "fixed:5/1000ms", "keepalive_ms": 0}'
expect_out apply_empty 0 "$added" "$bin" limiter apply "$tmp/limits.yaml" --url "$url"

# A file with a fault: nothing applied, the place named, exit 2; before
# the backend is even opened.
cat >"$tmp/bad.yaml" <<'EOF'
version: 1
limiters:
  - name: fine
    rules: fixed:1/1s
  - name: api
    rules: fixed:1/1s
    overrides:
      - {client: x, rules: "fixed:0/1s"}
EOF
expect_out fault_applies_nothing 2 "" "$bin" limiter apply "$tmp/bad.yaml" --url "$url"
expect_err fault_named '^sluice: input: .*/bad.yaml:8:28: rules "fixed:0/1s": expected unlimited, deny or rules (rule "fixed:0/1s": limit 0 is out of range 1..1000000000)$'
expect_out fault_before_connecting 2 "" "$bin" limiter apply "$tmp/bad.yaml" --url "redis://127.0.0.1:1"
expect_err fault_before_connecting_named '^sluice: input: '
expect_out missing_file 2 "" "$bin" limiter apply "$tmp/none.yaml" --url "$url"
expect_err missing_file_named 'none.yaml: cannot open: No such file or directory'
expect_out missing_file_argument 2 "" "$bin" limiter apply --url "$url"
expect_err missing_file_argument_named '^sluice: input: limiter apply: missing FILE'
expect_out unreachable 1 "" "$bin" limiter apply "$tmp/limits.yaml" --url "redis://127.0.0.1:1"
expect_err unreachable_named '^sluice: connect: '
expect_out export_unreachable 1 "" "$bin" limiter export --url "redis://127.0.0.1:1"

if [[ $url == mem://* ]]; then
    # Each process starts empty: every apply adds, every export is empty.
    expect_out apply_again_adds_on_mem 0 "$added" "$bin" limiter apply "$tmp/limits.yaml" --url "$url"
    expect_out export_empty_on_mem 0 "# sluice limits (docs/LIMITS.md)
version: 1
limiters: []" "$bin" limiter export --url "$url"
    echo "limits on $2: $pass passed, $fail failed"
    [[ $fail == 0 ]]
    exit
fi

expect_out apply_again_changes_nothing 0 "" "$bin" limiter apply "$tmp/limits.yaml" --url "$url"
# The file made the backend's: each limiter and override by the calls.
expect_out get_after_apply 0 '{"limiter": "api", "rules": "sliding:100/60000ms+fixed:2000/3600000ms", "keepalive_ms": 0}' \
    "$bin" limiter get api --url "$url"
expect_out check_deny_listed 3 "denied: the client is deny-listed" \
    "$bin" check --limiter api --client bad-bot --url "$url"
exported='# sluice limits (docs/LIMITS.md)
version: 1
limiters:
  - name: "api"
    rules: "sliding:100/60000ms+fixed:2000/3600000ms"
    overrides:
      - {client: "bad-bot", rules: deny}
      - {client: "partner", rules: "fixed:10000/3600000ms"}
      - {client: "vip-1", rules: unlimited}
      - {client_hex: "ff00", rules: deny}
  - name: "login"
    rules: "gcra:5/60000ms,burst=2"
  - name_hex: "c3a9ff"
    rules: "fixed:5/1000ms"'
expect_out export_after_apply 0 "$exported" "$bin" limiter export --url "$url"
cp "$tmp/out" "$tmp/exported.yaml"
# Export, then apply: no change, also with --prune; and into an empty
# prefix (from standard input) the same limiters, exported the same.
expect_out export_then_apply 0 "" "$bin" limiter apply "$tmp/exported.yaml" --url "$url" --prune
expect_out export_then_apply_elsewhere 0 "$added" "$bin" limiter apply - --url "$url2" <"$tmp/exported.yaml"
expect_out export_elsewhere_same 0 "$exported" "$bin" limiter export --url "$url2"

# A rule and an override changed, an override added: exactly those lines;
# --dry-run shows them and changes nothing.
sed -e 's|gcra:5/1m,burst=2|gcra:10/1m,burst=2|' -e 's|fixed:10000/1h|fixed:500/1h|' \
    -e 's|{client: vip-1, rules: unlimited}|{client: vip-1, rules: unlimited}\n      - {client: new, rules: "log:3/1s"}|' \
    "$tmp/limits.yaml" >"$tmp/changed.yaml"
changed='{"limiter": "api", "client": "new", "change": "added", "override": "log:3/1000ms"}
{"limiter": "api", "client": "partner", "change": "changed", "override": "fixed:500/3600000ms", "was_override": "fixed:10000/3600000ms"}
{"limiter": "login", "change": "changed", "rules": "gcra:10/60000ms,burst=2", "keepalive_ms": 0, "was_rules": "gcra:5/60000ms,burst=2", "was_keepalive_ms": 0}'
expect_out dry_run_shows 0 "$changed" "$bin" limiter apply "$tmp/changed.yaml" --url "$url" --dry-run
expect_err dry_run_says_so '^sluice: apply: --dry-run: 3 changes shown, none made$'
expect_out dry_run_changed_nothing 0 "$exported" "$bin" limiter export --url "$url"
expect_out apply_changes 0 "$changed" "$bin" limiter apply "$tmp/changed.yaml" --url "$url"
expect_out apply_changes_once 0 "" "$bin" limiter apply "$tmp/changed.yaml" --url "$url"
expect_out changed_rule_stored 0 '{"limiter": "login", "rules": "gcra:10/60000ms,burst=2", "keepalive_ms": 0}' \
    "$bin" limiter get login --url "$url"

# What is stored and not in the file: kept (and said) unless --prune.
expect_out apply_old_file_keeps 0 '{"limiter": "api", "client": "partner", "change": "changed", "override": "fixed:10000/3600000ms", "was_override": "fixed:500/3600000ms"}
{"limiter": "login", "change": "changed", "rules": "gcra:5/60000ms,burst=2", "keepalive_ms": 0, "was_rules": "gcra:10/60000ms,burst=2", "was_keepalive_ms": 0}' \
    "$bin" limiter apply "$tmp/limits.yaml" --url "$url"
expect_err kept_said '^sluice: apply: 0 limiters and 1 override stored but not in .*limits.yaml: kept (--prune removes them)$'
printf 'version: 1\nlimiters:\n  - name: login\n    rules: gcra:5/1m,burst=2\n' >"$tmp/login.yaml"
pruned='{"limiter": "api", "change": "removed", "was_rules": "sliding:100/60000ms+fixed:2000/3600000ms", "was_keepalive_ms": 0}
{"limiter_hex": "c3a9ff", "change": "removed", "was_rules": "fixed:5/1000ms", "was_keepalive_ms": 0}'
expect_out prune_dry_run 0 "$pruned" "$bin" limiter apply "$tmp/login.yaml" --url "$url" --prune --dry-run
expect_out prune 0 "$pruned" "$bin" limiter apply "$tmp/login.yaml" --url "$url" --prune
expect_out pruned_gone 3 "" "$bin" limiter get api --url "$url"
expect_out prune_override 0 '{"limiter": "api", "change": "added", "rules": "sliding:100/60000ms+fixed:2000/3600000ms", "keepalive_ms": 0}
{"limiter": "api", "client": "x", "change": "added", "override": "deny"}' \
    "$bin" limiter apply - --url "$url" <<'EOF'
version: 1
limiters:
  - {name: login, rules: "gcra:5/1m,burst=2"}
  - {name: api, rules: "sliding:100/1m+fixed:2000/1h", overrides: [{client: x, rules: deny}]}
EOF
expect_out prune_override_removed 0 '{"limiter": "api", "client": "x", "change": "removed", "was_override": "deny"}' \
    "$bin" limiter apply - --url "$url" --prune <<'EOF'
version: 1
limiters:
  - {name: login, rules: "gcra:5/1m,burst=2"}
  - {name: api, rules: "sliding:100/1m+fixed:2000/1h"}
EOF

# A limiter with a keep-alive: applied, compared by name on the next
# apply, but not listed (docs/LIMITS.md): export leaves it out, --prune
# leaves it to its keep-alive.
printf 'version: 1\nlimiters:\n  - {name: temp, rules: "fixed:9/1s", keepalive_ms: 600000}\n' >"$tmp/temp.yaml"
expect_out keepalive_added 0 '{"limiter": "temp", "change": "added", "rules": "fixed:9/1000ms", "keepalive_ms": 600000}' \
    "$bin" limiter apply "$tmp/temp.yaml" --url "$url2"
expect_out keepalive_unchanged 0 "" "$bin" limiter apply "$tmp/temp.yaml" --url "$url2"
expect_out keepalive_not_exported 0 "$exported" "$bin" limiter export --url "$url2"
expect_out keepalive_changed 0 '{"limiter": "temp", "change": "changed", "rules": "fixed:9/1000ms", "keepalive_ms": 0, "was_rules": "fixed:9/1000ms", "was_keepalive_ms": 600000}' \
    "$bin" limiter apply - --url "$url2" <<'EOF'
version: 1
limiters:
  - {name: temp, rules: "fixed:9/1s"}
EOF

echo "limits on $2: $pass passed, $fail failed"
[[ $fail == 0 ]]
