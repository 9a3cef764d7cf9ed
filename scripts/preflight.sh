#!/usr/bin/env bash
# preflight.sh - checks, before any build, that every tool and toolchain
# feature scripts/test.sh uses is here and works: it compiles, links and
# runs one tiny program per feature (gcc and clang, each sanitizer the
# passes use, libFuzzer, every library the build links, valgrind) and looks
# for each command. The first that fails stops it, naming the Debian
# package that provides it (scripts/install-deps.sh --test installs them
# all). Takes a few seconds.
#   scripts/preflight.sh     exit 0: all present; 1: the message names
#                            the missing package
set -euo pipefail

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
checked=0

# The Debian package a failure points to is named in each check; the
# versioned ones follow the compiler that is installed (Debian 12: gcc 12,
# clang 14).
gccv=$(gcc -dumpversion 2>/dev/null | cut -d. -f1 || true)
clangv=$(clang -dumpversion 2>/dev/null | cut -d. -f1 || true)

missing() { # WHAT PACKAGE [LOG]
    echo "preflight: $1 does not work: install the Debian package $2" \
        "(scripts/install-deps.sh --test installs every package the tests use)" >&2
    if [[ -n ${3:-} && -s $3 ]]; then
        sed -n '1,6s/^/preflight:   /p' "$3" >&2
    fi
    exit 1
}

need_cmd() { # COMMAND PACKAGE
    command -v "$1" >/dev/null 2>&1 || missing "the command $1" "$2"
    checked=$((checked + 1))
}

# build_run WHAT PACKAGE COMPILER [FLAGS...]: compiles and links
# $work/prog.c (or prog.cpp for c++) with the flags, and runs it.
build_run() {
    local what=$1 pkg=$2 cc=$3 src=$work/prog.c
    shift 3
    [[ $cc == c++ || $cc == g++ ]] && src=$work/prog.cpp
    rm -f "$work/prog"
    "$cc" "$src" -o "$work/prog" "$@" >"$work/log" 2>&1 ||
        missing "$what (cannot link a tiny program)" "$pkg" "$work/log"
    "$work/prog" >"$work/log" 2>&1 </dev/null ||
        missing "$what (a tiny program built with it fails to run)" "$pkg" \
            "$work/log"
    checked=$((checked + 1))
}

# The compilers, make and the binutils (build-essential), cmake.
need_cmd gcc build-essential
need_cmd make build-essential
need_cmd readelf binutils
need_cmd cmake cmake
need_cmd pkg-config pkg-config
cat >"$work/prog.c" <<'EOF'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    char *p = malloc(16);

    (void)argv;
    if (p == NULL)
        return 1;
    snprintf(p, 16, "%d", argc);
    printf("%s\n", p);
    free(p);
    return strcmp(argv[0], "") == 0;
}
EOF
cat >"$work/prog.cpp" <<'EOF'
#include <string>

int main()
{
    std::string s("sluice");
    return s.size() == 6 ? 0 : 1;
}
EOF
build_run "gcc (C11)" build-essential gcc -std=c11
build_run "g++ (C++17)" build-essential g++ -std=c++17
# gcc's sanitizers: the ASan+UBSan and TSan passes.
build_run "gcc -fsanitize=address,undefined" "libgcc-${gccv:-12}-dev" \
    gcc -fsanitize=address,undefined -fno-omit-frame-pointer
build_run "gcc -fsanitize=thread" "libgcc-${gccv:-12}-dev" \
    gcc -fsanitize=thread
# clang: the clang pass, and the fuzz targets (libFuzzer with ASan and
# UBSan; the runtimes are libclang_rt.*.a, which clang alone lacks).
need_cmd clang clang
build_run "clang (C11)" clang clang -std=c11
cat >"$work/fuzz.c" <<'EOF'
#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return size > 0 && data[0] == 0xff ? 0 : 0;
}
EOF
rm -f "$work/fuzz"
clang "$work/fuzz.c" -o "$work/fuzz" -fsanitize=fuzzer,address,undefined \
    >"$work/log" 2>&1 ||
    missing "clang -fsanitize=fuzzer,address,undefined (cannot link a tiny fuzz target)" \
        "libclang-rt-${clangv:-14}-dev" "$work/log"
"$work/fuzz" -runs=10 >"$work/log" 2>&1 ||
    missing "clang -fsanitize=fuzzer (a tiny fuzz target fails to run)" \
        "libclang-rt-${clangv:-14}-dev" "$work/log"
checked=$((checked + 1))
build_run "clang -fsanitize=address,undefined" "libclang-rt-${clangv:-14}-dev" \
    clang -fsanitize=address,undefined -fno-omit-frame-pointer
need_cmd clang-format clang-format

# The libraries the build and the tests link, each through pkg-config.
lib() { # PKG-CONFIG-NAME PACKAGE HEADER CALL
    pkg-config --exists "$1" || missing "pkg-config $1" "$2"
    printf '#include <stddef.h>\n#include <stdarg.h>\n#include <setjmp.h>\n#include <%s>\nint main(void)\n{\n    %s;\n    return 0;\n}\n' \
        "$3" "$4" >"$work/prog.c"
    # shellcheck disable=SC2046 # pkg-config gives several words
    build_run "the library $1" "$2" gcc $(pkg-config --cflags "$1") \
        $(pkg-config --libs "$1")
}
lib hiredis libhiredis-dev hiredis/hiredis.h 'redisFree(NULL)'
lib openssl libssl-dev openssl/ssl.h 'OPENSSL_init_ssl(0, NULL)'
lib yaml-0.1 libyaml-dev yaml.h '(void)yaml_get_version_string()'
lib jansson libjansson-dev jansson.h 'json_decref(json_object())'
lib cmocka libcmocka-dev cmocka.h 'cmocka_set_message_output(CM_OUTPUT_STDOUT)'
lib libevent libevent-dev event2/event.h 'event_base_free(event_base_new())'
lib libuv libuv1-dev uv.h '(void)uv_version()'

# valgrind, on the tiny C program: no error, no leak.
need_cmd valgrind valgrind
printf 'int main(void)\n{\n    return 0;\n}\n' >"$work/prog.c"
gcc -g "$work/prog.c" -o "$work/prog"
valgrind --quiet --error-exitcode=99 --leak-check=full "$work/prog" \
    >"$work/log" 2>&1 || missing "valgrind (on a tiny program)" valgrind "$work/log"
checked=$((checked + 1))

# The servers and the tools the tests run.
need_cmd redis-server redis-server
need_cmd redis-cli redis-tools
need_cmd nutcracker nutcracker
need_cmd openssl openssl
need_cmd curl curl
need_cmd python3 python3
need_cmd promtool prometheus
# The nginx module: nginx's source tree for modules (its build) and nginx
# (its tests); without them the module and its tests would be skipped.
[[ -x /usr/share/nginx/src/configure && -f /usr/share/nginx/src/conf_flags ]] ||
    missing "nginx's module source tree (/usr/share/nginx/src)" nginx-dev
checked=$((checked + 1))
[[ -x /usr/sbin/nginx ]] || missing "the command /usr/sbin/nginx" nginx-light
checked=$((checked + 1))
# Debian's Python, as tests/test_stats.sh runs it.
py=python3
[[ -x /usr/bin/python3 ]] && py=/usr/bin/python3
"$py" -c 'import prometheus_client' 2>"$work/log" ||
    missing "python3's module prometheus_client" python3-prometheus-client "$work/log"
checked=$((checked + 1))
echo "preflight: $checked tools and toolchain features present and working"
