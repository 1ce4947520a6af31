#!/usr/bin/env bash
# Derived watches against hand-written ones on generated doc queries: tests/scenarios/derive_soundness.sh
# at full size (200 queries × 1 000 transactions by default, on a cluster of its own), which defines
# every generated query twice (derived watches, and the generator's sound hand-written set), runs
# the same DML under both, fails on any stale doc, and prints the mix of watch kinds and, per
# transaction and per row change, the docs recomputed (the worker's docsync_query_recomputes_total)
# and the doc and keys statements (pg_stat_statements, by each definer's reader role).
#
#   tests/bench/derive_generated.sh [queries (200)] [transactions (1000)] [seed (104)]
#   (DOCSYNC_WORKER=path/to/docsync-worker, default build/rel/docsync-worker, a Release build)
#
# The seed is fixed by default so runs compare; the generator's version decides what a seed
# generates, so figures from different commits compare only as ratios.
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
export DERIVE_QUERIES=${1:-200} DERIVE_TXNS=${2:-1000} DERIVE_SEED=${3:-104}
export DOCSYNC_WORKER=${DOCSYNC_WORKER:-$top/build/rel/docsync-worker}
[ -x "$DOCSYNC_WORKER" ] || { echo "no worker at $DOCSYNC_WORKER: cmake -S . -B build/rel -DCMAKE_BUILD_TYPE=Release && cmake --build build/rel --target docsync-worker" >&2; exit 2; }
exec bash "$top/tests/scenarios/derive_soundness.sh"
