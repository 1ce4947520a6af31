# A private redis-server for the scenarios (worker_redis.sh, faults_*.sh): its own port and
# data directory under $tmp, appendonly with an fsync per write, so acknowledged docs survive a
# restart of Redis. Sourced after the caller has set `tmp` and defined `fail`; the caller's cleanup
# must call stop_redis (it also ends a stopped, SIGSTOPped or hung server).

command -v redis-server >/dev/null || fail "redis-server is not installed (bash packaging/deps.sh)"
redis_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
redis_pid=
mkdir -p "$tmp/redis"

rc() { redis-cli -p "$redis_port" "$@"; }

# start_redis: starts (or restarts, on the same port and data directory) and waits for PING.
start_redis() {
  redis-server --port "$redis_port" --bind 127.0.0.1 --dir "$tmp/redis" --save '' --appendonly yes \
    --appendfsync always --daemonize no >>"$tmp/redis.log" 2>&1 &
  redis_pid=$!
  for _ in $(seq 1 100); do [ "$(rc PING 2>/dev/null)" = PONG ] && return 0; sleep 0.1; done
  fail "redis-server did not start on port $redis_port: $(tail -n 5 "$tmp/redis.log")"
}
# stop_redis: kill -9 (a crash; appendfsync always has every acknowledged write on disk).
stop_redis() {
  if [ -n "$redis_pid" ]; then
    kill -CONT "$redis_pid" 2>/dev/null || true
    kill -9 "$redis_pid" 2>/dev/null || true
    wait "$redis_pid" 2>/dev/null || true
  fi
  redis_pid=
}
# shutdown_redis: an orderly SHUTDOWN, then waits for the process to end.
shutdown_redis() {
  rc SHUTDOWN >/dev/null 2>&1 || true
  wait "$redis_pid" 2>/dev/null || true
  redis_pid=
}
# pause_redis / resume_redis: SIGSTOP and SIGCONT. The kernel still accepts connections and buffers
# what clients send, so the worker sees a hung server, not a refused one.
# redis_doc KEY: the doc of the envelope retained at KEY (compact JSON), or empty.
redis_doc() { rc --raw GET "$1" | jq -c '.doc' 2>/dev/null || true; }
# redis_doc_is_current KEY SQL: t when the retained doc equals a fresh run of SQL (needs sql()).
redis_doc_is_current() {
  local d
  d=$(redis_doc "$1")
  [ -n "$d" ] || { echo "no doc at $1"; return; }
  sql "SELECT \$r\$$d\$r\$::jsonb IS NOT DISTINCT FROM ($2)::jsonb"
}
pause_redis() { kill -STOP "$redis_pid" || fail "could not SIGSTOP redis-server (pid $redis_pid)"; }
resume_redis() { kill -CONT "$redis_pid" || fail "could not SIGCONT redis-server (pid $redis_pid)"; }
