#!/usr/bin/env bash
# A definition never reads or runs more than its definer may, through the whole worker:
#   - a definition written around the API (a superuser's INSERT, as a restore with triggers disabled
#     writes it) whose SQL is a COPY is refused: a permanent failure of that query alone, never run;
#   - a definition whose definer lost SELECT after defining it is refused from the next definitions
#     reload on, and grant_reader refuses to grant for it;
#   - a stored query returning 200 000 nested brackets neither crashes nor stalls the worker;
# all the while another query keeps publishing, the slot advances and SIGTERM exits 0.
set -euo pipefail
test_name=definer
# shellcheck source=lib/worker_env.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib/worker_env.bash"
alice=docsync_alice_$$
drop_alice() { psql -X -q -d postgres -c "DROP ROLE IF EXISTS $alice" >/dev/null 2>&1; }
cleanup_hooks+=(drop_alice)

setup_db
sql "CREATE TABLE t (id int PRIMARY KEY, v int NOT NULL)"
sql "CREATE TABLE secrets (id int PRIMARY KEY, ssn text)"
sql "INSERT INTO t VALUES (1, 0)"
sql "INSERT INTO secrets VALUES (1, '078-05-1120')"
psql -X -q -v ON_ERROR_STOP=1 -d postgres -c "CREATE ROLE $alice" -c "GRANT docsync_admin TO $alice"
sql "GRANT SELECT ON t, secrets TO $alice"
sql "SET ROLE $alice;
     SELECT docsync.define_query('mine', 'SELECT jsonb_build_object(''ssn'', s.ssn, ''v'', t.v) FROM t JOIN secrets s USING (id) WHERE t.id = \$1', params => ARRAY['id'], watches => 'manual');
     SELECT docsync.watch('mine', 't', params => ARRAY['id'])" >/dev/null
sql "SELECT docsync.define_query('good', 'SELECT jsonb_build_object(''id'', t.id, ''v'', t.v) FROM t WHERE t.id = \$1', params => ARRAY['id'], watches => 'manual')" >/dev/null
sql "SELECT docsync.watch('good', 't', params => ARRAY['id'])" >/dev/null
grant_reader
# Around the API: only a superuser can still write the definition tables.
sql "INSERT INTO docsync.query_defs (name, sql, params, search_path) VALUES ('copier', 'COPY (SELECT g FROM generate_series(1, 1000000) g) TO STDOUT', '{id}', 'public')"
sql "INSERT INTO docsync.watch_defs (query, table_schema, table_name, columns) VALUES ('copier', 'public', 't', '{id}')"
[ "$(sql "SELECT refused FROM docsync.queries WHERE name = 'copier'")" = "query must be a SELECT" ] ||
  fail "docsync.queries does not show why copier is refused: $(sql "SELECT refused FROM docsync.queries WHERE name = 'copier'")"

good="SELECT jsonb_build_object('id', id, 'v', v) FROM t WHERE id = 1"
mine="SELECT jsonb_build_object('ssn', s.ssn, 'v', t.v) FROM t JOIN secrets s USING (id) WHERE t.id = 1"
start_worker --statement-timeout 2s
sql "UPDATE t SET v = 1 WHERE id = 1"
settle 30
[ "$(doc_equals_query db:good:1 "$good")" = t ] || fail "db:good:1 is $(last_doc db:good:1), not current"
[ "$(doc_equals_query db:mine:1 "$mine")" = t ] || fail "db:mine:1 is $(last_doc db:mine:1), not current"
[ -z "$(last_doc db:copier:1)" ] || fail "db:copier:1 was published"
wait_for 15 "SELECT permanent_failures >= 1 AND last_error LIKE '%is refused: query must be a SELECT%' FROM docsync.query_stats WHERE slot_name = '$slot' AND query = 'copier'" ||
  fail "copier was not refused: $(sql "SELECT json_agg(q) FROM docsync.query_stats q WHERE slot_name = '$slot'")"
echo "a COPY written around the API was refused; the other queries published"

# The definer loses SELECT: from the next definitions reload (here a restart) the query is refused.
sql "REVOKE SELECT ON secrets FROM $alice"
stop_worker
[ "$(sql "SELECT refused LIKE 'doc query \"mine\" reads what its definer $alice may not: permission denied for table secrets' FROM docsync.queries WHERE name = 'mine'")" = t ] ||
  fail "docsync.queries does not refuse mine: $(sql "SELECT refused FROM docsync.queries WHERE name = 'mine'")"
# grant_reader names each refused definition, grants nothing for it (and takes back what alice lost),
# and still grants what the other definitions need: one refused query never stops everyone's grants
out=$(sql "SELECT docsync.grant_reader('$reader_role')" 2>&1) || fail "grant_reader failed for every definer: $out"
case $out in *'docsync query "copier" is refused, so nothing is granted for it'*) ;; *) fail "grant_reader did not name copier: $out" ;; esac
case $out in *'docsync query "mine" is refused, so nothing is granted for it'*) ;; *) fail "grant_reader did not name mine: $out" ;; esac
[ "$(sql "SELECT has_table_privilege(reader, 'secrets', 'SELECT') FROM docsync.reader_roles WHERE definer = '$alice'")" = f ] ||
  fail "alice's reader role still holds SELECT on secrets, which alice lost"
published_before=$(grep -c '"channel":"db:mine:1"' "$docs" || true)
start_worker --statement-timeout 2s
sql "UPDATE t SET v = 2 WHERE id = 1"
settle 30
[ "$(doc_equals_query db:good:1 "$good")" = t ] || fail "after the revoke: db:good:1 is $(last_doc db:good:1), not current"
wait_for 15 "SELECT last_error LIKE '%is refused: doc query \"mine\" reads what its definer%' FROM docsync.query_stats WHERE slot_name = '$slot' AND query = 'mine'" ||
  fail "mine was not refused after the revoke: $(sql "SELECT json_agg(q) FROM docsync.query_stats q WHERE slot_name = '$slot'")"
[ "$(grep -c '"channel":"db:mine:1"' "$docs")" = "$published_before" ] || fail "db:mine:1 was published after the revoke"
echo "a definer's revoked SELECT refuses its query from the next reload on"

# A stored query whose text nests 200 000 levels deep: checked iteratively, published, no crash.
sql "INSERT INTO docsync.query_defs (name, sql, params, search_path) VALUES ('deep', \$q\$SELECT repeat('[', 200000) || repeat(']', 200000) WHERE \$1::int > 0\$q\$, '{id}', 'public')"
sql "INSERT INTO docsync.watch_defs (query, table_schema, table_name, columns) VALUES ('deep', 'public', 't', '{id}')"
sql "UPDATE t SET v = 3 WHERE id = 1"
settle 30
kill -0 "$worker_pid" 2>/dev/null || fail "the worker died on a deeply nested doc"
grep -q '"channel":"db:deep:1"' "$docs" || fail "db:deep:1 was not published"
stop_worker
echo "ok"
