#!/usr/bin/env bash
# check-readme.sh - the README's API listing (the ```c block of the section
# "## The C API") must be examples/quickstart.c, which the project builds
# and runs as a test, from its first #include on (the file's opening
# comment is the file's own). Exits 1 with a diff when they differ.
set -euo pipefail
cd "$(dirname "$0")/.."

listing=$(awk '
    /^## / { in_api = ($0 == "## The C API") }
    in_api && !done && /^```c$/ { inside = 1; next }
    inside && /^```$/ { inside = 0; done = 1 }
    inside { print }
' README.md)
if [[ -z $listing ]]; then
    echo "check-readme: no \`\`\`c block under \"## The C API\" in README.md" >&2
    exit 1
fi
if ! diff -u --label "examples/quickstart.c" --label "README.md (## The C API)" \
    <(sed -n '/^#include/,$p' examples/quickstart.c) <(printf '%s\n' "$listing"); then
    echo "check-readme: README.md's listing differs from examples/quickstart.c;" \
        "copy the file (from its first #include) into the README" >&2
    exit 1
fi
echo "check-readme: README.md's listing is examples/quickstart.c"
