#!/usr/bin/env bash
# twemproxy.sh - two redis-servers behind one nutcracker (twemproxy) pool,
# all on free loopback ports.
#   twemproxy.sh start DIR        writes DIR/url (twemproxy://proxy),
#                                 DIR/url-lua (redis://proxy), DIR/servers
#   twemproxy.sh stop DIR         stops the proxy and both servers
#   twemproxy.sh kill DIR N       kills server N (1 or 2) outright
#   twemproxy.sh revive DIR N     starts server N again on its port
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"

cmd=${1:?usage: twemproxy.sh start|stop|kill|revive DIR [N]}
dir=${2:?usage: twemproxy.sh start|stop|kill|revive DIR [N]}

case "$cmd" in
start)
    command -v nutcracker >/dev/null ||
        { echo "nutcracker not installed (apt-get install nutcracker)" >&2; exit 1; }
    start_redis "$dir/r1"
    start_redis "$dir/r2"
    stop_recorded "$dir/proxy"
    mkdir -p "$dir/proxy"
    for _ in $(seq 1 20); do
        port=$(pick_port)
        stats=$(pick_port)
        # Keys of one hash tag {K} go to one server; a dead server is an
        # error, not a silent re-hash (auto_eject_hosts: false). The proxy
        # waits 2 s for a server, as long as the tests' calls do (tu_open):
        # on a busy machine 400 ms once ran out under a thousand decisions
        # in flight (ERR Connection timed out), which is no failure of
        # sluice.
        cat >"$dir/proxy/nutcracker.yml" <<YML
sluice:
  listen: 127.0.0.1:$port
  hash: fnv1a_64
  hash_tag: "{}"
  distribution: ketama
  redis: true
  auto_eject_hosts: false
  timeout: ${TW_TIMEOUT:-2000}
  servers:
   - 127.0.0.1:$(cat "$dir/r1/port"):1 server1
   - 127.0.0.1:$(cat "$dir/r2/port"):1 server2
YML
        pin nutcracker -d -c "$dir/proxy/nutcracker.yml" -p "$dir/proxy/pid" \
            -o "$dir/proxy/nutcracker.log" -s "$stats" -a 127.0.0.1 || continue
        for _ in $(seq 1 50); do
            port_free "$port" || break
            sleep 0.1
        done
        if ! port_free "$port"; then
            echo "$port" >"$dir/proxy/port"
            echo "twemproxy://127.0.0.1:$port" >"$dir/url"
            echo "redis://127.0.0.1:$port" >"$dir/url-lua"
            printf '127.0.0.1:%s\n127.0.0.1:%s\n' "$(cat "$dir/r1/port")" \
                "$(cat "$dir/r2/port")" >"$dir/servers"
            echo "twemproxy.sh: nutcracker on 127.0.0.1:$port before" \
                "127.0.0.1:$(cat "$dir/r1/port") and 127.0.0.1:$(cat "$dir/r2/port")"
            exit 0
        fi
        stop_recorded "$dir/proxy"
    done
    echo "twemproxy.sh: could not start nutcracker; see $dir/proxy/nutcracker.log" >&2
    exit 1
    ;;
stop)
    # Side by side: each may take a second or two to exit.
    stop_recorded "$dir/proxy" &
    stop_recorded "$dir/r1" &
    stop_recorded "$dir/r2" &
    wait
    ;;
kill)
    n=${3:?server number}
    kill -9 "$(cat "$dir/r$n/pid")"
    rm -f "$dir/r$n/pid"
    ;;
revive)
    n=${3:?server number}
    restart_redis "$dir/r$n"
    ;;
*)
    echo "usage: twemproxy.sh start|stop|kill|revive DIR [N]" >&2
    exit 2
    ;;
esac
