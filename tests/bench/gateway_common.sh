# shellcheck shell=bash
# Shared run of the gateway benchmarks (sourced; no PostgreSQL, so apart from common.sh, which needs a
# cluster and a worker): builds docsync-gateway and the benchmark in build/bench (Release), starts a
# private redis-server and the gateway on loopback, runs the benchmark against them and reports the
# gateway's fate and warnings. DOCSYNC_BENCH_PIN=1 (as root): the gateway on CPU 1 under SCHED_FIFO
# priority 10, the client on CPU 0.
#
#   bench_gateway_run TARGET STREAMS [ARGS...]   runs build/bench/TARGET --port P --redis-port R
#                                                --gateway-pid G --clients STREAMS ARGS...; exits with
#                                                its status
bench_gateway_run() {
  local target=$1 clients=$2
  shift 2
  local top
  top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  cd "$top" || exit 1
  local build=${DOCSYNC_BENCH_BUILD:-$top/build/bench}
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >"$build.cmake.log" 2>&1 || { cat "$build.cmake.log"; exit 1; }
  cmake --build "$build" -j2 --target docsync-gateway "$target" >"$build.build.log" 2>&1 || { tail -n 40 "$build.build.log"; exit 1; }

  # Both ends hold one descriptor per stream: the gateway and the benchmark raise their soft limit to
  # the hard one, which must leave room.
  local need=$((clients + 100))
  [ "$(ulimit -Hn)" -ge "$need" ] || { echo "the hard descriptor limit ($(ulimit -Hn)) is below the $need this run needs: raise it (ulimit -Hn, LimitNOFILE=)" >&2; exit 1; }

  gateway_bench_tmp=$(mktemp -d)
  gateway_bench_pids=()
  trap gateway_bench_cleanup EXIT
  local tmp=$gateway_bench_tmp redis_port port gpid
  redis_port=$(gateway_bench_free_port)
  redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no --daemonize no >"$tmp/redis.log" 2>&1 &
  gateway_bench_pids+=("$!")
  for _ in $(seq 1 100); do redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break; sleep 0.05; done
  redis-cli -p "$redis_port" ping >/dev/null || { echo "redis-server did not start:" >&2; cat "$tmp/redis.log" >&2; exit 1; }

  local gateway_wrap=() client_wrap=()
  if [ "${DOCSYNC_BENCH_PIN:-0}" = 1 ]; then
    gateway_wrap=(chrt -f 10 taskset -c 1)
    client_wrap=(taskset -c 0)
  fi

  port=$(gateway_bench_free_port)
  python3 -c 'import secrets; print(secrets.token_hex(32))' >"$tmp/secret"
  "${gateway_wrap[@]}" "$build/docsync-gateway" --redis "redis://127.0.0.1:$redis_port" --listen "127.0.0.1:$port" \
    --jwt-secret-file "$tmp/secret" --public 'db:bench:*' --log-file "$tmp/gateway.log" &
  gpid=$!
  gateway_bench_pids+=("$gpid")
  for _ in $(seq 1 200); do curl -fs "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break; sleep 0.05; done
  curl -fs "http://127.0.0.1:$port/healthz" >/dev/null || { echo "docsync-gateway did not start:" >&2; cat "$tmp/gateway.log" >&2; exit 1; }

  echo "$("$build/docsync-gateway" --version 2>/dev/null || echo docsync-gateway), Release, $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg) at start${gateway_wrap[*]:+; the gateway under ${gateway_wrap[*]}, the client under ${client_wrap[*]}}"
  local status=0
  "${client_wrap[@]}" "$build/$target" "$@" --port "$port" --redis-port "$redis_port" --gateway-pid "$gpid" \
    --clients "$clients" || status=$?
  echo "load average $(cut -d' ' -f1-3 /proc/loadavg) at the end"
  kill -0 "$gpid" 2>/dev/null || { echo "docsync-gateway exited during the run:" >&2; tail -n 20 "$tmp/gateway.log" >&2; exit 1; }
  if grep -q -E 'warning|error' "$tmp/gateway.log"; then
    echo "the gateway's warnings and errors:"
    grep -E 'warning|error' "$tmp/gateway.log" | sort | uniq -c | sort -rn | head -n 10
  fi
  exit "$status"
}

gateway_bench_free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# shellcheck disable=SC2317 # run by the EXIT trap
gateway_bench_cleanup() {
  for p in "${gateway_bench_pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  for p in "${gateway_bench_pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$gateway_bench_tmp"
}
