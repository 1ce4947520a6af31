#!/usr/bin/env bash
# The fault suites in a loop with CPU hogs beside them: a test that passes alone but fails on a busy
# machine is a bug in the test or in the worker, and this is how to find it. Run by hand (not by
# ctest or CI: it takes about a minute per suite and round):
#
#   packaging/loop-under-load.sh [RUNS] [SUITE…]
#
# RUNS (default 20) rounds; each round runs every SUITE (default: faults_convergence faults_server
# faults_pool_timeouts faults_redis_outage) once, each with a fresh seed, while DOCSYNC_LOOP_HOGS
# (default: the number of cores) busy loops run at normal priority. Each suite starts its own
# cluster. The first failure stops the loop and keeps its output (the seed is in it); at the end it
# prints the count of runs and failures.
#   DOCSYNC_WORKER (default build/dev/docsync-worker), DOCSYNC_LOOP_HOGS, DOCSYNC_LOOP_KEEP_GOING=1
#   (run every round even after a failure).
set -uo pipefail
top=${DOCSYNC_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
export DOCSYNC_SOURCE_DIR=$top
export DOCSYNC_BUILD_DIR=${DOCSYNC_BUILD_DIR:-$top/build/dev}
export DOCSYNC_WORKER=${DOCSYNC_WORKER:-$DOCSYNC_BUILD_DIR/docsync-worker}
[ -x "$DOCSYNC_WORKER" ] || { echo "FAIL: no worker at $DOCSYNC_WORKER (build it, or set DOCSYNC_WORKER)" >&2; exit 1; }
runs=${1:-20}
shift || true
suites=("$@")
[ ${#suites[@]} -gt 0 ] || suites=(faults_convergence faults_server faults_pool_timeouts faults_redis_outage)
hogs=${DOCSYNC_LOOP_HOGS:-$(nproc)}
out=$(mktemp -d)
hog_pids=()
stop_hogs() {
  local p
  for p in "${hog_pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  hog_pids=()
}
trap stop_hogs EXIT
for _ in $(seq 1 "$hogs"); do
  (while :; do :; done) &
  hog_pids+=($!)
done
echo "$hogs CPU hogs beside $runs rounds of ${suites[*]}; outputs in $out"
total=0 failed=0
for round in $(seq 1 "$runs"); do
  for suite in "${suites[@]}"; do
    total=$((total + 1))
    log=$out/$suite.$round.log
    started=$SECONDS
    # The suites use the cluster of their own (no DOCSYNC_CLUSTER_DIR): never one left in the caller's environment.
    if env -u DOCSYNC_CLUSTER_DIR -u PGHOST -u PGPORT -u DOCSYNC_FAULT_SEED \
         bash "$top/tests/scenarios/$suite.sh" >"$log" 2>&1; then
      echo "round $round $suite: pass ($((SECONDS - started)) s, $(grep -m1 -o 'seed [0-9]*' "$log"))"
      rm -f "$log"
    else
      failed=$((failed + 1))
      echo "round $round $suite: FAIL ($((SECONDS - started)) s): $(grep -m1 'FAIL' "$log")"
      echo "  output kept: $log"
      [ "${DOCSYNC_LOOP_KEEP_GOING:-0}" = 1 ] || break 2
    fi
  done
done
echo "$total runs, $failed failed (${suites[*]}, $hogs hogs)"
[ "$failed" -eq 0 ]
