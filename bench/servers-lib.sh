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
