#!/usr/bin/env bash
# build-deb.sh - builds the Debian packages libsluice0, libsluice-dev,
# sluice-tools and libnginx-mod-http-sluice from a copy of the tree
# (never in the tree itself: dpkg-buildpackage writes into debian/ and puts
# the .debs in the parent directory), runs lintian on them, and with
# --install-check installs them, checks that they work, and removes them
# again.
#   scripts/build-deb.sh [--worktree] [--install-check] [--out DIR]
#     --worktree       copy the working tree (tracked and new files, not
#                      ignored ones) instead of the last commit (HEAD)
#     --install-check  apt-get install the .debs, check pkg-config, the CMake
#                      package, man 1 and man 3 sluice, the command and the
#                      nginx module (nginx -t loads it), then
#                      apt-get purge them
#     --out DIR        where to build (default /tmp/sluice-pkg); emptied first
# Needs root (or sudo) for apt-get. The .debs and the lintian report end up
# in DIR.
set -euo pipefail
cd "$(dirname "$0")/.."

from=head
install_check=0
out=/tmp/sluice-pkg
while [[ $# -gt 0 ]]; do
    case $1 in
    --worktree) from=worktree ;;
    --install-check) install_check=1 ;;
    --out)
        out=${2:?--out needs a directory}
        shift
        ;;
    *)
        echo "usage: scripts/build-deb.sh [--worktree] [--install-check] [--out DIR]" >&2
        exit 2
        ;;
    esac
    shift
done

sudo=""
if [[ $(id -u) -ne 0 ]]; then
    sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive

# The packaging tools, then the package's own Build-Depends.
need=()
for p in dpkg-dev debhelper lintian devscripts; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
        need+=("$p")
done
if [[ ${#need[@]} -gt 0 ]]; then
    echo "build-deb: installing ${need[*]}"
    $sudo apt-get update -qq
    $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

version=$(dpkg-parsechangelog -l debian/changelog -S Version)
src=$(dpkg-parsechangelog -l debian/changelog -S Source)
case $out in
/ | "" | "$PWD" | "$PWD"/*)
    echo "build-deb: --out must be outside the source tree" >&2
    exit 2
    ;;
esac
work=$out/$src-$version
rm -rf "$out"
mkdir -p "$work"
echo "== copy ($from) to $work"
if [[ $from == head ]]; then
    git archive --format=tar HEAD | tar -x -C "$work"
else
    git ls-files -z --cached --others --exclude-standard |
        while IFS= read -r -d '' f; do [[ -e $f ]] && printf '%s\0' "$f"; done |
        tar --null -T - -cf - | tar -x -C "$work"
fi

echo "== build dependencies"
if ! (cd "$work" && dpkg-checkbuilddeps >/dev/null 2>&1); then
    $sudo apt-get update -qq
    $sudo apt-get build-dep -y -qq "$work" >/dev/null
fi

echo "== dpkg-buildpackage -us -uc -b"
(cd "$work" && dpkg-buildpackage -us -uc -b) >"$out/build.log" 2>&1 || {
    tail -40 "$out/build.log"
    echo "build-deb: the build failed; see $out/build.log" >&2
    exit 1
}
grep -E '^(100% tests passed|[0-9]+% tests passed|The following tests FAILED)' \
    "$out/build.log" || true
changes=$(ls "$out"/"${src}"_"${version}"_*.changes)
for deb in "$out"/*.deb; do
    echo "== $(basename "$deb")"
    dpkg-deb -c "$deb" | awk '{print $6, $7, $8}'
done

echo "== lintian"
# Every tag, pedantic and informational included; errors and warnings fail.
lintian --pedantic --display-info --display-experimental --info \
    --fail-on error,warning "$changes" | tee "$out/lintian.txt"
echo "build-deb: lintian: $(grep -c '^[EWIPX]: ' "$out/lintian.txt" || true) tags" \
    "(see $out/lintian.txt)"

if [[ $install_check -eq 1 ]]; then
    echo "== install check"
    pkgs=(libsluice0 libsluice-dev sluice-tools libnginx-mod-http-sluice)
    for p in "${pkgs[@]}"; do
        if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
            echo "build-deb: $p is installed already; not touching it" >&2
            exit 1
        fi
    done
    trap '$sudo apt-get purge -y -qq "${pkgs[@]}" >/dev/null 2>&1 || true' EXIT
    (cd "$out" && $sudo apt-get install -y -qq ./*.deb >/dev/null)
    pkg-config --modversion sluice
    pkg-config --cflags --libs sluice
    test "$(pkg-config --modversion sluice)" = "${version%%-*}"
    man -w 3 sluice
    man 3 sluice | grep -q 'sluice_acquire_many'
    man -w 3 sluice_acquire_many # one link per function
    man -w 1 sluice
    man 1 sluice | grep -q 'SLUICE_PASSWORD'
    sluice --version
    sluice check --rule fixed:2/1s --key k >/dev/null
    # A program built against the installed package, both ways.
    probe=$(mktemp -d)
    cp "$work/examples/quickstart.c" "$probe/"
    cc -o "$probe/quickstart" "$probe/quickstart.c" $(pkg-config --cflags --libs sluice)
    "$probe/quickstart" | grep -q '^allowed, 60 left$'
    cat >"$probe/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.18)
project(probe C)
find_package(sluice 0.1 CONFIG REQUIRED)
add_executable(quickstart quickstart.c)
target_link_libraries(quickstart PRIVATE sluice::sluice)
CMAKE
    cmake -S "$probe" -B "$probe/build" >/dev/null
    cmake --build "$probe/build" >/dev/null
    "$probe/build/quickstart" | grep -q '^allowed, 60 left$'
    rm -rf "$probe"
    # The nginx module: in nginx's module directory, its load file in
    # modules-available (dh_nginx), and loaded by nginx -t.
    test -f /usr/lib/nginx/modules/ngx_http_sluice_module.so
    grep -q 'ngx_http_sluice_module.so' /usr/share/nginx/modules-available/mod-http-sluice.conf
    probe=$(mktemp -d)
    printf 'load_module /usr/lib/nginx/modules/ngx_http_sluice_module.so;\nevents {}\nhttp { sluice_backend m mem://; sluice_zone $uri zone=z rules=fixed:1/1s; }\n' \
        >"$probe/nginx.conf"
    /usr/sbin/nginx -t -q -p "$probe" -c "$probe/nginx.conf" -g "error_log stderr; pid $probe/pid;"
    rm -rf "$probe"
    # purge: the module's load file is enabled in /etc/nginx (dh_nginx).
    $sudo apt-get purge -y -qq "${pkgs[@]}" >/dev/null
    trap - EXIT
    echo "build-deb: installed, checked (pkg-config, CMake package, man 1 and 3," \
        "sluice, the nginx module loaded by nginx -t), removed"
fi
echo "build-deb: packages in $out"
