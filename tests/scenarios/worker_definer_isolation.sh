#!/usr/bin/env bash
# One definer (or any role) cannot reach another definer's docs through the real worker:
#   - mal may not redefine vic's query; vic's keys query keeps the search_path of its watch, so mal's
#     function of the same name in its own schema never runs as vic's reader role, and nothing of
#     vic's secret reaches the sink;
#   - mal loses SELECT on a table: its computes are refused at once (compute_as), and when it reads
#     the table through dynamic SQL in a function of its own, the reader role keeps no grant mal
#     lost (grant_reader takes it back); nothing of it is published;
#   - w's query resolves `||` to an operator of a schema w may use: the worker publishes the doc w
#     checked, not one computed with pg_catalog's ||;
#   - a role with no grant at all emits 1500 "docsync.definitions" messages: the next change is
#     published within 5 s all the same (the worker ignores messages docsync did not emit and
#     coalesces reloads).
set -euo pipefail
test_name=isolation
# shellcheck source=lib/worker_env.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib/worker_env.bash"
vic=docsync_vic_$$
mal=docsync_mal_$$
w=docsync_w_$$
nobody=docsync_nobody_$$
drop_roles() {
  psql -X -q -d postgres -c "DROP ROLE IF EXISTS $vic" -c "DROP ROLE IF EXISTS $mal" -c "DROP ROLE IF EXISTS $w" \
    -c "DROP ROLE IF EXISTS $nobody" >/dev/null 2>&1
}
cleanup_hooks+=(drop_roles)

setup_db
psql -X -q -v ON_ERROR_STOP=1 -d postgres -c "CREATE ROLE $vic" -c "CREATE ROLE $mal" -c "CREATE ROLE $w" \
  -c "CREATE ROLE $nobody LOGIN" -c "GRANT docsync_admin TO $vic, $mal, $w"
sql "CREATE SCHEMA vs AUTHORIZATION $vic; CREATE SCHEMA m AUTHORIZATION $mal; CREATE SCHEMA ws AUTHORIZATION $w"
sql "CREATE SCHEMA app; CREATE TABLE app.salaries (id int PRIMARY KEY, pay int); INSERT INTO app.salaries VALUES (1, 987654)
     ; GRANT USAGE ON SCHEMA app TO $mal; GRANT SELECT ON app.salaries TO $mal"
sql "CREATE SCHEMA ops; CREATE SCHEMA opf
     ; CREATE FUNCTION opf.cat_int(a text, b int) RETURNS text LANGUAGE sql IMMUTABLE
         AS \$\$ SELECT pg_catalog.textcat(a, pg_catalog.textcat('<', pg_catalog.textcat(b::text, '>'))) \$\$
     ; CREATE OPERATOR ops.|| (LEFTARG = text, RIGHTARG = int, FUNCTION = opf.cat_int)
     ; GRANT USAGE ON SCHEMA ops, opf TO $w"
# vic: a doc from its secret table, with a keys watch resolved in vic's schema
sql "SET ROLE $vic;
     CREATE TABLE vs.secret (id int PRIMARY KEY, s text); INSERT INTO vs.secret VALUES (1, 'TOPSECRET');
     CREATE TABLE vs.orders (code text PRIMARY KEY, total int); INSERT INTO vs.orders VALUES ('A1', 10);
     CREATE TABLE vs.items (id int PRIMARY KEY, code text); INSERT INTO vs.items VALUES (1, 'A1');
     CREATE FUNCTION vs.code_of(i int) RETURNS text LANGUAGE sql STABLE AS \$\$ SELECT code FROM vs.items WHERE id = i \$\$;
     SELECT docsync.define_query('vq', \$\$SELECT jsonb_build_object('total', (SELECT total FROM orders WHERE code = \$1), 'n', (SELECT count(*) FROM secret))\$\$, ARRAY['code'], search_path => 'vs', watches => 'manual');
     SELECT docsync.watch('vq', 'vs.orders', params => ARRAY['code'], search_path => 'vs');
     SELECT docsync.watch('vq', 'vs.items', keys_sql => 'SELECT code_of(\$1)', keys_args => ARRAY['id'], search_path => 'vs')" >/dev/null
# mal: its own query, and one reading the salaries it may read for now
sql "SET ROLE $mal;
     CREATE TABLE m.t (id int PRIMARY KEY); INSERT INTO m.t VALUES (1);
     SELECT docsync.define_query('pay', \$\$SELECT jsonb_build_object('pay', (SELECT pay FROM app.salaries s WHERE s.id = t.id)) FROM m.t WHERE id = \$1\$\$, ARRAY['id'], search_path => 'm', watches => 'manual');
     SELECT docsync.watch('pay', 'm.t', params => ARRAY['id'], search_path => 'm')" >/dev/null
# w: || resolved through ops
sql "SET ROLE $w;
     CREATE TABLE ws.t (id int PRIMARY KEY);
     SELECT docsync.define_query('wq', \$\$SELECT to_jsonb('id' || \$1::int)\$\$, ARRAY['id'], search_path => 'ops, ws', watches => 'manual');
     SELECT docsync.watch('wq', 'ws.t', params => ARRAY['id'], search_path => 'ws')" >/dev/null
grant_reader
sql "GRANT SELECT ON vs.items TO docsync_reader_$vic"  # what vs.code_of reads: function bodies are the DBA's to grant
start_worker

# (1) mal tries to take over vic's query under a schema of its own
sql "SET ROLE $mal; GRANT USAGE ON SCHEMA m TO PUBLIC;
     CREATE FUNCTION m.code_of(i int) RETURNS text LANGUAGE plpgsql STABLE AS \$f\$
       DECLARE r text; BEGIN EXECUTE 'SELECT current_user || '':'' || string_agg(s, '','') FROM vs.secret' INTO r; RETURN r; END \$f\$" >/dev/null
if sql "SET ROLE $mal; SELECT docsync.define_query('vq', \$\$SELECT jsonb_build_object('leak', \$1::text)\$\$, ARRAY['code'], or_replace => true, search_path => 'm', watches => 'manual')" >/dev/null 2>"$tmp/redefine.err"; then
  fail "mal redefined vic's query"
fi
grep -q "permission denied to redefine docsync query \"vq\"" "$tmp/redefine.err" || fail "unexpected error: $(cat "$tmp/redefine.err")"
sql "UPDATE vs.items SET code = 'A1' WHERE id = 1"
settle
[ "$(last_doc 'db:vq:A1')" = '{"n":1,"total":10}' ] || fail "vic's doc db:vq:A1 is $(last_doc 'db:vq:A1')"
! grep -q TOPSECRET "$docs" || fail "vic's secret was published: $(grep TOPSECRET "$docs" | head -n 1)"

# (2) mal loses SELECT on the salaries and reads them through dynamic SQL in its own function
sql "REVOKE SELECT ON app.salaries FROM $mal; REVOKE USAGE ON SCHEMA app FROM $mal"
# at once, with no definitions reload: the compute as mal's reader role is refused (compute_as)
sql "SET ROLE $mal; UPDATE m.t SET id = 1 WHERE id = 1"
settle
! grep -q 987654 "$docs" || fail "the salaries were published after the REVOKE: $(grep 987654 "$docs" | head -n 1)"
grep -q "no longer holds .* which its reader role" "$tmp/worker.log" || fail "the worker did not report the refused compute"
[ "$(sql "SELECT refused IS NOT NULL FROM docsync.queries WHERE name = 'pay'")" = t ] ||
  fail "mal's query was not refused after the REVOKE: $(sql "SELECT refused FROM docsync.queries WHERE name = 'pay'")"
sql "SET ROLE $mal;
     CREATE FUNCTION m.peek() RETURNS text LANGUAGE plpgsql STABLE AS \$f\$
       DECLARE r text; BEGIN EXECUTE 'SELECT string_agg(pay::text, '','') FROM app.salaries' INTO r; RETURN r; END \$f\$;
     SELECT docsync.define_query('pay', \$\$SELECT jsonb_build_object('pay', m.peek()) FROM m.t WHERE id = \$1\$\$, ARRAY['id'], or_replace => true, search_path => 'm', watches => 'manual')" >/dev/null
grant_reader
[ "$(sql "SELECT has_table_privilege('docsync_reader_$mal', 'app.salaries', 'SELECT')")" = f ] ||
  fail "mal's reader role still holds SELECT on app.salaries"
sql "SET ROLE $mal; UPDATE m.t SET id = 1 WHERE id = 1"
settle
! grep -q 987654 "$docs" || fail "the salaries were published: $(grep 987654 "$docs" | head -n 1)"

# (3) the doc w checked, with its operator
sql "INSERT INTO ws.t VALUES (7)"
settle
[ "$(last_doc 'db:wq:7')" = '"id<7>"' ] || fail "w's doc db:wq:7 is $(last_doc 'db:wq:7'), not the \"id<7>\" w checked"

# (4) a flood of definitions messages from a role with no grant
for _ in $(seq 1 1500); do echo "SELECT pg_logical_emit_message(true, 'docsync.definitions', 'x');"; done |
  psql -X -q -At -U "$nobody" -d "$db" >/dev/null
sql "INSERT INTO ws.t VALUES (8)"
deadline=$((SECONDS + 5))
until [ "$(last_doc 'db:wq:8')" = '"id<8>"' ]; do
  [ $SECONDS -lt $deadline ] || fail "the change after 1500 messages from $nobody was not published within 5 s"
  sleep 0.2
done
echo "PASS: definers isolated through the worker"
