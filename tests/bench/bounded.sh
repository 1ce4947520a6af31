#!/usr/bin/env bash
# What the server-side bounds on a compute's result cost (bench-bounded_bench): the shop's order
# docs by their batched form, bare and within worker/executor/bounded_forms.hpp's bounds, docs/s on
# one connection over loopback TCP, side by side in one run.
#   tests/bench/bounded.sh [batches per form (default 2000)] [batch (default 128)]
# Starts a throwaway cluster (the extension installed in it) and builds the benchmark in build/bench
# (Release).
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$top"
build=${DOCSYNC_BENCH_BUILD:-$top/build/bench}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >"$build.cmake.log" 2>&1 || { cat "$build.cmake.log"; exit 1; }
cmake --build "$build" -j2 --target bench-bounded_bench >/dev/null
cluster=$(packaging/dev-cluster.sh start | tail -n 1)
trap 'packaging/dev-cluster.sh stop "$cluster" >/dev/null' EXIT
# shellcheck disable=SC1091
. "$cluster/cluster.env"
psql() { command psql -X -q -v ON_ERROR_STOP=1 "$@"; }
psql -d postgres <<'SQL' >/dev/null
CREATE EXTENSION docsync;
CREATE TABLE customers (id int PRIMARY KEY, name text, email text, city text);
CREATE TABLE products (id int PRIMARY KEY, name text, category int, price numeric(12,2));
CREATE TABLE orders (id int PRIMARY KEY, customer_id int, status text, revision int, created_at timestamptz,
                     updated_at timestamptz);
CREATE TABLE order_items (id serial PRIMARY KEY, order_id int, product_id int, qty int);
INSERT INTO customers SELECT g, 'customer ' || g, 'c' || g || '@example.com', 'city ' || g % 100
  FROM generate_series(1, 10000) g;
INSERT INTO products SELECT g, 'product ' || g, g % 50, g % 100 + 0.99 FROM generate_series(1, 10000) g;
INSERT INTO orders SELECT g, 1 + g % 10000, 'new', 1, now(), now() FROM generate_series(1, 100000) g;
INSERT INTO order_items (order_id, product_id, qty)
  SELECT o, 1 + (o * 7 + k) % 10000, 1 + k FROM generate_series(1, 100000) o, generate_series(1, 3) k;
CREATE INDEX ON order_items (order_id);
ALTER TABLE order_items REPLICA IDENTITY FULL;
ANALYZE;
SQL
# shellcheck source=tests/bench/common.sh
# the shop's order doc (bench_order_query alone: common.sh asks for a worker this needs not)
# shellcheck disable=SC1090,SC1091
. <(sed -n '/^bench_order_query()/,/^}/p' tests/bench/common.sh)
bench_order_query | PGOPTIONS="-c client_min_messages=warning" psql -d postgres >/dev/null
"$build/bench-bounded_bench" "host=127.0.0.1 port=$PGPORT dbname=postgres" "${1:-2000}" "${2:-128}"
