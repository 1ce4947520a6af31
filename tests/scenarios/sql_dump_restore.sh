#!/usr/bin/env bash
# pg_dump of a database with docsync definitions, restored into other databases (custom format with
# pg_restore, plain SQL with psql, and split: --schema-only then --data-only --disable-triggers),
# keeps every definition: queries with their search_path, watches on the same tables and columns
# (watches are kept by name, so attnums resolve anew: the restored table has no dropped columns),
# the worker's per-slot generations, and the watch id sequence. Watches that no longer resolve in
# the source (a table dropped and a column renamed with session_replication_role = replica, so the
# event triggers did not fire) and watches on a schema left out of the dump (pg_dump -N) come back
# and are reported by name; they never fail the restore of the other watches. A query's derived
# watches come back with the relations they were derived from, by name, so DDL on one of them in
# the restored database derives them again.
# Needs a running server: PGHOST/PGPORT (packaging/dev-cluster.sh) and DOCSYNC_PG_BINDIR.
set -euo pipefail

: "${PGHOST:?PGHOST not set: run against packaging/dev-cluster.sh}" "${PGPORT:?}"
bindir=${DOCSYNC_PG_BINDIR:-$(dirname "$(command -v pg_dump)")}
export PGUSER=${PGUSER:-postgres}
src=docsync_dump_src_$$
dst_custom=docsync_dump_custom_$$
dst_plain=docsync_dump_plain_$$
dst_split=docsync_dump_split_$$
dst_partial=docsync_dump_partial_$$
work=$(mktemp -d)
chmod 755 "$work"

psql_() { timeout 60 "$bindir/psql" -X -q -v ON_ERROR_STOP=1 "$@"; }
cleanup() {
  for db in "$src" "$dst_custom" "$dst_plain" "$dst_split" "$dst_partial"; do
    timeout 60 "$bindir/psql" -X -q -d postgres -c "DROP DATABASE IF EXISTS $db" >/dev/null 2>&1 || true
  done
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

psql_ -d postgres -c "CREATE DATABASE $src"
psql_ -d "$src" <<'SQL'
CREATE EXTENSION docsync;
CREATE SCHEMA shop;
CREATE TABLE shop.orders (gone int, id int PRIMARY KEY, status text, customer_id int);
ALTER TABLE shop.orders DROP COLUMN gone;          -- attnums in this database: id 2, customer_id 4
ALTER TABLE shop.orders RENAME COLUMN status TO state;
CREATE TABLE shop.order_items (id int PRIMARY KEY, order_id int, product_id int);
ALTER TABLE shop.order_items REPLICA IDENTITY FULL;
CREATE TABLE shop.products (id int PRIMARY KEY, name text);
SET search_path = shop;
SELECT docsync.define_query('order',
  $$SELECT jsonb_build_object('id', o.id, 'state', o.state,
      'items', (SELECT coalesce(jsonb_agg(i ORDER BY i.id), '[]') FROM order_items i WHERE i.order_id = o.id))
    FROM orders o WHERE o.id = $1$$, params => ARRAY['order_id'], watches => 'manual');
SELECT docsync.watch('order', 'orders', params => ARRAY['id']);
SELECT docsync.watch('order', 'orders', params => ARRAY['customer_id'], allow_broadcast => true);
SELECT docsync.watch('order', 'order_items', params => ARRAY['order_id']);
SELECT docsync.watch('order', 'products',
  keys_sql => $$SELECT DISTINCT order_id FROM order_items WHERE product_id = $1$$, keys_args => ARRAY['id']);
SELECT docsync.define_query('count', 'SELECT jsonb_build_object(''n'', count(*)) FROM orders', watches => 'manual');
SELECT docsync.watch('count', 'orders', params => ARRAY[]::text[]);
-- a query with derived watches: order_items direct, products through a reverse index
SELECT docsync.define_query('derived', $$SELECT jsonb_agg(p.name) FROM order_items i JOIN products p ON p.id = i.product_id
                                        WHERE i.order_id = $1$$, params => ARRAY['order_id']);
SELECT docsync.advance_generation('dump_slot', '7000000000000000001', 1, 41, false);
-- watches that no longer resolve: their table dropped, their column renamed, unseen by the event
-- triggers; and a watch on a schema pg_dump -N leaves out
CREATE TABLE shop.r1 (id int PRIMARY KEY);
CREATE TABLE shop.r2 (id int PRIMARY KEY, c int);
CREATE SCHEMA aux;
CREATE TABLE aux.a1 (id int PRIMARY KEY);
SELECT docsync.define_query('r', 'SELECT to_jsonb(x) FROM (SELECT $1::int AS id) x', params => ARRAY['id'], watches => 'manual');
SELECT docsync.watch('r', 'r1', params => ARRAY['id']);
SELECT docsync.watch('r', 'r2', params => ARRAY['c'], allow_broadcast => true);
SELECT docsync.watch('r', 'aux.a1', params => ARRAY['id']);
SET session_replication_role = replica;
DROP TABLE shop.r1;
ALTER TABLE shop.r2 RENAME COLUMN c TO c2;
RESET session_replication_role;
SQL
problems() {
  psql_ -d "$1" -At -c "SELECT string_agg(format('%s.%s %s', table_schema, table_name, columns), ' ' ORDER BY id)
                          FROM docsync.watches WHERE problem IS NOT NULL"
}
[ "$(problems "$src")" = "shop.r1 {id} shop.r2 {c}" ] ||
  fail "fixture: the dangling watches are not reported in the source: $(problems "$src")"

# What must survive, with OIDs and attnums written as names (attnums may differ after a restore:
# they are checked against the catalog separately).
snapshot() {
  psql_ -d "$1" -At <<'SQL'
SELECT jsonb_build_object(
  -- the fingerprint hashes each table's storage (relfilenode, so that a rewrite recomputes): a
  -- restored copy's differs, and recomputes its docs once; every query must still have one
  'queries', (SELECT jsonb_agg((q - 'fingerprint') || jsonb_build_object('fingerprinted', q ? 'fingerprint' AND q ->> 'fingerprint' IS NOT NULL))
                FROM jsonb_array_elements(d -> 'queries') q),
  'watches', (SELECT jsonb_agg(x ORDER BY x::text)
                FROM jsonb_array_elements(d -> 'watches') w
                CROSS JOIN LATERAL (
                  SELECT (w - 'relid' - 'columns' - 'keys_args') || jsonb_build_object(
                           'rel', (w ->> 'relid')::oid::regclass::text,
                           'columns', (SELECT coalesce(jsonb_agg(c -> 'name'), '[]') FROM jsonb_array_elements(w -> 'columns') c),
                           'keys_args', (SELECT coalesce(jsonb_agg(c -> 'name'), '[]') FROM jsonb_array_elements(w -> 'keys_args') c)) AS x) s))
  FROM docsync.worker_definitions() d;
SELECT string_agg(format('%s=%s', slot, generation), ',') FROM docsync.worker_state;
SELECT string_agg(format('%s(%s)', e[1]::oid::regclass,
                         (SELECT string_agg(a.attname, ',' ORDER BY a.attnum) FROM pg_attribute a
                           WHERE a.attrelid = e[1]::oid AND a.attnum = ANY (string_to_array(e[2], ',')::int2[]))),
                  ' ' ORDER BY e[1]::oid::regclass::text)
  FROM regexp_matches(docsync.plugin_tables(), '([0-9]+)\(([0-9,]+)\)', 'g') e;
SELECT string_agg(format('%s|%s|%s', name, (SELECT array_agg(t::text ORDER BY t::text) FROM unnest(watched_tables) t),
                         coalesce(warning, '')), ';' ORDER BY name) FROM docsync.queries;
SQL
}
customer_attnum() {
  psql_ -d "$1" -At -c "SELECT attnums[1] FROM docsync.watches WHERE columns = '{customer_id}'"
}
before=$(snapshot "$src")
[ "$(customer_attnum "$src")" = 4 ] || fail "fixture: expected customer_id at attnum 4 in the source database"
echo "$before" | grep -q 'shop.orders(id,customer_id)' || fail "fixture: plugin_tables() lacks orders(id,customer_id): $before"

"$bindir/pg_dump" -d "$src" -Fc -f "$work/db.dump"
"$bindir/pg_dump" -d "$src" -Fp -f "$work/db.sql"

psql_ -d postgres -c "CREATE DATABASE $dst_custom"
timeout 120 "$bindir/pg_restore" --exit-on-error -d "$dst_custom" "$work/db.dump"
psql_ -d postgres -c "CREATE DATABASE $dst_plain"
psql_ -d "$dst_plain" -f "$work/db.sql" >/dev/null
# split restore: the tables first, then the data with every trigger disabled (docsync's included)
psql_ -d postgres -c "CREATE DATABASE $dst_split"
timeout 120 "$bindir/pg_restore" --exit-on-error --schema-only -d "$dst_split" "$work/db.dump"
timeout 120 "$bindir/pg_restore" --exit-on-error --data-only --disable-triggers -d "$dst_split" "$work/db.dump"

for dst in "$dst_custom" "$dst_plain" "$dst_split"; do
  after=$(snapshot "$dst")
  if [ "$after" != "$before" ]; then
    diff <(echo "$before") <(echo "$after") >&2 || true
    fail "definitions differ after restore into $dst"
  fi
  # The restored table has no dropped column: customer_id is attnum 3 there, and the watch says so.
  [ "$(customer_attnum "$dst")" = 3 ] || fail "watch of customer_id not re-resolved to attnum 3 in $dst"
  # attnums agree with the restored catalog, and the plugin option names the right columns
  psql_ -d "$dst" -At -c "
    SELECT count(*) FROM docsync.watches w, unnest(w.columns, w.attnums) u(col, num) WHERE w.problem IS NULL AND
       NOT EXISTS (SELECT FROM pg_attribute a WHERE a.attrelid = w.\"table\" AND a.attname = u.col AND a.attnum = u.num)" |
    grep -qx 0 || fail "watch attnums do not match the restored tables in $dst"
  [ "$(problems "$dst")" = "shop.r1 {id} shop.r2 {c}" ] || fail "dangling watches not reported by name in $dst: $(problems "$dst")"
  # the restored definitions keep working: the id sequence continues, DDL is followed
  psql_ -d "$dst" -At <<'SQL' | tail -n 1 | grep -qx 't|state2' || fail "definitions in $dst do not keep working"
SET search_path = shop;
CREATE TEMP TABLE m AS SELECT max(id) AS before FROM docsync.watch_defs;
SELECT docsync.unwatch('count', 'orders');
SELECT docsync.watch('count', 'orders', params => ARRAY[]::text[]) > (SELECT before FROM m);
ALTER TABLE orders RENAME COLUMN state TO state2;
ALTER TABLE orders REPLICA IDENTITY FULL;
SELECT docsync.watch('order', 'orders', params => ARRAY['state2']) > (SELECT before FROM m);
ALTER TABLE orders RENAME COLUMN state2 TO state3;
ALTER TABLE orders RENAME COLUMN state3 TO state2;
SELECT count(*) = 2 AND bool_and(id > (SELECT before FROM m)), max(columns[1]) FROM docsync.watch_defs
 WHERE columns = '{state2}' OR (query = 'count' AND table_name = 'orders');
SQL
done

# a dump that leaves a schema out: its watches come back, reported, and nothing binds elsewhere
"$bindir/pg_dump" -d "$src" -Fc -N aux -f "$work/partial.dump"
psql_ -d postgres -c "CREATE DATABASE $dst_partial"
timeout 120 "$bindir/pg_restore" --exit-on-error -d "$dst_partial" "$work/partial.dump"
[ "$(problems "$dst_partial")" = "shop.r1 {id} shop.r2 {c} aux.a1 {id}" ] ||
  fail "watch of the left-out schema not reported: $(problems "$dst_partial")"
psql_ -d "$dst_partial" -At -c "SELECT count(*) FROM docsync.watch_defs" | grep -qx 10 ||
  fail "a watch went missing from the partial restore"
psql_ -d "$dst_partial" -At -c "SELECT d -> 'unresolved' @> '[{\"query\": \"r\"}]' FROM docsync.worker_definitions() d" |
  grep -qx t || fail "worker_definitions() does not list the unresolved watches"

# the relations a query's derived watches were derived from are restored by name (regclass), so DDL
# on one of them still derives them again: order_items' replica identity back to its key gives the
# derived watch on order_id allow_broadcast
derived_from() { psql_ -d "$1" -At -c "SELECT derived_from::text FROM docsync.query_defs WHERE name = 'derived'"; }
for dst in "$dst_custom" "$dst_plain" "$dst_split"; do
  [ "$(derived_from "$dst")" = "$(derived_from "$src")" ] ||
    fail "derived_from differs in $dst: $(derived_from "$dst"), not $(derived_from "$src")"
  psql_ -d "$dst" -c "SET client_min_messages = warning" -c "ALTER TABLE shop.order_items REPLICA IDENTITY DEFAULT"
  psql_ -d "$dst" -At -c "SELECT allow_broadcast FROM docsync.watches WHERE query = 'derived' AND table_name = 'order_items'" |
    grep -qx t || fail "DDL on a table a restored query was derived from did not derive its watches again in $dst"
done

# the cluster-wide role was reused, not recreated
psql_ -d postgres -At -c "SELECT count(*) FROM pg_roles WHERE rolname = 'docsync_admin'" | grep -qx 1 ||
  fail "docsync_admin is missing"
echo "sql_dump_restore: ok"
