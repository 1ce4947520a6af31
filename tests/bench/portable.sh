#!/usr/bin/env bash
# Portable mode against the docsync plugin, on the same WAL: what reading PostgreSQL's built-in
# pgoutput costs the server (bytes sent, the walsender's decoding CPU), the worker (its CPU) and the
# user (commit → publish latency).
#
#   dir=$(packaging/dev-cluster.sh start); . "$dir/cluster.env"
#   tests/bench/portable.sh [seconds of load (default 20)] [order transactions/s (default 200)] [rounds (default 2)]
#   (DOCSYNC_WORKER=path/to/docsync-worker, default build/rel/docsync-worker, a Release build)
#
# Method. The shop schema of shop_workload.sql plus products(id, name, price) (501 rows), and the
# README's 'order' doc query and watches: orders(id), order_items(order_id) (REPLICA IDENTITY FULL)
# and the reverse index on products; the doc also carries the order's updated_at as 'ts'. The load is
# bench_workload's transactions paced by pgbench -R: an order, its three items, two audit rows and
# an update of the order that sets updated_at = clock_timestamp() just before COMMIT; then an audit
# heartbeat on its own. Per round, four slots are made one after the other on the idle database
# (the same position): a docsync and a pgoutput slot read by a worker each, --sink stdout --live all
# (every order's doc computed and published at each of its commits), and a docsync and a pgoutput
# slot only peeked at the end for the bytes. The pgoutput worker's publication is made first, by the
# statements the worker names when its role may not (the tables' owner runs them), as on a managed
# server. Both workers stream the same load at the same time, so a change of machine load hits both
# alike; the round after starts them in the other order.
#   - bytes sent: sum of the payloads pg_logical_slot_peek_binary_changes returns for the load on the
#     bytes slots, with the options each worker starts its stream with, plus the 25-byte XLogData
#     header each message travels in (keepalives apart).
#   - server decoding CPU: the utime + stime of each worker slot's walsender (pg_replication_slots.
#     active_pid, /proc/PID/stat) over the load and until the slot has confirmed its end.
#   - worker CPU: the same for each worker process.
#   - commit → publish: a reader on each worker's stdout stamps each line on arrival; latency =
#     arrival − ts for the docs committed during the load in their final state ('paid'); p50/p99.
# The loadavg before and after each round is printed. Not a timed test: figures depend on the machine.
set -euo pipefail
seconds=${1:-20}
rate=${2:-200}
rounds=${3:-2}
# shellcheck source=tests/bench/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
trap bench_cleanup EXIT
bench_worker_has_flag --plugin || { echo "$worker has no --plugin: build this checkout's worker" >&2; exit 1; }
bench_setup_db

psql -d "$db" -f "$(dirname "${BASH_SOURCE[0]}")/shop_workload.sql" >/dev/null
psql -d "$db" <<SQL >/dev/null
SET client_min_messages = warning;
CREATE TABLE products (id int PRIMARY KEY, name text NOT NULL, price numeric(12,2) NOT NULL);
INSERT INTO products SELECT g, 'product ' || g, 9.99 FROM generate_series(0, 500) g;
CREATE SEQUENCE bench_order_id;
ALTER TABLE order_items REPLICA IDENTITY FULL;
GRANT SELECT ON orders, order_items, products TO $reader;
BEGIN;
SELECT docsync.define_query('order', \$\$SELECT jsonb_build_object('id', o.id, 'status', o.status, 'items',
    (SELECT coalesce(jsonb_agg(jsonb_build_object('product', p.name, 'price', p.price, 'qty', i.qty)
                               ORDER BY i.id), '[]')
       FROM order_items i JOIN products p ON p.id = i.product_id WHERE i.order_id = o.id),
    'ts', extract(epoch FROM o.updated_at))
  FROM orders o WHERE o.id = \$1\$\$, params => ARRAY['order_id']);
SELECT docsync.watch('order', 'orders',      params => ARRAY['id']);
SELECT docsync.watch('order', 'order_items', params => ARRAY['order_id']);
SELECT docsync.watch('order', 'products',
  keys_sql => \$\$SELECT DISTINCT order_id FROM order_items WHERE product_id = \$1\$\$, keys_args => ARRAY['id']);
COMMIT;
-- The definer's reader role, now that the definition exists.
SELECT docsync.grant_reader('$reader');
SQL
cat >"$bench_tmp/load.sql" <<'SQL'
SELECT nextval('bench_order_id') AS i \gset
BEGIN;
INSERT INTO orders VALUES (:i, :i % 97, 'new', :i * 1.25, 'Street ' || :i || ', Some City, Some Country', repeat('note ', 20), now(), now());
INSERT INTO order_items SELECT :i * 10 + k, :i, (:i * 7 + k) % 501, k, 9.99, 'item description for product ' || k FROM generate_series(1, 3) k;
INSERT INTO audit_log (at, actor, action, payload) SELECT now(), 'app', 'order.created', repeat('{"k": "v"}', 10) FROM generate_series(1, 2);
UPDATE orders SET status = 'paid', updated_at = clock_timestamp() WHERE id = :i;
COMMIT;
INSERT INTO audit_log (at, actor, action, payload) VALUES (now(), 'cron', 'heartbeat', repeat('x', 100));
SQL
cat >"$bench_tmp/reader.py" <<'PY'
import sys, time
out = open(sys.argv[1], "w", buffering=1)
src = sys.stdin.buffer
while True:
    line = src.readline()
    if not line:
        break
    out.write(f"{time.time():.6f} {line.decode()}")
PY

# The pgoutput worker's publication, made the way a managed server's owner makes it: the worker's role
# owns no table, so its first start stops naming the statements; the bench (an owner) runs them.
pub_slot=bench_pub_$$
"$worker" --dsn "$dsn_repl" --pool-dsn "$dsn_reader" --slot "$pub_slot" --create-slot --plugin pgoutput \
  --sink stdout --status-dir "$bench_tmp" --log-level warning >/dev/null 2>"$bench_tmp/pub.log" || true
marker='have an owner of the tables (or a superuser) run: '
statements=$(grep -o "$marker.*" "$bench_tmp/pub.log" | head -n 1)
[ -n "$statements" ] || { echo "the pgoutput worker named no statements for an owner:" >&2; cat "$bench_tmp/pub.log" >&2; exit 1; }
psql -d "$db" -c "${statements#"$marker"}" >/dev/null
publication=docsync_$pub_slot
tables=$(psql -At -d "$db" -c "SELECT docsync.plugin_tables()")

cpu() { bench_cpu_seconds "$@"; }
walsender() { psql -At -d "$db" -c "SELECT active_pid FROM pg_replication_slots WHERE slot_name = '$1' AND active"; }
wait_active() {
  for _ in $(seq 1 300); do
    [ -n "$(walsender "$1")" ] && return 0
    sleep 0.1
  done
  echo "slot $1 was not streamed within 30 s" >&2; return 1
}
results=$bench_tmp/results
: >"$results"

run_round() {
  local round=$1 first=$2 second=$3 mode slot start_lsn end_lsn load_start
  local -A wpid wsnd wcpu0 scpu0
  echo "== round $round: load average $(cut -d' ' -f1-3 /proc/loadavg) before"
  # The pgoutput worker's slot is the one its publication is named after.
  for slot in "bench_w_docsync_${round}_$$ docsync" "$pub_slot pgoutput" "bench_b_docsync_${round}_$$ docsync" \
              "bench_b_pgoutput_${round}_$$ pgoutput"; do
    psql -d "$db" -c "SELECT pg_create_logical_replication_slot('${slot% *}', '${slot#* }')" >/dev/null
  done
  start_lsn=$(psql -At -d "$db" -c "SELECT pg_current_wal_lsn()")
  for mode in "$first" "$second"; do
    slot=bench_w_${mode}_${round}_$$
    mkfifo "$bench_tmp/docs_${mode}_$round"
    python3 "$bench_tmp/reader.py" "$bench_tmp/arrivals_${mode}_$round" <"$bench_tmp/docs_${mode}_$round" &
    bench_pids+=("$!")
    [ "$mode" = pgoutput ] && slot=$pub_slot
    "$worker" --dsn "$dsn_repl" --pool-dsn "$dsn_reader" --slot "$slot" --plugin "$mode" --sink stdout --live all \
      --status-dir "$bench_tmp" --log-level warning >"$bench_tmp/docs_${mode}_$round" 2>"$bench_tmp/worker_${mode}_$round.log" &
    wpid[$mode]=$!
    bench_pids+=("${wpid[$mode]}")
  done
  for mode in docsync pgoutput; do
    slot=bench_w_${mode}_${round}_$$; [ "$mode" = pgoutput ] && slot=$pub_slot
    wait_active "$slot" || { tail -n 20 "$bench_tmp/worker_${mode}_$round.log" >&2; exit 1; }
    wsnd[$mode]=$(walsender "$slot")
    wcpu0[$mode]=$(cpu "${wpid[$mode]}")
    scpu0[$mode]=$(cpu "${wsnd[$mode]}")
  done
  load_start=$EPOCHREALTIME
  pgbench -n -d "$db" -f "$bench_tmp/load.sql" -R "$rate" -T "$seconds" -c 4 -j 2 >"$bench_tmp/pgbench.log" 2>&1 || { cat "$bench_tmp/pgbench.log" >&2; exit 1; }
  end_lsn=$(psql -At -d "$db" -c "SELECT pg_current_wal_lsn()")
  local limit=$(( 60 + seconds * 4 ))
  for mode in docsync pgoutput; do
    slot=bench_w_${mode}_${round}_$$; [ "$mode" = pgoutput ] && slot=$pub_slot
    bench_wait_confirmed "$slot" "$end_lsn" "$limit" "$load_start" >/dev/null || { tail -n 20 "$bench_tmp/worker_${mode}_$round.log" >&2; exit 1; }
  done
  # Each consumer's CPU once both have confirmed everything: the settling wait counts for both alike.
  local -A wcpu scpu
  for mode in docsync pgoutput; do
    wcpu[$mode]=$(echo "$(cpu "${wpid[$mode]}") - ${wcpu0[$mode]}" | bc -l)
    scpu[$mode]=$(echo "$(cpu "${wsnd[$mode]}") - ${scpu0[$mode]}" | bc -l)
  done
  local commits
  commits=$(awk '/number of transactions actually processed/ {print $NF}' "$bench_tmp/pgbench.log" | cut -d/ -f1)
  for mode in docsync pgoutput; do
    kill -TERM "${wpid[$mode]}"
    wait "${wpid[$mode]}" || { echo "the $mode worker failed:" >&2; cat "$bench_tmp/worker_${mode}_$round.log" >&2; exit 1; }
  done
  # The bytes each plugin sends for the load, peeked on the slots no worker read.
  local dbytes pbytes
  dbytes=$(psql -At -d "$db" -c "SELECT coalesce(sum(octet_length(data) + 25), 0) FROM pg_logical_slot_peek_binary_changes(
             'bench_b_docsync_${round}_$$', '$end_lsn', NULL, 'tables', '$tables', 'format', 'binary', 'proto_version', '1')")
  pbytes=$(psql -At -d "$db" -c "SELECT coalesce(sum(octet_length(data) + 25), 0) FROM pg_logical_slot_peek_binary_changes(
             'bench_b_pgoutput_${round}_$$', '$end_lsn', NULL, 'proto_version', '1', 'publication_names', '$publication', 'messages', 'true')")
  # Every slot goes; the next round makes its own at its point.
  for slot in "bench_w_docsync_${round}_$$" "$pub_slot" "bench_b_docsync_${round}_$$" "bench_b_pgoutput_${round}_$$"; do
    psql -d "$db" -c "SELECT pg_drop_replication_slot('$slot')" >/dev/null
  done
  local wal
  wal=$(psql -At -d "$db" -c "SELECT '$end_lsn'::pg_lsn - '$start_lsn'::pg_lsn")
  echo "load: $commits order transactions at -R $rate for $seconds s, $(echo "scale=1; $wal / 1000000" | bc -l) MB of WAL; first started: $first; load average $(cut -d' ' -f1-3 /proc/loadavg) after"
  python3 - "$round" "$load_start" "$commits" "$dbytes" "$pbytes" "${scpu[docsync]}" "${scpu[pgoutput]}" \
      "${wcpu[docsync]}" "${wcpu[pgoutput]}" "$bench_tmp/arrivals_docsync_$round" "$bench_tmp/arrivals_pgoutput_$round" <<'PY' | tee -a "$results"
import json, sys
rnd, start, commits = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
nbytes = {"docsync": int(sys.argv[4]), "pgoutput": int(sys.argv[5])}
scpu = {"docsync": float(sys.argv[6]), "pgoutput": float(sys.argv[7])}
wcpu = {"docsync": float(sys.argv[8]), "pgoutput": float(sys.argv[9])}
files = {"docsync": sys.argv[10], "pgoutput": sys.argv[11]}
lat = {}
for mode, path in files.items():
    ms = []
    for row in open(path):
        at, line = row.split(" ", 1)
        doc = json.loads(line)["doc"]
        if doc is None or doc.get("status") != "paid" or doc["ts"] < start:
            continue
        ms.append((float(at) - doc["ts"]) * 1000)
    ms.sort()
    if len(ms) < commits:
        sys.exit(f"the {mode} worker published {len(ms)} paid orders of the load's {commits}")
    lat[mode] = ms
q = lambda ms, p: ms[min(len(ms) - 1, int(p * len(ms)))]
print(f"{'round ' + rnd:<10} {'bytes sent':>12} {'walsender CPU s':>16} {'worker CPU s':>13} {'p50 ms':>8} {'p99 ms':>8}")
for mode in ("docsync", "pgoutput"):
    print(f"{mode:<10} {nbytes[mode]:>12} {scpu[mode]:>16.2f} {wcpu[mode]:>13.2f} {q(lat[mode], .5):>8.2f} {q(lat[mode], .99):>8.2f}")
r = lambda k, d: d["pgoutput"] / d["docsync"] if d["docsync"] else float("nan")
print(f"{'ratio':<10} {r(0, nbytes):>11.2f}x {r(0, scpu):>15.2f}x {r(0, wcpu):>12.2f}x "
      f"{q(lat['pgoutput'], .5) / q(lat['docsync'], .5):>7.2f}x {q(lat['pgoutput'], .99) / q(lat['docsync'], .99):>7.2f}x"
      f"   (pgoutput / docsync; {commits} orders, per order: {nbytes['docsync'] / commits:.0f} vs {nbytes['pgoutput'] / commits:.0f} B)")
PY
}

for round in $(seq 1 "$rounds"); do
  if [ $((round % 2)) = 1 ]; then run_round "$round" docsync pgoutput; else run_round "$round" pgoutput docsync; fi
done
