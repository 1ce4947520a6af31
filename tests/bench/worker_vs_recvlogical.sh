#!/usr/bin/env bash
# The rate at which docsync-worker consumes its slot (decode + handle every change, no live doc)
# against pg_recvlogical reading the same slot contents with the same plugin and options into
# /dev/null, side by side in one run.
#
#   dir=$(packaging/dev-cluster.sh start); . "$dir/cluster.env"
#   tests/bench/worker_vs_recvlogical.sh [transactions (default 10000)]
#   (DOCSYNC_WORKER=path/to/docsync-worker, default build/rel/docsync-worker, a Release build)
#
# Two docsync slots are created at the same position before the workload, so both hold the same
# changes. The workload is plugin_bench.sh's: per transaction an order, three items, two unwatched
# audit rows and an update of the order; then a transaction touching only the unwatched table. The
# doc query 'order' watches orders(id) and order_items(order_id); the worker runs with
# --live subscribers against a private Redis that has no subscriber, so every change is decoded,
# mapped to its channel and found not live: the cost of consuming a slot, with no doc computed.
# pg_recvlogical gets -o tables=<docsync.plugin_tables()> -o format=binary -o proto_version=1 (what
# the worker asks for) and --endpos. Each consumer is timed from its start until the slot's
# confirmed_flush_lsn reaches the end LSN of the workload's last COMMIT (polled every 20 ms); the runs
# take turns on an otherwise idle cluster. The WAL decoding
# itself happens in the server's walsender in both cases: the ratio shows what the worker adds.
# Not a timed test: figures depend on the machine.
set -euo pipefail
n=${1:-10000}
# shellcheck source=tests/bench/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
trap bench_cleanup EXIT
bench_setup_db
bench_start_redis

psql -d "$db" -f "$(dirname "${BASH_SOURCE[0]}")/shop_workload.sql" >/dev/null
psql -d "$db" <<SQL >/dev/null
SET client_min_messages = warning;
ALTER TABLE order_items REPLICA IDENTITY FULL;
GRANT SELECT ON orders, order_items TO $reader;
SELECT docsync.define_query('order', \$\$SELECT jsonb_build_object('id', o.id, 'status', o.status,
  'items', (SELECT jsonb_agg(i.product_id ORDER BY i.id) FROM order_items i WHERE i.order_id = o.id))
  FROM orders o WHERE o.id = \$1\$\$, params => ARRAY['order_id']);
SELECT docsync.watch('order', 'orders', params => ARRAY['id']);
SELECT docsync.watch('order', 'order_items', params => ARRAY['order_id']);
SQL
tables=$(psql -At -d "$db" -c "SELECT docsync.plugin_tables()")
# Four slots at one position: two for each consumer, run alternately (recvlogical, worker, worker,
# recvlogical) so a load change on the shared machine hits both alike; each one's best run counts.
for s in r1 w1 w2 r2; do psql -d "$db" -c "SELECT pg_create_logical_replication_slot('bench_${s}_$$', 'docsync')" >/dev/null; done
slot_r=bench_r1_$$
start_lsn=$(psql -At -d "$db" -c "SELECT max(confirmed_flush_lsn) FROM pg_replication_slots WHERE slot_name LIKE 'bench\\_%\\_$$'")
t=$EPOCHREALTIME
psql -d "$db" -c "CALL bench_workload($n)"
end_lsn=$(psql -At -d "$db" -c "SELECT pg_current_wal_lsn()")
# The end: the last COMMIT's end LSN, the position both consumers confirm once they have it all.
read -r records end_lsn < <(psql -At -F ' ' -d "$db" -c "SELECT count(*), max(lsn) FROM pg_logical_slot_peek_binary_changes('$slot_r', '$end_lsn', NULL, 'tables', '$tables')")
wal_bytes=$(psql -At -d "$db" -c "SELECT '$end_lsn'::pg_lsn - '$start_lsn'::pg_lsn")
printf 'workload: %d watched + %d unwatched transactions, %d records from the plugin, %.1f MB of WAL (%s .. %s), generated in %.1fs\n' \
  "$n" "$n" "$records" "$(echo "$wal_bytes / 1000000" | bc -l)" "$start_lsn" "$end_lsn" "$(echo "$EPOCHREALTIME - $t" | bc -l)"
limit=$(( 60 + n / 100 ))

# Each consumer runs in a command substitution (its own subshell, where the EXIT trap does not
# reach), so each function ends its own process on every path.
run_recvlogical() {
  local slot=bench_$1_$$ t0=$EPOCHREALTIME pid t
  pg_recvlogical -d "$dsn_repl" -S "$slot" --start --endpos "$end_lsn" -f /dev/null -F 0 -s 1 \
    -o "tables=$tables" -o format=binary -o proto_version=1 2>"$bench_tmp/recvlogical.log" &
  pid=$!
  t=$(bench_wait_confirmed "$slot" "$end_lsn" "$limit" "$t0") || { kill -9 "$pid"; cat "$bench_tmp/recvlogical.log" >&2; exit 1; }
  # It exits by itself at --endpos: wait for that (at most 10 s) so runs do not overlap.
  for _ in $(seq 1 200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
  kill -9 "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  echo "$t"
}
run_worker() {
  local slot=bench_$1_$$ t0=$EPOCHREALTIME wpid t
  "$worker" --dsn "$dsn_repl" --pool-dsn "$dsn_reader" --slot "$slot" --sink "redis://127.0.0.1:$redis_port" \
    --live subscribers --status-dir "$bench_tmp" --log-level warning 2>"$bench_tmp/worker.log" &
  wpid=$!
  t=$(bench_wait_confirmed "$slot" "$end_lsn" "$limit" "$t0") || { kill -9 "$wpid"; tail -n 20 "$bench_tmp/worker.log" >&2; exit 1; }
  # The worker's own CPU time (user + system) for the run: well under the wall time means the
  # server's decoding, not the worker, sets the pace.
  awk -v hz="$(getconf CLK_TCK)" '{printf "%.3f", ($14 + $15) / hz}' "/proc/$wpid/stat" >"$bench_tmp/cpu_$1"
  kill -TERM "$wpid"
  wait "$wpid" || { echo "the worker failed:" >&2; cat "$bench_tmp/worker.log" >&2; exit 1; }
  echo "$t"
}
r1=$(run_recvlogical r1)
w1=$(run_worker w1)
w2=$(run_worker w2)
r2=$(run_recvlogical r2)
echo "runs (seconds): pg_recvlogical $r1, $r2; docsync-worker $w1, $w2 (worker CPU $(cat "$bench_tmp/cpu_w1") s, $(cat "$bench_tmp/cpu_w2") s)"
t_recv=$(printf '%s\n' "$r1" "$r2" | sort -n | head -n1)
t_worker=$(printf '%s\n' "$w1" "$w2" | sort -n | head -n1)

rate() { echo "scale=0; $1 / $2" | bc -l; }
printf '%-16s %8s %12s %10s\n' consumer seconds records/s 'WAL MB/s'
printf '%-16s %8s %12s %10.1f\n' pg_recvlogical "$t_recv" "$(rate "$records" "$t_recv")" "$(echo "$wal_bytes / 1000000 / $t_recv" | bc -l)"
printf '%-16s %8s %12s %10.1f\n' docsync-worker "$t_worker" "$(rate "$records" "$t_worker")" "$(echo "$wal_bytes / 1000000 / $t_worker" | bc -l)"
printf 'worker / pg_recvlogical rate: %.2fx (target >= 0.9x)\n' "$(echo "$t_recv / $t_worker" | bc -l)"
