#!/usr/bin/env bash
# A sink that lost docs while no worker ran (docs/design.md, "sink checks"): nothing in the sink says
# what it should hold, so the next worker reads it from PostgreSQL (docsync.sink_state,
# docsync.live_journal). Three losses, each while the worker is stopped:
#   1. Redis restarted from an older RDB snapshot: a doc first published after it is gone;
#   2. FLUSHALL (as a restart without persistence): every doc and docsync's own keys are gone;
#   3. the JSONL file truncated.
# Each time the next worker must log the loss at ERROR naming the sink, hold docsync.wait_published
# while its recompute is held back (a lock on the doc query), and bring back every doc.
set -euo pipefail
test_name=sinklost
# shellcheck source=lib/own_cluster.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib/own_cluster.bash"
# shellcheck source=lib/redis_server.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib/redis_server.bash"
cleanup_hooks+=(stop_redis)

# Snapshots only (no AOF): a restart loads the last SAVE, as a restore from an RDB backup does.
start_rdb_redis() {
  redis-server --port "$redis_port" --bind 127.0.0.1 --dir "$tmp/redis" --save '' --appendonly no \
    --dbfilename dump.rdb --daemonize no >>"$tmp/redis.log" 2>&1 &
  redis_pid=$!
  for _ in $(seq 1 100); do [ "$(rc PING 2>/dev/null)" = PONG ] && return 0; sleep 0.1; done
  fail "redis-server did not start: $(tail -n 5 "$tmp/redis.log")"
}

setup_db
sql "CREATE TABLE item (id int PRIMARY KEY, v int NOT NULL)"
# gate() waits while the test holds advisory lock 42: it holds the recompute back.
sql "CREATE FUNCTION gate() RETURNS int LANGUAGE sql AS \$f\$SELECT 1 FROM (SELECT pg_advisory_xact_lock_shared(42)) s\$f\$"
doc_sql() { echo "SELECT jsonb_build_object('id', i.id, 'v', i.v, 'g', gate()) FROM item i WHERE i.id = $1"; }
sql "SELECT docsync.define_query('item', \$q\$SELECT jsonb_build_object('id', i.id, 'v', i.v, 'g', gate()) FROM item i WHERE i.id = \$1\$q\$, params => ARRAY['id'])" >/dev/null 2>&1
sql "SELECT docsync.watch('item', 'item', params => ARRAY['id'])" >/dev/null
grant_reader
start_rdb_redis
redis_sink="redis://127.0.0.1:$redis_port"

# current SINK ID: t when the sink's doc of item ID equals a fresh run of its query.
current() {
  if [ "$1" = file ]; then doc_equals_query "db:item:$2" "$(doc_sql "$2")"; else redis_doc_is_current "db:item:$2" "$(doc_sql "$2")"; fi
}
wait_current() {  # SINK WHAT IDS...
  local sink=$1 what=$2 id deadline=$((SECONDS + 60))
  shift 2
  for id in "$@"; do
    until [ "$(current "$sink" "$id")" = t ]; do
      [ $SECONDS -lt $deadline ] || fail "$what: db:item:$id is not current"
      sleep 0.2
    done
  done
}
# The docs of items 1..4 published; item 4 after `mark` (a SAVE for the RDB step).
publish_items() {  # SINK-ARGS... -- SINK MARK
  sql "TRUNCATE item"
  sql "INSERT INTO item SELECT g, 1 FROM generate_series(1, 3) g"
  settle 30
  wait_current "$1" "before the snapshot" 1 2 3
  [ "$2" = save ] && rc SAVE >/dev/null
  sql "INSERT INTO item VALUES (4, 1)"
  sql "UPDATE item SET v = 2 WHERE id = 1"
  settle 30
  wait_current "$1" "after the snapshot" 1 4
  sleep 3  # the worker records the sink's version every 2 s
}
# The next worker, its recompute held back by the lock: it logs the loss, wait_published holds,
# then every doc comes back and wait_published passes.
check_recovery() {  # SINK WHAT START-ARGS...
  local sink=$1 what=$2 lock_pid target
  shift 2
  : >"$tmp/worker.log"
  psql -X -q -d "$db" -c "SELECT pg_advisory_lock(42)" -c "SELECT pg_sleep(6)" >/dev/null 2>&1 &
  lock_pid=$!
  extra_pids+=($lock_pid)
  wait_for 10 "SELECT count(*) > 0 FROM pg_locks WHERE locktype = 'advisory' AND objid = 42 AND granted" ||
    fail "$what: advisory lock 42 was not taken"
  target=$(sql "SELECT pg_current_wal_lsn()")
  start_worker "$@" --live all
  for _ in $(seq 1 50); do grep -q "lost docs while no worker watched it" "$tmp/worker.log" && break; sleep 0.1; done
  grep -q "ERROR \[publish\] .*lost docs while no worker watched it" "$tmp/worker.log" ||
    fail "$what: the next worker did not report the lost docs"
  if [ "$(sql "CALL docsync.wait_published('$target', '1s')")" = t ]; then
    fail "$what: wait_published said published while the recompute of the lost docs was held back"
  fi
  wait "$lock_pid" || true
  wait_current "$sink" "$what, after the next worker's recompute" 1 2 3 4
  [ "$(sql "CALL docsync.wait_published('$target', '30s')")" = t ] || fail "$what: wait_published never passed $target"
  stop_worker
  echo "  $what: reported, waits held, every doc back"
}

echo "1. Redis restarted from an older RDB snapshot while no worker ran"
start_worker --sink "$redis_sink" --live all
publish_items redis save
stop_worker
stop_redis
start_rdb_redis
[ -z "$(rc --raw GET db:item:4)" ] || fail "setup: the snapshot holds item 4"
check_recovery redis "older RDB" --sink "$redis_sink"
[ "$(sql "SELECT count(*) FROM docsync.sinks WHERE sink LIKE 'Redis at 127.0.0.1:$redis_port%' AND journaled_channels = 4")" = 1 ] ||
  fail "docsync.sinks does not show the Redis sink with 4 journaled channels: $(sql "SELECT * FROM docsync.sinks")"

echo "2. FLUSHALL while no worker ran"
start_worker --sink "$redis_sink" --live all
publish_items redis none
stop_worker
rc FLUSHALL >/dev/null
check_recovery redis "FLUSHALL" --sink "$redis_sink"

echo "3. the JSONL file truncated while no worker ran"
start_worker
publish_items file none
stop_worker
: >"$docs"
check_recovery file "truncated file"

echo "PASS worker_sink_lost"
