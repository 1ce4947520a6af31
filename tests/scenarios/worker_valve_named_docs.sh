#!/usr/bin/env bash
# The WAL safety valve and a doc that was never published (docs/design.md, "sink checks", invariant
# 6): a new row's first compute keeps timing out (a migration's lock past --statement-timeout:
# transient, it holds the slot), then the valve recreates the slot, so the change that named the
# doc is never streamed again. Its doc is in no sink; only the live journal (docsync.live_journal)
# says it is live. Two ways:
#   1. the valve fires in the running worker;
#   2. the worker is killed (-9) while the compute is held, and the valve fires at the next start.
# Each time, once the lock is gone and the worker drained, the new doc is published and current.
set -euo pipefail
test_name=valvenamed
# shellcheck source=lib/own_cluster.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib/own_cluster.bash"
# shellcheck source=lib/redis_server.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib/redis_server.bash"
cleanup_hooks+=(stop_redis)

setup_db
sql "CREATE TABLE item (id int PRIMARY KEY, v int NOT NULL)"
sql "CREATE TABLE filler (id bigserial PRIMARY KEY, pad text)"
# gate() waits while the test holds advisory lock 42: the migration's lock.
sql "CREATE FUNCTION gate() RETURNS int LANGUAGE sql AS \$f\$SELECT 1 FROM (SELECT pg_advisory_xact_lock_shared(42)) s\$f\$"
doc_sql() { echo "SELECT jsonb_build_object('id', i.id, 'v', i.v, 'g', gate()) FROM item i WHERE i.id = $1"; }
sql "SELECT docsync.define_query('item', \$q\$SELECT jsonb_build_object('id', i.id, 'v', i.v, 'g', gate()) FROM item i WHERE i.id = \$1\$q\$, params => ARRAY['id'])" >/dev/null 2>&1
sql "SELECT docsync.watch('item', 'item', params => ARRAY['id'])" >/dev/null
grant_reader
start_redis
worker_args=(--sink "redis://127.0.0.1:$redis_port" --live all --statement-timeout 1s --max-retained-wal 8MB)
current() { redis_doc_is_current "db:item:$1" "$(doc_sql "$1")"; }
wait_current() {  # WHAT ID
  local deadline=$((SECONDS + 60))
  until [ "$(current "$2")" = t ]; do
    [ $SECONDS -lt $deadline ] || fail "$1: db:item:$2 is '$(redis_doc "db:item:$2")', the row gives $(sql "$(doc_sql "$2")")"
    sleep 0.2
  done
}

# STEP KILL NEW: item NEW inserted under the lock, the valve fired (after kill -9 and a restart when
# KILL is yes), the lock released; item NEW must be published and current.
valve_step() {
  local what=$1 kill=$2 new=$3 lock_pid target
  : >"$tmp/worker.log"
  start_worker "${worker_args[@]}"
  sql "UPDATE item SET v = v + 1 WHERE id = 1"
  settle 30
  wait_current "$what, before the lock" 1
  psql -X -q -d "$db" -c "SELECT pg_advisory_lock(42)" -c "SELECT pg_sleep(20)" >/dev/null 2>&1 &
  lock_pid=$!
  extra_pids+=($lock_pid)
  wait_for 10 "SELECT count(*) > 0 FROM pg_locks WHERE locktype = 'advisory' AND objid = 42 AND granted" ||
    fail "$what: advisory lock 42 was not taken"
  sql "INSERT INTO item VALUES ($new, 1)"
  sql "UPDATE item SET v = v + 1 WHERE id = 1"
  sleep 3  # the new doc's compute times out at least once
  [ -z "$(rc --raw GET "db:item:$new")" ] || fail "$what: db:item:$new was published under the lock"
  if [ "$kill" = yes ]; then
    kill -9 "$worker_pid"
    wait "$worker_pid" 2>/dev/null || true
    worker_pid=
  fi
  for _ in $(seq 1 6); do sql "INSERT INTO filler (pad) SELECT repeat('y', 1000) FROM generate_series(1, 5000)"; done
  [ "$kill" = yes ] && start_worker "${worker_args[@]}"
  for _ in $(seq 1 60); do grep -q "WAL SAFETY VALVE" "$tmp/worker.log" && break; sleep 0.5; done
  grep -q "WAL SAFETY VALVE" "$tmp/worker.log" || fail "$what: the valve did not fire"
  wait "$lock_pid" || true
  wait_current "$what, after the valve and the lock" "$new"
  wait_current "$what, after the valve and the lock" 1
  target=$(sql "SELECT pg_current_wal_lsn()")
  [ "$(sql "CALL docsync.wait_published('$target', '30s')")" = t ] || fail "$what: wait_published never passed $target"
  stop_worker
  sql "TRUNCATE filler"
  echo "  $what: db:item:$new published after the valve"
}

sql "INSERT INTO item VALUES (1, 1)"
echo "1. the valve in the running worker"
valve_step "running worker" no 2
echo "2. kill -9, then the valve at the next start"
valve_step "kill -9" yes 3
echo "PASS worker_valve_named_docs"
