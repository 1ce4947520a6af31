#!/usr/bin/env bash
# Each definer's docs are computed with that definer's read rights, through the real worker:
#   - alice may read hr.payroll and publishes from it, so the pool role computes her docs as a
#     reader role that may read it; mal may not read it, and its doc queries try to anyway, at
#     runtime: query_to_xml, table_to_xml, ts_stat, a plpgsql function of its own, a role change.
#     None of them publishes anything of the secret: each fails as mal's reader role;
#   - mal's doc query terminates every backend of the pool role it can see while alice's docs are
#     computed: it may signal none of them, and alice's docs keep publishing.
set -euo pipefail
test_name=readers
# shellcheck source=lib/worker_env.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib/worker_env.bash"
alice=docsync_alice_$$
mal=docsync_mal_$$
drop_roles() {
  psql -X -q -d postgres -c "DROP ROLE IF EXISTS $alice" -c "DROP ROLE IF EXISTS $mal" >/dev/null 2>&1
}
cleanup_hooks+=(drop_roles)

setup_db
sql "CREATE SCHEMA hr"
sql "CREATE TABLE hr.payroll (id int PRIMARY KEY, salary int NOT NULL)"
sql "INSERT INTO hr.payroll VALUES (1, 987654)"
sql "CREATE TABLE t (id int PRIMARY KEY, v int NOT NULL)"
sql "INSERT INTO t VALUES (1, 0)"
psql -X -q -v ON_ERROR_STOP=1 -d postgres -c "CREATE ROLE $alice" -c "CREATE ROLE $mal" \
  -c "GRANT docsync_admin TO $alice, $mal"
sql "GRANT USAGE ON SCHEMA hr TO $alice; GRANT SELECT ON hr.payroll TO $alice; GRANT SELECT ON t TO $alice, $mal"
sql "CREATE SCHEMA m AUTHORIZATION $mal"
sql "SET ROLE $alice;
     SELECT docsync.define_query('pay', 'SELECT jsonb_build_object(''salary'', p.salary, ''v'', t.v) FROM hr.payroll p JOIN t USING (id) WHERE t.id = \$1', params => ARRAY['id'], search_path => 'public', watches => 'manual');
     SELECT docsync.watch('pay', 't', params => ARRAY['id'])" >/dev/null
sql "SET ROLE $mal;
     CREATE FUNCTION m.peek() RETURNS text LANGUAGE plpgsql AS \$f\$BEGIN RETURN (SELECT string_agg(salary::text, ',') FROM hr.payroll); END\$f\$;
     CREATE FUNCTION m.kill() RETURNS int LANGUAGE plpgsql AS \$f\$
       DECLARE n int := 0; p int;
       BEGIN
         FOR p IN SELECT pid FROM pg_stat_activity WHERE usename = session_user AND pid <> pg_backend_pid() LOOP
           BEGIN
             IF pg_terminate_backend(p) THEN n := n + 1; END IF;
           EXCEPTION WHEN insufficient_privilege THEN NULL;
           END;
         END LOOP;
         RETURN n;
       END\$f\$;
     CREATE FUNCTION m.become() RETURNS text LANGUAGE plpgsql AS \$f\$BEGIN PERFORM set_config('role', 'docsync_reader_$alice', true); RETURN (SELECT string_agg(salary::text, ',') FROM hr.payroll); END\$f\$" >/dev/null
define_mal() {
  sql "SET ROLE $mal; SELECT docsync.define_query('$1', \$q\$$2\$q\$, params => ARRAY['id'], search_path => 'm, public', watches => 'manual');
       SELECT docsync.watch('$1', 't', params => ARRAY['id'])" >/dev/null
}
define_mal xml "SELECT to_jsonb(query_to_xml('SELECT * FROM hr.payroll', true, false, '')::text) FROM t WHERE id = \$1"
# by OID: a name would be looked up (and refused) when the query is checked
payroll_oid=$(sql "SELECT 'hr.payroll'::regclass::oid")
define_mal tab "SELECT to_jsonb(table_to_xml($payroll_oid::oid::regclass, true, false, '')::text) FROM t WHERE id = \$1"
define_mal tss "SELECT to_jsonb(array_agg(s.word)) FROM t, ts_stat('SELECT to_tsvector(salary::text) FROM hr.payroll') s WHERE t.id = \$1"
define_mal fun "SELECT to_jsonb(m.peek()) FROM t WHERE id = \$1"
define_mal rol "SELECT to_jsonb(m.become()) FROM t WHERE id = \$1"
define_mal kil "SELECT to_jsonb(m.kill()) FROM t WHERE id = \$1"
grant_reader
[ "$(sql "SELECT count(*) FROM docsync.queries WHERE refused IS NULL AND reader_role IS NOT NULL")" = 7 ] ||
  fail "the queries do not all have a reader role: $(sql "SELECT json_agg(json_build_array(name, reader_role, refused)) FROM docsync.queries")"

pay="SELECT jsonb_build_object('salary', p.salary, 'v', t.v) FROM hr.payroll p JOIN t USING (id) WHERE t.id = 1"
start_worker --statement-timeout 2s --pool 4
for v in 1 2 3 4 5; do sql "UPDATE t SET v = $v WHERE id = 1"; sleep 0.2; done
settle 30
[ "$(doc_equals_query db:pay:1 "$pay")" = t ] || fail "db:pay:1 is $(last_doc db:pay:1), not current"
if grep '"channel":"db:\(xml\|tab\|tss\|fun\|rol\|kil\):' "$docs" | grep -q 987654; then
  fail "a doc of $mal published the secret: $(grep 987654 "$docs" | head -n 3)"
fi
for q in xml tab tss fun rol; do
  wait_for 15 "SELECT permanent_failures >= 1 FROM docsync.query_stats WHERE slot_name = '$slot' AND query = '$q'" ||
    fail "$q did not fail: $(sql "SELECT json_agg(q) FROM docsync.query_stats q WHERE slot_name = '$slot'")"
done
# m.kill() ran as mal's reader role: it signalled nobody (the pool's backends need the pool's rights)
[ "$(last_doc db:kil:1)" = 0 ] || fail "db:kil:1 is $(last_doc db:kil:1): a compute signalled the pool's backends"
grep -q "terminating connection due to administrator command" "$tmp/worker.log" &&
  fail "a pool connection was terminated: $(grep -m 3 'terminating connection' "$tmp/worker.log")"
echo "mal's runtime reads and signals failed as its reader role; alice's docs published"
stop_worker
echo "ok"
