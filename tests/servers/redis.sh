#!/usr/bin/env bash
# redis.sh - starts or stops a throwaway redis-server on a free loopback port.
#   redis.sh start DIR   starts one; writes DIR/port, DIR/url and DIR/pid
#   redis.sh stop DIR    stops the one recorded in DIR (only that pid)
set -euo pipefail

cmd=${1:?usage: redis.sh start|stop DIR}
dir=${2:?usage: redis.sh start|stop DIR}

port_free() {
    ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

stop() {
    if [[ -f "$dir/pid" ]]; then
        local pid
        pid=$(cat "$dir/pid")
        if kill -0 "$pid" 2>/dev/null; then
            kill "$pid" 2>/dev/null || true
            for _ in $(seq 1 50); do
                kill -0 "$pid" 2>/dev/null || break
                sleep 0.1
            done
            kill -9 "$pid" 2>/dev/null || true
        fi
        rm -f "$dir/pid"
    fi
}

case "$cmd" in
start)
    command -v redis-server >/dev/null ||
        { echo "redis.sh: redis-server not installed (apt-get install redis-server)" >&2; exit 1; }
    mkdir -p "$dir"
    stop
    for _ in $(seq 1 50); do
        port=$((20000 + RANDOM % 40000))
        port_free "$port" || continue
        redis-server --port "$port" --bind 127.0.0.1 --save '' \
            --appendonly no --daemonize yes --dir "$dir" \
            --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" \
            --enable-debug-command yes \
            ${REDIS_EXTRA_ARGS:-} || continue
        for _ in $(seq 1 50); do
            if redis-cli -p "$port" ping 2>/dev/null | grep -q PONG; then
                cp "$dir/redis.pid" "$dir/pid"
                echo "$port" >"$dir/port"
                echo "redis://127.0.0.1:$port" >"$dir/url"
                echo "redis.sh: redis-server on 127.0.0.1:$port (pid $(cat "$dir/pid"))"
                exit 0
            fi
            sleep 0.1
        done
    done
    echo "redis.sh: could not start redis-server; see $dir/redis.log" >&2
    exit 1
    ;;
stop)
    stop
    ;;
*)
    echo "usage: redis.sh start|stop DIR" >&2
    exit 2
    ;;
esac
