#!/usr/bin/env bash
# Commit -> client through the whole chain, in one run: PostgreSQL (a throwaway cluster), the Release
# worker (--sink redis://, --live subscribers), a private redis-server, the Release docsync-gateway,
# and one SSE client following 100 docs (bench-gateway_bench e2e: a C++ client, no browser).
#
# Method. Table item(id, v), doc query 'item' {"id", "v"}, channels db:item:1..100. The client's
# stream subscribes them on the gateway, which asks the worker for them (docsync:warm) and makes them
# live (--live subscribers counts the gateway's subscriptions). Once an update of every doc has
# reached the client, 4 writer connections commit 200 txn/s for 20 s on a fixed schedule, each an
# autocommit UPDATE item SET v = v + 1 WHERE id = $1 RETURNING v, going round the docs (each doc
# changes every 0.5 s: no doc is hot, so the engine's pacing of a hot doc's rounds is not measured).
# For every commit (id, v): latency = the client's read of the first doc of id at v or newer minus
# the moment the commit returned to its writer (the same host clock). A pattern subscriber on Redis
# stamps the same docs as Redis sends them, which splits each latency into commit -> Redis (the
# worker) and Redis -> client (the gateway).
#
#   tests/bench/gateway_e2e.sh [seconds of load (default 20)] [docs (default 100)] [txn/s (default 200)]
# Builds docsync-worker, docsync-gateway and bench-gateway_bench in build/bench (Release) and starts
# a throwaway cluster (packaging/dev-cluster.sh). Not a timed test: figures depend on the machine.
set -euo pipefail
seconds=${1:-20}
docs=${2:-100}
rate=${3:-200}
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$top"
build=${DOCSYNC_BENCH_BUILD:-$top/build/bench}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >"$build.cmake.log" 2>&1 || { cat "$build.cmake.log"; exit 1; }
cmake --build "$build" -j2 --target docsync-worker docsync-gateway bench-gateway_bench >"$build.build.log" 2>&1 || { tail -n 40 "$build.build.log"; exit 1; }
cluster=$(packaging/dev-cluster.sh start)
# shellcheck disable=SC1091
. "$cluster/cluster.env"
export DOCSYNC_WORKER=${DOCSYNC_WORKER:-$build/docsync-worker}
# shellcheck source=tests/bench/common.sh
. "$top/tests/bench/common.sh"
trap 'bench_cleanup; packaging/dev-cluster.sh stop "$cluster" >/dev/null' EXIT
bench_setup_db
bench_item_table "$docs"
bench_start_redis
"$worker" --dsn "$dsn_repl" --pool-dsn "$dsn_reader" --slot "bench_gateway_$$" --create-slot \
  --sink "redis://127.0.0.1:$redis_port" --live subscribers --status-dir "$bench_tmp/status" \
  --log-level warning >"$bench_tmp/worker.log" 2>&1 &
wpid=$!
bench_pids+=("$wpid")
for _ in $(seq 1 200); do
  [ "$(command psql -X -At -d "$db" -c "SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'bench_gateway_$$' AND active")" = 1 ] && break
  sleep 0.05
done

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
python3 -c 'import secrets; print(secrets.token_hex(32))' >"$bench_tmp/secret"
"$build/docsync-gateway" --redis "redis://127.0.0.1:$redis_port" --listen "127.0.0.1:$port" \
  --jwt-secret-file "$bench_tmp/secret" --public 'db:item:*' --log-file "$bench_tmp/gateway.log" &
gpid=$!
bench_pids+=("$gpid")
for _ in $(seq 1 200); do curl -fs "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break; sleep 0.05; done
curl -fs "http://127.0.0.1:$port/healthz" >/dev/null || { echo "docsync-gateway did not start:" >&2; cat "$bench_tmp/gateway.log" >&2; exit 1; }

echo "PostgreSQL $(psql -At -d "$db" -c 'SHOW server_version'), Release worker and gateway, $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg) at start"
conninfo="host=$PGHOST port=$PGPORT dbname=$db user=${PGUSER:-postgres}"
cpu0=$(bench_cpu_seconds "$wpid" "$gpid")
status=0
"$build/bench-gateway_bench" e2e --port "$port" --redis-port "$redis_port" --dsn "$conninfo" \
  --docs "$docs" --rate "$rate" --seconds "$seconds" || status=$?
cpu1=$(bench_cpu_seconds "$wpid" "$gpid")
echo "load average $(cut -d' ' -f1-3 /proc/loadavg) at the end; the worker and the gateway used $(echo "$cpu1 - $cpu0" | bc -l) s of CPU over the run"
for p in "$wpid:worker" "$gpid:gateway"; do
  kill -0 "${p%%:*}" 2>/dev/null || { echo "the ${p#*:} exited during the run" >&2; status=1; }
done
if grep -q -E 'warning|error' "$bench_tmp/gateway.log"; then
  echo "the gateway's warnings and errors:"
  grep -E 'warning|error' "$bench_tmp/gateway.log" | sort | uniq -c | sort -rn | head -n 10
fi
[ "$status" = 0 ] || { echo "the worker's log:" >&2; tail -n 20 "$bench_tmp/worker.log" >&2; }
exit "$status"
