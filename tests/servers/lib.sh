# lib.sh - shared by the server scripts: free loopback ports, starting a
# throwaway redis-server, stopping only pids recorded in a directory.

port_free() {
    ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# SERVER_CPUS (e.g. "0") pins every server to those CPUs (the benchmark
# keeps the load on the others).
pin() {
    if [[ -n ${SERVER_CPUS:-} ]]; then
        taskset -c "$SERVER_CPUS" "$@"
    else
        "$@"
    fi
}

# A port that nothing listens on now (the caller still handles a race).
# Ports stay below Linux's ephemeral range (32768 and up), where the many
# outgoing connections of a test run could hold them.
pick_port() {
    local p
    for _ in $(seq 1 100); do
        p=$((10000 + RANDOM % 12000))
        if port_free "$p"; then
            echo "$p"
            return 0
        fi
    done
    return 1
}

# stop_recorded DIR: stops the process whose pid DIR/pid records.
stop_recorded() {
    local dir=$1 pid
    [[ -f "$dir/pid" ]] || return 0
    pid=$(cat "$dir/pid")
    if kill -0 "$pid" 2>/dev/null; then
        # A server a test froze (SIGSTOP) and could not thaw ends too.
        kill -CONT "$pid" 2>/dev/null || true
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 1 50); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$dir/pid"
}

# debug_opt: the option that allows DEBUG (the fault tests' DEBUG SLEEP):
# Redis 7 refuses DEBUG without it, Redis 6.2 has no such option and allows
# DEBUG by default. REDIS_SERVER_VERSION caches the answer.
debug_opt() {
    if [ -z "${REDIS_SERVER_VERSION:-}" ]; then
        REDIS_SERVER_VERSION=$(redis-server --version | sed -n 's/.*v=\([0-9]*\)\..*/\1/p')
    fi
    [ "${REDIS_SERVER_VERSION:-7}" -ge 7 ] && echo --enable-debug-command yes
    return 0
}

# start_redis DIR [redis-server args...]: a redis-server on a free loopback
# port, no persistence; writes DIR/port and DIR/pid.
start_redis() {
    local dir=$1 port
    shift
    command -v redis-server >/dev/null ||
        { echo "redis-server not installed (apt-get install redis-server)" >&2; return 1; }
    mkdir -p "$dir"
    stop_recorded "$dir"
    for _ in $(seq 1 20); do
        port=$(pick_port) || continue
        pin redis-server --port "$port" --bind 127.0.0.1 --save '' \
            --appendonly no --daemonize yes --dir "$dir" \
            --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" \
            $(debug_opt) "$@" || continue
        for _ in $(seq 1 50); do
            if redis-cli -p "$port" ping 2>/dev/null | grep -q PONG; then
                cp "$dir/redis.pid" "$dir/pid"
                echo "$port" >"$dir/port"
                return 0
            fi
            sleep 0.1
        done
    done
    echo "could not start redis-server; see $dir/redis.log" >&2
    return 1
}

# start_at DIR PORT [args...]: a redis-server on a given port.
start_at() {
    local dir=$1 port=$2
    shift 2
    mkdir -p "$dir"
    echo "$port" >"$dir/port"
    restart_redis "$dir" "$@"
}

# restart_redis DIR: starts the redis of DIR again on its recorded port.
restart_redis() {
    local dir=$1 port
    port=$(cat "$dir/port")
    shift
    pin redis-server --port "$port" --bind 127.0.0.1 --save '' \
        --appendonly no --daemonize yes --dir "$dir" \
        --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" \
        $(debug_opt) "$@"
    for _ in $(seq 1 50); do
        if redis-cli -p "$port" ping 2>/dev/null | grep -q PONG; then
            cp "$dir/redis.pid" "$dir/pid"
            return 0
        fi
        sleep 0.1
    done
    return 1
}

# make_cert DIR NAME [CA DAYS SAN]: DIR/NAME.key and DIR/NAME.crt, signed by
# DIR/CA (a new self-signed CA when CA is not given).
make_cert() {
    local dir=$1 name=$2 ca=${3:-} days=${4:-2} san=${5:-}
    command -v openssl >/dev/null ||
        { echo "openssl not installed (apt-get install openssl)" >&2; return 1; }
    if [[ -z $ca ]]; then
        openssl req -x509 -newkey rsa:2048 -nodes -keyout "$dir/$name.key" \
            -out "$dir/$name.crt" -days 2 -subj "/CN=sluice test $name" 2>/dev/null
        return
    fi
    openssl req -newkey rsa:2048 -nodes -keyout "$dir/$name.key" \
        -out "$dir/$name.csr" -subj "/CN=$name" 2>/dev/null
    printf 'subjectAltName=%s\n' "$san" >"$dir/$name.ext"
    openssl x509 -req -in "$dir/$name.csr" -CA "$dir/$ca.crt" \
        -CAkey "$dir/$ca.key" -CAcreateserial -out "$dir/$name.crt" \
        -days "$days" -extfile "$dir/$name.ext" 2>/dev/null
}

# make_certs DIR: a CA (ca), a server certificate for 127.0.0.1 and
# localhost (server) and a client certificate (client), all signed by it.
make_certs() {
    make_cert "$1" ca &&
        make_cert "$1" server ca 2 "IP:127.0.0.1,DNS:localhost" &&
        make_cert "$1" client ca 2 "DNS:client"
}
