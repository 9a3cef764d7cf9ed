#!/usr/bin/env bash
# sentinel-tls.sh - sentinel.sh with SENTINEL_TLS=1: the data nodes and the
# sentinels reached over TLS (rediss+sentinel://).
#   sentinel-tls.sh start|stop DIR
here=$(cd "$(dirname "$0")" && pwd)
SENTINEL_TLS=1 exec "$here/sentinel.sh" "$@"
