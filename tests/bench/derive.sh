#!/usr/bin/env bash
# Derived watches against hand-written ones, in one run on the same data and workload: the README's
# `order` doc over the demo shop (tests/bench/shop_workload.sql, plus the products its items name),
# first with the watches the README writes by hand (define_query(…, watches => 'manual') and three
# docsync.watch calls), then with watches => 'derived'. Reports, for each, the doc computes and the
# keys-query statements per row change, and derived / hand-written (goal: within 1.2×).
#
#   dir=$(packaging/dev-cluster.sh start); . "$dir/cluster.env"
#   tests/bench/derive.sh [orders (default 2000)]
#   (DOCSYNC_BENCH_DERIVED_FIRST=1: the derived phase first)
#   (DOCSYNC_WORKER=path/to/docsync-worker, default build/rel/docsync-worker, a Release build)
#
# Method. Each phase starts from the same rows (orders, items and audit rows emptied, product prices
# reset), defines the doc query its way, creates a new slot and runs the worker with --live all and
# a JSONL sink on a file of its own, so every doc the workload names becomes live when first
# computed. The workload, in steps, each committed while the worker streams and drained (the slot
# confirmed past it) before the next begins:
#   1. CALL bench_workload(orders): per order, one transaction inserting it, three items and two
#      audit rows and updating its status, and one touching the audit log only (nothing reads it);
#   2. 200 price changes of products the orders hold (reverse index: a keys lookup, then the docs);
#   3. an UPDATE of each item's description, which the doc does not read, 100 rows a transaction
#      (order_items has REPLICA IDENTITY FULL, as the README sets it, so the worker sees which
#      columns kept their values);
#   4. an UPDATE of each order's notes, which the doc does not read either, 100 rows a transaction
#      (orders keeps the default identity: the old status is not logged, so the worker cannot tell
#      that it kept its value).
# Per step: row changes (docsync_changes_total, the worker's metrics: changes of watched tables
# handled), doc computes (docsync_recomputes_total, the worker's metrics: each doc a batched
# statement computed counts), and the reader's statements that read order_items
# (pg_stat_statements, calls): the doc query's (alone or batched) and the keys queries'. Every doc
# the sink holds at the end is checked against a fresh run of the query: a phase whose docs are not
# current fails the benchmark. Not a timed test: how changes coalesce depends on the machine's pace.
set -euo pipefail
orders=${1:-2000}
# shellcheck source=tests/bench/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
trap bench_cleanup EXIT
bench_setup_db

if [ "$(psql -At -d "$db" -c "SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
                               WHERE n.nspname = 'docsync' AND p.proname = 'define_query'
                                 AND 'watches' = ANY (p.proargnames)")" = 0 ]; then
  echo "this docsync has no derived watches (define_query(…, watches => 'derived')): nothing to compare" >&2
  exit 1
fi

psql -d "$db" -f "$top/tests/bench/shop_workload.sql" >/dev/null
psql -d "$db" <<SQL >/dev/null
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pg_stat_statements;
CREATE TABLE products (id int PRIMARY KEY, name text NOT NULL, price numeric(10,2) NOT NULL, stock int);
INSERT INTO products SELECT g, 'product ' || g, 1 + g % 50, 100 FROM generate_series(0, 500) g;
ALTER TABLE order_items REPLICA IDENTITY FULL;  -- as the README sets it: a delete logs its order_id
GRANT SELECT ON orders, order_items, products, audit_log TO $reader;
SQL

doc_sql="SELECT jsonb_build_object('id', o.id, 'status', o.status, 'items',
    (SELECT coalesce(jsonb_agg(jsonb_build_object('product', p.name, 'price', p.price, 'qty', i.qty)
                               ORDER BY i.id), '[]')
       FROM order_items i JOIN products p ON p.id = i.product_id WHERE i.order_id = o.id))
  FROM orders o WHERE o.id = \$1"

define() {
  local mode=$1
  psql -d "$db" <<SQL >/dev/null
SET client_min_messages = warning;
SELECT docsync.drop_query(name) FROM docsync.query_defs WHERE name = 'order';
SELECT docsync.define_query('order', \$doc\$$doc_sql\$doc\$, params => ARRAY['order_id'], watches => '$mode');
SQL
  if [ "$mode" = manual ]; then
    psql -d "$db" <<'SQL' >/dev/null
SET client_min_messages = warning;
SELECT docsync.watch('order', 'orders',      params => ARRAY['id']);
SELECT docsync.watch('order', 'order_items', params => ARRAY['order_id']);
SELECT docsync.watch('order', 'products',
  keys_sql => $$SELECT DISTINCT order_id FROM order_items WHERE product_id = $1$$, keys_args => ARRAY['id']);
SQL
  fi
  psql -d "$db" -c "SELECT docsync.grant_reader('$reader')" >/dev/null
  echo "$mode watches:"
  psql -At -F ' | ' -d "$db" -c "SELECT format('  %s.%s', table_schema, table_name), CASE WHEN broadcast THEN 'broadcast'
                                          WHEN keys_sql IS NULL THEN 'direct ' || columns::text ELSE 'keys ' || keys_sql END,
                                        'reads ' || coalesce(read_columns::text, 'every column')
                                   FROM docsync.watch_defs WHERE query = 'order' ORDER BY table_name, id"
}

results=$bench_tmp/results
: >"$results"
# counters MODE STEP: after the worker has acknowledged everything committed so far, the metrics (a
# status tick's snapshot: read until a tick after the drain shows them settled) and the reader's
# statements since the step began; appends "STEP mode step changes computes doc_stmts keys_stmts
# keys_rows" (changes and computes as totals since the worker started).
counters() {
  local mode=$1 step=$2 target metrics before_tick= changes computes
  target=$(psql -At -d "$db" -c "SELECT pg_current_wal_lsn()")
  bench_wait_confirmed "$slot" "$target" 600 "$EPOCHREALTIME" >/dev/null
  for _ in $(seq 1 60); do
    metrics=$(curl -fs "http://127.0.0.1:$metrics_port/metrics" | grep -E '^docsync_(changes|recomputes)_total ' || true)
    [ -n "$metrics" ] && [ "$metrics" = "$before_tick" ] && break
    before_tick=$metrics
    sleep 1.1
  done
  changes=$(awk '$1 == "docsync_changes_total" {print $2}' <<<"$metrics")
  computes=$(awk '$1 == "docsync_recomputes_total" {print $2}' <<<"$metrics")
  echo "STEP $mode $step $changes $computes $(psql -At -F ' ' -d "$db" -c "
    SELECT coalesce(sum(calls) FILTER (WHERE s.query LIKE '%jsonb_build_object%'), 0),
           coalesce(sum(calls) FILTER (WHERE s.query NOT LIKE '%jsonb_build_object%'), 0),
           coalesce(sum(rows) FILTER (WHERE s.query NOT LIKE '%jsonb_build_object%'), 0)
      FROM pg_stat_statements s JOIN pg_roles r ON r.oid = s.userid
     WHERE (r.rolname = '$reader' OR (r.rolname LIKE 'docsync\\_reader\\_%' AND pg_has_role('$reader', r.oid, 'MEMBER')))
       AND s.dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
       AND s.query LIKE '%order_items%'")" >>"$results"
  psql -d "$db" -c "SELECT pg_stat_statements_reset()" >/dev/null
}

phase() {
  local mode=$1 sink=$bench_tmp/docs_$1.jsonl wpid
  slot=bench_derive_${1}_$$
  psql -d "$db" -c "TRUNCATE orders, order_items, audit_log" -c "UPDATE products SET price = 1 + id % 50" >/dev/null
  define "$mode"
  metrics_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  "$worker" --dsn "$dsn_repl" --pool-dsn "$dsn_reader" --slot "$slot" --create-slot --sink "file:$sink" \
    --live all --audit-rate 0 --status-dir "$bench_tmp" --metrics-listen "127.0.0.1:$metrics_port" \
    --log-level warning >"$bench_tmp/worker_$mode.log" 2>&1 &
  wpid=$!
  bench_pids+=("$wpid")
  for _ in $(seq 1 200); do
    [ "$(command psql -X -At -d "$db" -c "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '$slot' AND active")" = 1 ] && break
    sleep 0.05
  done
  counters "$mode" start
  psql -d "$db" -c "CALL bench_workload($orders)" >/dev/null
  counters "$mode" orders
  for k in $(seq 1 200); do echo "UPDATE products SET price = price + 0.01 WHERE id = $(( (k * 37) % 501 ));"; done |
    psql -d "$db" >/dev/null
  counters "$mode" prices
  for start in $(seq 0 100 $((orders * 10 + 3))); do
    echo "UPDATE order_items SET description = description || '.' WHERE id >= $start AND id < $((start + 100));"
  done | psql -d "$db" >/dev/null
  counters "$mode" descriptions
  for start in $(seq 0 100 "$orders"); do
    echo "UPDATE orders SET notes = 'called' WHERE id >= $start AND id < $((start + 100));"
  done | psql -d "$db" >/dev/null
  counters "$mode" notes
  kill -TERM "$wpid"
  wait "$wpid" 2>/dev/null || true
  psql -d "$db" -c "SELECT pg_drop_replication_slot('$slot')" >/dev/null

  # every doc the sink holds last equals a fresh run of the query
  python3 - "$sink" >"$bench_tmp/last_$mode.tsv" <<'PY'
import json, sys
last = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("channel", "").startswith("db:order:"):
        last[r["channel"][len("db:order:"):]] = r["doc"]
for k, d in last.items():
    print(f"{k}\t{json.dumps(d)}")
PY
  local stale held
  held=$(wc -l <"$bench_tmp/last_$mode.tsv")
  stale=$(psql -At -d "$db" <<SQL
CREATE TEMP TABLE held (id int, doc jsonb);
\copy held FROM '$bench_tmp/last_$mode.tsv'
SELECT count(*) FROM held h
 WHERE h.doc IS DISTINCT FROM (SELECT jsonb_build_object('id', o.id, 'status', o.status, 'items',
    (SELECT coalesce(jsonb_agg(jsonb_build_object('product', p.name, 'price', p.price, 'qty', i.qty) ORDER BY i.id), '[]')
       FROM order_items i JOIN products p ON p.id = i.product_id WHERE i.order_id = o.id))
  FROM orders o WHERE o.id = h.id);
SQL
)
  [ "$held" -ge "$orders" ] || { echo "$mode: the sink holds $held order docs, not $orders" >&2; exit 1; }
  [ "$stale" = 0 ] || { echo "$mode: $stale of $held docs differ from a fresh run of the query" >&2; exit 1; }
  echo "  $held docs, all current"
}

echo "PostgreSQL $(psql -At -d "$db" -c 'SHOW server_version'), worker $worker, $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg) at start"
echo "$orders orders of 3 items, 501 products"
# DOCSYNC_BENCH_DERIVED_FIRST=1 runs the phases the other way round (the second phase runs on a warm
# server: run both orders to see what that weighs)
if [ "${DOCSYNC_BENCH_DERIVED_FIRST:-0}" = 1 ]; then phase derived; phase manual; else phase manual; phase derived; fi
echo "load average $(cut -d' ' -f1-3 /proc/loadavg) at the end"
python3 - "$results" <<'PY'
import sys
steps = {}
order = []
for l in open(sys.argv[1]):
    if l.startswith("STEP "):
        mode, step, *v = l.split()[1:]
        steps[(mode, step)] = [float(x) for x in v]
        if step not in order:
            order.append(step)
names = {"orders": "orders: insert, 3 items, status update (bench_workload)",
         "prices": "200 price changes (reverse index)",
         "descriptions": "item descriptions, read by no doc (REPLICA IDENTITY FULL)",
         "notes": "order notes, read by no doc (default identity)"}
def delta(mode, step):
    i = order.index(step)
    cur, prev = steps[(mode, step)], steps[(mode, order[i - 1])]
    return cur[0] - prev[0], cur[1] - prev[1], cur[2], cur[3], cur[4]
print("\n| step | row changes | doc computes per change, hand-written / derived | ratio | doc statements, hand-written / derived | keys statements, hand-written / derived |")
print("| --- | --- | --- | --- | --- | --- |")
tot = {m: [0.0] * 5 for m in ("manual", "derived")}
for step in order[1:]:
    m, d = delta("manual", step), delta("derived", step)
    for k in range(5):
        tot["manual"][k] += m[k]; tot["derived"][k] += d[k]
    ratio = f"{d[1] / m[1]:.2f}×" if m[1] else "—"
    changes = f"{m[0]:.0f}" if m[0] == d[0] else f"{m[0]:.0f} / {d[0]:.0f}"
    print(f"| {names.get(step, step)} | {changes} | {m[1] / m[0]:.4f} / {d[1] / d[0]:.4f} | {ratio} | {m[2]:.0f} / {d[2]:.0f} | {m[3]:.0f} / {d[3]:.0f} |")
m, d = tot["manual"], tot["derived"]
print(f"| **all** | {m[0]:.0f} | {m[1] / m[0]:.4f} / {d[1] / d[0]:.4f} | **{d[1] / m[1]:.2f}×** | {m[2]:.0f} / {d[2]:.0f} | {m[3]:.0f} / {d[3]:.0f} |")
print(f"\nkeys queries returned {m[4]:.0f} / {d[4]:.0f} rows; doc computes in all: {m[1]:.0f} / {d[1]:.0f}")
PY
