#!/usr/bin/env bash
# The long version of faults_convergence.sh: at least 12 kill -9s over a longer workload.
DOCSYNC_FAULT_LONG=1 exec bash "$(dirname "${BASH_SOURCE[0]}")/faults_convergence.sh"
