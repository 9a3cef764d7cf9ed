#!/usr/bin/env bash
# cluster.sh - a Redis Cluster of 3 masters and 3 replicas on free loopback
# ports, created with redis-cli --cluster create.
#   cluster.sh start DIR     writes DIR/url (redis-cluster://seeds),
#                            DIR/servers (every node), DIR/nN/port
#   cluster.sh stop DIR      stops every node recorded in DIR
# Node timeout: CLUSTER_NODE_TIMEOUT ms (default 2000), so that failover
# tests take seconds, not tens of seconds. CLUSTER_NODES and
# CLUSTER_REPLICAS (default 6 and 1) make a smaller cluster.
# CLUSTER_TLS=1: 3 masters, no replicas, each with a TLS port beside its
# plain one (the tests' own checks use the plain ports) and TLS on the
# cluster bus (tls-cluster yes); certificates made in DIR; DIR/url then
# names the TLS ports with tls=1 and the CA and client certificate, and ends
# with TLS_URL_QUERY when that is set.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"

cmd=${1:?usage: cluster.sh start|stop DIR}
dir=${2:?usage: cluster.sh start|stop DIR}
nodes=${CLUSTER_NODES:-6}
replicas=${CLUSTER_REPLICAS:-1}
tls=${CLUSTER_TLS:-}
if [[ -n $tls ]]; then
    nodes=3
    replicas=0
fi

# The nodes stop side by side: each takes about 2 s to exit.
stop_all() {
    for i in $(seq 1 $nodes); do
        stop_recorded "$dir/n$i" &
    done
    wait
}

case "$cmd" in
start)
    stop_all
    rm -rf "$dir"
    mkdir -p "$dir"
    addrs=()
    tlsaddrs=()
    tlsargs=()
    if [[ -n $tls ]]; then
        make_certs "$dir"
    fi
    for i in $(seq 1 $nodes); do
        # The cluster bus listens on port + 10000: both must be free, and
        # below the ephemeral range.
        started=0
        for _ in $(seq 1 20); do
            p=$((10000 + RANDOM % 12000))
            port_free "$p" && port_free $((p + 10000)) || continue
            if [[ -n $tls ]]; then
                tp=$(pick_port)
                [[ $tp != "$p" && $tp != $((p + 10000)) ]] || continue
                tlsargs=(--tls-port "$tp" --tls-cluster yes
                    --tls-replication yes --tls-auth-clients no
                    --tls-cert-file "$dir/server.crt"
                    --tls-key-file "$dir/server.key"
                    --tls-ca-cert-file "$dir/ca.crt")
            fi
            if start_at "$dir/n$i" "$p" --cluster-enabled yes \
                --cluster-config-file nodes.conf \
                --cluster-node-timeout "${CLUSTER_NODE_TIMEOUT:-2000}" \
                "${tlsargs[@]}"; then
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
        [[ -z $tls ]] || tlsaddrs+=("127.0.0.1:$tp")
    done
    tlscli=()
    [[ -z $tls ]] || tlscli=(--tls --cacert "$dir/ca.crt")
    # With TLS on the bus, the nodes meet through their TLS ports.
    create=("${addrs[@]}")
    [[ -z $tls ]] || create=("${tlsaddrs[@]}")
    redis-cli "${tlscli[@]}" --cluster create "${create[@]}" \
        --cluster-replicas "$replicas" \
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
    if [[ -n $tls ]]; then
        (IFS=,; echo "redis-cluster://${tlsaddrs[*]:0:3}?tls=1&tls_ca_file=$dir/ca.crt&tls_cert=$dir/client.crt&tls_key=$dir/client.key${TLS_URL_QUERY:+&$TLS_URL_QUERY}") |
            sed 's/ /,/g' >"$dir/url"
    fi
    printf '%s\n' "${addrs[@]}" >"$dir/servers"
    echo "cluster.sh: $nodes nodes ($replicas replica a master) on ${addrs[*]} ${tlsaddrs[*]}"
    ;;
stop)
    stop_all
    ;;
*)
    echo "usage: cluster.sh start|stop DIR" >&2
    exit 2
    ;;
esac
