# servers-lib.sh - shared by bench/run.sh and bench/compare.sh: the
# harness's own servers on loopback, and sluice-bench's targets on them.
# Sourced.

# bench_servers DIR [tls]: starts one Redis, two Redis behind nutcracker, a
# 3+3 cluster and, with "tls", a Redis that speaks TLS, under DIR; sets r
# (the Redis's port, for the floors and the peers) and targets (the
# --target arguments of sluice-bench, mem:// last). The caller stops them
# (tests/servers/stop-all.sh DIR).
bench_servers() {
    local dir=$1 tws
    tests/servers/redis.sh start "$dir/redis" >/dev/null
    tests/servers/twemproxy.sh start "$dir/twemproxy" >/dev/null
    tests/servers/cluster.sh start "$dir/cluster" >/dev/null
    r=$(cat "$dir/redis/port")
    tws=$(paste -sd, "$dir/twemproxy/servers")
    targets=(--target "redis=redis://127.0.0.1:$r"
        --target "multi=$(cat "$dir/redis/url-multi")"
        --target "twemproxy=$(cat "$dir/twemproxy/url")|$tws"
        --target "lua-proxy=$(cat "$dir/twemproxy/url-lua")|$tws"
        --target "cluster=$(cat "$dir/cluster/url")|$(paste -sd, "$dir/cluster/servers")")
    if [[ ${2:-} == tls ]]; then
        tests/servers/tls.sh start "$dir/tls" >/dev/null
        targets+=(--target "tls=$(cat "$dir/tls/url")|$(paste -sd, "$dir/tls/servers")")
    fi
    targets+=(--target "mem=mem://")
}

# bench_capacity DIR: Redis Clusters of 1, 3 and 6 masters, no replicas,
# under DIR/m1, DIR/m3, DIR/m6, for the capacity cells; sets cap_targets
# (--target cap1=..., cap3=..., cap6=...). redis-cli --cluster create wants
# 3 masters or more: the lone master takes every slot itself. The caller
# stops them (tests/servers/stop-all.sh DIR).
bench_capacity() {
    local dir=$1 n p
    cap_targets=()
    (
        . tests/servers/lib.sh
        mkdir -p "$dir/m1"
        for _ in $(seq 1 20); do
            p=$((10000 + RANDOM % 12000))
            port_free "$p" && port_free $((p + 10000)) || continue
            start_at "$dir/m1/n1" "$p" --cluster-enabled yes \
                --cluster-config-file nodes.conf && break
        done
        p=$(cat "$dir/m1/n1/port")
        redis-cli -p "$p" cluster addslotsrange 0 16383 >/dev/null
        for _ in $(seq 1 100); do
            redis-cli -p "$p" cluster info | tr -d '\r' | grep -q '^cluster_state:ok$' && break
            sleep 0.1
        done
        echo "redis-cluster://127.0.0.1:$p" >"$dir/m1/url"
        echo "127.0.0.1:$p" >"$dir/m1/servers"
    ) || return 1
    for n in 3 6; do
        CLUSTER_NODES=$n CLUSTER_REPLICAS=0 tests/servers/cluster.sh start "$dir/m$n" >/dev/null ||
            return 1
    done
    for n in 1 3 6; do
        cap_targets+=(--target "cap$n=$(cat "$dir/m$n/url")|$(paste -sd, "$dir/m$n/servers")")
    done
}
