#!/usr/bin/env bash
# stop-all.sh - stops every server that a test run recorded under DIR.
dir=${1:?usage: stop-all.sh DIR}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
while IFS= read -r -d '' pidfile; do
    stop_recorded "$(dirname "$pidfile")"
done < <(find "$dir" -name pid -print0 2>/dev/null)
exit 0
