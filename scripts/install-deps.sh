#!/usr/bin/env bash
# install-deps.sh - installs, from Debian's packages, whatever sluice needs to
# build and test and is not installed yet. Safe to run again.
#   scripts/install-deps.sh          build and demo
#   scripts/install-deps.sh --test   also the servers and tools the tests use
set -euo pipefail

pkgs=(build-essential cmake pkg-config libhiredis-dev libssl-dev libyaml-dev
    libjansson-dev)
if [[ ${1:-} == --test ]]; then
    # Every package that scripts/test.sh and the tests use, named: a
    # fresh Debian 12 has none of them, and --no-install-recommends brings
    # nothing more. clang alone lacks the sanitizer and libFuzzer runtimes
    # (libclang_rt.*.a, in libclang-rt-14-dev, only recommended by clang);
    # scripts/preflight.sh checks each of these before any build.
    pkgs+=(
        libcmocka-dev                    # the unit and integration tests
        redis-server redis-tools         # the servers, redis-cli
        nutcracker                       # twemproxy
        openssl                          # the TLS tests' certificates
        valgrind                         # the valgrind pass
        clang clang-format               # the clang pass, the format check
        libclang-rt-14-dev               # clang's -fsanitize=fuzzer,address,...
        libevent-dev libuv1-dev          # the event-loop adapters' tests
        python3 python3-prometheus-client # the model, the metrics check
        prometheus                       # promtool: the metrics pages' check
        curl                             # the example HTTP service's test
        nginx-dev nginx-light            # the nginx module: its build, nginx
    )
fi

missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
        missing+=("$p")
done
if [[ ${#missing[@]} -eq 0 ]]; then
    exit 0
fi
sudo=""
if [[ $(id -u) -ne 0 ]]; then
    sudo="sudo"
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# nginx is here for the module's tests, which start their own on free
# ports: the one the package starts at install (port 80) is stopped, and
# kept from starting at boot.
if [[ " ${missing[*]} " == *" nginx-light "* ]]; then
    if [[ -d /run/systemd/system ]]; then
        $sudo systemctl disable --now nginx.service >/dev/null 2>&1 || true
    elif [[ -x /etc/init.d/nginx ]]; then
        $sudo /etc/init.d/nginx stop >/dev/null 2>&1 || true
    fi
fi
# Debian's prometheus package is here for its promtool only; under
# systemd its server starts at install (port 9090): stop it, and keep it
# from starting at boot.
if [[ " ${missing[*]} " == *" prometheus "* && -d /run/systemd/system ]]; then
    $sudo systemctl disable --now prometheus.service >/dev/null 2>&1 || true
fi
