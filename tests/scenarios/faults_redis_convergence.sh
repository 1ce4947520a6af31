#!/usr/bin/env bash
# faults_convergence.sh with the Redis sink: kill -9s of the worker during the workload, then every
# order's doc retained by a real redis-server (appendonly, fsync always) equals a fresh run of its
# query, a tombstone for a deleted order.
DOCSYNC_FAULT_SINK=redis exec bash "$(dirname "${BASH_SOURCE[0]}")/faults_convergence.sh"
