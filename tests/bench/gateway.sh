#!/usr/bin/env bash
# The gateway's figures, in one run, against a private redis-server and a Release docsync-gateway on
# loopback, measured by bench-gateway_bench, a client process apart from the gateway:
#   1. concurrent SSE streams: 10 000 on one channel, all open at once, each answered 200 and sent
#      the channel's retained doc (the gateway's /healthz must count them too);
#   2. the gateway's memory per idle stream: its VmRSS with the streams open and idle minus its VmRSS
#      with none, over the count (Pss from smaps_rollup beside it, and the slope from half to all); the
#      kernel's socket memory is not in RSS and is shown apart, machine-wide;
#   3. fan-out: 100 docs published with the real Redis sink, 250 ms apart, to the 10 000 streams:
#      publish -> the last stream has it, p50/p99/max, and publish -> each stream.
#
#   tests/bench/gateway.sh [streams (default 10000)] [publishes (default 100)] [ms between publishes (default 250)]
#   DOCSYNC_BENCH_PIN=1 tests/bench/gateway.sh   (as root: the gateway on CPU 1 under SCHED_FIFO priority 10,
#                                                 the client on CPU 0, so that other work on the machine
#                                                 does not take the gateway's core)
# Builds docsync-gateway and bench-gateway_bench in build/bench (Release); no PostgreSQL.
# The quantiles are of one value per publish: with 100 publishes, p99 is the slowest one.
# See tests/bench/gateway_bench.cpp for how each figure is taken. Not a timed test: figures depend on
# the machine.
set -euo pipefail
clients=${1:-10000}
publishes=${2:-100}
interval=${3:-250}
# shellcheck source=tests/bench/gateway_common.sh
source "$(dirname "${BASH_SOURCE[0]}")/gateway_common.sh"
bench_gateway_run bench-gateway_bench "$clients" fanout --publishes "$publishes" --interval-ms "$interval"
