#!/usr/bin/env bash
# DDL derives the watches of a query again while another session holds a lock on a table the query
# reads: the derivation gives up after lock_timeout, the DDL succeeds, and the query keeps its
# previous watches plus a derived broadcast watch on each table they cover, with
# docsync.queries.warning saying why; the next DDL, even on a table the query does not read,
# derives them again. A cancel of the DDL (statement_timeout) while it waits there cancels the DDL
# and leaves the definitions as they were. A function's own SET lock_timeout does not lift the
# 100 ms while its body is analysed. Needs no worker.
# Starts a cluster of its own (packaging/dev-cluster.sh), stopped at exit.
set -euo pipefail
top=${DOCSYNC_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
cluster=$("$top/packaging/dev-cluster.sh" start --no-install)
trap '"$top/packaging/dev-cluster.sh" stop "$cluster" >/dev/null 2>&1 || true' EXIT
"$top/packaging/dev-cluster.sh" install "$cluster" >/dev/null
# shellcheck disable=SC1091
. "$cluster/cluster.env"
bindir=${DOCSYNC_PG_BINDIR:-$(dirname "$(command -v psql)")}
export PGUSER=${PGUSER:-postgres}
db=docsync_locks_$$
fail=0

psql_() { timeout 60 "$bindir/psql" -X -q -v ON_ERROR_STOP=1 -d "$db" "$@"; }
val() { psql_ -At -c "$1"; }
check() { # check WHAT GOT WANT
  if [ "$2" = "$3" ]; then echo "ok   $1"; else echo "FAIL $1: got '$2', want '$3'"; fail=1; fi
}
watches() { val "SELECT string_agg(table_name || ':' || kind, ',' ORDER BY table_name, kind) FROM docsync.watches WHERE query = 'basket'"; }
# holds an ACCESS EXCLUSIVE lock on app.items for $1 seconds, in the background
hold_items() {
  psql_ -c "BEGIN; LOCK app.items IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep($1); COMMIT;" >/dev/null &
  holder=$!
  for _ in $(seq 100); do
    [ "$(val "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation WHERE c.relname = 'items' AND l.mode = 'AccessExclusiveLock' AND l.granted")" = 1 ] && return
    sleep 0.05
  done
  echo "FAIL the lock on app.items was never granted"; exit 1
}

"$bindir/psql" -X -q -d postgres -c "CREATE DATABASE $db" >/dev/null
psql_ >/dev/null <<'SQL'
CREATE EXTENSION docsync;
CREATE SCHEMA app;
CREATE TABLE app.orders (id int PRIMARY KEY, customer int);
CREATE TABLE app.items (order_id int, sku int, PRIMARY KEY (order_id, sku));
ALTER TABLE app.orders REPLICA IDENTITY FULL;
ALTER TABLE app.items REPLICA IDENTITY FULL;
SET client_min_messages = warning;
SELECT docsync.define_query('basket', $$SELECT jsonb_build_object('c', o.customer, 'n', (SELECT count(*) FROM items i WHERE i.order_id = o.id))
  FROM orders o WHERE o.id = $1$$, params => ARRAY['id'], search_path => 'app');
SQL
before=$(watches)
check "derived watches" "$before" "items:direct,orders:direct"

# a lock held elsewhere: the DDL (which derives every query again: a function) succeeds at once
hold_items 3
start=$(date +%s%N)
psql_ -c "CREATE FUNCTION app.f() RETURNS int LANGUAGE sql AS 'SELECT 1'" >/dev/null
took=$(( ($(date +%s%N) - start) / 1000000 ))
wait "$holder"
[ "$took" -lt 2000 ] && echo "ok   DDL took ${took} ms beside the lock" || { echo "FAIL DDL took ${took} ms"; fail=1; }
check "previous watches kept, each table broadcast" "$(watches)" \
  "items:broadcast,items:direct,orders:broadcast,orders:direct"
check "warning says why" "$(val "SELECT warning LIKE '%could not be derived again after DDL%lock%' FROM docsync.queries WHERE name = 'basket'")" t

# the next DDL, on a table the query does not read, derives them again
psql_ -c "CREATE TABLE app.unrelated (a int)" >/dev/null
check "derived again at the next DDL" "$(watches)" "$before"
check "no warning left" "$(val "SELECT coalesce(warning, '') FROM docsync.queries WHERE name = 'basket'")" ""

# a cancel while the derivation waits for the lock: the DDL is cancelled, the definitions unchanged
defs() { val "SELECT md5(string_agg(w::text, ';' ORDER BY w.id)) || md5(string_agg(q::text, ';')) FROM docsync.watch_defs w, docsync.query_defs q"; }
gen=$(val "SELECT generation FROM docsync.def_generation")
snap=$(defs)
hold_items 3
out=$(psql_ -c "SET statement_timeout = '50ms'" -c "CREATE FUNCTION app.g() RETURNS int LANGUAGE sql AS 'SELECT 2'" 2>&1 || true)
wait "$holder"
check "DDL cancelled" "$(echo "$out" | grep -c 'canceling statement due to statement timeout')" 1
check "its function not made" "$(val "SELECT to_regprocedure('app.g()') IS NULL")" t
check "definitions unchanged" "$(defs)" "$snap"
check "generation unchanged" "$(val "SELECT generation FROM docsync.def_generation")" "$gen"

# a function's own SET lock_timeout = 0 is for its runs: analysing its body keeps the DDL's 100 ms
psql_ >/dev/null <<'SQL'
CREATE FUNCTION app.item_count() RETURNS bigint LANGUAGE sql STABLE SET lock_timeout = 0
  AS 'SELECT count(*) FROM app.items';
SELECT docsync.define_query('counted', $$SELECT jsonb_build_object('id', o.id, 'n', app.item_count())
  FROM app.orders o WHERE o.id = $1$$, params => ARRAY['id']);
SQL
hold_items 3
start=$(date +%s%N)
out=$(psql_ -c "SET statement_timeout = '2500ms'" -c "CREATE FUNCTION app.h() RETURNS int LANGUAGE sql AS 'SELECT 3'" 2>&1 || true)
took=$(( ($(date +%s%N) - start) / 1000000 ))
wait "$holder"
[ "$took" -lt 2000 ] && echo "ok   DDL took ${took} ms beside the lock, past a body's SET lock_timeout = 0" \
  || { echo "FAIL DDL took ${took} ms past a body's SET lock_timeout = 0: $out"; fail=1; }
check "its function made" "$(val "SELECT to_regprocedure('app.h()') IS NOT NULL")" t

"$bindir/psql" -X -q -d postgres -c "DROP DATABASE $db WITH (FORCE)" >/dev/null
[ "$fail" = 0 ] && echo PASS || { echo FAIL; exit 1; }
