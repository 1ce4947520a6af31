#!/usr/bin/env bash
# Start failures of the moment are retried: the pool role's connections are all taken (emulated
# with CONNECTION LIMIT 0: SQLSTATE 53300, "too many connections", class 53, transient).
#   - the active worker A (--standby) dies meanwhile; the spare B takes the lease, its pool cannot
#     connect: B gives the lease back and stands by again, retrying every 2 s, not exit; once the
#     pool role can connect again B takes over and the change made meanwhile is published;
#   - a worker without --standby that starts meanwhile retries with backoff, saying so, not exit,
#     and starts once the pool role can connect (a wrong password still ends it: worker_first_start.sh).
# Starts a cluster of its own (lib/own_cluster.bash); needs DOCSYNC_WORKER and jq.
set -euo pipefail
test_name=spare_pool
# shellcheck source=lib/own_cluster.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib/own_cluster.bash"
setup_db
sql "CREATE TABLE acct (id int PRIMARY KEY, bal int NOT NULL)"
sql "INSERT INTO acct SELECT g, 0 FROM generate_series(1, 5) g"
sql "SELECT docsync.define_query('acct', \$q\$SELECT jsonb_build_object('id', a.id, 'bal', a.bal) FROM acct a WHERE a.id = \$1\$q\$, params => ARRAY['id'])" >/dev/null
sql "SELECT docsync.watch('acct', 'acct', params => ARRAY['id'])" >/dev/null
grant_reader
start_worker --standby --live all
a=$worker_pid
"$worker_bin" --dsn "$(dsn "$repl_role")" --pool-dsn "$(dsn "$reader_role")" --slot "$slot" \
  --status-dir "$status_dir" --status-interval 1s --sink "file:$docs" --standby --live all >>"$tmp/b.out" 2>>"$tmp/b.log" &
b=$!
extra_pids+=("$b")
wait_for 30 "SELECT count(*) = 1 FROM docsync.workers WHERE slot_name = '$slot' AND role = 'standby'" || fail "B never stood by"
sql "UPDATE acct SET bal = 1 WHERE id = 1"
settle 60
doc_sql="SELECT jsonb_build_object('id', id, 'bal', bal) FROM acct WHERE id = 1"

echo "the pool role refused (53300), A killed: B takes the lease, gives it back and retries"
sql "ALTER ROLE $reader_role CONNECTION LIMIT 0"
kill -9 "$a"
wait "$a" 2>/dev/null || true
worker_pid=
sql "UPDATE acct SET bal = 2 WHERE id = 1"
target=$(sql "SELECT pg_current_wal_lsn()")
deadline=$((SECONDS + 30))
until [ "$(grep -c "too many connections.*giving the lease back and standing by again" "$tmp/b.log")" -ge 2 ]; do
  kill -0 "$b" 2>/dev/null || { code=0; wait "$b" || code=$?; fail "B exited $code: $(tail -n 3 "$tmp/b.log")"; }
  [ $SECONDS -lt $deadline ] || fail "B did not retry twice in 30 s: $(tail -n 3 "$tmp/b.log")"
  sleep 0.5
done
sql "ALTER ROLE $reader_role CONNECTION LIMIT -1"
worker_pid=$b
[ "$(sql "CALL docsync.wait_published('$target', '30s')")" = t ] || fail "the change is not published 30 s after the pool came back: $(tail -n 3 "$tmp/b.log")"
[ "$(doc_equals_query db:acct:1 "$doc_sql")" = t ] || fail "db:acct:1 lacks the update: $(last_doc db:acct:1)"
stop_worker

echo "without --standby: the worker retries with backoff while the pool role is refused"
sql "ALTER ROLE $reader_role CONNECTION LIMIT 0"
"$worker_bin" --dsn "$(dsn "$repl_role")" --pool-dsn "$(dsn "$reader_role")" --slot "$slot" \
  --status-dir "$status_dir" --status-interval 1s --sink "file:$docs" --live all >>"$tmp/c.out" 2>>"$tmp/c.log" &
worker_pid=$!
deadline=$((SECONDS + 30))
until [ "$(grep -c "cannot start: --pool-dsn: could not connect.*too many connections.*retried in" "$tmp/c.log")" -ge 2 ]; do
  kill -0 "$worker_pid" 2>/dev/null || { code=0; wait "$worker_pid" || code=$?; worker_pid=; fail "the worker exited $code: $(tail -n 3 "$tmp/c.log")"; }
  [ $SECONDS -lt $deadline ] || fail "the worker did not retry twice in 30 s: $(tail -n 3 "$tmp/c.log")"
  sleep 0.5
done
grep -q "retried in 2s (try 1)" "$tmp/c.log" && grep -q "retried in 4s (try 2)" "$tmp/c.log" ||
  fail "no backoff: $(grep "retried in" "$tmp/c.log")"
sql "ALTER ROLE $reader_role CONNECTION LIMIT -1"
sql "UPDATE acct SET bal = 3 WHERE id = 1"
settle 30
[ "$(doc_equals_query db:acct:1 "$doc_sql")" = t ] || fail "db:acct:1 lacks the update: $(last_doc db:acct:1)"
stop_worker
echo PASS
