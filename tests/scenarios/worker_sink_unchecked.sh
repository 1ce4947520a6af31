#!/usr/bin/env bash
# Redis restarted from an older RDB snapshot (docs/design.md, "sink checks"): the docs of commits
# the slot already confirmed are gone from Redis, and until the worker has checked what Redis holds
# after the restart, docsync.wait_published must not call those commits published, nor may
# docsync:watermark pass them. The worker watches its Redis connection, so it knows of the restart
# at once, holds the waits until its check has run, finds the restart (run_id), recomputes every
# live doc under a gap, and then the waits pass with GET returning the commit's doc.
set -euo pipefail
test_name=unchecked
# shellcheck source=lib/worker_env.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib/worker_env.bash"
# shellcheck source=lib/redis_server.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib/redis_server.bash"
cleanup_hooks+=(stop_redis)
# Snapshots only (no append-only file), so a restart loads the last SAVE.
start_rdb_redis() {
  redis-server --port "$redis_port" --bind 127.0.0.1 --dir "$tmp/redis" --save '' --appendonly no \
    --dbfilename dump.rdb --daemonize no >>"$tmp/redis.log" 2>&1 &
  redis_pid=$!
  for _ in $(seq 1 100); do [ "$(rc PING 2>/dev/null)" = PONG ] && return 0; sleep 0.02; done
  fail "redis-server did not start on port $redis_port: $(tail -n 5 "$tmp/redis.log")"
}

setup_db
sql "CREATE TABLE acct (id int PRIMARY KEY, bal int NOT NULL)"
sql "INSERT INTO acct SELECT g, 0 FROM generate_series(1, 10) g"
doc_sql() { echo "SELECT jsonb_build_object('id', a.id, 'bal', a.bal) FROM acct a WHERE a.id = $1"; }
sql "SELECT docsync.define_query('acct', \$q\$SELECT jsonb_build_object('id', a.id, 'bal', a.bal) FROM acct a WHERE a.id = \$1\$q\$, params => ARRAY['id'])" >/dev/null 2>&1
sql "SELECT docsync.watch('acct', 'acct', params => ARRAY['id'])" >/dev/null
grant_reader
start_rdb_redis
start_worker --sink "redis://127.0.0.1:$redis_port" --live all

for round in 1 2 3; do
  sql "UPDATE acct SET bal = bal + 1"
  target=$(sql "SELECT pg_current_wal_lsn()")
  [ "$(sql "CALL docsync.wait_published('$target', '30s')")" = t ] || fail "round $round: wait_published never passed $target"
  [ "$(redis_doc_is_current db:acct:1 "$(doc_sql 1)")" = t ] || fail "round $round: db:acct:1 is $(redis_doc db:acct:1)"
  rc SAVE >/dev/null
  old=$(redis_doc db:acct:1)
  sql "UPDATE acct SET bal = bal + 100"
  target=$(sql "SELECT pg_current_wal_lsn()")
  [ "$(sql "CALL docsync.wait_published('$target', '30s')")" = t ] || fail "round $round: wait_published never passed $target"
  [ "$(redis_doc_is_current db:acct:1 "$(doc_sql 1)")" = t ] || fail "round $round: db:acct:1 is $(redis_doc db:acct:1)"
  wm=$(rc --raw GET docsync:watermark)

  # Redis restarts from the snapshot taken before the commit.
  rc SHUTDOWN NOSAVE >/dev/null 2>&1 || true
  wait "$redis_pid" 2>/dev/null || true
  start_rdb_redis
  [ "$(redis_doc db:acct:1)" = "$old" ] || fail "round $round: Redis did not come back with the older snapshot: $(redis_doc db:acct:1)"
  # From now on, whenever a wait says published, GET must return the commit's doc.
  held=0 passed=
  for _ in $(seq 1 150); do
    if [ "$(sql "CALL docsync.wait_published('$target', '10ms')")" = t ]; then
      [ "$(redis_doc_is_current db:acct:1 "$(doc_sql 1)")" = t ] ||
        fail "round $round: wait_published said $target published while GET db:acct:1 returns $(redis_doc db:acct:1) (Redis came back from an older snapshot)"
      passed=1
      break
    fi
    held=$((held + 1))
    now_wm=$(rc --raw GET docsync:watermark || true)
    gen=$(rc --raw GET docsync:watermark_generation || true)
    if [ -n "$now_wm" ] && [ "$(sql "SELECT '$now_wm'::pg_lsn >= '$target'")" = t ] &&
       [ "$(redis_doc_is_current db:acct:1 "$(doc_sql 1)")" != t ]; then
      fail "round $round: docsync:watermark is $now_wm (generation $gen), past $target, while GET db:acct:1 returns $(redis_doc db:acct:1)"
    fi
    sleep 0.05
  done
  [ -n "$passed" ] || fail "round $round: wait_published never passed $target after the restart"
  echo "round $round: after Redis came back from the older snapshot the wait held for $held polls (watermark was $wm), then passed with the doc current"
done
stop_worker
rc SHUTDOWN NOSAVE >/dev/null 2>&1 || true
wait "$redis_pid" 2>/dev/null || true
redis_pid=
echo "PASS worker_sink_unchecked"
