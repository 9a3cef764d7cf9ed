#!/usr/bin/env bash
# cluster.sh - a Redis Cluster of 3 masters and 3 replicas on free loopback
# ports, created with redis-cli --cluster create.
#   cluster.sh start DIR     writes DIR/url (redis-cluster://seeds),
#                            DIR/servers (every node), DIR/nN/port
#   cluster.sh stop DIR      stops every node recorded in DIR
# Node timeout: CLUSTER_NODE_TIMEOUT ms (default 2000), so that failover
# tests take seconds, not tens of seconds.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"

cmd=${1:?usage: cluster.sh start|stop DIR}
dir=${2:?usage: cluster.sh start|stop DIR}
nodes=6

stop_all() {
    for i in $(seq 1 $nodes); do
        stop_recorded "$dir/n$i"
    done
}

case "$cmd" in
start)
    stop_all
    rm -rf "$dir"
    mkdir -p "$dir"
    addrs=()
    for i in $(seq 1 $nodes); do
        # The cluster bus listens on port + 10000: both must be free, and
        # below the ephemeral range.
        started=0
        for _ in $(seq 1 20); do
            p=$((10000 + RANDOM % 12000))
            port_free "$p" && port_free $((p + 10000)) || continue
            if start_at "$dir/n$i" "$p" --cluster-enabled yes \
                --cluster-config-file nodes.conf \
                --cluster-node-timeout "${CLUSTER_NODE_TIMEOUT:-2000}"; then
                started=1
                break
            fi
        done
        if [[ $started != 1 ]]; then
            echo "cluster.sh: could not start node $i; see $dir/n$i/redis.log" >&2
            stop_all
            exit 1
        fi
        addrs+=("127.0.0.1:$p")
    done
    redis-cli --cluster create "${addrs[@]}" --cluster-replicas 1 \
        --cluster-yes >"$dir/create.log" 2>&1 ||
        { cat "$dir/create.log" >&2; stop_all; exit 1; }
    # Wait until every node sees the whole cluster and every replica syncs.
    deadline=$((SECONDS + 60))
    for i in $(seq 1 $nodes); do
        p=$(cat "$dir/n$i/port")
        until redis-cli -p "$p" cluster info | tr -d '\r' | grep -q '^cluster_state:ok$' &&
            redis-cli -p "$p" cluster info | tr -d '\r' | grep -q "^cluster_known_nodes:$nodes\$" &&
            ! redis-cli -p "$p" info replication | tr -d '\r' | grep -q '^master_link_status:down$'; do
            if ((SECONDS >= deadline)); then
                echo "cluster.sh: the cluster did not converge in 60 s" >&2
                stop_all
                exit 1
            fi
            sleep 0.2
        done
    done
    (IFS=,; echo "redis-cluster://${addrs[*]:0:3}") | sed 's/ /,/g' >"$dir/url"
    printf '%s\n' "${addrs[@]}" >"$dir/servers"
    echo "cluster.sh: 3 masters + 3 replicas on ${addrs[*]}"
    ;;
stop)
    stop_all
    ;;
*)
    echo "usage: cluster.sh start|stop DIR" >&2
    exit 2
    ;;
esac
