#!/usr/bin/env bash
# Patches against whole docs through docsync-gateway, in one run (docs/benchmarks.md#patches): a
# private redis-server, a Release docsync-gateway on loopback, and bench-patch_fanout_bench, a client
# process apart from the gateway holding 10 000 SSE streams with patches=1 on one channel whose doc
# is a 50 kB leaderboard. Rounds of publishes each changing one score, alternately as patches (the key
# SET whole, the patch's envelope PUBLISHed, as the worker's script does with --patches on) and as
# whole docs (--patches off); per block: bytes the streams read per publish, the gateway's CPU per
# delivery, and checks that every stream ends on the last doc (every 500th applies the patches itself).
#
#   tests/bench/patch_fanout.sh [streams (default 10000)] [publishes per block (default 10)] [rounds (default 3)]
#   DOCSYNC_BENCH_PLAIN=1 tests/bench/patch_fanout.sh   (streams without patches=1: the gateway applies each
#                                                        patch and sends them whole docs)
#   DOCSYNC_BENCH_PIN=1 tests/bench/patch_fanout.sh   (as root: the gateway on CPU 1 under SCHED_FIFO
#                                                      priority 10, the client on CPU 0)
# Builds docsync-gateway and bench-patch_fanout_bench in build/bench (Release); no PostgreSQL. Not a
# timed test: figures depend on the machine.
set -euo pipefail
clients=${1:-10000}
publishes=${2:-10}
rounds=${3:-3}
# shellcheck source=tests/bench/gateway_common.sh
source "$(dirname "${BASH_SOURCE[0]}")/gateway_common.sh"
bench_gateway_run bench-patch_fanout_bench "$clients" --publishes "$publishes" --rounds "$rounds" \
  --ask-patches "$((1 - ${DOCSYNC_BENCH_PLAIN:-0}))"
