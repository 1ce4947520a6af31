#!/usr/bin/env bash
# Portable mode's full recompute at start: one statement per doc (--batch 1) against the batched forms
# of the portable install (docs/portable.md, "Batched forms"), on the shop's order doc of
# tests/bench/batch.sh (an order, its customer, its items with their products' prices).
#
#   dir=$(packaging/dev-cluster.sh start); . "$dir/cluster.env"
#   tests/bench/portable_batch.sh [live docs (default 20000)]
#   DOCSYNC_WORKER=path/to/docsync-worker   (default build/rel/docsync-worker, a Release build)
#   DOCSYNC_BENCH_BEFORE=path/to/script.sql another portable script to run the same way first (one
#                                           built from an older tree, say, whose batch_sql is null)
#
# Method. Per script: a database of its own with the portable script run in it (sql/docsync-portable.sql,
# made afresh by make portable), 10 000 customers, 10 000 products and as many orders as live docs
# (3 items each); the doc query 'order' with its two direct watches written by hand; the worker
# with --plugin pgoutput (its publication made by the statements its first start names) on a JSONL
# file sink holding one envelope per order, so that at start it recomputes every doc. The rate is the
# live docs over recompute_started_at .. recompute_finished_at of docsync.status; the worker's
# default --batch against --batch 1, on the same slot. Not a timed test: figures depend on the machine.
set -euo pipefail
docs=${1:-20000}
[[ $docs =~ ^[1-9][0-9]*$ ]] || { echo "usage: $0 [live docs]" >&2; exit 2; }
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/bench/common.sh
. "$here/common.sh"
trap bench_cleanup EXIT
make -s -C "$top" portable
scripts=()
[ -n "${DOCSYNC_BENCH_BEFORE:-}" ] && scripts+=("$DOCSYNC_BENCH_BEFORE")
scripts+=("$top/sql/docsync-portable.sql")
slot=bench_pbatch_$$
awk -v n="$docs" 'BEGIN { for (i = 1; i <= n; i++) printf "{\"channel\":\"db:order:%d\",\"doc\":{\"id\":%d},\"generation\":1,\"lsn\":\"0/1\"}\n", i, i }' \
  >"$bench_tmp/retained.jsonl"

setup() { # SCRIPT: the database $db afresh, with the portable install of SCRIPT and the shop
  psql -d postgres -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db" >/dev/null
  psql -d postgres -c "SET client_min_messages = warning" -c "DROP ROLE IF EXISTS $repl" -c "DROP ROLE IF EXISTS $reader" \
       -c "CREATE ROLE $repl LOGIN REPLICATION" -c "CREATE ROLE $reader LOGIN" >/dev/null
  psql -d "$db" -f "$1" >/dev/null 2>&1 || { echo "$1 does not install" >&2; exit 1; }
  psql -d "$db" <<SQL >/dev/null
SET client_min_messages = warning;
CREATE TABLE customers (id int PRIMARY KEY, name text NOT NULL, email text NOT NULL, city text NOT NULL);
CREATE TABLE products (id int PRIMARY KEY, category int NOT NULL, price numeric(10,2) NOT NULL, name text NOT NULL);
CREATE TABLE orders (id int PRIMARY KEY, customer_id int NOT NULL REFERENCES customers, status text NOT NULL,
                     revision int NOT NULL, created_at timestamptz NOT NULL, updated_at timestamptz NOT NULL);
CREATE TABLE order_items (id bigint PRIMARY KEY, order_id int NOT NULL REFERENCES orders,
                          product_id int NOT NULL REFERENCES products, qty int NOT NULL);
INSERT INTO customers SELECT g, 'customer ' || g, 'c' || g || '@example.com', 'city ' || g % 50 FROM generate_series(1, 10000) g;
INSERT INTO products SELECT g, g % 10, 1 + (g * 37 % 10000) / 100.0, 'product ' || g FROM generate_series(1, 10000) g;
INSERT INTO orders SELECT g, 1 + g % 10000, 'paid', 0, now() - interval '1 day', now() - interval '1 day'
  FROM generate_series(1, $docs) g;
INSERT INTO order_items SELECT o * 4 + k, o, 1 + (o * 7 + k * 131) % 10000, 1 + (o + k) % 3
  FROM generate_series(1, $docs) o, generate_series(1, 3) k;
CREATE INDEX ON order_items (order_id);
ALTER TABLE order_items REPLICA IDENTITY FULL;
VACUUM ANALYZE customers, products, orders, order_items;
$(bench_order_query)
SELECT docsync.grant_reader('$reader');
SELECT docsync.grant_replication('$repl');
SQL
  echo "  the order doc: $(psql -At -d "$db" -c "SELECT coalesce('not batched: ' || not_batched, 'batched') FROM docsync.queries WHERE name = 'order'")"
  # the publication, made the way a managed server's owner makes it (tests/bench/portable.sh)
  "$worker" --dsn "$dsn_repl" --pool-dsn "$dsn_reader" --slot "$slot" --create-slot --plugin pgoutput \
    --sink stdout --status-dir "$bench_tmp" --log-level warning >/dev/null 2>"$bench_tmp/pub.log" || true
  local marker='have an owner of the tables (or a superuser) run: ' statements
  statements=$(grep -o "$marker.*" "$bench_tmp/pub.log" | head -n 1)
  [ -n "$statements" ] || { echo "the worker named no statements for an owner:" >&2; cat "$bench_tmp/pub.log" >&2; exit 1; }
  psql -d "$db" -c "${statements#"$marker"}" >/dev/null
}

recompute() { # FLAGS...: the full recompute at start; prints docs/s
  local wpid row
  cp "$bench_tmp/retained.jsonl" "$bench_tmp/sink.jsonl"
  "$worker" --dsn "$dsn_repl" --pool-dsn "$dsn_reader" --slot "$slot" --create-slot --plugin pgoutput \
    --sink "file:$bench_tmp/sink.jsonl" --live all --status-dir "$bench_tmp" --log-level warning "$@" 2>"$bench_tmp/worker.log" &
  wpid=$!
  bench_pids+=("$wpid")
  row=
  for _ in $(seq 1 6000); do
    kill -0 "$wpid" 2>/dev/null || { echo "the worker exited:" >&2; tail -n 20 "$bench_tmp/worker.log" >&2; exit 1; }
    row=$(psql -At -F ' ' -d "$db" -c "
      SELECT recompute_total, extract(epoch FROM recompute_finished_at - recompute_started_at)
        FROM docsync.status
       WHERE slot_name = '$slot' AND worker_pid = $wpid AND recompute IS NOT NULL AND recompute_finished_at IS NOT NULL")
    [ -n "$row" ] && break
    sleep 0.2
  done
  kill -TERM "$wpid"
  wait "$wpid" || { echo "the worker failed:" >&2; tail -n 20 "$bench_tmp/worker.log" >&2; exit 1; }
  [ -n "$row" ] || { echo "no finished recompute after 20 min" >&2; exit 1; }
  read -r total wall <<<"$row"
  [ "$total" -eq "$docs" ] || { echo "expected $docs docs recomputed, got $total" >&2; exit 1; }
  echo "$docs $wall" | awk '{ printf "%.0f docs/s (%d docs in %.2f s)", $1 / $2, $1, $2 }'
}

for script in "${scripts[@]}"; do
  echo "== $script: $docs live docs"
  setup "$script"
  one=$(recompute --batch 1)
  echo "  --batch 1:        $one"
  batched=$(recompute)
  echo "  default --batch:  $batched"
  awk -v a="${one%% *}" -v b="${batched%% *}" 'BEGIN { printf "  batched / one by one: %.2f×\n", b / a }'
done
