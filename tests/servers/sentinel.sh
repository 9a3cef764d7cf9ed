#!/usr/bin/env bash
# sentinel.sh - a master, two replicas and three sentinels watching them, on
# free loopback ports: the deployment redis+sentinel:// is for. Sentinels
# are redis-server in sentinel mode (the binary Debian's redis-sentinel
# package links to); they require a password of their own, the data nodes
# another, so that the tests tell the two apart.
#   sentinel.sh start DIR  writes DIR/url (redis+sentinel://),
#                          DIR/url-multi (redis+multi+sentinel://),
#                          DIR/sentinels (host:port,...), DIR/master
#                          (the master's name), DIR/servers (the data
#                          nodes, host:port a line), DIR/node-N/port,
#                          DIR/rogue (a sentinel that names a replica)
#   sentinel.sh stop DIR   stops every process recorded under DIR
# With SENTINEL_TLS=1 (sentinel-tls.sh) clients reach the data nodes and
# the sentinels over TLS only (a CA and certificates made here; the plain
# ports stay for the script's own checks): the nodes replicate over TLS
# and announce their TLS ports, the sentinels watch and greet each other
# over TLS, so that every address a sentinel names is a TLS port; the
# URLs are rediss+sentinel:// (and redis+multi+sentinel:// with tls=1).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"

cmd=${1:?usage: sentinel.sh start|stop DIR}
dir=${2:?usage: sentinel.sh start|stop DIR}
name=sluicemaster
data_pw=data-pw
sentinel_pw=sentinel-pw

# Every process recorded under DIR, stopped together (a test may have
# killed or frozen some of them).
stop_all() {
    local d pids=()
    for d in "$dir"/sentinel-* "$dir"/node-*; do
        [[ -f $d/pid ]] && pids+=("$(cat "$d/pid")")
    done
    [[ ${#pids[@]} -gt 0 ]] || return 0
    kill -CONT "${pids[@]}" 2>/dev/null || true
    kill "${pids[@]}" 2>/dev/null || true
    for _ in $(seq 1 50); do
        local alive=0 p
        for p in "${pids[@]}"; do
            kill -0 "$p" 2>/dev/null && alive=1
        done
        [[ $alive == 1 ]] || break
        sleep 0.1
    done
    kill -9 "${pids[@]}" 2>/dev/null || true
    rm -f "$dir"/sentinel-*/pid "$dir"/node-*/pid
    return 0
}

tls=${SENTINEL_TLS:-0}
# The TLS settings of a data node, as arguments.
tls_args() {
    echo --tls-cert-file "$dir/server.crt" --tls-key-file "$dir/server.key" \
        --tls-ca-cert-file "$dir/ca.crt" --tls-auth-clients optional \
        --tls-replication yes
}

# start_sentinel DIR MASTER_PORT: a sentinel on a free port that watches
# the master, with the data nodes' password and a password of its own;
# quick to decide (a master is down after 1 s without an answer).
start_sentinel() {
    local d=$1 mport=$2 port tport=""
    mkdir -p "$d"
    for _ in $(seq 1 20); do
        port=$(pick_port) || continue
        [[ $tls == 1 ]] && tport=$(pick_port)
        cat >"$d/sentinel.conf" <<EOF
port $port
bind 127.0.0.1
daemonize yes
dir $d
pidfile $d/redis.pid
logfile $d/redis.log
requirepass $sentinel_pw
sentinel monitor $name 127.0.0.1 $mport 2
sentinel auth-pass $name $data_pw
sentinel down-after-milliseconds $name 1000
sentinel failover-timeout $name 10000
sentinel parallel-syncs $name 2
EOF
        if [[ $tls == 1 ]]; then
            cat >>"$d/sentinel.conf" <<EOF
tls-port $tport
tls-cert-file $dir/server.crt
tls-key-file $dir/server.key
tls-ca-cert-file $dir/ca.crt
tls-auth-clients optional
tls-replication yes
sentinel announce-ip 127.0.0.1
sentinel announce-port $tport
EOF
        fi
        pin redis-server "$d/sentinel.conf" --sentinel || continue
        for _ in $(seq 1 50); do
            if redis-cli -p "$port" -a "$sentinel_pw" --no-auth-warning \
                ping 2>/dev/null | grep -q PONG; then
                cp "$d/redis.pid" "$d/pid"
                echo "$port" >"$d/port"
                echo "${tport:-$port}" >"$d/client-port"
                return 0
            fi
            sleep 0.1
        done
    done
    echo "could not start a sentinel; see $d/redis.log" >&2
    return 1
}

case "$cmd" in
start)
    mkdir -p "$dir"
    stop_all
    # A replica's full sync leaves dump.rdb in its directory, which a
    # server started there again would load: every start is empty.
    rm -f "$dir"/node-*/dump.rdb "$dir"/sentinel-*/sentinel.conf
    [[ $tls == 1 ]] && make_certs "$dir"
    # Started open (start_redis pings without a password), then closed.
    # With TLS each node has a TLS port too, announced to its master. A
    # replica moved to a new master syncs at once (no diskless delay): the
    # failover's leader ends it only then, and the tests wait for that.
    for i in 0 1 2; do
        if [[ $tls == 1 ]]; then
            tp=$(pick_port)
            # shellcheck disable=SC2046 # tls_args is several words
            start_redis "$dir/node-$i" --masterauth "$data_pw" \
                --repl-diskless-sync-delay 0 \
                --tls-port "$tp" --replica-announce-port "$tp" $(tls_args)
            echo "$tp" >"$dir/node-$i/client-port"
        else
            start_redis "$dir/node-$i" --masterauth "$data_pw" \
                --repl-diskless-sync-delay 0
            cp "$dir/node-$i/port" "$dir/node-$i/client-port"
        fi
        redis-cli -p "$(cat "$dir/node-$i/port")" config set requirepass \
            "$data_pw" >/dev/null
    done
    master=$(cat "$dir/node-0/client-port")
    for i in 1 2; do
        redis-cli -p "$(cat "$dir/node-$i/port")" -a "$data_pw" \
            --no-auth-warning replicaof 127.0.0.1 "$master" >/dev/null
    done
    sentinels=""
    for i in 1 2 3; do
        start_sentinel "$dir/sentinel-$i" "$master"
        sentinels+="${sentinels:+,}127.0.0.1:$(cat "$dir/sentinel-$i/client-port")"
        # INFO from each node every second, not every 10 s (Redis 7's
        # SENTINEL DEBUG): a sentinel that has not seen a node turn replica
        # takes it, once promoted, for a master that must be converted
        # back, and undoes the next failover; the tests wait until every
        # sentinel has seen it, which this makes a second's wait.
        redis-cli -p "$(cat "$dir/sentinel-$i/port")" -a "$sentinel_pw" \
            --no-auth-warning sentinel debug info-period 1000 >/dev/null
    done
    # A sentinel of its own that names a replica as the master (a mistake
    # in its configuration, which a message must point at): it watches,
    # under the master's name, a node that replicates from nothing
    # reachable (port 1). It knows no other sentinel and never reaches its
    # quorum, so it never acts.
    if [[ $tls == 1 ]]; then
        tp=$(pick_port)
        # shellcheck disable=SC2046 # tls_args is several words
        start_redis "$dir/node-rogue" --tls-port "$tp" $(tls_args)
        echo "$tp" >"$dir/node-rogue/client-port"
    else
        start_redis "$dir/node-rogue"
        cp "$dir/node-rogue/port" "$dir/node-rogue/client-port"
    fi
    redis-cli -p "$(cat "$dir/node-rogue/port")" replicaof 127.0.0.1 1 >/dev/null
    redis-cli -p "$(cat "$dir/node-rogue/port")" config set requirepass \
        "$data_pw" >/dev/null
    start_sentinel "$dir/sentinel-rogue" "$(cat "$dir/node-rogue/client-port")"
    # Ready when the replicas are in sync and every sentinel knows the
    # other two and both replicas.
    for _ in $(seq 1 100); do
        ok=1
        for i in 1 2; do
            redis-cli -p "$(cat "$dir/node-$i/port")" -a "$data_pw" \
                --no-auth-warning info replication 2>/dev/null |
                grep -q 'master_link_status:up' || ok=0
        done
        for i in 1 2 3; do
            info=$(redis-cli -p "$(cat "$dir/sentinel-$i/port")" \
                -a "$sentinel_pw" --no-auth-warning sentinel master "$name" \
                2>/dev/null | tr '\n' ' ')
            [[ $info == *"num-other-sentinels 2 "* &&
                $info == *"num-slaves 2 "* ]] || ok=0
        done
        [[ $ok == 1 ]] && break
        sleep 0.2
    done
    if [[ $ok != 1 ]]; then
        echo "sentinel.sh: the sentinels did not settle; see $dir/*/redis.log" >&2
        exit 1
    fi
    q="sentinel_password=$sentinel_pw"
    if [[ $tls == 1 ]]; then
        q+="&tls_ca_file=$dir/ca.crt&tls_cert=$dir/client.crt&tls_key=$dir/client.key"
        q+=${TLS_URL_QUERY:+&$TLS_URL_QUERY}
        echo "rediss+sentinel://:$data_pw@$sentinels/$name?$q" >"$dir/url"
        echo "redis+multi+sentinel://:$data_pw@$sentinels/$name?tls=1&$q" >"$dir/url-multi"
    else
        echo "redis+sentinel://:$data_pw@$sentinels/$name?$q" >"$dir/url"
        echo "redis+multi+sentinel://:$data_pw@$sentinels/$name?$q" >"$dir/url-multi"
    fi
    echo "$sentinels" >"$dir/sentinels"
    echo "127.0.0.1:$(cat "$dir/sentinel-rogue/client-port")" >"$dir/rogue"
    echo "$name" >"$dir/master"
    for i in 0 1 2; do
        echo "127.0.0.1:$(cat "$dir/node-$i/port")"
    done >"$dir/servers"
    echo "sentinel.sh: master 127.0.0.1:$master, sentinels $sentinels"
    ;;
stop)
    stop_all
    ;;
*)
    echo "usage: sentinel.sh start|stop DIR" >&2
    exit 2
    ;;
esac
