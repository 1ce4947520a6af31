#!/usr/bin/env bash
# Invariant 7 (docs/design.md) through the whole worker, with the recommended pool role
# (docsync.grant_reader): doc queries that try to write, that switch default_transaction_read_only
# off and then write, that return two rows, and that return 10 MB each end as a permanent outcome
# visible in docsync.query_stats and docsync.status, while another query on the same table keeps
# publishing and confirmed_flush_lsn keeps advancing. A doc query that sleeps past
# --statement-timeout is a failure of the environment, not an outcome: it holds the slot (and
# wait_published) with the timeout shown in docsync.status, until it is redefined. Then the
# start-up check of the pool role: SUPERUSER, REPLICATION, pg_read_server_files and
# pg_signal_backend members, a role two memberships from a superuser, and a table owner are refused
# with a message naming the path and exit status 1; so is a superuser --dsn role;
# --allow-unsafe-pool starts with a loud warning.
set -euo pipefail
test_name=hostile
# shellcheck source=lib/worker_env.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib/worker_env.bash"
unsafe_role=docsync_unsafe_$$
mid_role=docsync_mid_$$
drop_unsafe() {
  psql -X -q -d "$db" -c "DROP TABLE IF EXISTS owned" >/dev/null 2>&1
  psql -X -q -d postgres -c "DROP ROLE IF EXISTS $unsafe_role" -c "DROP ROLE IF EXISTS $mid_role" >/dev/null 2>&1
}
cleanup_hooks+=(drop_unsafe)

setup_db
sql "CREATE TABLE t (id int PRIMARY KEY, v int NOT NULL)"
# A table the reader may write to: only the read-only transaction stands between a doc query and it.
sql "CREATE TABLE scribbles (id int)"
sql "INSERT INTO t VALUES (1, 0), (2, 0)"
define() {
  sql "SELECT docsync.define_query('$1', \$q\$$2\$q\$, params => ARRAY['id'], watches => 'manual')" >/dev/null
  sql "SELECT docsync.watch('$1', 't', params => ARRAY['id'])" >/dev/null
}
define good "SELECT jsonb_build_object('id', t.id, 'v', t.v) FROM t WHERE t.id = \$1"
# define_query refuses a data-modifying WITH; a volatile function hides the write from it.
sql "CREATE FUNCTION scribble(i int) RETURNS int LANGUAGE plpgsql AS \$f\$BEGIN INSERT INTO scribbles VALUES (i); RETURN i; END\$f\$"
sql "CREATE FUNCTION escape_and_scribble(i int) RETURNS int LANGUAGE plpgsql AS \$f\$BEGIN
       PERFORM set_config('default_transaction_read_only', 'off', false);
       INSERT INTO scribbles VALUES (i); RETURN i; END\$f\$"
define writes "SELECT jsonb_build_object('wrote', scribble(\$1::int))"
define escapes "SELECT jsonb_build_object('ro', set_config('default_transaction_read_only', 'off', false), 'wrote', escape_and_scribble(\$1::int))"
sql "CREATE TABLE slow (id int PRIMARY KEY, v int NOT NULL)"
sql "INSERT INTO slow VALUES (1, 0)"
sql "SELECT docsync.define_query('sleeps', \$q\$SELECT jsonb_build_object('id', \$1::int, 'slept', pg_sleep(4)::text)\$q\$, params => ARRAY['id'], watches => 'manual')" >/dev/null
sql "SELECT docsync.watch('sleeps', 'slow', params => ARRAY['id'])" >/dev/null
define tworows "SELECT jsonb_build_object('id', \$1::int, 'g', g) FROM generate_series(1, 2) g"
define huge "SELECT jsonb_build_object('id', \$1::int, 'pad', repeat('x', 10 * 1024 * 1024))"
grant_reader
sql "GRANT INSERT ON scribbles TO $reader_role"

start_worker --statement-timeout 1s --pool 3
good="SELECT jsonb_build_object('id', id, 'v', v) FROM t WHERE id = 1"
for round in 1 2 3; do
  # read before the change: a fast worker may acknowledge it before a read after it
  before=$(sql "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = '$slot'")
  sql "UPDATE t SET v = v + 1 WHERE id = 1"
  settle 30
  [ "$(doc_equals_query db:good:1 "$good")" = t ] || fail "round $round: db:good:1 is $(last_doc db:good:1), not current"
  [ "$(sql "SELECT confirmed_flush_lsn > '$before' FROM pg_replication_slots WHERE slot_name = '$slot'")" = t ] ||
    fail "round $round: confirmed_flush_lsn did not advance"
done
echo "the good query kept publishing and the slot kept advancing through three rounds"

stats() { sql "SELECT json_agg(q) FROM docsync.query_stats q WHERE slot_name = '$slot'"; }
check_failed() { # QUERY LIKE-PATTERN
  wait_for 15 "SELECT permanent_failures >= 1 AND last_error LIKE '$2' AND last_error_at > now() - interval '1 min' FROM docsync.query_stats WHERE slot_name = '$slot' AND query = '$1'" ||
    fail "query $1 did not fail as expected ($2): $(stats)"
}
check_failed writes '%read-only transaction%'
check_failed escapes '%read-only transaction%'
check_failed tworows '%row%'
check_failed huge '%bytes%'
# (waited for: docsync.query_stats reads the status file, written every status interval)
wait_for 15 "SELECT permanent_failures = 0 AND recomputes >= 3 FROM docsync.query_stats WHERE slot_name = '$slot' AND query = 'good'" ||
  fail "the good query failed or did not run: $(stats)"
[ "$(sql "SELECT count(*) FROM scribbles")" = 0 ] || fail "a doc query wrote to scribbles"
for q in writes escapes tworows huge; do
  [ -z "$(last_doc "db:$q:1")" ] || fail "db:$q:1 was published: $(last_doc "db:$q:1" | head -c 200)"
done
[ "$(sql "SELECT permanent_failures >= 5 AND last_error LIKE 'doc query %' AND last_error_at > now() - interval '1 min'
                AND worker_state = 'streaming' FROM docsync.status WHERE slot_name = '$slot'")" = t ] ||
  fail "docsync.status does not show the failures: $(sql "SELECT row_to_json(s) FROM docsync.status s WHERE slot_name = '$slot'")"
echo "every hostile query failed visibly: $(sql "SELECT string_agg(query || ': ' || left(last_error, 90), E'\n  ' ORDER BY query) FROM docsync.query_stats WHERE slot_name = '$slot' AND permanent_failures > 0")"

# A timeout holds the slot: it is the environment's, and its doc has no outcome yet.
sql "UPDATE slow SET v = v + 1 WHERE id = 1"
held=$(sql "SELECT pg_current_wal_lsn()")
wait_for 20 "SELECT last_error LIKE '%sleeps%timed out%' AND transient_retries > 0 FROM docsync.status WHERE slot_name = '$slot'" ||
  fail "docsync.status does not show the timeout: $(sql "SELECT row_to_json(s) FROM docsync.status s WHERE slot_name = '$slot'")"
[ "$(sql "CALL docsync.wait_published('$held', '3s')")" = f ] || fail "wait_published passed a change whose doc query times out"
[ "$(sql "SELECT confirmed_flush_lsn < '$held' FROM pg_replication_slots WHERE slot_name = '$slot'")" = t ] ||
  fail "the slot confirmed a change whose doc query times out"
[ "$(sql "SELECT permanent_failures FROM docsync.query_stats WHERE slot_name = '$slot' AND query = 'sleeps'")" = 0 ] ||
  fail "a timeout was recorded as a permanent outcome: $(stats)"
[ -z "$(last_doc db:sleeps:1)" ] || fail "db:sleeps:1 was published: $(last_doc db:sleeps:1)"
# Redefined to finish in time, the doc is published and the slot moves on.
sql "SELECT docsync.define_query('sleeps', \$q\$SELECT jsonb_build_object('id', \$1::int, 'slept', pg_sleep(0.1)::text)\$q\$, params => ARRAY['id'], or_replace => true, watches => 'manual')" >/dev/null
[ "$(sql "CALL docsync.wait_published('$held', '30s')")" = t ] || fail "after the redefinition the slot never passed $held"
[ -n "$(last_doc db:sleeps:1)" ] || fail "after the redefinition db:sleeps:1 was not published"
echo "a doc query past --statement-timeout held the slot until it was redefined"
stop_worker

# The pool role check at start. Each attempt uses a fresh slot name so nothing is left behind.
refused() { # DESCRIPTION EXPECTED-PROBLEM ROLE-SETUP...
  local what=$1 problem=$2; shift 2
  drop_unsafe
  psql -X -q -v ON_ERROR_STOP=1 -d postgres -c "CREATE ROLE $unsafe_role LOGIN" "$@"
  local rc=0
  timeout 60 "$worker_bin" --dsn "$(dsn "$repl_role")" --pool-dsn "$(dsn "$unsafe_role")" --slot "$slot" \
    --sink "file:$tmp/unsafe.jsonl" --status-dir "$status_dir" >"$tmp/unsafe.out" 2>"$tmp/unsafe.err" || rc=$?
  [ $rc -eq 1 ] || fail "a $what pool role: exit $rc, expected 1; $(cat "$tmp/unsafe.err")"
  grep -qF "pool role \"$unsafe_role\" is not harmless ($problem" "$tmp/unsafe.err" ||
    fail "a $what pool role: the message does not name $problem: $(cat "$tmp/unsafe.err")"
  grep -q -- "--allow-unsafe-pool" "$tmp/unsafe.err" || fail "the refusal does not mention --allow-unsafe-pool"
  echo "refused a $what pool role: $(grep -o 'is not harmless ([^)]*)' "$tmp/unsafe.err")"
}
refused superuser "$unsafe_role is a superuser" -c "ALTER ROLE $unsafe_role SUPERUSER"
refused replication "$unsafe_role has REPLICATION" -c "ALTER ROLE $unsafe_role REPLICATION"
refused "pg_read_server_files member" "$unsafe_role is a member of pg_read_server_files" -c "GRANT pg_read_server_files TO $unsafe_role"
refused "pg_signal_backend member" "$unsafe_role is a member of pg_signal_backend" -c "GRANT pg_signal_backend TO $unsafe_role"
# Through memberships: a plpgsql function could SET ROLE to any role the pool role belongs to.
refused "two memberships from a superuser" "$unsafe_role is a member of $mid_role, which is a member of postgres, a superuser" \
  -c "CREATE ROLE $mid_role" -c "GRANT postgres TO $mid_role" -c "GRANT $mid_role TO $unsafe_role"
refused "table owner" "$unsafe_role owns table public.owned" -c "\\c $db" -c "CREATE TABLE owned (id int)" \
  -c "ALTER TABLE owned OWNER TO $unsafe_role"

# The --dsn role holds the slot: a superuser there is refused the same way.
rc=0
timeout 60 "$worker_bin" --dsn "$(dsn postgres)" --pool-dsn "$(dsn "$reader_role")" --slot "$slot" \
  --sink "file:$tmp/unsafe.jsonl" --status-dir "$status_dir" >"$tmp/unsafe.out" 2>"$tmp/unsafe.err" || rc=$?
[ $rc -eq 1 ] || fail "a superuser --dsn role: exit $rc, expected 1; $(cat "$tmp/unsafe.err")"
grep -qF "the replication role of --dsn is not harmless (postgres is a superuser)" "$tmp/unsafe.err" ||
  fail "a superuser --dsn role: $(cat "$tmp/unsafe.err")"
echo "refused a superuser --dsn role"

# --allow-unsafe-pool: it starts, streams, publishes and says loudly what it is doing.
# What grant_reader would do, which refuses this role: the definer's reader role reads t, and the
# pool role computes as it.
sql "GRANT SELECT ON t TO docsync_reader_postgres; GRANT docsync_reader_postgres TO $unsafe_role;
     GRANT USAGE ON SCHEMA docsync TO $unsafe_role; GRANT EXECUTE ON FUNCTION docsync.compute_as(name, text) TO $unsafe_role"
"$worker_bin" --dsn "$(dsn "$repl_role")" --pool-dsn "$(dsn "$unsafe_role")" --slot "$slot" --allow-unsafe-pool \
  --sink "file:$docs" --status-dir "$status_dir" --status-interval 1s >"$tmp/worker.out" 2>"$tmp/worker.log" &
worker_pid=$!
wait_for 60 "SELECT active FROM pg_replication_slots WHERE slot_name = '$slot'" || fail "--allow-unsafe-pool: the worker did not start"
grep -q "WARN.*--allow-unsafe-pool: the pool role \"$unsafe_role\" is not harmless" "$tmp/worker.log" ||
  fail "--allow-unsafe-pool did not warn: $(head -n 5 "$tmp/worker.log")"
sql "UPDATE t SET v = 100 WHERE id = 1"
settle 30
[ "$(doc_equals_query db:good:1 "$good")" = t ] || fail "--allow-unsafe-pool: db:good:1 not current"
echo "ok"
