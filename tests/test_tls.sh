#!/usr/bin/env bash
# test_tls.sh - TLS as a user meets it, through the CLI, against the servers
# of tests/servers/tls.sh: a wrong CA, an expired certificate, a wrong
# server name, a missing client certificate and bad settings each fail with
# a status and a message that names the cause; verification can be turned
# off; twemproxy refuses TLS.
#   test_tls.sh SLUICE_BINARY SERVERS_DIR/tls
set -uo pipefail
bin=$1
dir=$2
tport=$(cat "$dir/tls-port")
eport=$(cat "$dir/expired-port")
client="tls_cert=$dir/client.crt&tls_key=$dir/client.key"
good="rediss://127.0.0.1:$tport?tls_ca_file=$dir/ca.crt&$client&prefix=tlstest$$:"
fails=0

# expect NAME EXIT PATTERN URL: `check` on URL exits EXIT and its stderr
# matches PATTERN (grep -E).
expect() {
    local name=$1 want=$2 pattern=$3 url=$4 got out
    out=$("$bin" check --url "$url" --rule fixed:100/1h --key k 2>&1 >/dev/null)
    got=$?
    if [[ $got -ne $want ]] || ! grep -Eq -- "$pattern" <<<"$out"; then
        echo "FAIL $name: exit $got (want $want), stderr: $out"
        fails=$((fails + 1))
    else
        echo "ok   $name: $out"
    fi
}

expect verified 0 '^$' "$good"
expect wrong_ca 1 '^sluice: connect: .*failed verification: (unable to get local issuer certificate|self-signed certificate in certificate chain)' \
    "rediss://127.0.0.1:$tport?tls_ca_file=$dir/other-ca.crt&$client"
expect expired 1 '^sluice: connect: .*failed verification: certificate has expired' \
    "rediss://127.0.0.1:$eport?tls_ca_file=$dir/ca.crt"
expect wrong_name 1 '^sluice: connect: .*failed verification: hostname mismatch.*name "wrong.example"' \
    "rediss://127.0.0.1:$tport?tls_ca_file=$dir/ca.crt&$client&tls_server_name=wrong.example"
expect right_name 0 '^$' \
    "rediss://127.0.0.1:$tport?tls_ca_file=$dir/ca.crt&$client&tls_server_name=localhost&prefix=tlstest$$:"
expect no_client_certificate 1 '^sluice: connect: .*after the TLS handshake: does the server want a client certificate' \
    "rediss://127.0.0.1:$tport?tls_ca_file=$dir/ca.crt"
expect not_verified 0 '^$' \
    "rediss://127.0.0.1:$tport?tls_ca_file=$dir/other-ca.crt&tls_verify=0&$client&prefix=tlstest$$:"
# A TLS port resets a client that speaks plain text to it: the message asks
# (issue 20, item 7). A server that waits instead is a timeout.
expect plain_client_on_tls_port 1 '^sluice: (connect|io): .*is this a TLS port\? use rediss://|^sluice: timeout: ' \
    "redis://127.0.0.1:$tport?timeout_ms=300"
expect tls_client_on_plain_port 1 '^sluice: connect: .*TLS handshake' \
    "rediss://127.0.0.1:$(cat "$dir/main/port")?tls_ca_file=$dir/ca.crt&connect_timeout_ms=500"
expect missing_ca_file 2 '^sluice: url: .*tls_ca_file=/nonexistent/ca.crt: .*No such file' \
    "rediss://127.0.0.1:$tport?tls_ca_file=/nonexistent/ca.crt"
expect key_without_cert 2 '^sluice: url: .*both tls_cert= and tls_key=' \
    "rediss://127.0.0.1:$tport?tls_ca_file=$dir/ca.crt&tls_key=$dir/client.key"
expect key_of_another_cert 2 '^sluice: url: .*tls_key=.*not the key of tls_cert' \
    "rediss://127.0.0.1:$tport?tls_ca_file=$dir/ca.crt&tls_cert=$dir/client.crt&tls_key=$dir/server.key"
expect tls_options_without_tls 2 '^sluice: url: .*without TLS' \
    "redis://127.0.0.1:$tport?tls_ca_file=$dir/ca.crt"
expect twemproxy_has_no_tls 2 '^sluice: url: .*twemproxy has no TLS' \
    "twemproxy://127.0.0.1:$tport?tls=1"
# The plain backend over TLS, and the password never in a message.
expect multi_over_tls 0 '^$' \
    "redis+multi://127.0.0.1:$tport?tls=1&tls_ca_file=$dir/ca.crt&$client&prefix=tlstest$$:"
out=$("$bin" check --url "rediss://user:s3cret-pw@127.0.0.1:$tport?tls_ca_file=$dir/other-ca.crt" \
    --rule fixed:1/1s --key k 2>&1)
if grep -q s3cret-pw <<<"$out"; then
    echo "FAIL password_not_shown: $out"
    fails=$((fails + 1))
else
    echo "ok   password_not_shown"
fi
echo "# $fails failed"
[[ $fails -eq 0 ]]
