#!/usr/bin/env bash
# A Redis that may evict docs (docs/design.md, "sink checks"): maxmemory with an allkeys-* policy,
# as a managed "cache" Redis is set up, drops retained docs on its own while they count as
# published. The worker refuses such a policy at start, read with CONFIG GET and, where CONFIG is
# renamed away, from INFO memory; takes noeviction and volatile-*; and catches a CONFIG SET to an
# evicting policy while it runs: docs are held (wait_published false, the doc not published) until
# the policy is fixed, then every live doc is recomputed.
set -euo pipefail
test_name=eviction
# shellcheck source=lib/worker_env.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib/worker_env.bash"
# shellcheck source=lib/redis_server.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib/redis_server.bash"
cleanup_hooks+=(stop_redis)
# redis_with ARGS...: a fresh Redis (no persistence) with these settings.
redis_with() {
  stop_redis
  redis-server --port "$redis_port" --bind 127.0.0.1 --dir "$tmp/redis" --save '' --appendonly no \
    --daemonize no "$@" >>"$tmp/redis.log" 2>&1 &
  redis_pid=$!
  for _ in $(seq 1 100); do [ "$(rc PING 2>/dev/null)" = PONG ] && return 0; sleep 0.05; done
  fail "redis-server did not start on port $redis_port: $(tail -n 5 "$tmp/redis.log")"
}
# refused_at_start LABEL: the worker must exit non-zero at start, naming the setting and the fix.
refused_at_start() {
  : >"$tmp/worker.log"
  local code=0
  timeout 60 "$worker_bin" --dsn "$(dsn "$repl_role")" --pool-dsn "$(dsn "$reader_role")" --slot "$slot" \
    --create-slot --status-dir "$status_dir" --sink "redis://127.0.0.1:$redis_port" --live all \
    >>"$tmp/worker.out" 2>>"$tmp/worker.log" || code=$?
  [ "$code" -ne 0 ] && [ "$code" -ne 124 ] || fail "$1: the worker did not refuse the evicting Redis (exit $code)"
  grep -q "maxmemory-policy allkeys-lru" "$tmp/worker.log" && grep -q "maxmemory-policy noeviction" "$tmp/worker.log" ||
    fail "$1: the refusal names neither the policy nor the fix: $(tail -n 3 "$tmp/worker.log")"
  echo "$1: refused at start: $(grep -o 'evicts keys.*(maxmemory-policy [^)]*)' "$tmp/worker.log" | head -n 1)"
}

setup_db
sql "CREATE TABLE item (id int PRIMARY KEY, n int NOT NULL)"
sql "INSERT INTO item SELECT g, 0 FROM generate_series(1, 20) g"
doc_sql() { echo "SELECT jsonb_build_object('id', i.id, 'n', i.n) FROM item i WHERE i.id = $1"; }
sql "SELECT docsync.define_query('item', \$q\$$(doc_sql '$1')\$q\$, params => ARRAY['id'])" >/dev/null 2>&1
sql "SELECT docsync.watch('item', 'item', params => ARRAY['id'])" >/dev/null
grant_reader

# 1. allkeys-lru, read with CONFIG GET, and with CONFIG renamed away (INFO memory).
redis_with --maxmemory 4mb --maxmemory-policy allkeys-lru
refused_at_start "CONFIG GET"
redis_with --maxmemory 4mb --maxmemory-policy allkeys-lru --rename-command CONFIG ""
[ "$(rc CONFIG GET maxmemory-policy 2>&1 | grep -c -i 'unknown command')" = 1 ] || fail "CONFIG was not renamed away"
refused_at_start "INFO memory"
grep -q "from INFO memory" "$tmp/worker.log" || fail "the refusal does not say it read INFO memory"

# 2. volatile-lru is taken (only tombstones carry an expiry); then the policy changes while it runs.
redis_with --maxmemory 64mb --maxmemory-policy volatile-lru
: >"$tmp/worker.log"
start_worker --sink "redis://127.0.0.1:$redis_port" --live all
sql "UPDATE item SET n = n + 1"
target=$(sql "SELECT pg_current_wal_lsn()")
[ "$(sql "CALL docsync.wait_published('$target', '30s')")" = t ] || fail "wait_published never passed $target"
[ "$(redis_doc_is_current db:item:20 "$(doc_sql 20)")" = t ] || fail "db:item:20 is $(redis_doc db:item:20)"

rc CONFIG SET maxmemory-policy allkeys-lru >/dev/null
wait_log() { for _ in $(seq 1 100); do grep -q "$1" "$tmp/worker.log" && return 0; sleep 0.1; done; return 1; }
wait_log "evicts keys under memory pressure" || fail "the worker did not notice CONFIG SET maxmemory-policy allkeys-lru"
sql "UPDATE item SET n = n + 10 WHERE id = 7"
target=$(sql "SELECT pg_current_wal_lsn()")
sleep 3
[ "$(sql "CALL docsync.wait_published('$target', '10ms')")" = f ] ||
  fail "wait_published passed $target while Redis may evict docs"
[ "$(redis_doc_is_current db:item:7 "$(doc_sql 7)")" = f ] || fail "db:item:7 was published into an evicting Redis: $(redis_doc db:item:7) ($(redis_doc_is_current db:item:7 "$(doc_sql 7)"))"
[ "$(grep -c "evicts keys under memory pressure" "$tmp/worker.log")" = 1 ] ||
  fail "the evicting policy was logged $(grep -c "evicts keys under memory pressure" "$tmp/worker.log") times, not once"
grep -q "may evict docs (maxmemory-policy allkeys-lru): held until it is fixed" "$tmp/worker.log" ||
  fail "no publish was held back for the evicting policy"
# Redis evicts a doc meanwhile (as it would under memory pressure).
rc DEL db:item:3 >/dev/null
rc CONFIG SET maxmemory-policy noeviction >/dev/null
[ "$(sql "CALL docsync.wait_published('$target', '30s')")" = t ] || fail "wait_published never passed $target once fixed"
for id in 3 7 20; do
  [ "$(redis_doc_is_current "db:item:$id" "$(doc_sql "$id")")" = t ] || fail "db:item:$id is $(redis_doc "db:item:$id") once fixed"
done
grep -q "had an evicting maxmemory-policy, now fixed" "$tmp/worker.log" || fail "the fix did not recompute the live docs"
stop_worker
echo "PASS worker_redis_eviction"
