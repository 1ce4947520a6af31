#!/usr/bin/env bash
# The long version of faults_redis_outage.sh: each outage lasts 30 s.
DOCSYNC_FAULT_OUTAGE=30 exec bash "$(dirname "${BASH_SOURCE[0]}")/faults_redis_outage.sh"
