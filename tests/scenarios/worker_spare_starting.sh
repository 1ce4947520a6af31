#!/usr/bin/env bash
# A spare never kills a healthy worker that is still starting. The active worker's lease session
# answers every second from the moment it holds the lease (replication/lease_watch.hpp), and a spare
# takes the holder for hung only when that session has been idle as long as the slot went unstreamed
# (20 s; 4 s here, DOCSYNC_TEST_HUNG_AFTER, so that the test waits seconds, not minutes). Here a
# migration holds an ACCESS EXCLUSIVE lock on the table the doc query reads for 10 s, more than twice
# that, so the active worker (--standby, the lease taken) waits in docsync.worker_definitions() the
# whole time, streaming nothing; the second spare must leave it alone, and once the lock goes the
# worker streams and publishes.
# Starts a cluster of its own (lib/own_cluster.bash); needs DOCSYNC_WORKER and jq.
set -euo pipefail
test_name=spare_starting
export DOCSYNC_TEST_HUNG_AFTER=4s
# shellcheck source=lib/own_cluster.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib/own_cluster.bash"

acct() { echo "SELECT jsonb_build_object('id', a.id, 'balance', a.balance) FROM acct a WHERE a.id = $1"; }
setup_db
sql "CREATE TABLE acct (id int PRIMARY KEY, balance int NOT NULL)"
sql "INSERT INTO acct SELECT g, 100 * g FROM generate_series(1, 5) g"
sql "SELECT docsync.define_query('acct', \$q\$$(acct '$1')\$q\$, params => ARRAY['id'])" >/dev/null 2>&1
sql "SELECT docsync.watch('acct', 'acct', params => ARRAY['id'])" >/dev/null
grant_reader

# The slot made, then left unstreamed.
start_worker --standby
sql "UPDATE acct SET balance = balance"
settle 30
stop_worker

echo "a migration holds acct for 10 s; the active worker starts behind it, a second spare beside it"
psql -X -q -d "$db" -c "BEGIN" -c "LOCK TABLE acct IN ACCESS EXCLUSIVE MODE" -c "SELECT pg_sleep(10)" -c "COMMIT" \
  >/dev/null 2>&1 &
lock_pid=$!
extra_pids+=("$lock_pid")
wait_for 10 "SELECT count(*) > 0 FROM pg_locks l JOIN pg_class c ON c.oid = l.relation WHERE c.relname = 'acct' AND l.mode = 'AccessExclusiveLock' AND l.granted" ||
  fail "the migration did not take its lock"
"$worker_bin" --dsn "$(dsn "$repl_role")" --pool-dsn "$(dsn "$reader_role")" --slot "$slot" --standby \
  --status-dir "$status_dir" --status-interval 1s --sink "file:$docs" >>"$tmp/worker.out" 2>>"$tmp/worker.log" &
worker_pid=$!
wait_for 15 "SELECT count(*) = 1 FROM docsync.workers WHERE slot_name = '$slot' AND role = 'active'" ||
  fail "the first worker did not take the lease"
"$worker_bin" --dsn "$(dsn "$repl_role")" --pool-dsn "$(dsn "$reader_role")" --slot "$slot" --standby \
  --status-dir "$status_dir" --status-interval 1s --sink "file:$docs" >>"$tmp/spare.out" 2>>"$tmp/spare.log" &
spare_pid=$!
extra_pids+=("$spare_pid")
started=$SECONDS
while kill -0 "$lock_pid" 2>/dev/null; do
  kill -0 "$worker_pid" 2>/dev/null ||
    fail "the starting worker died after $((SECONDS - started)) s behind the migration's lock: $(grep -h 'hung' "$tmp/spare.log" | head -n 3)"
  sleep 0.5
done
echo "   the starting worker lived through $((SECONDS - started)) s without streaming"
! grep -q 'taking it for hung' "$tmp/spare.log" || fail "the spare took the starting worker for hung: $(grep 'hung' "$tmp/spare.log")"
wait_for 30 "SELECT active FROM pg_replication_slots WHERE slot_name = '$slot'" || fail "the worker did not stream once the lock went"
[ "$(sql "SELECT count(*) FROM docsync.workers WHERE slot_name = '$slot' AND role = 'active' AND application_name LIKE '% pid $worker_pid'")" = 1 ] ||
  fail "the first worker does not hold the lease: $(sql "SELECT application_name FROM docsync.workers WHERE slot_name = '$slot'")"
sql "UPDATE acct SET balance = 4242 WHERE id = 3"
settle 30
[ "$(doc_equals_query db:acct:3 "$(acct 3)")" = t ] || fail "db:acct:3 after the migration: $(last_doc db:acct:3)"
kill -TERM "$spare_pid"
wait "$spare_pid" || fail "the spare exited $? on SIGTERM"
stop_worker
echo "ok"
