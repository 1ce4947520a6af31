#!/usr/bin/env bash
# The worker reading PostgreSQL's built-in pgoutput (--plugin pgoutput), as on a server that loads no
# custom output plugin: the shop schema and seeded randomized workload of the fault tests (direct and
# reverse-index watches, a REPLICA IDENTITY FULL table, moves, deletes, truncates, subtransactions, a
# hot row, unwatched traffic) through the real worker, kill -9ed once mid-stream.
#   - The replication role does not own the tables: the first start stops before making a slot, its
#     error ending with the statements for an owner; once an owner has run them the worker streams.
#   - The slot is a pgoutput slot and the publication lists the watched tables whole (no column lists).
#   - After the workload the sink converges (every order's doc equals a fresh run of its query),
#     and no acknowledgement passed a transaction that had not completed (faults_common.bash).
# Uses the cluster of the calling environment (packaging/dev-cluster.sh), or a private one.
#   DOCSYNC_FAULT_SEED=N  replay a seed
set -uo pipefail
# shellcheck source=faults_common.bash
. "$(dirname "${BASH_SOURCE[0]}")/faults_common.bash"

start_cluster
write_workload 300 "$tmp/workload.sql"

echo "first start: the role may not set up the publication"
start_worker --plugin pgoutput
for _ in $(seq 1 150); do kill -0 "$worker_pid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$worker_pid" 2>/dev/null && fail "the worker kept running without its publication"
wait "$worker_pid" 2>/dev/null
worker_pid=
marker='have an owner of the tables (or a superuser) run: '
statements=$(grep -o "$marker.*" "$tmp/worker.$run.log" | head -n 1)
[ -n "$statements" ] || fail "the worker's error names no statements: $(tail -n 3 "$tmp/worker.$run.log")"
[ "$(sql "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '$slot'")" = 0 ] ||
  fail "the worker made its slot without the publication"
sql "${statements#"$marker"}" || fail "the statements the worker named failed: ${statements#"$marker"}"

echo "with the publication an owner made, the worker streams pgoutput"
start_worker --plugin pgoutput
publish_all
[ "$(sql "SELECT plugin FROM pg_replication_slots WHERE slot_name = '$slot'")" = pgoutput ] ||
  fail "the slot is not a pgoutput slot"
columns=$(sql "SELECT tablename || '(' || array_to_string(attnames, ',') || ')' FROM pg_publication_tables
               WHERE pubname = 'docsync_$slot' AND schemaname = 'public' ORDER BY tablename" | tr '\n' ' ')
# Whole tables, no column lists: a column list that misses the replica identity makes PostgreSQL
# refuse the application's UPDATE and DELETE, and the identity is the tables' owners' to change.
[ "$columns" = "order_items(id,order_id,product_id,qty) orders(id,status) products(id,price) " ] ||
  fail "the publication lists $columns"
[ "$(sql "SELECT count(*) FROM pg_publication_rel r JOIN pg_publication p ON p.oid = r.prpubid
          WHERE p.pubname = 'docsync_$slot' AND r.prattrs IS NOT NULL")" = 0 ] ||
  fail "the publication has a column list"

run_workload "$tmp/workload.sql"
sleep_random 500 1500
worker_alive
kill_worker
sleep_random 0 800
start_worker --plugin pgoutput
wait_workload 300
echo "workload done; draining"
drain 120
check_convergence
check_acks
echo "PASS worker_pgoutput (seed $seed)"
