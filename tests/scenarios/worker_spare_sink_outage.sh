#!/usr/bin/env bash
# A hot spare that takes over during a Redis outage stands by again and retries, as a running worker
# rides out the same outage: the active worker (--standby) streams to Redis; Redis is shut down; the
# active worker is killed (kill -9); the spare takes the lease, cannot start its sink, gives the lease
# back and stands by again (it must not exit); a row changes; Redis comes back; the spare takes over,
# streams the slot, and the changed doc is published.
# Starts a cluster of its own (lib/own_cluster.bash); needs DOCSYNC_WORKER, jq and
# redis-server.
set -euo pipefail
test_name=spare_sink
# shellcheck source=lib/own_cluster.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib/own_cluster.bash"
# shellcheck source=lib/redis_server.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib/redis_server.bash"
cleanup_hooks+=(stop_redis)

acct() { echo "SELECT jsonb_build_object('id', a.id, 'balance', a.balance) FROM acct a WHERE a.id = $1"; }
setup_db
sql "CREATE TABLE acct (id int PRIMARY KEY, balance int NOT NULL)"
sql "INSERT INTO acct SELECT g, 100 * g FROM generate_series(1, 5) g"
sql "SELECT docsync.define_query('acct', \$q\$$(acct '$1')\$q\$, params => ARRAY['id'])" >/dev/null 2>&1
sql "SELECT docsync.watch('acct', 'acct', params => ARRAY['id'])" >/dev/null
grant_reader
start_redis
sink=(--sink "redis://127.0.0.1:$redis_port")

start_worker --standby "${sink[@]}"
first=$worker_pid
sql "UPDATE acct SET balance = balance"
settle 30
"$worker_bin" --dsn "$(dsn "$repl_role")" --pool-dsn "$(dsn "$reader_role")" --slot "$slot" --standby \
  --status-dir "$status_dir" --status-interval 1s "${sink[@]}" >>"$tmp/spare.out" 2>>"$tmp/spare.log" &
spare=$!
extra_pids+=("$spare")
wait_for 30 "SELECT count(*) = 1 FROM docsync.workers WHERE slot_name = '$slot' AND role = 'standby'" ||
  fail "the spare did not stand by"

echo "Redis shut down, then the active worker killed: the spare takes the lease during the outage"
shutdown_redis
kill -9 "$first"
wait "$first" 2>/dev/null || true
worker_pid=
deadline=$((SECONDS + 30))
until grep -q 'cannot start the sink' "$tmp/spare.log"; do
  kill -0 "$spare" 2>/dev/null || { code=0; wait "$spare" || code=$?; tail -n 5 "$tmp/spare.log" >&2; fail "the spare exited $code during the Redis outage"; }
  [ $SECONDS -lt $deadline ] || fail "the spare did not try to take over in 30 s: $(tail -n 5 "$tmp/spare.log")"
  sleep 0.2
done
sql "UPDATE acct SET balance = 777 WHERE id = 2"
sleep 5
kill -0 "$spare" 2>/dev/null || { code=0; wait "$spare" || code=$?; fail "the spare exited $code during the Redis outage: $(tail -n 5 "$tmp/spare.log")"; }
echo "   the spare is still there after 5 s of outage: $(grep -c 'cannot start the sink' "$tmp/spare.log") tries"

echo "Redis back: the spare takes over and publishes"
start_redis
worker_pid=$spare
wait_for 30 "SELECT active FROM pg_replication_slots WHERE slot_name = '$slot'" || fail "nobody streams the slot after Redis came back"
settle 30
[ "$(redis_doc_is_current db:acct:2 "$(acct 2)")" = t ] || fail "db:acct:2 after the outage: $(rc GET db:acct:2)"
stop_worker
echo "ok"
