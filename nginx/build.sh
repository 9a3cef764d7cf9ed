#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# build.sh - builds ngx_http_sluice_module.so, a dynamic module for the
# nginx whose source tree for modules is NGINX_SRC (Debian's nginx-dev:
# /usr/share/nginx/src, configured with --with-compat, whose conf_flags
# give the configure arguments of Debian's own nginx, so that the module's
# signature matches the binary's). nginx's configure and make do the
# build, as Debian's dh_nginx does: the source tree is only read; objects
# and the module go to OUT_DIR. libsluice is linked statically, its
# symbols kept inside the module (--exclude-libs): the module needs no
# libsluice.so.0 beside nginx, and another copy of sluice in the process
# cannot take its calls.
#   nginx/build.sh OUT_DIR SLUICE_INCLUDE_DIR LIBSLUICE_A [CC]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: build.sh OUT_DIR SLUICE_INCLUDE_DIR LIBSLUICE_A [CC]}
inc=${2:?usage: build.sh OUT_DIR SLUICE_INCLUDE_DIR LIBSLUICE_A [CC]}
lib=${3:?usage: build.sh OUT_DIR SLUICE_INCLUDE_DIR LIBSLUICE_A [CC]}
cc=${4:-cc}
src=${NGINX_SRC:-/usr/share/nginx/src}

[[ -x $src/configure && -f $src/conf_flags ]] || {
    echo "build.sh: no nginx source for modules in $src (apt-get install nginx-dev)" >&2
    exit 1
}
mkdir -p "$out"
out=$(cd "$out" && pwd)
inc=$(cd "$inc" && pwd)
lib=$(cd "$(dirname "$lib")" && pwd)/$(basename "$lib")

# What libsluice.a needs, as its own build links it.
export SLUICE_INCS=$inc
export SLUICE_LIBS="$lib $(pkg-config --libs hiredis openssl yaml-0.1) -lpthread -Wl,--exclude-libs,$(basename "$lib")"

# configure once per set of arguments (it takes seconds: it probes the
# system as nginx's own build did); make every time (it rebuilds what
# changed).
# shellcheck disable=SC1091 # Debian's file, read at build time
. "$src/conf_flags"
args=(--with-cc="$cc" --with-cc-opt="-g -O2 -fPIC -fstack-protector-strong -D_FORTIFY_SOURCE=2"
    --with-ld-opt="-fPIC -Wl,-z,relro -Wl,-z,now"
    "${NGX_CONF_FLAGS[@]}" --add-dynamic-module="$here" --builddir="$out")
stamp="$(printf '%q ' "${args[@]}") $SLUICE_LIBS $(cat "$here/config")"
if [[ ! -f $out/Makefile || $(cat "$out/configure.args" 2>/dev/null) != "$stamp" ]]; then
    (cd "$src" && ./configure "${args[@]}") >"$out/configure.log" 2>&1 || {
        tail -20 "$out/configure.log" >&2
        echo "build.sh: nginx's configure failed; see $out/configure.log" >&2
        exit 1
    }
    printf '%s' "$stamp" >"$out/configure.args"
fi
# The link does not know libsluice.a: the module is linked again each time.
rm -f "$out/ngx_http_sluice_module.so"
make -s -f "$out/Makefile" -C "$src" modules
echo "build.sh: $out/ngx_http_sluice_module.so"
