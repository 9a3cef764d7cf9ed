#!/usr/bin/env bash
# stop-all.sh - stops every server that a test run recorded under DIR.
dir=${1:?usage: stop-all.sh DIR}
here=$(dirname "$0")
for d in "$dir"/*/; do
    [[ -f "$d/pid" ]] && "$here/redis.sh" stop "$d"
done
exit 0
