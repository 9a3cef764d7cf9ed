#!/usr/bin/env bash
# redis.sh - a throwaway redis-server on a free loopback port, with an ACL
# user that may not run scripts (for redis+multi://).
#   redis.sh start DIR   writes DIR/url (redis://), DIR/url-multi
#                        (redis+multi:// as the no-scripting user), DIR/port,
#                        and DIR/url-unix, DIR/url-multi-unix: the same
#                        through its Unix-domain socket
#   redis.sh stop DIR    stops the server recorded in DIR (only that pid)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"

cmd=${1:?usage: redis.sh start|stop DIR}
dir=${2:?usage: redis.sh start|stop DIR}

case "$cmd" in
start)
    # The user "noscript" may do anything but run Lua (EVAL, EVALSHA, SCRIPT).
    # The socket's path must fit in 107 bytes: a deep build directory
    # gets one under /tmp.
    mkdir -p "$dir"
    sock=$(cd "$dir" && pwd)/redis.sock
    if [[ ${#sock} -gt 100 ]]; then
        sock=$(mktemp -d /tmp/sluice-sock.XXXXXX)/redis.sock
    fi
    start_redis "$dir" --user noscript on ">noscript-pw" "~*" "&*" +@all -@scripting \
        --unixsocket "$sock" --unixsocketperm 700
    port=$(cat "$dir/port")
    echo "redis://localhost?socket=$sock" >"$dir/url-unix"
    echo "redis+multi://noscript:noscript-pw@localhost?socket=$sock" >"$dir/url-multi-unix"
    echo "redis://127.0.0.1:$port" >"$dir/url"
    echo "redis+multi://noscript:noscript-pw@127.0.0.1:$port" >"$dir/url-multi"
    echo "127.0.0.1:$port" >"$dir/servers"
    echo "redis.sh: redis-server on 127.0.0.1:$port (pid $(cat "$dir/pid"))"
    ;;
stop)
    stop_recorded "$dir"
    ;;
*)
    echo "usage: redis.sh start|stop DIR" >&2
    exit 2
    ;;
esac
