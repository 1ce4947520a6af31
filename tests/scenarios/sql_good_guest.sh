#!/usr/bin/env bash
# docsync never adds a lock wait, a deadlock, a serialization failure or a failure to a customer's
# DDL, and DROP EXTENSION leaves nothing behind. Two sessions at a time, on watched tables of a
# query whose watches are derived (so DDL derives them again, and must hold no lock for it):
#   - an open migration transaction that altered orders does not block ALTER TABLE order_items, nor
#     a SELECT from it;
#   - T1 alters orders then reads order_items while T2 alters order_items and commits: no deadlock,
#     in READ COMMITTED and in REPEATABLE READ (no serialization failure);
#   - CREATE INDEX CONCURRENTLY beside an idle transaction that called docsync.unwatch() succeeds
#     within lock_timeout and leaves a valid index;
#   - DROP EXTENSION docsync: drops the docsync schema (and its pg_init_privs rows), revokes what
#     grant_reader granted, and warns about each docsync slot with the WAL it holds and how to drop
#     it; the extension can be created again at once, and a schema docsync in its way is named with
#     the fix.
# Starts a cluster of its own (packaging/dev-cluster.sh), stopped at exit: the guest role, the slot
# and the slots DROP EXTENSION lists are the cluster's, shared with no other test.
set -euo pipefail
top=${DOCSYNC_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
cluster=$("$top/packaging/dev-cluster.sh" start --no-install)
trap '"$top/packaging/dev-cluster.sh" stop "$cluster" >/dev/null 2>&1 || true' EXIT
"$top/packaging/dev-cluster.sh" install "$cluster" >/dev/null
# shellcheck disable=SC1091
. "$cluster/cluster.env"
bindir=${DOCSYNC_PG_BINDIR:-$(dirname "$(command -v psql)")}
export PGUSER=${PGUSER:-postgres}
db=docsync_guest_$$
work=$(mktemp -d)
pids=()

psql_() { timeout 60 "$bindir/psql" -X -q -v ON_ERROR_STOP=1 -d "$db" "$@"; }
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  timeout 60 "$bindir/psql" -X -q -d "$db" -c "SELECT pg_drop_replication_slot('guest_slot')" >/dev/null 2>&1 || true
  timeout 60 "$bindir/psql" -X -q -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true
  timeout 60 "$bindir/psql" -X -q -d postgres -c "DROP ROLE IF EXISTS guest_reader" >/dev/null 2>&1 || true
  rm -rf "$work"
  "$top/packaging/dev-cluster.sh" stop "$cluster" >/dev/null 2>&1 || true
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; for f in "$work"/*.log; do [ -f "$f" ] && { echo "--- $f" >&2; cat "$f" >&2; }; done; exit 1; }

# A session in the background: runs SQL1, stays idle (in its transaction) for SECONDS, runs SQL2.
# Its output goes to $work/NAME.log.
background() { # NAME SQL1 SECONDS SQL2
  { echo "$2"; sleep "$3"; echo "$4"; } |
    timeout 60 "$bindir/psql" -X -v ON_ERROR_STOP=1 -d "$db" >"$work/$1.log" 2>&1 &
  pids+=($!)
  eval "pid_$1=$!"
}
finished_ok() { # NAME: waits for it; fails unless it succeeded
  local pid
  eval "pid=\$pid_$1"
  wait "$pid" || fail "session $1 failed: $(cat "$work/$1.log")"
}

psql_ -d postgres -c "CREATE DATABASE $db"
psql_ <<'SQL'
SET client_min_messages = warning;
CREATE EXTENSION docsync;
CREATE TABLE orders (id int PRIMARY KEY, status text, customer_id int);
CREATE TABLE order_items (id int PRIMARY KEY, order_id int, qty int);
ALTER TABLE order_items REPLICA IDENTITY FULL;
INSERT INTO orders SELECT g, 'new', g FROM generate_series(1, 100) g;
INSERT INTO order_items SELECT g, g, 1 FROM generate_series(1, 100) g;
SELECT docsync.define_query('order', $q$SELECT jsonb_build_object('o', to_jsonb(o),
  'items', (SELECT jsonb_agg(i) FROM order_items i WHERE i.order_id = o.id)) FROM orders o WHERE o.id = $1$q$,
  params => ARRAY['order_id']);
SELECT docsync.watch('order', 'orders', params => ARRAY['id']);
SELECT docsync.watch('order', 'order_items', params => ARRAY['order_id']);
SQL

# 1. An open migration on orders blocks neither DDL on order_items nor reads of it.
background hold "BEGIN; ALTER TABLE orders ADD COLUMN y1 int;" 5 "COMMIT;"
sleep 1
psql_ -c "SET lock_timeout = '2s'" -c "ALTER TABLE order_items ADD COLUMN y2 int" ||
  fail "ALTER TABLE order_items waited behind an open migration of orders"
psql_ -c "SET statement_timeout = '2s'" -c "SELECT count(*) FROM order_items" >/dev/null ||
  fail "SELECT from order_items waited behind an open migration of orders"
finished_ok hold

# 2. The pair that deadlocked on a shared row, in both isolation levels.
for level in "READ COMMITTED" "REPEATABLE READ"; do
  background t1 "BEGIN ISOLATION LEVEL $level; ALTER TABLE orders ADD COLUMN y3 int;" 2 \
    "SELECT count(*) FROM order_items; COMMIT;"
  sleep 0.5
  psql_ -c "SET lock_timeout = '5s'" -c "BEGIN ISOLATION LEVEL $level" \
        -c "ALTER TABLE order_items ADD COLUMN y4 int" -c "COMMIT" ||
    fail "$level: ALTER TABLE order_items failed beside a migration of orders"
  finished_ok t1
  grep -qi "deadlock\|could not serialize" "$work/t1.log" && fail "$level: $(cat "$work/t1.log")"
  psql_ -c "ALTER TABLE orders DROP COLUMN y3" -c "ALTER TABLE order_items DROP COLUMN y4"
done

# 3. CREATE INDEX CONCURRENTLY beside an idle transaction that changed definitions.
background idle "BEGIN; SELECT docsync.unwatch('order', 'order_items');" 6 "ROLLBACK;"
sleep 1
psql_ -c "SET lock_timeout = '3s'" -c "CREATE INDEX CONCURRENTLY order_items_qty ON order_items (qty)" ||
  fail "CREATE INDEX CONCURRENTLY failed beside an open unwatch()"
psql_ -At -c "SELECT indisvalid FROM pg_index WHERE indexrelid = 'order_items_qty'::regclass" | grep -qx t ||
  fail "the index is not valid"
finished_ok idle

# 4. DROP EXTENSION leaves nothing behind but what it names: the slot, with how to drop it.
psql_ -c "CREATE ROLE guest_reader LOGIN" -c "SELECT docsync.grant_reader('guest_reader')" >/dev/null
psql_ -c "SELECT pg_create_logical_replication_slot('guest_slot', 'docsync')" >/dev/null
psql_ -c "INSERT INTO orders VALUES (1000, 'x', 1)"
init_privs_before=$(psql_ -At -c "SELECT count(*) FROM pg_init_privs")
psql_ -c "DROP EXTENSION docsync" 2>"$work/drop.log" || fail "DROP EXTENSION failed"
grep -q 'WARNING:  replication slot "guest_slot" of docsync stays after DROP EXTENSION and holds' "$work/drop.log" ||
  fail "no warning about the slot"
grep -q "pg_drop_replication_slot('guest_slot')" "$work/drop.log" || fail "the warning does not say how to drop the slot"
grep -q "NOTICE:  docsync: REVOKE SELECT ON TABLE public.orders FROM docsync_reader_" "$work/drop.log" ||
  fail "grant_reader's grants were not revoked"
# the reader roles are dropped, or (granted something in another database of this cluster) kept, saying so
grep -Eq "NOTICE:  docsync: (DROP ROLE docsync_reader_|role docsync_reader_.* stays: )" "$work/drop.log" ||
  fail "the reader roles were neither dropped nor reported: $(cat "$work/drop.log")"
[ "$(psql_ -At -c "SELECT count(*) FROM pg_namespace WHERE nspname = 'docsync'")" = 0 ] || fail "the docsync schema is left"
[ "$(psql_ -At -c "SELECT has_table_privilege('guest_reader', 'orders', 'SELECT')")" = f ] ||
  fail "guest_reader still reads orders"
init_privs_after=$(psql_ -At -c "SELECT count(*) FROM pg_init_privs")
[ "$init_privs_after" -lt "$init_privs_before" ] || fail "pg_init_privs rows of docsync are left"
[ "$(psql_ -At -c "SELECT count(*) FROM pg_init_privs i LEFT JOIN pg_namespace n ON i.classoid = 'pg_namespace'::regclass AND n.oid = i.objoid
                   WHERE i.classoid = 'pg_namespace'::regclass AND n.oid IS NULL")" = 0 ] ||
  fail "a pg_init_privs row of a dropped schema is left"
psql_ -c "SET client_min_messages = warning" -c "CREATE EXTENSION docsync" || fail "CREATE EXTENSION after DROP failed"
# a schema of that name in the way is named, with the fix
psql_ -c "DROP EXTENSION docsync" -c "CREATE SCHEMA docsync" 2>/dev/null
psql_ -c "CREATE EXTENSION docsync" 2>"$work/create.log" && fail "CREATE EXTENSION over a leftover schema succeeded"
grep -q 'HINT:  If it holds nothing you need, run DROP SCHEMA docsync CASCADE' "$work/create.log" ||
  fail "no fix for a leftover schema: $(cat "$work/create.log")"
echo "sql_good_guest: ok"
