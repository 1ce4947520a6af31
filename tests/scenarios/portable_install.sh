#!/usr/bin/env bash
# The portable install (docs/portable.md) on a server that has no docsync library, as managed
# PostgreSQL offers it: a cluster of its own started without the extension (and, where the server
# has output_plugin_libraries, with docsync left out of it), a role docsync_owner LOGIN CREATEDB
# CREATEROLE REPLICATION owning a new database, and sql/docsync-portable.sql (make portable) run by
# that role with psql. Then, as that role, a definer and an intruder:
#   - the install is portable, has no C function and no event trigger, and a second run refuses;
#   - queries and watches are defined, the definition views show them, grant_reader grants what the
#     definer may read and compute_as computes a doc as the definer's reader role, which it lends
#     the pool role for the compute's transaction alone (refused in a read-only transaction, for a
#     role that is no pool or no reader role, a second time, or while the pool role is a member of
#     a reader role, which grant_reader takes back; a commit of the lending fails);
#   - watches are written by hand: define_query's watches defaults to 'manual', 'derived' and
#     derive_watches() raise feature_not_supported with a hint; a broadcast watch is defined, and
#     explain shows direct, keys and broadcast watches;
#   - refusals: a definer without SELECT on a table, a text of two statements or one that writes, a
#     role outside docsync_admin, another definer's query; forged calls of the writer (for a role the
#     session's user is not a member of; for itself, over a table it may not read) gain nothing; a
#     definer's code that parse analysis runs (a domain's CHECK) runs as the definer's parser role,
#     with the definer's rights, when the writer or the definitions read parses its text; what it
#     does to the session is undone (a setting, a temporary object, a row), and what a rollback keeps
#     (a prepared statement made or replaced, an advisory lock, a closed cursor) fails the parse; a
#     statement hidden where the scan and the server read quotes differently (€e'\') is refused by
#     the server's own count and never runs;
#   - channel() gives every vector of tests/channel_vectors.tsv;
#   - wait_published fails at once with no slot, times out on a lagging slot, returns true once the
#     slot confirmed the position, and waits while the worker reports a gap;
#   - the status views over rows written by hand into docsync.worker_status;
#   - installed by a superuser, the plpgsql event triggers: DDL raises the generation, a dropped
#     watched table takes its watches along; installed by the owner, none, and the install says so;
#   - with the library installed afterwards: channel() of the portable install and of the extension
#     agree over 3000 random strings.
# Needs no running server: it starts and stops its own (packaging/dev-cluster.sh).
set -euo pipefail

top=${DOCSYNC_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
export PG_CONFIG
dir=""
cleanup() { [ -z "$dir" ] || "$top/packaging/dev-cluster.sh" stop "$dir" >/dev/null 2>&1 || true; }
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

make -s -C "$top" PG_CONFIG="$PG_CONFIG" portable
script=$top/sql/docsync-portable.sql

dir=$("$top/packaging/dev-cluster.sh" start --no-install)
# shellcheck disable=SC1091
. "$dir/cluster.env"
psql_as() { local role=$1 db=$2; shift 2; timeout 60 "$DOCSYNC_PG_BINDIR/psql" -X -q -At -v ON_ERROR_STOP=1 -U "$role" -d "$db" "$@"; }
expect() { # WHAT EXPECTED ACTUAL
  [ "$3" = "$2" ] || fail "$1: expected [$2], got [$3]"
}
refused() { # WHAT PATTERN ROLE SQL: the statement fails with a message matching PATTERN
  local out
  if out=$(psql_as "$3" app -c "$4" 2>&1); then fail "$1: not refused: $out"; fi
  grep -qE "$2" <<<"$out" || fail "$1: refused, but not with /$2/: $out"
}

# a server without the library: the private copy of the server keeps none that the system's install
# may hold, no docsync extension is available, no plugin listed
rm -f "$dir/root$("$PG_CONFIG" --pkglibdir)/docsync.so" "$dir/root$("$PG_CONFIG" --sharedir)"/extension/docsync[.-]*
rm -rf "$dir/root$("$PG_CONFIG" --pkglibdir)/bitcode/docsync" "$dir/root$("$PG_CONFIG" --pkglibdir)/bitcode/docsync.index.bc"
expect "docsync library" 0 "$(psql_as postgres postgres -c "SELECT count(*) FROM pg_available_extensions WHERE name = 'docsync'")"
[ ! -e "$dir/root$("$PG_CONFIG" --pkglibdir)/docsync.so" ] || fail "docsync.so is installed"
if [ "$(psql_as postgres postgres -c "SELECT count(*) FROM pg_settings WHERE name = 'output_plugin_libraries'")" = 1 ]; then
  psql_as postgres postgres -c "ALTER SYSTEM SET output_plugin_libraries = 'pgoutput'"
  "$top/packaging/dev-cluster.sh" ctl "$dir" restart >/dev/null
fi

psql_as postgres postgres <<'SQL'
CREATE ROLE docsync_owner LOGIN CREATEDB CREATEROLE REPLICATION;
CREATE DATABASE app OWNER docsync_owner;
SQL
expect "owner is no superuser" f "$(psql_as docsync_owner app -c "SELECT rolsuper FROM pg_roles WHERE rolname = current_user")"

# the install, as the owner
out=$(timeout 120 "$DOCSYNC_PG_BINDIR/psql" -X -q -v ON_ERROR_STOP=1 -U docsync_owner -d app -f "$script" 2>&1 >/dev/null)
grep -q "WARNING:  docsync is installed without DDL event triggers" <<<"$out" || fail "the install does not say it made no event triggers: $out"
expect "install_kind" portable "$(psql_as docsync_owner app -c "SELECT docsync.install_kind()")"
expect "C functions" 0 "$(psql_as docsync_owner app -c "SELECT count(*) FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang WHERE p.pronamespace = 'docsync'::regnamespace AND l.lanname = 'c'")"
expect "event triggers" 0 "$(psql_as docsync_owner app -c "SELECT count(*) FROM pg_event_trigger")"
if out=$(timeout 60 "$DOCSYNC_PG_BINDIR/psql" -X -q -v ON_ERROR_STOP=1 -U docsync_owner -d app -f "$script" 2>&1); then
  fail "a second run was not refused"
fi
if ! grep -q 'schema "docsync" already exists' <<<"$out" || ! grep -q "docsync's portable install" <<<"$out"; then
  fail "the second run's refusal does not say what is installed: $out"
fi

# the customer's tables, a definer that may read orders, an intruder that may read nothing
psql_as docsync_owner app <<'SQL'
SET client_min_messages = warning;
CREATE TABLE orders (id int PRIMARY KEY, customer text NOT NULL, total numeric NOT NULL);
CREATE TABLE lines (order_id int NOT NULL REFERENCES orders, n int NOT NULL, item text, PRIMARY KEY (order_id, n));
ALTER TABLE lines REPLICA IDENTITY FULL;
CREATE TABLE secrets (id int PRIMARY KEY, secret text);
INSERT INTO orders VALUES (1, 'ann', 10), (2, 'bob', 20);
INSERT INTO lines VALUES (1, 1, 'tea'), (1, 2, 'cake');
INSERT INTO secrets VALUES (1, 'hunter2');
CREATE ROLE definer LOGIN IN ROLE docsync_admin;
CREATE ROLE intruder LOGIN IN ROLE docsync_admin;
CREATE ROLE outsider LOGIN;
CREATE ROLE docsync_pool LOGIN;
GRANT USAGE ON SCHEMA docsync TO definer, intruder, outsider;
GRANT SELECT ON orders, lines TO definer;
SQL

psql_as definer app >/dev/null <<'SQL'
BEGIN;
SELECT docsync.define_query('order',
  $q$SELECT jsonb_build_object('id', o.id, 'total', o.total,
                               'lines', (SELECT coalesce(jsonb_agg(l.item ORDER BY l.n), '[]') FROM lines l WHERE l.order_id = o.id))
       FROM orders o WHERE o.id = $1$q$, ARRAY['id']);
SELECT docsync.watch('order', 'orders', params => ARRAY['id']);
SELECT docsync.watch('order', 'lines', keys_sql => 'SELECT o.id FROM orders o WHERE o.id = $1', keys_args => ARRAY['order_id']);
SELECT docsync.define_query('customers', $q$SELECT jsonb_agg(o.customer ORDER BY o.customer) FROM orders o$q$);
SELECT docsync.watch('customers', 'orders', params => ARRAY[]::text[]);
COMMIT;
SQL
expect "definer stored" "customers|definer|public, pg_temp
order|definer|public, pg_temp" "$(psql_as docsync_owner app -c "SELECT name, defined_by, search_path FROM docsync.query_defs ORDER BY name")"
expect "watches" "order|orders|direct||
order|lines|keys||
customers|orders|direct||" \
  "$(psql_as definer app -c "SELECT query, table_name, kind, problem, NULL FROM docsync.watches ORDER BY id")"
expect "tables read" "{orders,lines}" "$(psql_as definer app -c "SELECT docsync.tables_read('order')")"
expect "analysis" "{integer}|{jsonb}" "$(psql_as definer app -c "SELECT param_types, result_types FROM docsync.analyze_query('SELECT to_jsonb(o) FROM orders o WHERE o.id = \$1')")"

# derived watches need the extension's C analysis: watches defaults to 'manual', and 'derived' or a
# call of derive_watches raises feature_not_supported saying to write the watches by hand
expect "watches by hand by default" "customers|manual|0
order|manual|0" "$(psql_as definer app -c "SELECT q.name, q.watches, (SELECT count(*) FROM docsync.watch_defs w WHERE w.query = q.name AND w.origin = 'derived') FROM docsync.query_defs q ORDER BY q.name")"
for call in "SELECT docsync.define_query('derived', 'SELECT to_jsonb(o) FROM orders o WHERE o.id = \$1', ARRAY['id'], watches => 'derived')" \
            "SELECT * FROM docsync.derive_watches('SELECT to_jsonb(o) FROM orders o WHERE o.id = \$1', 'public', 'definer')"; do
  if out=$(psql_as definer app -c '\set VERBOSITY verbose' -c "$call" 2>&1); then fail "not refused: $call: $out"; fi
  grep -q "ERROR:  0A000: derived watches are not available in the portable install of docsync" <<<"$out" ||
    fail "$call: not refused as feature_not_supported: $out"
  grep -q "HINT:  Define the query with watches => 'manual' (the default here) and write its watches by hand with docsync.watch()." <<<"$out" ||
    fail "$call: the refusal gives no hint: $out"
done
expect "the refused query is not defined" 0 "$(psql_as definer app -c "SELECT count(*) FROM docsync.query_defs WHERE name = 'derived'")"
# a broadcast watch, and explain over hand-written watches
psql_as definer app >/dev/null <<'SQL'
SELECT docsync.define_query('per_customer', $q$SELECT jsonb_build_object('n', count(*)) FROM orders o WHERE o.customer = $1$q$, ARRAY['customer']);
SELECT docsync.watch('per_customer', 'orders', broadcast => true);
SQL
expect "broadcast watch" "per_customer|orders|broadcast|t|manual" \
  "$(psql_as definer app -c "SELECT w.query, w.table_name, w.kind, d.broadcast, w.origin FROM docsync.watches w JOIN docsync.watch_defs d ON d.id = w.id WHERE w.query = 'per_customer'")"
refused "a broadcast watch with params" 'a broadcast watch takes no params' definer \
  "SELECT docsync.watch('per_customer', 'orders', params => ARRAY['customer'], broadcast => true)"
expect "explain" "lines|keys|manual|lines.order_id → keys_sql → \$1||written by hand with docsync.watch|
orders|direct|manual|orders.id → \$1|1|written by hand with docsync.watch|" \
  "$(psql_as definer app -c "SELECT \"table\", kind, origin, mapping, doc_queries_per_change, why, missing_index FROM docsync.explain('order')")"
expect "explain a broadcast watch" "orders|broadcast|every change → every live doc|written by hand with docsync.watch" \
  "$(psql_as definer app -c "SELECT \"table\", kind, mapping, why FROM docsync.explain('per_customer')")"
psql_as definer app -c "SELECT docsync.drop_query('per_customer')" >/dev/null

# before grant_reader the definitions wait for a reader role; after it, nothing is refused
grep -q "no reader role yet" <<<"$(psql_as definer app -c "SELECT refused FROM docsync.queries WHERE name = 'order'")" ||
  fail "a definer without a reader role is not reported"
psql_as docsync_owner app -c "SELECT docsync.grant_reader('docsync_pool')" >/dev/null
expect "queries after grant_reader" "customers||
order||" "$(psql_as definer app -c "SELECT name, refused, warning FROM docsync.queries ORDER BY name")"
expect "reader role" "definer|docsync_reader_definer" "$(psql_as docsync_owner app -c "SELECT definer, reader FROM docsync.reader_roles")"
expect "reader grants" "orders
lines" "$(psql_as docsync_owner app -c "SELECT table_name FROM docsync.reader_grants WHERE kind = 'table' ORDER BY granted_at, table_name DESC")"
# a compute as the worker does it: compute_as, then the doc query; the pool role is a member of no
# reader role but for the compute's transaction, which compute_as leaves read-only
compute_begin="BEGIN ISOLATION LEVEL REPEATABLE READ READ WRITE"
expect "compute as the reader role" '{"id": 1, "lines": ["tea", "cake"], "total": 10}|docsync_reader_definer|on' \
  "$(psql_as docsync_pool app -c "$compute_begin" -c "SELECT docsync.compute_as('docsync_reader_definer', 'public, pg_temp')" -c "SELECT jsonb_build_object('id', o.id, 'total', o.total, 'lines', (SELECT coalesce(jsonb_agg(l.item ORDER BY l.n), '[]') FROM lines l WHERE l.order_id = o.id)), current_user, current_setting('transaction_read_only') FROM orders o WHERE o.id = 1" -c "ROLLBACK" | grep docsync_reader)"
members() { psql_as docsync_owner app -c "SELECT count(*) FROM pg_auth_members WHERE member = 'docsync_pool'::regrole"; }
expect "the pool role's memberships" 0 "$(members)"
refused "a compute that commits" 'a transaction that borrowed reader role docsync_reader_definer cannot commit' docsync_pool \
  "$compute_begin; SELECT docsync.compute_as('docsync_reader_definer', 'public, pg_temp'); COMMIT"
refused "a compute outside a transaction block" 'a transaction that borrowed reader role docsync_reader_definer cannot commit' docsync_pool \
  "SELECT docsync.compute_as('docsync_reader_definer', 'public, pg_temp')"
expect "the pool role's memberships after a commit" 0 "$(members)"
refused "a compute in a read-only transaction" 'cannot lend reader role docsync_reader_definer in a read-only transaction' docsync_pool \
  "BEGIN READ ONLY; SELECT docsync.compute_as('docsync_reader_definer', 'public, pg_temp')"
refused "a compute that lends again" 'cannot lend reader role docsync_reader_definer in a read-only transaction' docsync_pool \
  "$compute_begin; SELECT docsync.compute_as('docsync_reader_definer', 'public, pg_temp'); RESET ROLE; SELECT docsync._lend_reader('docsync_reader_definer')"
refused "a compute that takes the lending back" 'cannot execute REVOKE ROLE in a read-only transaction' docsync_pool \
  "$compute_begin; SELECT docsync.compute_as('docsync_reader_definer', 'public, pg_temp'); RESET ROLE; REVOKE docsync_reader_definer FROM docsync_pool"
refused "a lending to a role that is no pool role" 'role definer is no docsync pool role' definer \
  "BEGIN READ WRITE; SELECT docsync._lend_reader('docsync_reader_definer')"
refused "a lending of a role that is no reader role" 'role docsync_admin is no docsync reader role' docsync_pool \
  "BEGIN READ WRITE; SELECT docsync._lend_reader('docsync_admin')"
# a standing membership (an older install's, one granted by hand) refuses every lending until
# grant_reader takes it back
psql_as docsync_owner app -c "GRANT docsync_reader_definer TO docsync_pool" >/dev/null
refused "a compute while the pool role is a member" 'role docsync_pool is a member of reader role docsync_reader_definer already' docsync_pool \
  "$compute_begin; SELECT docsync.compute_as('docsync_reader_definer', 'public, pg_temp')"
expect "grant_reader takes a standing membership back" "REVOKE docsync_reader_definer FROM docsync_pool" \
  "$(psql_as docsync_owner app -c "SELECT docsync.grant_reader('docsync_pool')")"
expect "the pool role's memberships after grant_reader" 0 "$(members)"
expect "the reader role cannot read secrets" f "$(psql_as docsync_owner app -c "SELECT has_table_privilege('docsync_reader_definer', 'secrets', 'SELECT')")"

# refusals
refused "no SELECT on the table" 'reads what its definer definer may not: permission denied for table public.secrets' definer \
  "SELECT docsync.define_query('leak', 'SELECT jsonb_build_object(''s'', s.secret) FROM secrets s WHERE s.id = \$1', ARRAY['id'])"
refused "a watch of a table it may not read" 'definer intruder may not' intruder \
  "SELECT docsync.define_query('mine', 'SELECT to_jsonb(1)'); SELECT docsync.watch('mine', 'secrets', params => ARRAY[]::text[], keys_sql => NULL)" 
refused "two statements" 'exactly one statement' definer \
  "SELECT docsync.define_query('two', 'SELECT to_jsonb(1); DROP TABLE public.orders')"
refused "a comment hiding nothing" 'exactly one statement' definer \
  "SELECT docsync.define_query('two', E'SELECT to_jsonb(1) -- x\n; DELETE FROM public.orders')"
refused "a write" 'must only read|must be a SELECT' definer \
  "SELECT docsync.define_query('w', 'WITH d AS (DELETE FROM orders RETURNING id) SELECT to_jsonb(count(*)) FROM d')"
refused "row locks" 'must not lock rows' definer \
  "SELECT docsync.define_query('l', 'SELECT to_jsonb(o.id) FROM orders o WHERE o.id = \$1 FOR UPDATE', ARRAY['id'])"
# code a definer wrote, that parse analysis runs (a domain's CHECK calling the definer's function,
# reached through an array literal), runs with the definer's rights alone wherever docsync parses the
# text as the installing role (the writer, the definitions read): as the definer's parser role, a
# member of the definer alone, owning nothing but its parser, in a subtransaction rolled back after
psql_as docsync_owner app -c "GRANT CREATE ON SCHEMA public TO definer"
psql_as definer app <<'SQL'
CREATE TABLE public.sneak_log (who text);
CREATE FUNCTION public.sneaky(v int) RETURNS boolean LANGUAGE plpgsql AS $f$
DECLARE
  s record;
BEGIN
  RAISE NOTICE 'sneaky ran as %', current_user;
  CASE v
    WHEN 2 THEN PERFORM set_config('docsync.api_caller', 'docsync_owner', false);
    WHEN 3 THEN PERFORM set_config('search_path', 'public, pg_catalog', false);
    WHEN 4 THEN CREATE TEMP TABLE IF NOT EXISTS pg_replication_slots (slot_name name);
    WHEN 5 THEN INSERT INTO public.sneak_log VALUES (current_user);
    WHEN 6 THEN PERFORM pg_advisory_lock(4242);
    WHEN 7 THEN PERFORM count(*) FROM public.secrets;
    WHEN 8 THEN ALTER FUNCTION docsync_parse.docsync_parser_definer(text, text, text, text) SECURITY INVOKER;
    WHEN 9 THEN
      IF NOT EXISTS (SELECT FROM pg_prepared_statements WHERE name = 'sneaky_stmt') THEN
        PREPARE sneaky_stmt AS SELECT 1;
      END IF;
    WHEN 10 THEN
      PERFORM pg_advisory_lock(4343);
      RAISE EXCEPTION 'sneaky fails the parse';
    WHEN 11 THEN RAISE EXCEPTION 'sneaky ends the parse' USING ERRCODE = 'DSY02';
    WHEN 12 THEN RAISE EXCEPTION 'cannot open PREPARE query as cursor' USING ERRCODE = 'invalid_cursor_definition';
    WHEN 13 THEN
      -- every prepared statement of the session that parses, replaced by one of the definer's
      FOR s IN SELECT p.name FROM pg_prepared_statements p WHERE p.name NOT LIKE 'docsync%' LOOP
        EXECUTE format('DEALLOCATE %I', s.name);
        EXECUTE format('PREPARE %I AS SELECT 666', s.name);
      END LOOP;
    WHEN 14 THEN
      IF EXISTS (SELECT FROM pg_cursors WHERE name = 'owner_cursor') THEN
        EXECUTE 'CLOSE owner_cursor';
      END IF;
    WHEN 15 THEN
      -- a writer, as the session's user (whom the writers believe when the session is theirs)
      PERFORM docsync._api_define_query(session_user::regrole, 'nested', 'SELECT to_jsonb(1)', '{}', false,
                                        'public, pg_temp', 'manual', false);
    WHEN 16 THEN
      FOR s IN SELECT p.name FROM pg_prepared_statements p WHERE p.name NOT LIKE 'docsync%' LOOP
        EXECUTE format('DEALLOCATE %I', s.name);
        EXECUTE format('PREPARE %I AS SELECT 666', s.name);
      END LOOP;
      RAISE EXCEPTION 'canceling statement due to user request' USING ERRCODE = 'query_canceled';
    WHEN 17 THEN ASSERT false, 'sneaky asserts';
    WHEN 19 THEN
      IF session_user <> 'definer' THEN
        RAISE EXCEPTION 'canceling statement due to user request' USING ERRCODE = 'query_canceled';
      END IF;
    WHEN 20 THEN
      -- the statements prepared in the statement running now (their prepare_time is the one a
      -- statement prepared here gets), prepared again, the same text read with backslash escapes
      FOR s IN SELECT p.name, p.statement FROM pg_prepared_statements p WHERE p.prepare_time = statement_timestamp() LOOP
        EXECUTE format('DEALLOCATE %I', s.name);
        PERFORM set_config('standard_conforming_strings', 'off', true);
        EXECUTE s.statement;
      END LOOP;
    WHEN 18 THEN
      IF EXISTS (SELECT FROM pg_prepared_statements WHERE name = 'owner_stmt') THEN
        EXECUTE 'EXECUTE owner_stmt';
      END IF;
    ELSE NULL;
  END CASE;
  RETURN true;
END
$f$;
CREATE DOMAIN public.sneaky_int AS int CHECK (public.sneaky(VALUE));
SQL
out=$(psql_as definer app -c "SELECT docsync.define_query('sneaky', 'SELECT to_jsonb(''{1}''::public.sneaky_int[])')" 2>&1) ||
  fail "a text reaching a domain whose CHECK runs the definer's code was refused: $out"
grep -q "sneaky ran as docsync_parser_definer" <<<"$out" || fail "the writer did not parse as the definer's parser role: $out"
! grep -q "sneaky ran as docsync_owner" <<<"$out" || fail "the definer's code ran as the installing role: $out"
out=$(psql_as docsync_owner app -c "SELECT docsync.worker_definitions() IS NOT NULL" 2>&1)
grep -q "sneaky ran as docsync_parser_definer" <<<"$out" || fail "the definitions read did not parse as the parser role: $out"
! grep -q "sneaky ran as docsync_owner" <<<"$out" || fail "the definitions read ran the definer's code as the installing role: $out"
expect "the definition is not refused" "" "$(psql_as docsync_owner app -c "SELECT refused FROM docsync.queries WHERE name = 'sneaky'" 2>/dev/null)"
# (each case below parses as the owner would, through docsync._parse_as_parser)
parse_as_parser() { # MODE: the parse of a text reaching sneaky(MODE), as the owner
  echo "SELECT docsync._parse_as_parser('definer', 'select', 'SELECT to_jsonb(''{$1}''::public.sneaky_int[])', 'public, pg_temp', NULL) IS NOT NULL"
}
expect "the parser role: no login, inherits, a member of the definer alone, no member" "f|t|definer|0" \
  "$(psql_as docsync_owner app -c "SELECT r.rolcanlogin, r.rolinherit,
       (SELECT string_agg(g.rolname, ',') FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid WHERE m.member = r.oid),
       (SELECT count(*) FROM pg_auth_members m WHERE m.roleid = r.oid)
     FROM pg_roles r WHERE r.rolname = 'docsync_parser_definer'")"
# what it does to the session or the database is undone before docsync's next statement: a setting
# (docsync.api_caller, which the writers believe, or the search_path), a temporary table that would
# hide a catalog, a row
session_after() { # MODE STATEMENT: STATEMENT's output after a parse reaching sneaky(MODE)
  psql_as docsync_owner app -c "$(parse_as_parser "$1")" -c "$2" 2>/dev/null | tail -1
}
expect "docsync.api_caller after a parse that set it" "" "$(session_after 2 "SELECT current_setting('docsync.api_caller', true)")"
expect "the search_path after a parse that set it" '"$user", public' "$(session_after 3 "SHOW search_path")"
expect "temporary tables after a parse that made one" 0 "$(session_after 4 "SELECT count(*) FROM pg_class WHERE relnamespace = pg_my_temp_schema()")"
session_after 5 "SELECT 1" >/dev/null
expect "rows after a parse that wrote one" 0 "$(psql_as definer app -c "SELECT count(*) FROM public.sneak_log")"
# what a rollback keeps fails the parse and goes: an advisory lock (after a failed parse too); a
# prepared statement made, or one of the session's replaced, whose next EXECUTE then fails rather
# than run the definer's statement with the session's rights
refused "parse-time code leaving an advisory lock" "parsing a definition of definer left an advisory lock behind" docsync_owner "$(parse_as_parser 6)"
refused "a failing parse leaving an advisory lock" "parsing a definition of definer left an advisory lock behind" docsync_owner "$(parse_as_parser 10)"
refused "parse-time code leaving a prepared statement" "parsing a definition of definer left the session's prepared statements changed" docsync_owner "$(parse_as_parser 9)"
expect "what the refused parse left, after it" "0|0" "$(psql_as docsync_owner app -v ON_ERROR_STOP=0 -c "$(parse_as_parser 6)" -c "$(parse_as_parser 9)" \
  -c "SELECT (SELECT count(*) FROM pg_locks WHERE pid = pg_backend_pid() AND locktype = 'advisory') || '|' || (SELECT count(*) FROM pg_prepared_statements)" 2>/dev/null | tail -1)"
out=$(psql_as docsync_owner app -v ON_ERROR_STOP=0 -c "PREPARE owner_stmt AS SELECT 42" -c "$(parse_as_parser 13)" -c "EXECUTE owner_stmt" 2>&1) || true
! grep -q 666 <<<"$out" || fail "the session's prepared statement ran the definer's replacement: $out"
grep -q 'prepared statement "owner_stmt" does not exist' <<<"$out" || fail "the replaced statement was not deallocated: $out"
# nor one prepared in the same statement as the parse: replaced by the same text parsed under other
# settings, it has the same name, text, types and prepare_time, and would look unchanged
out=$(psql_as docsync_owner app -v ON_ERROR_STOP=0 -c "DO \$\$BEGIN PREPARE owner_stmt AS SELECT 'C:\\temp\\x41'; PERFORM ($(parse_as_parser 20)); END\$\$" \
  -c "EXECUTE owner_stmt" 2>&1) || true
grep -q 'docsync parses no definition of definer in a session that prepared statement owner_stmt in the statement running now' <<<"$out" ||
  fail "a parse ran beside a statement prepared in the same statement: $out"
grep -qxF 'C:\temp\x41' <<<"$out" || fail "a statement prepared in the parse's own statement was replaced: $out"
# a cursor's position cannot be read, and FETCH checks no privilege: no parse runs in a session
# with an open cursor (the code could read the rows of the owner's cursor over secrets)
out=$(psql_as docsync_owner app -v ON_ERROR_STOP=0 -c "BEGIN" -c "DECLARE owner_cursor CURSOR FOR SELECT secret FROM secrets" \
  -c "$(parse_as_parser 14)" -c "FETCH owner_cursor" -c "ROLLBACK" 2>&1) || true
grep -q "docsync parses no definition of definer in a session that has an open cursor" <<<"$out" || fail "a parse ran beside an open cursor: $out"
! grep -q "sneaky ran" <<<"$out" || fail "the definer's code ran beside an open cursor: $out"
# a cancel or a failed assertion raised by the code is an error of the parse (one that ended the
# statement would fail every definer's definitions read), and the checks still run: the replaced
# statement goes
out=$(psql_as docsync_owner app -v ON_ERROR_STOP=0 -c "PREPARE owner_stmt AS SELECT 42" -c "$(parse_as_parser 16)" -c "EXECUTE owner_stmt" 2>&1) || true
! grep -q 666 <<<"$out" || fail "a statement replaced by a parse that raised a cancel ran the definer's replacement: $out"
grep -q 'prepared statement "owner_stmt" does not exist' <<<"$out" || fail "the statement a cancelling parse replaced was not deallocated: $out"
psql_as definer app -c "SELECT docsync.define_query('cancels', 'SELECT to_jsonb(''{19}''::public.sneaky_int[])')" >/dev/null 2>&1
expect "a definitions read beside a definition whose parse raises a cancel" "t" \
  "$(psql_as docsync_owner app -c "SELECT docsync.worker_definitions() IS NOT NULL" 2>/dev/null)"
out=$(psql_as docsync_owner app -c "SELECT name || ': ' || coalesce(refused, 'not refused') FROM docsync.queries WHERE name IN ('sneaky', 'cancels') ORDER BY name" 2>/dev/null)
grep -q "cancels: .*parsing a definition of definer raised SQLSTATE 57014" <<<"$out" || fail "the cancelling definition is not refused alone: $out"
grep -q "sneaky: not refused" <<<"$out" || fail "another definition was refused beside a cancelling one: $out"
psql_as definer app -c "SELECT docsync.drop_query('cancels')" >/dev/null
refused "a parse whose code fails an assertion" 'parsing a definition of definer raised SQLSTATE P0004' docsync_owner "$(parse_as_parser 17)"
# a statement the code only ran stays
expect "a statement the parse only ran" 42 "$(psql_as docsync_owner app -c "PREPARE owner_stmt AS SELECT 42" -c "$(parse_as_parser 18)" -c "EXECUTE owner_stmt" 2>/dev/null | tail -1)"
# the writers refuse while a parse runs: code it runs holds the definer's rights, not the session's
# user's, whom the writers believe (here the owner: it would define as the owner)
refused "a writer called by parse-time code" 'docsync definitions cannot be written while a definition of definer is parsed' docsync_owner "$(parse_as_parser 15)"
expect "definitions the parse wrote" 0 "$(psql_as docsync_owner app -c "SELECT count(*) FROM docsync.query_defs WHERE name = 'nested'")"
# a session's advisory locks are held a number of times no catalog shows: none may be held
refused "a parse in a session holding an advisory lock" 'parses no definition of definer in a session that holds an advisory lock' docsync_owner \
  "SELECT pg_advisory_lock(99); $(parse_as_parser 1)"
# docsync's own SQLSTATE, with which it ends the parse's subtransaction, raised by the parse's code
# is an error of the parse, not a parse that went through with no result
refused "parse-time code raising DSY02" "raised docsync's own SQLSTATE DSY02" docsync_owner "$(parse_as_parser 11)"
# nor is the server's count of statements: code that the analysis of a second statement runs,
# raising the refusal the count expects of one statement, is not that refusal
refused "a second statement raising the one-statement refusal" 'exactly one statement' definer \
  "SELECT docsync.prove_one_statement(\$q\$SELECT 1; SELECT '{12}'::public.sneaky_int[]\$q\$)"
# the definer's rights, no more: it may not read secrets, nor reach its parser
refused "parse-time code reading what the definer may not" 'permission denied for table secrets' docsync_owner "$(parse_as_parser 7)"
refused "parse-time code altering its parser" 'permission denied for schema docsync_parse' docsync_owner "$(parse_as_parser 8)"
expect "the parser is intact" t "$(psql_as docsync_owner app -c "SELECT docsync.parser_intact('docsync_parse.docsync_parser_definer(text, text, text, text)'::regprocedure, 'docsync_parser_definer'::regrole)")"
psql_as definer app -c "SELECT docsync.drop_query('sneaky')" >/dev/null
# a role of a parser role's name that docsync did not make is refused, not used
psql_as docsync_owner app -c "CREATE ROLE docsync_parser_intruder"
refused "a parser role docsync did not make" 'role "docsync_parser_intruder" exists, but is not a harmless docsync parser role' intruder \
  "SELECT docsync.define_query('theirs', 'SELECT to_jsonb(1)')"
psql_as docsync_owner app -c "DROP ROLE docsync_parser_intruder"
# two definers whose long names share their first 24 bytes get parser roles of their own
expect "parser roles of long multi-byte names" "2|true" "$(psql_as docsync_owner app -c "SELECT count(DISTINCT n) || '|' || (max(octet_length(n)) <= 63) FROM (VALUES
  (docsync.parser_role_name(repeat('д', 25) || '_anna')), (docsync.parser_role_name(repeat('д', 25) || '_boris'))) v(n)")"
psql_as definer app -c "DROP DOMAIN public.sneaky_int" -c "DROP FUNCTION public.sneaky(int)" -c "DROP TABLE public.sneak_log"
# nor through the definition's search_path: an operator of the definer's, found before pg_catalog's,
# resolves only in the definer's own text, never in docsync's statements around it
psql_as definer app <<'SQL'
CREATE FUNCTION public.sneaky_eq(text, text) RETURNS boolean LANGUAGE plpgsql AS $f$
BEGIN
  RAISE NOTICE 'sneaky_eq ran as %', current_user;
  RETURN $1 OPERATOR(pg_catalog.=) $2;
END
$f$;
CREATE OPERATOR public.= (LEFTARG = text, RIGHTARG = text, FUNCTION = public.sneaky_eq);
SQL
out=$(psql_as definer app -c "SELECT docsync.define_query('by_customer', 'SELECT to_jsonb(count(*)) FROM orders o WHERE o.customer = \$1::text', ARRAY['customer'], search_path => 'public, pg_catalog')" 2>&1) ||
  fail "a query under a search_path naming pg_catalog late was refused: $out"
! grep -q "sneaky_eq ran as docsync_owner" <<<"$out" || fail "the definer's operator ran as the installing role: $out"
psql_as definer app -c "SELECT docsync.drop_query('by_customer')" -c "DROP OPERATOR public.= (text, text)" -c "DROP FUNCTION public.sneaky_eq(text, text)" >/dev/null
# a text the scan and the server read differently never runs as the installing role: after a
# non-ASCII character 'e' continues an identifier, so €e'\' is the identifier "€e" and a plain
# string, and the ';' after it ends a statement; the server's parser proves the count as well
psql_as docsync_owner app -c "CREATE SEQUENCE public.owner_seq"
psql_as definer app <<'SQL'
CREATE DOMAIN public."€e" AS text;
CREATE FUNCTION public.pwn() RETURNS int LANGUAGE plpgsql AS $f$
BEGIN
  PERFORM nextval('public.owner_seq');
  RAISE EXCEPTION 'pwn ran as %', current_user;
END $f$;
SQL
refused "a statement hidden after €e'\\'" 'exactly one statement' definer \
  "SELECT docsync.define_query('inj', \$q\$SELECT to_jsonb(€e'\') AS doc; CREATE TEMP TABLE IF NOT EXISTS zz AS SELECT public.pwn() AS a --') FROM public.orders o WHERE o.id = \$1\$q\$, ARRAY['id'])"
expect "the hidden statement never ran" f "$(psql_as docsync_owner app -c "SELECT is_called FROM public.owner_seq")"
refused "two statements, by the server's count" 'exactly one statement' definer \
  "SELECT docsync.prove_one_statement(\$q\$SELECT to_jsonb(1); SELECT public.pwn()\$q\$)"
expect "one statement, by the server's count" '' "$(psql_as definer app -c "SELECT docsync.prove_one_statement(\$q\$SELECT to_jsonb(€e'\\') -- ;\$q\$)")"
psql_as definer app -c 'DROP FUNCTION public.pwn()' -c 'DROP DOMAIN public."€e"'
psql_as docsync_owner app -c "DROP SEQUENCE public.owner_seq"
psql_as docsync_owner app -c "REVOKE CREATE ON SCHEMA public FROM definer"
# the one-statement scan follows the server's lexical rules: a ';' inside quotes or comments is text
expect "one statement, whatever its quoting" "SELECT \$x\$;\$x\$|SELECT E'\\';'|SELECT ';' /* ; */|SELECT \"a;b\" -- ;" \
  "$(psql_as docsync_owner app <<'SQL'
SELECT docsync.one_statement($q$SELECT $x$;$x$;$q$) || '|' || docsync.one_statement($q$SELECT E'\';'$q$) || '|' ||
       docsync.one_statement($q$SELECT ';' /* ; */ ;  $q$) || '|' || docsync.one_statement($q$SELECT "a;b" -- ;$q$);
SQL
)"
for text in "SELECT ';'; SELECT 2" "SELECT \$\$x\$\$; DELETE FROM orders" "SELECT E'\\\\'; DELETE FROM orders" "SELECT 1 /* /* */ */; SELECT 2"; do
  refused "two statements: $text" 'exactly one statement' docsync_owner "SELECT docsync.one_statement(\$q\$$text\$q\$)"
done
expect "orders intact" 2 "$(psql_as docsync_owner app -c "SELECT count(*) FROM orders")"
refused "a role outside docsync_admin" 'permission denied to define docsync queries' outsider \
  "SELECT docsync.define_query('x', 'SELECT to_jsonb(1)')"
refused "another definer's query" 'permission denied to redefine docsync query "order": it was defined by definer' intruder \
  "SELECT docsync.define_query('order', 'SELECT to_jsonb(1)', or_replace => true)"
refused "another definer's query, dropped" 'permission denied to drop docsync query "order"' intruder \
  "SELECT docsync.drop_query('order')"
# forged calls of the writer
refused "the writer, for a role the session is not a member of" 'permission denied to write docsync definitions as role definer' intruder \
  "SELECT docsync._api_define_query('definer', 'forged', 'SELECT to_jsonb(1)', '{}', false, 'public', 'manual', false)"
refused "the writer, redefining another's query as it" 'permission denied to write docsync definitions as role definer' intruder \
  "SELECT docsync._api_define_query('definer', 'order', 'SELECT jsonb_build_object(''s'', s.secret) FROM secrets s WHERE s.id = \$1', ARRAY['id'], true, 'public', 'manual', false)"
refused "the writer, for itself over a table it may not read" 'reads what its definer intruder may not' intruder \
  "SELECT docsync._api_define_query('intruder', 'forged', 'SELECT jsonb_build_object(''s'', s.secret) FROM secrets s WHERE s.id = \$1', ARRAY['id'], false, 'public', 'manual', false)"
refused "a claimed caller in docsync.api_caller" 'reads what its definer intruder may not' intruder \
  "SET docsync.api_caller = 'definer'; SELECT docsync._api_define_query('intruder', 'forged', 'SELECT jsonb_build_object(''s'', s.secret) FROM secrets s', '{}', false, 'public', 'manual', false)"
refused "the implementation itself" 'permission denied for function _define_query' intruder \
  "SELECT docsync._define_query('forged', 'SELECT to_jsonb(1)', '{}', false, 'public', 'manual', false)"
refused "the definition tables" 'permission denied for table query_defs' definer \
  "INSERT INTO docsync.query_defs (name, sql, search_path) VALUES ('forged', 'SELECT to_jsonb(1)', 'public')"
expect "no forged definition" "customers
order" "$(psql_as docsync_owner app -c "SELECT name FROM docsync.query_defs ORDER BY name")"
# a column revoked after the definition: the definition is refused, not run with the reader's old grant
psql_as docsync_owner app -c "REVOKE SELECT ON lines FROM definer"
grep -q "permission denied for table public.lines" <<<"$(psql_as definer app -c "SELECT refused FROM docsync.queries WHERE name = 'order'")" ||
  fail "a REVOKE from the definer does not refuse its query"
# and its computes at once: the reader role still holds the grant until grant_reader runs
expect "the reader role's grant outlives the REVOKE until grant_reader" t \
  "$(psql_as docsync_owner app -c "SELECT has_table_privilege('docsync_reader_definer', 'lines', 'SELECT')")"
refused "a compute after a REVOKE from its definer" 'docsync compute as "docsync_reader_definer" refused: its definer definer no longer holds SELECT on public.lines' \
  docsync_pool "$compute_begin; SELECT docsync.compute_as('docsync_reader_definer', 'public, pg_temp')"
psql_as docsync_owner app -c "GRANT SELECT ON lines TO definer"
expect "a compute after the GRANT back" docsync_reader_definer \
  "$(psql_as docsync_pool app -c "$compute_begin" -c "SELECT docsync.compute_as('docsync_reader_definer', 'public, pg_temp')" -c "SELECT current_user" -c "ROLLBACK" | grep docsync_reader)"
expect "unwatch and drop" "1|" "$(psql_as definer app -c "SELECT docsync.unwatch('customers', 'orders'), docsync.drop_query('customers')")"

# channel(): the shared vectors
vectors=$dir/channel_vectors.tsv
grep -v -e '^#' -e '^$' "$top/tests/channel_vectors.tsv" >"$vectors"
chmod a+r "$vectors"
nvectors=$(wc -l <"$vectors")
[ "$nvectors" -gt 10 ] || fail "tests/channel_vectors.tsv holds $nvectors vectors"
mismatches=$(psql_as definer app <<SQL
CREATE TEMP TABLE v (query text, vals text, want text);
\copy v FROM '$vectors' WITH (FORMAT csv, DELIMITER E'\t', QUOTE E'\x01')
SELECT count(*) || ' ' || coalesce(string_agg(format('%s %s: %s, not %s', query, vals, got, want), '; '), '')
  FROM (SELECT v.*, docsync.channel(v.query, VARIADIC coalesce(ARRAY(SELECT jsonb_array_elements_text(v.vals::jsonb)), '{}')) AS got
          FROM v) x
 WHERE got IS DISTINCT FROM want
SQL
)
expect "channel() over tests/channel_vectors.tsv ($nvectors vectors)" "0 " "$mismatches"

# wait_published
start=$SECONDS
refused "no slot" 'database "app" has no docsync replication slot' definer "CALL docsync.wait_published(timeout => '10s')"
[ $((SECONDS - start)) -le 3 ] || fail "wait_published without a slot did not return at once"
psql_as docsync_owner app -c "SELECT pg_create_logical_replication_slot('docsync_app', 'pgoutput')" >/dev/null
psql_as docsync_owner app -c "INSERT INTO docsync.worker_status (slot_name, layout_version, worker_pid, state, started_at, heartbeat_at)
                              VALUES ('docsync_app', 1, 4242, 'streaming', now() - interval '1 minute', now())"
psql_as docsync_owner app -c "INSERT INTO orders VALUES (3, 'cy', 30)"
start_ms=$(date +%s%3N)
expect "a lagging slot times out" f "$(psql_as definer app -c "CALL docsync.wait_published(timeout => '300ms')")"
elapsed=$(( $(date +%s%3N) - start_ms ))
if [ "$elapsed" -lt 300 ] || [ "$elapsed" -ge 3000 ]; then fail "the timed-out wait took $elapsed ms, not about 300"; fi
lsn=$(psql_as docsync_owner app -c "SELECT pg_current_wal_lsn()")
psql_as docsync_owner app -c "SELECT pg_replication_slot_advance('docsync_app', '$lsn')" >/dev/null
expect "a confirmed position" t "$(psql_as definer app -c "CALL docsync.wait_published('$lsn', '5s')")"
psql_as docsync_owner app -c "UPDATE docsync.worker_status SET recompute = 'gap', recompute_gap, recompute_started_at = now()" 2>/dev/null ||
  psql_as docsync_owner app -c "UPDATE docsync.worker_status SET recompute = 'gap', recompute_gap = true, recompute_started_at = now()"
expect "a gap being recomputed" f "$(psql_as definer app -c "CALL docsync.wait_published('$lsn', '200ms')")"
psql_as docsync_owner app -c "UPDATE docsync.worker_status SET recompute_finished_at = now()"
expect "the gap closed" t "$(psql_as definer app -c "CALL docsync.wait_published('$lsn', '5s')")"

# the status views over hand-written rows (the worker's part of the contract, docs/portable.md)
psql_as docsync_owner app <<'SQL'
UPDATE docsync.worker_status SET recompute = NULL, recompute_gap = false, recompute_started_at = NULL, recompute_finished_at = NULL,
       heartbeat_at = now() - interval '30 seconds', received_lsn = '0/1', acked_lsn = '0/1', acked_at = now();
INSERT INTO docsync.worker_query_status VALUES ('docsync_app', 'order', 7, 1, 2.5, 'boom', now(), NULL);
INSERT INTO docsync.worker_status (slot_name, layout_version, worker_pid, state, started_at, heartbeat_at)
VALUES ('docsync_next', 2, 4343, 'streaming', now(), now());
GRANT pg_monitor TO definer;
SQL
expect "status: a worker gone quiet on an inactive slot" "docsync_app|t|f|4242|stopped|stopped
docsync_next|f|f|4343||unknown" \
  "$(psql_as definer app -c "SELECT slot_name, confirmed_flush_lsn IS NOT NULL, slot_active, worker_pid, worker_state, health FROM docsync.status ORDER BY slot_name")"
grep -q "not trusted: layout version 2" <<<"$(psql_as definer app -c "SELECT reason FROM docsync.status WHERE slot_name = 'docsync_next'")" ||
  fail "a report of another layout is trusted"
expect "query_stats" "docsync_app|order|7|1|2.5|boom" \
  "$(psql_as definer app -c "SELECT slot_name, query, recomputes, permanent_failures, mean_compute_ms, last_error FROM docsync.query_stats")"
# a fresh heartbeat on an inactive slot without the worker's lease: gone; with it: running
psql_as docsync_owner app -c "UPDATE docsync.worker_status SET heartbeat_at = now() WHERE slot_name = 'docsync_app'"
expect "status: no lease held" stopped "$(psql_as definer app -c "SELECT worker_state FROM docsync.status WHERE slot_name = 'docsync_app'")"
# a worker that holds its lease (an advisory lock on a connection of its own) is not gone
timeout 20 "$DOCSYNC_PG_BINDIR/psql" -X -q -U docsync_owner -d app \
  -c "SELECT pg_advisory_lock(hashtextextended('docsync_app', 1685288801))" -c "SELECT pg_sleep(8)" >/dev/null &
holder=$!
for _ in $(seq 1 50); do
  [ "$(psql_as docsync_owner app -c "SELECT docsync.lease_held('docsync_app')")" = t ] && break
  sleep 0.1
done
psql_as docsync_owner app -c "UPDATE docsync.worker_status SET heartbeat_at = now() WHERE slot_name = 'docsync_app'"
expect "status: a worker holding its lease" "running-or-streaming" \
  "$(psql_as definer app -c "SELECT CASE WHEN worker_state = 'streaming' THEN 'running-or-streaming' ELSE worker_state || ': ' || reason END FROM docsync.status WHERE slot_name = 'docsync_app'")"
expect "workers: the lease's holder" "active" "$(psql_as definer app -c "SELECT role FROM docsync.workers WHERE slot_name = 'docsync_app'")"
kill "$holder" 2>/dev/null || true
wait "$holder" 2>/dev/null || true
refused "forget_slot of a slot that exists" 'replication slot "docsync_app" exists' docsync_owner "SELECT docsync.forget_slot('docsync_app')"
expect "forget_slot" "docsync.worker_status row 'docsync_next'" "$(psql_as docsync_owner app -c "SELECT docsync.forget_slot('docsync_next')")"
psql_as docsync_owner app -c "SELECT pg_drop_replication_slot('docsync_app')" >/dev/null

# installed by a superuser, the event triggers exist, in plpgsql: DDL raises the generation and a
# dropped watched table takes its watches along
psql_as postgres postgres -c "CREATE DATABASE supered"
timeout 120 "$DOCSYNC_PG_BINDIR/psql" -X -q -v ON_ERROR_STOP=1 -U postgres -d supered -f "$script" >/dev/null
expect "event triggers by a superuser" "docsync_ddl_command_end|plpgsql
docsync_sql_drop|plpgsql" "$(psql_as postgres supered -c "SELECT e.evtname, l.lanname FROM pg_event_trigger e JOIN pg_proc p ON p.oid = e.evtfoid JOIN pg_language l ON l.oid = p.prolang ORDER BY 1")"
psql_as postgres supered >/dev/null <<'SQL'
CREATE TABLE t (id int PRIMARY KEY, x int);
BEGIN;
SELECT docsync.define_query('q', 'SELECT to_jsonb(t) FROM t WHERE t.id = $1', ARRAY['id']);
SELECT docsync.watch('q', 't', params => ARRAY['id']);
COMMIT;
SQL
before=$(psql_as postgres supered -c "SELECT generation FROM docsync.def_generation")
psql_as postgres supered -c "ALTER TABLE t ADD COLUMN y int"
after=$(psql_as postgres supered -c "SELECT generation FROM docsync.def_generation")
if [ "$after" -le "$before" ]; then fail "DDL did not raise the generation ($before, then $after)"; fi
out=$(psql_as postgres supered -c "DROP TABLE t" 2>&1)
grep -q 'removed a watch of docsync query "q": public.t was dropped' <<<"$out" || fail "no warning for the dropped watch: $out"
expect "watches of a dropped table" 0 "$(psql_as postgres supered -c "SELECT count(*) FROM docsync.watch_defs")"

# channel(): the portable function against the C one, over the same random strings
"$top/packaging/dev-cluster.sh" install "$dir" >/dev/null
psql_as postgres postgres -c "CREATE DATABASE cext"
psql_as postgres cext -c "CREATE EXTENSION docsync"
random_channels='SELECT setseed(0.25);
  CREATE TEMP TABLE v AS
    SELECT i, (SELECT string_agg(chr(CASE WHEN r < 0.3 THEN 1 + (random() * 126)::int
                                          WHEN r < 0.5 THEN (ARRAY[37, 58, 127, 9, 10, 8232, 233, 8364, 128512])[1 + (random() * 8)::int]
                                          ELSE 32 + (random() * 94)::int END), "")
                 FROM (SELECT random() AS r, g FROM generate_series(0, (random() * 12)::int + i % 2) g) c WHERE i > 0) AS s
      FROM generate_series(1, 3000) i;
  SELECT count(*), md5(string_agg(docsync.channel("q", VARIADIC ARRAY[s, s || ":", NULL]), E"\n" ORDER BY i)) FROM v;'
random_channels=${random_channels//\"/\'}
portable=$(psql_as docsync_owner app -c "$random_channels" | tail -n 1)
extension=$(psql_as postgres cext -c "$random_channels" | tail -n 1)
[[ $portable == 3000\|* ]] || fail "the random differential computed [$portable]"
expect "channel(): portable and C agree over 3000 random strings" "$extension" "$portable"

# uninstalled as docs/portable.md says: the runners and parsers go, then the reader and parser roles
psql_as docsync_owner app -c "SELECT docsync._before_drop()" -c "DROP SCHEMA docsync CASCADE" >/dev/null 2>&1 ||
  fail "the uninstall failed: $(psql_as docsync_owner app -c "SELECT docsync._before_drop()" 2>&1)"
expect "docsync's schemas and roles after the uninstall" "0|0" "$(psql_as docsync_owner app -c "SELECT
  (SELECT count(*) FROM pg_namespace WHERE nspname IN ('docsync', 'docsync_run', 'docsync_parse')) || '|' ||
  (SELECT count(*) FROM pg_roles WHERE rolname LIKE 'docsync\_parser\_%' OR rolname LIKE 'docsync\_reader\_%')")"
echo "portable_install: ok"
