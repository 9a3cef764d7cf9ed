#!/usr/bin/env bash
# install-deps.sh - installs, from Debian's packages, whatever sluice needs to
# build and test and is not installed yet. Safe to run again.
#   scripts/install-deps.sh          build and demo
#   scripts/install-deps.sh --test   also the servers and tools the tests use
set -euo pipefail

pkgs=(build-essential cmake pkg-config libhiredis-dev libssl-dev libjansson-dev)
if [[ ${1:-} == --test ]]; then
    # libevent and libuv: the event-loop adapters' tests and the bench.
    pkgs+=(libcmocka-dev redis-server redis-tools nutcracker openssl valgrind clang-format clang libfuzzer-14-dev libevent-dev libuv1-dev python3-prometheus-client curl)
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
