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
#   - Streamed transactions (protocol version 2; the walsender's logical_decoding_work_mem at 64kB,
#     the worker's --stream-memory at 32kB, so they go to temporary files), after that workload: a large one with a
#     subtransaction rolled back inside it, two interleaved (the connection dropped while one is
#     open), a large one rolled back, and one in
#     progress while the worker is killed with kill -9 and started again (the new one must get all
#     of it), and one that cannot go to a temporary file (its retries back off, nothing past it is
#     acknowledged). The engine gets exactly the committed changes (its `changes` counter in docsync.status), none of a rolled-back
#     (sub)transaction's, and the sink converges.
# Uses the cluster of the calling environment (packaging/dev-cluster.sh), or a private one.
#   DOCSYNC_FAULT_SEED=N  replay a seed
set -uo pipefail
# shellcheck source=faults_common.bash
. "$(dirname "${BASH_SOURCE[0]}")/faults_common.bash"

start_cluster
write_workload 300 "$tmp/workload.sql"
# The walsender streams a transaction past 64kB of decoded changes (every session of this script
# inherits the setting; only the walsender's matters).
export PGOPTIONS="-c logical_decoding_work_mem=64kB"

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
start_worker --plugin pgoutput --stream-memory 32kB
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
start_worker --plugin pgoutput --stream-memory 32kB
wait_workload 300
echo "workload done; draining"
drain 120

echo "streamed transactions"
# gate_close N: a session of its own holds advisory lock N, where a transaction waits
# (pg_advisory_lock_shared) until gate_open N.
gate_close() {
  psql -X -q -d "$db" -c "SET application_name = 'stream_gate_$1'" -c "SELECT pg_advisory_lock($1), pg_sleep(120)" \
    >/dev/null 2>&1 &
  for _ in $(seq 1 100); do
    [ "$(sql "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = $1 AND granted")" = 1 ] && return 0
    sleep 0.1
  done
  fail "the gate session did not take its lock"
}
gate_open() { sql "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'stream_gate_$1'" >/dev/null; }
# Each loop writes 20 to 40 rows a round: a few hundred kB of decoded changes, streamed in blocks.
loop() { echo "DO \$\$ BEGIN FOR i IN 1..$1 LOOP $2; END LOOP; END \$\$;"; }
# The changes the worker handed its engine since it started, once everything written is confirmed
# and its status (written every 200 ms) says so.
changes() { drain 60; sleep 0.4; sql "SELECT changes FROM docsync.status WHERE slot_name = '$slot'"; }
sql "INSERT INTO orders VALUES (1) ON CONFLICT DO NOTHING"
publish_all
items=$(sql "SELECT count(*) FROM order_items")
orders=$(sql "SELECT count(*) FROM orders")
before=$(changes)
psql -X -q -v ON_ERROR_STOP=1 -d "$db" >/dev/null <<SQL || fail "the large transaction failed"
BEGIN;
$(loop 120 "UPDATE order_items SET qty = qty + 1")
SAVEPOINT s;
$(loop 80 "UPDATE orders SET status = 'never ' || i")
SELECT pg_sleep(0.5);  -- streamed while it is alive (one already rolled back when decoded is not sent)
ROLLBACK TO SAVEPOINT s;
UPDATE orders SET status = 'large';
COMMIT;
SQL
# The changes that committed (give or take one the status had not counted yet), none of the
# rolled-back subtransaction's (80 per order).
after=$(changes)
(( after - before >= 120 * items + orders && after - before <= 120 * items + orders + 5 )) ||
  fail "the large transaction handed $((after - before)) changes to the engine, not $((120 * items + orders))"
# Two at once, each streamed between the other's blocks; the second commits first, then the
# connection drops while the first is still open: the server sends it again from its start.
gate_close 4243
psql -X -q -v ON_ERROR_STOP=1 -d "$db" >"$tmp/first.out" 2>&1 <<SQL &
BEGIN;
$(loop 100 "UPDATE order_items SET qty = qty + 1 WHERE id % 2 = 0")
SELECT pg_advisory_lock_shared(4243);
$(loop 100 "UPDATE order_items SET qty = qty + 1 WHERE id % 2 = 0")
UPDATE orders SET status = 'first' WHERE id % 2 = 0;
COMMIT;
SQL
first=$!
sleep 0.3
psql -X -q -v ON_ERROR_STOP=1 -d "$db" >/dev/null <<SQL || fail "the second interleaved transaction failed"
BEGIN;
$(loop 100 "UPDATE order_items SET qty = qty + 1 WHERE id % 2 = 1")
UPDATE orders SET status = 'second' WHERE id % 2 = 1;
COMMIT;
SQL
sql "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = '$slot'" >/dev/null
gate_open 4243
wait "$first" || fail "the first interleaved transaction failed: $(cat "$tmp/first.out")"
# A large transaction rolled back: none of it may reach the engine.
before=$(changes)
psql -X -q -v ON_ERROR_STOP=1 -d "$db" >/dev/null <<SQL || fail "the rolled-back transaction failed"
BEGIN;
$(loop 150 "UPDATE orders SET status = 'aborted ' || i")
SELECT pg_sleep(0.5);
ROLLBACK;
SQL
psql -X -q -v ON_ERROR_STOP=1 -d "$db" -c "UPDATE orders SET status = status WHERE id = 1" >/dev/null
after=$(changes)
(( after - before >= 1 && after - before <= 6 )) ||
  fail "the rolled-back transaction's changes reached the engine ($((after - before)) changes, not 1)"
# One in progress, streamed, while the worker is killed (having confirmed positions past its first
# blocks): the next worker gets all of it, from its start. It waits at a gate until that one counts.
gate_close 4242
psql -X -q -v ON_ERROR_STOP=1 -d "$db" >"$tmp/killed.out" 2>&1 <<SQL &
BEGIN;
$(loop 150 "UPDATE order_items SET qty = qty + 1")
SELECT pg_advisory_lock_shared(4242);
$(loop 50 "UPDATE order_items SET qty = qty + 1")
UPDATE orders SET status = 'across a kill';
COMMIT;
SQL
held=$!
sleep 0.7
kill_worker
start_worker --plugin pgoutput --stream-memory 32kB
for _ in $(seq 1 100); do
  [ "$(sql "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '$slot' AND active")" = 1 ] && break
  worker_alive
  sleep 0.1
done
before=$(changes)
gate_open 4242
wait "$held" || fail "the transaction in progress across the kill failed: $(cat "$tmp/killed.out")"
after=$(changes)
(( after - before >= 200 * items + orders && after - before <= 200 * items + orders + 5 )) ||
  fail "the transaction across the kill handed $((after - before)) changes to the engine, not $((200 * items + orders))"
# A streamed transaction that cannot go to a temporary file (here $TMPDIR does not exist; a full
# disk alike) fails each session at the same place: the retries back off as for a refused
# connection, not every few hundred milliseconds with the server decoding it again each time; and
# nothing past it is acknowledged. A worker with room then takes it.
kill_worker
TMPDIR=$tmp/no-such-dir start_worker --plugin pgoutput --stream-memory 32kB
spill_log=$tmp/worker.$run.log
confirmed() { sql "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = '$slot'"; }
# (at least 2 000 changes, whatever the seed left in order_items: past the walsender's 64kB, so it
# is streamed, and past --stream-memory)
spill_loops=$(( items > 0 ? (2000 + items - 1) / items : 2000 ))
(( spill_loops >= 150 )) || spill_loops=150
psql -X -q -v ON_ERROR_STOP=1 -d "$db" >/dev/null <<SQL || fail "the transaction that cannot be spilled failed"
BEGIN;
$(loop "$spill_loops" "UPDATE order_items SET qty = qty + 1")
UPDATE orders SET status = 'spilled at last';
COMMIT;
SQL
big=$(sql "SELECT pg_current_wal_lsn()")
spill_failed='replication connection lost: could not (create|write) a temporary file'
for _ in $(seq 1 300); do grep -Eq "$spill_failed" "$spill_log" && break; worker_alive; sleep 0.1; done
sleep 6  # from the first failure on
lost=$(grep -Ec "$spill_failed" "$spill_log")
echo "$lost sessions failed on the temporary file in the 6 s after the first"
(( lost >= 2 && lost <= 9 )) ||
  fail "$lost sessions failed on the temporary file in the 6 s after the first (the backoff must grow: 2 to 9)"
[ "$(sql "SELECT '$(confirmed)'::pg_lsn < '$big'::pg_lsn")" = t ] ||
  fail "the slot was confirmed past a transaction the worker could not hold"
kill_worker
start_worker --plugin pgoutput --stream-memory 32kB
check_convergence
check_acks
grep -q 'pgoutput protocol version 2 with streamed transactions' "$tmp/worker.$((run - 1)).log" ||
  fail "the worker did not stream with protocol version 2"
grep -q 'over --stream-memory' "$tmp"/worker.*.log || fail "no streamed transaction went to a temporary file"
[ "$(sql "SELECT count(*) FROM orders WHERE status = 'spilled at last'")" -gt 0 ] || fail "the last transaction did not commit"

echo "PASS worker_pgoutput (seed $seed)"
