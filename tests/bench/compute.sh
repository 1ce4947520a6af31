#!/usr/bin/env bash
# Round trips per compute (bench-compute_bench): the executor's one pipelined exchange against the
# same five statements sent one by one, docs/s on one pool connection over loopback TCP, in one run.
#   tests/bench/compute.sh [computes (default 20000)]
# Starts a throwaway cluster and builds the benchmark in build/bench (Release).
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$top"
build=${DOCSYNC_BENCH_BUILD:-$top/build/bench}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >"$build.cmake.log" 2>&1 || { cat "$build.cmake.log"; exit 1; }
cmake --build "$build" -j2 --target bench-compute_bench >/dev/null
cluster=$(packaging/dev-cluster.sh start)
trap 'packaging/dev-cluster.sh stop "$cluster" >/dev/null' EXIT
# shellcheck disable=SC1091
. "$cluster/cluster.env"
psql -X -q -v ON_ERROR_STOP=1 -d postgres <<'SQL'
CREATE TABLE orders (id int PRIMARY KEY, customer_id int NOT NULL, status text NOT NULL, total numeric(12,2));
CREATE TABLE order_items (id int PRIMARY KEY, order_id int NOT NULL, product_id int NOT NULL, qty int NOT NULL,
                          unit_price numeric(12,2));
INSERT INTO orders SELECT g, g % 97, 'paid', g * 1.25 FROM generate_series(1, 1000) g;
INSERT INTO order_items SELECT o * 10 + k, o, (o * 7 + k) % 501, k, 9.99
  FROM generate_series(1, 1000) o, generate_series(1, 3) k;
CREATE INDEX ON order_items (order_id);
ANALYZE;
CREATE ROLE bench_reader LOGIN;
GRANT SELECT ON orders, order_items TO bench_reader;
SQL
"$build/bench-compute_bench" "host=127.0.0.1 port=$PGPORT dbname=postgres user=bench_reader" "${1:-20000}"
