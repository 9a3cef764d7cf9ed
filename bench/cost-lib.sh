# cost-lib.sh - shared by bench/redis-cost.sh and bench/cluster-cost.sh:
# a redis-server under callgrind, and the instructions inside
# evalShaCommand per decision of a command run against it. Sourced, with
# n (decisions a cell) set.

# cost_init: installs what is missing, builds the driver (sets drv), makes
# a directory for the dumps (sets out), and stops the server and removes
# it on exit.
cost_init() {
    cost_build
    out=$(mktemp -d)
    trap 'cost_stop; rm -rf "$out"' EXIT
}

# cost_build: installs what is missing, builds the driver; sets drv.
cost_build() {
    scripts/install-deps.sh --test
    cmake -S . -B build-cost -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DSLUICE_BUILD_BENCH=ON -DSLUICE_BUILD_TESTS=OFF >/dev/null
    cmake --build build-cost --target sluice_cost_driver -j "$(nproc)" >/dev/null
    drv=build-cost/sluice-cost-driver
}

# cost_server DIR [redis-server args...]: starts a redis-server under
# callgrind writing its dumps to DIR; sets vpid, port and floor (the SHA of
# the EVALSHA floor: INCR + PEXPIRE, itself a fixed window).
cost_server() {
    local dir=$1
    shift
    cost_dir=$dir
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    (cd "$dir" && exec valgrind --tool=callgrind --callgrind-out-file="$dir/cg.%p" \
        redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
        "$@" >/dev/null 2>&1) &
    vpid=$!
    for _ in $(seq 100); do
        redis-cli -p "$port" PING >/dev/null 2>&1 && break
        sleep 0.2
    done
    floor=$(redis-cli -p "$port" SCRIPT LOAD \
        "local n = redis.call('INCR', KEYS[1]) redis.call('PEXPIRE', KEYS[1], ARGV[1]) return n")
}

# cost_stop: stops the server of cost_server.
cost_stop() {
    if [[ -n ${vpid:-} ]]; then
        redis-cli -p "$port" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
        wait "$vpid" 2>/dev/null || true
        vpid=
    fi
}

# cost_count NAME CMD...: instructions per decision inside evalShaCommand
# while CMD runs (after one warm-up run: a hot key reaches its steady state).
cost_count() {
    local name=$1 f ir
    shift
    "$@" >/dev/null 2>&1
    callgrind_control -z "$vpid" >/dev/null 2>&1
    "$@" >/dev/null
    callgrind_control -d "$name" "$vpid" >/dev/null 2>&1
    sleep 0.5
    f=$(grep -lx "desc: Trigger: dump $name" "$cost_dir"/cg.*.* | head -1)
    ir=$(callgrind_annotate --inclusive=yes "$f" 2>/dev/null |
        awk '/evalShaCommand/ {gsub(",", "", $1); print $1; exit}')
    echo $((ir / n))
}
