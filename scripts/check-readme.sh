#!/usr/bin/env bash
# check-readme.sh - checks that the README stays a true ten-minute read:
# its quickstart listing (the ```c block of the section "## Quickstart") is
# examples/quickstart.c, which the project builds and runs as a test, from
# its first #include on (the file's opening comment is the file's own); it
# is at most 250 lines; and every relative link in README.md, docs/ and
# tests/README.md names a file that exists (and, with #anchor, a heading in
# it). Exits 1 naming what differs or is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
status=0

listing=$(awk '
    /^## / { in_api = ($0 == "## Quickstart") }
    in_api && !done && /^```c$/ { inside = 1; next }
    inside && /^```$/ { inside = 0; done = 1 }
    inside { print }
' README.md)
if [[ -z $listing ]]; then
    echo "check-readme: no \`\`\`c block under \"## Quickstart\" in README.md" >&2
    exit 1
fi
if ! diff -u --label "examples/quickstart.c" --label "README.md (## Quickstart)" \
    <(sed -n '/^#include/,$p' examples/quickstart.c) <(printf '%s\n' "$listing"); then
    echo "check-readme: README.md's listing differs from examples/quickstart.c;" \
        "copy the file (from its first #include) into the README" >&2
    exit 1
fi
echo "check-readme: README.md's listing is examples/quickstart.c"

lines=$(wc -l <README.md)
if ((lines > 250)); then
    echo "check-readme: README.md has $lines lines, more than 250;" \
        "move the detail to docs/ and link to it" >&2
    status=1
fi

# GitHub's anchor for each heading of a Markdown file: lower case, spaces
# to '-', punctuation other than '-' and '_' dropped (code fences skipped).
anchors() {
    awk '/^```/ { fence = !fence; next } !fence && /^#+ / { sub(/^#+ /, ""); print }' "$1" |
        tr '[:upper:]' '[:lower:]' | sed -e 's/[^[:alnum:] _-]//g' -e 's/ /-/g'
}

links=0
for doc in README.md docs/*.md docs/*/*.md tests/README.md; do
    [[ -e $doc ]] || continue
    dir=$(dirname "$doc")
    # Inline links outside code fences: [text](target), target relative.
    while IFS= read -r target; do
        case $target in
        http://* | https://* | mailto:*) continue ;;
        esac
        links=$((links + 1))
        file=${target%%#*}
        anchor=
        [[ $target == *#* ]] && anchor=${target#*#}
        if [[ -z $file ]]; then
            path=$doc
        else
            path=$dir/$file
        fi
        if [[ ! -e $path ]]; then
            echo "check-readme: $doc links to $target: no such file" >&2
            status=1
        elif [[ -n $anchor ]] && ! anchors "$path" | grep -qxF -- "$anchor"; then
            echo "check-readme: $doc links to $target: no such heading in $path" >&2
            status=1
        fi
    done < <(awk '/^ *```/ { fence = !fence; next } !fence' "$doc" |
        grep -o '\]([^) ]*)' | sed -e 's/^](//' -e 's/)$//')
done
if ((status == 0)); then
    echo "check-readme: README.md has $lines lines; $links relative links resolve"
fi
exit $status
