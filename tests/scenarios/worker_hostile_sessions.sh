#!/usr/bin/env bash
# Invariant 7 (docs/design.md) against customer SQL that reaches past its own transaction, through
# the whole worker with the recommended pool role (docsync.grant_reader), on a pool of 3
# connections:
#   - a doc query that takes a session-level advisory lock and leaves it behind: every compute ends
#     with pg_advisory_unlock_all(), so computes of the same doc query on the other pooled
#     connections never wait for it and no advisory lock outlives a compute;
#   - doc queries that read or advance the worker's own slot (pg_logical_slot_get_changes, …_peek_…,
#     pg_replication_slot_advance): refused for want of REPLICATION, a permanent outcome in
#     docsync.query_stats; the walsender is never disturbed and the docs stay current;
#   - dblink (when the server has it): writing through it, or connecting as another role, is refused
#     (a non-superuser's dblink needs a password the server asks for);
#   - keys queries (reverse indexes) that write, return more rows than --max-keys, return more
#     columns than the doc query has params (a view widened after the watch was made): permanent
#     outcomes, the slot moves; one whose keys have another type than the doc param (text for an
#     int) is refused when the watch is made;
#   - a keys query that sleeps past --statement-timeout: a failure of the environment, so it holds
#     the slot and wait_published, shown in docsync.status, until its query is dropped.
set -euo pipefail
test_name=hostile_sessions
# shellcheck source=lib/worker_env.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib/worker_env.bash"

setup_db
sql "CREATE TABLE t (id int PRIMARY KEY, v int NOT NULL)"
sql "INSERT INTO t SELECT g, 0 FROM generate_series(1, 6) g"
# k maps to t's rows through the keys queries below.
sql "CREATE TABLE k (id int PRIMARY KEY, t_id int NOT NULL)"
sql "ALTER TABLE k REPLICA IDENTITY FULL"  # keys_args t_id is not in the primary key
sql "INSERT INTO k SELECT g, g FROM generate_series(1, 6) g"
sql "CREATE VIEW kv AS SELECT t_id FROM k"
# ks reaches t through the keys query that sleeps.
sql "CREATE TABLE ks (id int PRIMARY KEY, t_id int NOT NULL)"
sql "ALTER TABLE ks REPLICA IDENTITY FULL"
sql "INSERT INTO ks VALUES (1, 1)"
sql "CREATE TABLE scribbles (id int)"
sql "CREATE FUNCTION scribble(i int) RETURNS int LANGUAGE plpgsql AS \$f\$BEGIN INSERT INTO scribbles VALUES (i); RETURN i; END\$f\$"
by_id="SELECT jsonb_build_object('id', t.id, 'v', t.v) FROM t WHERE t.id = \$1"
define() { # NAME SQL: a doc query of one param, watched directly on t
  sql "SELECT docsync.define_query('$1', \$q\$$2\$q\$, params => ARRAY['id'], watches => 'manual')" >/dev/null
  sql "SELECT docsync.watch('$1', 't', params => ARRAY['id'])" >/dev/null
}
define_keys() { # NAME KEYS-SQL: the doc query by_id, reached from k through KEYS-SQL
  sql "SELECT docsync.define_query('$1', \$q\$$by_id\$q\$, params => ARRAY['id'], watches => 'manual')" >/dev/null
  sql "SELECT docsync.watch('$1', 'k', keys_sql => \$q\$$2\$q\$, keys_args => ARRAY['t_id'])" >/dev/null
}

define good "$by_id"
define locker "SELECT jsonb_build_object('id', t.id, 'v', t.v, 'locked', pg_advisory_lock(4242) IS NOT NULL) FROM t WHERE t.id = \$1"
slot_fns=(get peek advance get_binary)
define get "SELECT jsonb_build_object('id', \$1::int, 'n', (SELECT count(*) FROM pg_logical_slot_get_changes('$slot', NULL, NULL)))"
define peek "SELECT jsonb_build_object('id', \$1::int, 'n', (SELECT count(*) FROM pg_logical_slot_peek_changes('$slot', NULL, NULL)))"
define get_binary "SELECT jsonb_build_object('id', \$1::int, 'n', (SELECT count(*) FROM pg_logical_slot_get_binary_changes('$slot', NULL, NULL)))"
define advance "SELECT jsonb_build_object('id', \$1::int, 'to', (SELECT end_lsn FROM pg_replication_slot_advance('$slot', pg_current_wal_lsn()))::text)"

dblink_fns=()
if [ "$(sql "SELECT count(*) FROM pg_available_extensions WHERE name = 'dblink'")" = 1 ]; then
  sql "CREATE EXTENSION dblink"
  dblink_fns=(dblink_write dblink_as dblink_u)
  loopback="host=$PGHOST port=$PGPORT dbname=$db"
  define dblink_write "SELECT jsonb_build_object('id', \$1::int, 'r', dblink_exec('$loopback user=postgres', 'INSERT INTO scribbles VALUES (' || \$1::int || ')'))"
  define dblink_as "SELECT jsonb_build_object('id', \$1::int, 'r', (SELECT x FROM dblink('host=127.0.0.1 port=$PGPORT dbname=$db user=$repl_role', 'SELECT 1') AS d(x int)))"
  define dblink_u "SELECT jsonb_build_object('id', \$1::int, 'r', dblink_connect_u('x', '$loopback user=postgres'))"
else
  echo "SKIP dblink: the server has no dblink extension (postgresql-15's contrib set provides it)"
fi

define_keys kwrites "SELECT scribble(\$1)"
sql "SELECT docsync.define_query('ksleeps', \$q\$$by_id\$q\$, params => ARRAY['id'], watches => 'manual')" >/dev/null
sql "SELECT docsync.watch('ksleeps', 'ks', keys_sql => \$q\$SELECT \$1::int FROM pg_sleep(4)\$q\$, keys_args => ARRAY['t_id'])" >/dev/null
define_keys khuge "SELECT g FROM generate_series(1, 200) g WHERE \$1::int IS NOT NULL"
define_keys kwide "SELECT * FROM kv WHERE t_id = \$1"
sql "SELECT docsync.define_query('kbadtype', \$q\$$by_id\$q\$, params => ARRAY['id'], watches => 'manual')" >/dev/null
if refused=$(sql "SELECT docsync.watch('kbadtype', 'k', keys_sql => \$q\$SELECT 'not a number' WHERE \$1::int IS NOT NULL\$q\$,
                                       keys_args => ARRAY['t_id'])" 2>&1); then
  fail "a keys query returning text for an integer param was accepted"
fi
grep -q 'column 1 of keys_sql is text, but param "id" of docsync query "kbadtype" is integer' <<<"$refused" ||
  fail "the refusal does not name the column and types: $refused"
sql "SELECT docsync.drop_query('kbadtype')" >/dev/null
# After the watch was checked: kwide's keys query now returns two columns for a one-param doc.
sql "CREATE OR REPLACE VIEW kv AS SELECT t_id, id FROM k"
grant_reader
sql "GRANT INSERT ON scribbles TO $reader_role"
[ "$(sql "SELECT has_table_privilege('docsync_reader_postgres', 'kv', 'SELECT')")" = t ] || fail "grant_reader did not grant SELECT on the view kv"

start_worker --statement-timeout 1s --pool 3 --max-keys 100
walsender=$(sql "SELECT active_pid FROM pg_replication_slots WHERE slot_name = '$slot'")
stats() { sql "SELECT json_agg(q ORDER BY query) FROM docsync.query_stats q WHERE slot_name = '$slot'"; }
all_current() { # QUERY SQL: every id of t has a current doc on QUERY's channel
  local id
  for id in 1 2 3 4 5 6; do
    [ "$(doc_equals_query "db:$1:$id" "$(sed "s/\\\$1/$id/g" <<<"$2")")" = t ] || return 1
  done
}

# Three rounds: each changes every row of t and of k in one transaction, so each doc query runs for
# six docs at once over the three pooled connections.
for round in 1 2 3; do
  before=$(sql "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = '$slot'")
  sql "BEGIN; UPDATE t SET v = v + 1; UPDATE k SET id = id; COMMIT"
  settle 60
  [ "$(sql "SELECT confirmed_flush_lsn > '$before' FROM pg_replication_slots WHERE slot_name = '$slot'")" = t ] ||
    fail "round $round: confirmed_flush_lsn did not advance"
  all_current good "$by_id" || fail "round $round: the docs of good are not current"
  all_current locker "SELECT jsonb_build_object('id', t.id, 'v', t.v, 'locked', true) FROM t WHERE t.id = \$1" ||
    fail "round $round: the docs of locker are not current (a compute waited for an advisory lock left behind?): $(stats)"
done
echo "three rounds: every doc of good and locker current, the slot advanced each time"

# (a) the advisory lock never outlived a compute.
[ "$(sql "SELECT permanent_failures FROM docsync.query_stats WHERE slot_name = '$slot' AND query = 'locker'")" = 0 ] ||
  fail "locker failed: $(stats)"
[ "$(sql "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid)
           WHERE l.locktype = 'advisory' AND a.usename = '$reader_role'")" = 0 ] ||
  fail "a pooled connection still holds an advisory lock"
[ "$(sql "SELECT pg_try_advisory_lock(4242)")" = t ] || fail "advisory lock 4242 is held by someone"
echo "advisory locks taken by a doc query never outlived its compute"

check_failed() { # QUERY LIKE-PATTERN
  wait_for 20 "SELECT permanent_failures >= 1 AND last_error LIKE '$2' FROM docsync.query_stats WHERE slot_name = '$slot' AND query = '$1'" ||
    fail "query $1 did not fail as expected ($2): $(stats)"
  [ -z "$(last_doc "db:$1:1")" ] || fail "db:$1:1 was published: $(last_doc "db:$1:1" | head -c 200)"
}
# (b) the worker's own slot: refused, and the walsender never restarted.
for q in "${slot_fns[@]}"; do check_failed "$q" '%must be superuser or replication role%'; done
[ "$(sql "SELECT active_pid FROM pg_replication_slots WHERE slot_name = '$slot'")" = "$walsender" ] ||
  fail "the slot's walsender changed: the stream was disturbed"
# (c) dblink.
for q in "${dblink_fns[@]}"; do
  case $q in
    dblink_u) check_failed "$q" '%permission denied for function dblink_connect_u%' ;;
    *) check_failed "$q" '%password%' ;;
  esac
done
[ "$(sql "SELECT count(*) FROM scribbles")" = 0 ] || fail "a doc or keys query wrote to scribbles"
# (d) keys queries.
check_failed kwrites '%read-only transaction%'
check_failed khuge '%over --max-keys (100)%'
check_failed kwide '%returned 2 columns; query "kwide" takes 1 params%'
echo "refused: $(sql "SELECT string_agg(query || ': ' || left(last_error, 110), E'\n  ' ORDER BY query)
                       FROM docsync.query_stats WHERE slot_name = '$slot' AND permanent_failures > 0")"

# (e) a keys query past --statement-timeout holds the slot until its query is dropped.
sql "UPDATE ks SET t_id = 2"
held=$(sql "SELECT pg_current_wal_lsn()")
wait_for 20 "SELECT last_error LIKE '%timed out%' AND transient_retries > 0 FROM docsync.status WHERE slot_name = '$slot'" ||
  fail "docsync.status does not show the keys query's timeout: $(sql "SELECT row_to_json(s) FROM docsync.status s WHERE slot_name = '$slot'")"
[ "$(sql "CALL docsync.wait_published('$held', '3s')")" = f ] || fail "wait_published passed a change whose keys lookup times out"
[ "$(sql "SELECT permanent_failures FROM docsync.query_stats WHERE slot_name = '$slot' AND query = 'ksleeps'")" = 0 ] ||
  fail "the keys query's timeout was recorded as a permanent outcome: $(stats)"
sql "SELECT docsync.drop_query('ksleeps')" >/dev/null
[ "$(sql "CALL docsync.wait_published('$held', '30s')")" = t ] || fail "after drop_query('ksleeps') the slot never passed $held"
echo "a keys query past --statement-timeout held the slot until its query was dropped"

# The slot keeps moving after all of that, and good stays current.
sql "UPDATE t SET v = v + 10 WHERE id = 3"
settle 30
all_current good "$by_id" || fail "after the hostile queries: the docs of good are not current"
[ "$(sql "SELECT worker_state FROM docsync.status WHERE slot_name = '$slot'")" = streaming ] || fail "the worker is not streaming"
stop_worker
echo "ok"
