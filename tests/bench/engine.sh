#!/usr/bin/env bash
# The engine's figures, in one run:
#   - events/s through Engine::on_change with 100 000 live docs, and resident memory per live doc
#     (no server: bench-engine_bench, a Release build);
#   - doc queries per change on a hot-row storm: one row updated 5 000 times in separate
#     transactions, each change handed to the engine as the stream would, the doc queries counted by
#     pg_stat_statements in a throwaway cluster (the integration test that asserts it, which prints
#     the figure).
#   tests/bench/engine.sh [live_docs] [events]
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$top"
build=${DOCSYNC_BENCH_BUILD:-$top/build/bench}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >"$build.cmake.log" 2>&1 || { cat "$build.cmake.log"; exit 1; }
cmake --build "$build" -j2 --target bench-engine_bench docsync-integration-tests >/dev/null
echo "== engine without a server"
"$build/bench-engine_bench" "${1:-100000}" "${2:-2000000}"
echo "== hot-row storm against a throwaway cluster"
cluster=$(packaging/dev-cluster.sh start)
trap 'packaging/dev-cluster.sh stop "$cluster"' EXIT
# shellcheck disable=SC1091
. "$cluster/cluster.env"
"$build/docsync-integration-tests" -tc='*hot row*' 2>/dev/null | grep '^hot row:'
