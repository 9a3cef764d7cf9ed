#!/usr/bin/env bash
# cluster-tls.sh - cluster.sh with CLUSTER_TLS=1: 3 masters speaking TLS to
# clients and on the cluster bus.
#   cluster-tls.sh start|stop DIR
here=$(cd "$(dirname "$0")" && pwd)
CLUSTER_TLS=1 exec "$here/cluster.sh" "$@"
