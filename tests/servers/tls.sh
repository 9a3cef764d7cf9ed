#!/usr/bin/env bash
# tls.sh - throwaway redis-servers that speak TLS, with a CA and
# certificates made here by openssl:
#   DIR/main      a plain port (for the tests' own checks) and a TLS port
#                 that requires a client certificate signed by the CA
#   DIR/expired   a TLS port whose certificate expired when it was made
# and the files DIR/ca.crt, DIR/other-ca.crt (a CA that signed nothing of
# these), DIR/client.crt, DIR/client.key. Writes DIR/url (rediss://),
# DIR/url-multi (redis+multi:// with tls=1), DIR/servers, DIR/tls-port,
# DIR/expired-port. TLS_URL_QUERY, when set, ends both URLs (the tests under
# valgrind give the first handshake of a process more time with it).
#   tls.sh start DIR | tls.sh stop DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"

cmd=${1:?usage: tls.sh start|stop DIR}
dir=${2:?usage: tls.sh start|stop DIR}

case "$cmd" in
start)
    mkdir -p "$dir"
    stop_recorded "$dir/main"
    stop_recorded "$dir/expired"
    make_certs "$dir"
    make_cert "$dir" other-ca
    make_cert "$dir" expired ca 0 "IP:127.0.0.1,DNS:localhost"
    tport=$(pick_port)
    start_redis "$dir/main" --tls-port "$tport" \
        --tls-cert-file "$dir/server.crt" --tls-key-file "$dir/server.key" \
        --tls-ca-cert-file "$dir/ca.crt" --tls-auth-clients yes
    eport=$(pick_port)
    start_redis "$dir/expired" --tls-port "$eport" \
        --tls-cert-file "$dir/expired.crt" --tls-key-file "$dir/expired.key" \
        --tls-ca-cert-file "$dir/ca.crt" --tls-auth-clients no
    q="tls_ca_file=$dir/ca.crt&tls_cert=$dir/client.crt&tls_key=$dir/client.key"
    q+=${TLS_URL_QUERY:+&$TLS_URL_QUERY}
    echo "rediss://127.0.0.1:$tport?$q" >"$dir/url"
    echo "redis+multi://127.0.0.1:$tport?tls=1&$q" >"$dir/url-multi"
    echo "127.0.0.1:$(cat "$dir/main/port")" >"$dir/servers"
    echo "$tport" >"$dir/tls-port"
    echo "$eport" >"$dir/expired-port"
    sleep 1 # the expired certificate is past its end from here on
    echo "tls.sh: TLS redis-server on 127.0.0.1:$tport, expired certificate on 127.0.0.1:$eport"
    ;;
stop)
    stop_recorded "$dir/main"
    stop_recorded "$dir/expired"
    ;;
*)
    echo "usage: tls.sh start|stop DIR" >&2
    exit 2
    ;;
esac
