#!/usr/bin/env bash
# run.sh - builds programs against sluice the three ways users do, and runs
# them: (a) pkg-config from a plain Makefile, (b) CMake's
# find_package(sluice CONFIG), both against BUILD_DIR installed into a
# temporary prefix, and (c) CMake's add_subdirectory of this source tree.
# Each builds a C11, a C++11 and a C++17 program, linked shared and static,
# that checks the library's version against the header's and is denied its
# third request on fixed:2/1s (mem://).
#   tests/consumers/run.sh BUILD_DIR     (a configured and built tree)
set -euo pipefail
if [[ $# -ne 1 || ! -f $1/CMakeCache.txt ]]; then
    echo "usage: tests/consumers/run.sh BUILD_DIR (a built sluice tree)" >&2
    exit 2
fi
build=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
jobs=$(nproc)
passed=0
failed=0
programs=(c-shared c-static c++11-shared c++11-static c++17-shared
    c++17-static)

fail() { # MESSAGE [LOG]
    echo "FAIL $1"
    [[ -n ${2:-} ]] && sed 's/^/     /' "$2"
    failed=$((failed + 1))
}

# Runs the programs of one consumer from DIR: each must exit 0 and say
# "allowed allowed denied", and be linked to libsluice.so or not, as named.
run_programs() { # CONSUMER DIR
    local consumer=$1 dir=$2 p out needed
    for p in "${programs[@]}"; do
        if ! out=$("$dir/$p" "$consumer/$p" 2>&1); then
            fail "$consumer/$p: $out"
            continue
        fi
        needed=$(readelf -d "$dir/$p" | grep -c 'NEEDED.*libsluice\.so' || true)
        if [[ $p == *-shared && $needed -ne 1 ]] ||
            [[ $p == *-static && $needed -ne 0 ]]; then
            fail "$consumer/$p: linked to libsluice.so $needed times"
        elif [[ $out != *": allowed allowed denied" ]]; then
            fail "$consumer/$p: $out"
        else
            echo "ok   $out"
            passed=$((passed + 1))
        fi
    done
}

# Builds a consumer with LOG for its output; on failure, every program of
# it counts as failed.
build_or_fail() { # CONSUMER LOG COMMAND...
    local consumer=$1 log=$2
    shift 2
    if ! "$@" >"$log" 2>&1; then
        fail "$consumer: build failed (${#programs[@]} programs)" "$log"
        failed=$((failed + ${#programs[@]} - 1))
        return 1
    fi
}

cmake_build() { # SOURCE BINARY CMAKE_ARGS...
    cmake -S "$1" -B "$2" "${@:3}" && cmake --build "$2" -j "$jobs"
}

echo "install $build into $prefix"
cmake --install "$build" --prefix "$prefix" >"$tmp/install.log"
pc=$(find "$prefix" -name sluice.pc)
config=$(find "$prefix" -name sluiceConfig.cmake)
if [[ -z $pc || -z $config ]]; then
    echo "FAIL the install has no sluice.pc or sluiceConfig.cmake" >&2
    exit 1
fi
export PKG_CONFIG_PATH=${pc%/sluice.pc}
libdir=$(pkg-config --variable=libdir sluice)
# sluice.h needs nothing but its own directory: no flag of hiredis's or
# OpenSSL's (-I/usr/include/hiredis -D_FILE_OFFSET_BITS=64 once leaked).
cflags=$(pkg-config --cflags sluice)
if [[ $(echo $cflags) != "-I$(pkg-config --variable=includedir sluice)" ]]; then
    fail "pkg-config --cflags sluice: \"$cflags\", want only -I of its include dir"
else
    echo "ok   pkg-config --cflags sluice: $cflags"
    passed=$((passed + 1))
fi
echo "pkg-config --cflags --libs sluice: $(pkg-config --cflags --libs sluice)"
echo "pkg-config --static --libs sluice: $(pkg-config --static --libs sluice)"

# (a) pkg-config and make; the shared programs find the library as an
# installed one is found, here through LD_LIBRARY_PATH, and c-rpath by
# its rpath (docs/API.md, "Linking").
mkdir -p "$tmp/a"
if build_or_fail pkgconfig "$tmp/a.log" \
    make -C "$tmp/a" -f "$here/pkgconfig/Makefile" SRC="$here" -j "$jobs"; then
    LD_LIBRARY_PATH=$libdir run_programs pkgconfig "$tmp/a"
    # The other way a program finds libsluice.so.0 in a prefix: its rpath.
    if out=$(env -u LD_LIBRARY_PATH "$tmp/a/c-rpath" pkgconfig/c-rpath 2>&1) &&
        [[ $out == *": allowed allowed denied" ]]; then
        echo "ok   $out (by its rpath, $libdir)"
        passed=$((passed + 1))
    else
        fail "pkgconfig/c-rpath: $out"
    fi
fi

# (b) find_package(sluice CONFIG) with the prefix in CMAKE_PREFIX_PATH.
if build_or_fail find_package "$tmp/b.log" cmake_build "$here/find_package" \
    "$tmp/b" -DCMAKE_PREFIX_PATH="$prefix" -DSRC="$here"; then
    run_programs find_package "$tmp/b"
fi

# (c) add_subdirectory of the source tree: only the library is built (no
# CLI, tests or examples, so no jansson or cmocka needed).
if build_or_fail add_subdirectory "$tmp/c.log" cmake_build \
    "$here/subdirectory" "$tmp/c" -DSLUICE_SOURCE_DIR="$src" -DSRC="$here"; then
    if [[ -e $tmp/c/sluice/sluice || -e $tmp/c/sluice/quickstart ]]; then
        fail "add_subdirectory: built the CLI or the examples as well"
    fi
    run_programs add_subdirectory "$tmp/c"
fi

echo "$passed passed, $failed failed"
((failed == 0))
