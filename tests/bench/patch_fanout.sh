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
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$top"
build=${DOCSYNC_BENCH_BUILD:-$top/build/bench}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >"$build.cmake.log" 2>&1 || { cat "$build.cmake.log"; exit 1; }
cmake --build "$build" -j2 --target docsync-gateway bench-patch_fanout_bench >"$build.build.log" 2>&1 || { tail -n 40 "$build.build.log"; exit 1; }

need=$((clients + 100))
[ "$(ulimit -Hn)" -ge "$need" ] || { echo "the hard descriptor limit ($(ulimit -Hn)) is below the $need this run needs: raise it (ulimit -Hn, LimitNOFILE=)" >&2; exit 1; }

tmp=$(mktemp -d)
pids=()
# shellcheck disable=SC2317 # run by the EXIT trap
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

redis_port=$(free_port)
redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no --daemonize no >"$tmp/redis.log" 2>&1 &
pids+=("$!")
for _ in $(seq 1 100); do redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break; sleep 0.05; done
redis-cli -p "$redis_port" ping >/dev/null || { echo "redis-server did not start:" >&2; cat "$tmp/redis.log" >&2; exit 1; }

gateway_wrap=()
client_wrap=()
if [ "${DOCSYNC_BENCH_PIN:-0}" = 1 ]; then
  gateway_wrap=(chrt -f 10 taskset -c 1)
  client_wrap=(taskset -c 0)
fi

port=$(free_port)
python3 -c 'import secrets; print(secrets.token_hex(32))' >"$tmp/secret"
"${gateway_wrap[@]}" "$build/docsync-gateway" --redis "redis://127.0.0.1:$redis_port" --listen "127.0.0.1:$port" \
  --jwt-secret-file "$tmp/secret" --public 'db:bench:*' --log-file "$tmp/gateway.log" &
gpid=$!
pids+=("$gpid")
for _ in $(seq 1 200); do curl -fs "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break; sleep 0.05; done
curl -fs "http://127.0.0.1:$port/healthz" >/dev/null || { echo "docsync-gateway did not start:" >&2; cat "$tmp/gateway.log" >&2; exit 1; }

echo "$("$build/docsync-gateway" --version 2>/dev/null || echo docsync-gateway), Release, $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg) at start${gateway_wrap[*]:+; the gateway under ${gateway_wrap[*]}, the client under ${client_wrap[*]}}"
status=0
"${client_wrap[@]}" "$build/bench-patch_fanout_bench" --port "$port" --redis-port "$redis_port" --gateway-pid "$gpid" \
  --clients "$clients" --publishes "$publishes" --rounds "$rounds" --ask-patches "$((1 - ${DOCSYNC_BENCH_PLAIN:-0}))" || status=$?
echo "load average $(cut -d' ' -f1-3 /proc/loadavg) at the end"
kill -0 "$gpid" 2>/dev/null || { echo "docsync-gateway exited during the run:" >&2; tail -n 20 "$tmp/gateway.log" >&2; exit 1; }
if grep -q -E 'warning|error' "$tmp/gateway.log"; then
  echo "the gateway's warnings and errors:"
  grep -E 'warning|error' "$tmp/gateway.log" | sort | uniq -c | sort -rn | head -n 10
fi
exit "$status"
