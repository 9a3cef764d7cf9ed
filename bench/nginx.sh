#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# nginx.sh - the nginx module beside nginx's own limit_req, in one run, with
# wrk against one nginx (one worker) serving a small static answer on
# loopback (empty_gif: 43 bytes, in the content phase, after the limits):
# no limit; limit_req (the local floor: a shared-memory zone); the module
# on mem://; on redis:// with 10,000 keys drawn uniformly, with one hot
# key, with one hot key and reservations (reserve_ms=100); and through
# twemproxy. No limit ever denies (their limits are far above the rate):
# the cells measure the cost of deciding. The cells run in turn, ROUNDS
# (3) times over, each told by its median round: requests/s, p50, p99 and
# p99.9 latency (wrk's, by a Lua done() hook), and Redis CPU per request
# (INFO cpu, user and system, before and after). Then the p99 that no
# limit, limit_req and the module on redis:// (uniform keys) show at a
# fixed rate, half the uniform cell's (paced by wrk's delay(): wrk2 is not
# in Debian). Writes bench/out/nginx.md.
#   bench/nginx.sh [--seconds S] [--connections C]   S: a cell's, in all
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=10
conns=50
while (($#)); do
    case "$1" in
    --seconds) seconds=$2; shift 2 ;;
    --connections) conns=$2; shift 2 ;;
    *) echo "usage: bench/nginx.sh [--seconds S] [--connections C]" >&2; exit 2 ;;
    esac
done
out=$(pwd)/bench/out
work=$out/nginx
mkdir -p "$out"
rm -rf "$work"
mkdir -p "$work/logs"

scripts/install-deps.sh --test
if ! command -v wrk >/dev/null; then
    sudo=""
    [[ $(id -u) -ne 0 ]] && sudo=sudo
    echo "nginx.sh: installing wrk"
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends wrk >/dev/null
fi

cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release -DSLUICE_BUILD_TESTS=OFF \
    -DSLUICE_BUILD_EXAMPLES=OFF >/dev/null
cmake --build build-bench -j "$(nproc)" --target nginx_module >/dev/null
module=$(pwd)/build-bench/nginx/objs/ngx_http_sluice_module.so

servers=$work/servers
trap 'tests/servers/stop-all.sh "$servers"; [[ -f $work/nginx.pid ]] && kill "$(cat "$work/nginx.pid")" 2>/dev/null; true' EXIT
tests/servers/redis.sh start "$servers/redis" >/dev/null
tests/servers/twemproxy.sh start "$servers/twemproxy" >/dev/null
rport=$(cat "$servers/redis/port")
tw=$(cat "$servers/twemproxy/url")

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
cells=(none limit_req mem redis_uniform redis_hot redis_hot_reserve twemproxy)
declare -A ports
for c in "${cells[@]}"; do ports[$c]=$(port); done
big=1000000000 # never reached: the cells measure deciding, not denying
user=""
[[ $(id -u) -eq 0 ]] && user="user root root;"
cat >"$work/nginx.conf" <<EOF
load_module $module;
$user
worker_processes 1;
error_log $work/logs/error.log warn;
pid $work/nginx.pid;
events { worker_connections 4096; }
http {
    access_log off;
    keepalive_requests 1000000;
    sluice_backend mem mem://;
    sluice_backend redis "redis://127.0.0.1:$rport?timeout_ms=1000";
    sluice_backend hot "redis://127.0.0.1:$rport?timeout_ms=1000&reserve_ms=100&reserve_share=50";
    sluice_backend tw "$tw?timeout_ms=1000";
    limit_req_zone \$http_x_key zone=floor:64m rate=${big}r/s;
    sluice_zone \$http_x_key zone=m backend=mem rules=fixed:$big/1m;
    sluice_zone \$http_x_key zone=u backend=redis rules=fixed:$big/1m;
    sluice_zone "hot" zone=h backend=redis rules=fixed:$big/1m;
    sluice_zone "hot" zone=hr backend=hot rules=fixed:$big/1m;
    sluice_zone \$http_x_key zone=t backend=tw rules=fixed:$big/1m;
    server { listen 127.0.0.1:${ports[none]}; location / { empty_gif; } }
    server { listen 127.0.0.1:${ports[limit_req]};
             location / { limit_req zone=floor burst=100000 nodelay; empty_gif; } }
    server { listen 127.0.0.1:${ports[mem]};
             location / { sluice_limit zone=m; empty_gif; } }
    server { listen 127.0.0.1:${ports[redis_uniform]};
             location / { sluice_limit zone=u; empty_gif; } }
    server { listen 127.0.0.1:${ports[redis_hot]};
             location / { sluice_limit zone=h; empty_gif; } }
    server { listen 127.0.0.1:${ports[redis_hot_reserve]};
             location / { sluice_limit zone=hr; empty_gif; } }
    server { listen 127.0.0.1:${ports[twemproxy]};
             location / { sluice_limit zone=t; empty_gif; } }
}
EOF
/usr/sbin/nginx -p "$work" -c "$work/nginx.conf" -t -q
/usr/sbin/nginx -p "$work" -c "$work/nginx.conf"

# Keys: 10,000 drawn uniformly, in the X-Key header.
cat >"$work/keys.lua" <<'EOF'
math.randomseed(os.time())
request = function()
    wrk.headers["X-Key"] = "k" .. math.random(1, 10000)
    return wrk.format(nil, "/")
end
done = function(summary, latency, requests)
    io.write(string.format("LAT %d %d %d\n", latency:percentile(50),
        latency:percentile(99), latency:percentile(99.9)))
end
EOF

redis_cpu() { # PORT: used_cpu_user + used_cpu_sys, in µs
    redis-cli -p "$1" info cpu | tr -d '\r' | awk -F: '
        /^used_cpu_(user|sys):/ { t += $2 } END { printf "%d\n", t * 1000000 }'
}
tw_ports=$(cut -d: -f2 "$servers/twemproxy/servers")

# The cells in turn, ROUNDS times over (seconds / ROUNDS each): a load
# beside the bench that comes and goes then falls on every cell alike; each
# cell is told by its median round (by requests/s).
rounds=${ROUNDS:-3}
each=$(awk -v s="$seconds" -v r="$rounds" 'BEGIN { printf "%.0f", s / r < 1 ? 1 : s / r }')
for ((round = 1; round <= rounds; round++)); do
    for c in "${cells[@]}"; do
        ps=$rport
        [[ $c == twemproxy ]] && ps=$tw_ports
        before=0
        for p in $ps; do before=$((before + $(redis_cpu "$p"))); done
        wrk -t2 -c"$conns" -d"${each}s" -s "$work/keys.lua" \
            "http://127.0.0.1:${ports[$c]}/" >"$work/$c.$round.wrk" 2>&1
        after=0
        for p in $ps; do after=$((after + $(redis_cpu "$p"))); done
        echo $((after - before)) >"$work/$c.$round.cpu"
        non2xx=$(awk '/Non-2xx/ { print $5 }' "$work/$c.$round.wrk")
        [[ -z $non2xx ]] || { echo "nginx.sh: $c answered $non2xx non-2xx" >&2; cat "$work/$c.$round.wrk" >&2; exit 1; }
    done
done
printf '| cell | requests/s (rounds) | p50 ms | p99 ms | p99.9 ms | Redis CPU µs/request |\n' >"$work/table.md"
printf '|---|---|---|---|---|---|\n' >>"$work/table.md"
declare -A rps
for c in "${cells[@]}"; do
    all=""
    for ((round = 1; round <= rounds; round++)); do
        r=$(awk '/^Requests\/sec:/ { printf "%d", $2 }' "$work/$c.$round.wrk")
        all+="$r $round"$'\n'
    done
    med=$(printf '%s' "$all" | sort -n | sed -n "$(((rounds + 1) / 2))p" | cut -d' ' -f2)
    f=$work/$c.$med.wrk
    r=$(awk '/^Requests\/sec:/ { printf "%d", $2 }' "$f")
    rps[$c]=$r
    reqs=$(awk '/requests in/ { print $1 }' "$f")
    read -r p50 p99 p999 < <(awk '/^LAT / { print $2, $3, $4 }' "$f")
    cpu="-"
    [[ $c == none || $c == limit_req || $c == mem ]] ||
        cpu=$(awk -v u="$(cat "$work/$c.$med.cpu")" -v n="$reqs" 'BEGIN { printf "%.2f", u / n }')
    printf '| %s | %d (%s) | %.2f | %.2f | %.2f | %s |\n' "$c" "$r" \
        "$(printf '%s' "$all" | cut -d' ' -f1 | paste -sd/)" \
        "$(awk -v x="$p50" 'BEGIN { print x / 1000 }')" \
        "$(awk -v x="$p99" 'BEGIN { print x / 1000 }')" \
        "$(awk -v x="$p999" 'BEGIN { print x / 1000 }')" "$cpu" >>"$work/table.md"
done
ratio() { awk -v a="${rps[$1]}" -v b="${rps[$2]}" 'BEGIN { printf "%.2f", a / b }'; }

# At fixed rates: half, a quarter and an eighth of the uniform redis://
# cell's requests/s, from connections that each wait 10 ms between an
# answer and their next request (wrk's delay(); wrk2's -R is not in
# Debian): no limit, limit_req, the module on mem:// (the request's
# suspension and resumption without Redis), then on redis://, uniform
# keys, at the same rate. The lower rates tell what the added p99 owes to the
# machine's load (two cores for wrk, nginx and Redis) rather than to the
# module: it falls with the load if it is the scheduler's.
sed 's/^done = /delay = function() return 10 end\ndone = /' "$work/keys.lua" >"$work/paced.lua"
printf '| cell | at requests/s | achieved | p50 ms | p99 ms | p99.9 ms |\n|---|---|---|---|---|---|\n' \
    >"$work/paced.md"
declare -A p99s
added=""
for div in 2 4 8; do
    rate=$((rps[redis_uniform] / div))
    pace_conns=$(((rate * 105 + 9999) / 10000))
    for c in none limit_req mem redis_uniform; do
        wrk -t2 -c"$pace_conns" -d"${seconds}s" -s "$work/paced.lua" \
            "http://127.0.0.1:${ports[$c]}/" >"$work/$c.paced" 2>&1
        r=$(awk '/^Requests\/sec:/ { printf "%d", $2 }' "$work/$c.paced")
        read -r p50 p99 p999 < <(awk '/^LAT / { print $2, $3, $4 }' "$work/$c.paced")
        p99s[$c]=$p99
        printf '| %s | %d (1/%d) | %d | %.2f | %.2f | %.2f |\n' "$c" "$rate" "$div" "$r" \
            "$(awk -v x="$p50" 'BEGIN { print x / 1000 }')" \
            "$(awk -v x="$p99" 'BEGIN { print x / 1000 }')" \
            "$(awk -v x="$p999" 'BEGIN { print x / 1000 }')" >>"$work/paced.md"
    done
    added+="- the module's added p99 at 1/$div of the uniform cell's rate ($pace_conns connections, 10 ms apart): "
    added+="redis:// $(awk -v a="${p99s[redis_uniform]}" -v b="${p99s[none]}" 'BEGIN { printf "%.2f", (a - b) / 1000 }') ms"
    [[ $div == 2 ]] && added+=" (target <= 1 ms)"
    added+=", mem:// $(awk -v a="${p99s[mem]}" -v b="${p99s[none]}" 'BEGIN { printf "%.2f", (a - b) / 1000 }') ms"
    added+=", limit_req $(awk -v a="${p99s[limit_req]}" -v b="${p99s[none]}" 'BEGIN { printf "%.2f", (a - b) / 1000 }') ms"
    added+=$'\n'
done
{
    echo "# nginx: the module beside limit_req"
    echo
    echo "wrk -t2 -c$conns, $rounds rounds of ${each} s a cell (the median round shown), one nginx worker, $(nproc) cores, $(date -u +%Y-%m-%d)."
    echo
    cat "$work/table.md"
    echo
    echo "- one hot key with reservations / limit_req: $(ratio redis_hot_reserve limit_req) (target >= 0.9)"
    echo "- uniform keys on redis:// / limit_req: $(ratio redis_uniform limit_req) (target >= 0.5)"
    echo "- mem:// / limit_req: $(ratio mem limit_req); limit_req / no limit: $(ratio limit_req none)"
    echo
    cat "$work/paced.md"
    echo
    printf '%s' "$added"
} >"$out/nginx.md"
cat "$out/nginx.md"
