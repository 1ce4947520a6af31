#!/usr/bin/env bash
# What docsync adds to a customer's migrations: the same 2 000 DDL statements (ADD/RENAME/DROP COLUMN,
# ALTER COLUMN TYPE, CREATE INDEX, COMMENT, CREATE/DROP TABLE, each in its own transaction) run in a
# database with docsync, doc queries and watches on the migrated tables, and in one without the
# extension, interleaved, five rounds each; reports the median of each and the ratio.
#   DOCSYNC_BENCH_DDL=N sets the number of statements (default 2000), DOCSYNC_BENCH_ROUNDS the rounds.
# Needs a running cluster (packaging/dev-cluster.sh start; . "$dir/cluster.env").
set -euo pipefail
: "${PGHOST:?run against packaging/dev-cluster.sh: . \"\$dir/cluster.env\"}"
n=${DOCSYNC_BENCH_DDL:-2000}
rounds=${DOCSYNC_BENCH_ROUNDS:-5}
with=docsync_ddl_with_$$
without=docsync_ddl_without_$$
tmp=$(mktemp -d)
psql_() { psql -X -q -v ON_ERROR_STOP=1 "$@"; }
cleanup() {
  psql_ -d postgres -c "DROP DATABASE IF EXISTS $with" -c "DROP DATABASE IF EXISTS $without" >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT

# The tables, made afresh before every run (a run leaves dropped columns behind), and in the database
# with docsync, the watches on them.
schema="SET client_min_messages = warning;
DROP TABLE IF EXISTS orders, order_items;
CREATE TABLE orders (id int PRIMARY KEY, status text, customer_id int);
CREATE TABLE order_items (id int PRIMARY KEY, order_id int, qty int);
INSERT INTO orders SELECT g, 'new', g % 100 FROM generate_series(1, 1000) g;
INSERT INTO order_items SELECT g, g % 1000 + 1, 1 FROM generate_series(1, 3000) g;"
watches="SELECT docsync.watch('order', 'orders', params => ARRAY['id']);
SELECT docsync.watch('order', 'order_items', keys_sql => 'SELECT \$1::int', keys_args => ARRAY['order_id'], allow_broadcast => true);"
for d in "$with" "$without"; do
  psql_ -d postgres -c "CREATE DATABASE $d"
done
psql_ -d "$with" -c "SET client_min_messages = warning" -c "CREATE EXTENSION docsync" -c "$schema" \
  -c "SELECT docsync.define_query('order', \$q\$SELECT jsonb_build_object('o', to_jsonb(o), 'items', (SELECT jsonb_agg(i) FROM order_items i WHERE i.order_id = o.id)) FROM orders o WHERE o.id = \$1\$q\$, params => ARRAY['order_id'])" >/dev/null
prepare() { # DB
  psql_ -d "$1" -c "$schema" >/dev/null 2>&1
  [ "$1" != "$with" ] || psql_ -d "$1" -c "$watches" >/dev/null
}

# The migration: 8 statements a round, each its own transaction.
{
  for i in $(seq 1 $((n / 8))); do
    echo "ALTER TABLE orders ADD COLUMN c$i int;"
    echo "ALTER TABLE orders RENAME COLUMN c$i TO d$i;"
    echo "ALTER TABLE orders ALTER COLUMN d$i TYPE bigint;"
    echo "CREATE INDEX orders_d${i}_idx ON orders (d$i);"
    echo "COMMENT ON COLUMN orders.d$i IS 'migrated';"
    echo "ALTER TABLE orders DROP COLUMN d$i;"
    echo "CREATE TABLE scratch_$i (id int);"
    echo "DROP TABLE scratch_$i;"
  done
} >"$tmp/migration.sql"

run() { # DB → seconds
  local start end
  prepare "$1"
  start=$(date +%s%N)
  psql_ -d "$1" -f "$tmp/migration.sql" >/dev/null
  end=$(date +%s%N)
  awk -v ns=$((end - start)) 'BEGIN { printf "%.3f\n", ns / 1e9 }'
}
median() { sort -n | sed -n "$(((rounds + 1) / 2))p"; }
: >"$tmp/with"; : >"$tmp/without"
for _ in $(seq 1 "$rounds"); do
  run "$without" >>"$tmp/without"
  run "$with" >>"$tmp/with"
done
t_with=$(median <"$tmp/with")
t_without=$(median <"$tmp/without")
echo "migration of $n DDL statements, median of $rounds (seconds): with docsync $t_with, without $t_without"
echo "overhead: $(awk -v a="$t_with" -v b="$t_without" 'BEGIN { printf "%.3f", a / b }')x"
