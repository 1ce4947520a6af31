#!/usr/bin/env bash
# The publication a pgoutput worker reads from may be edited by the tables' owners; it must never
# break the application's writes, and an edit must never leave docs stale (--plugin pgoutput):
#   - ALTER TABLE … REPLICA IDENTITY FULL on a watched table (what docsync advises for a refused
#     watch): the application's UPDATE and DELETE of it still run. PostgreSQL refuses them on a
#     table whose publication column list does not cover the replica identity, so the worker
#     publishes watched tables whole.
#   - The watched table taken out of the publication by hand (ALTER PUBLICATION … DROP TABLE), then
#     a row changed: pgoutput never sends that change. Within the catalog check (--catalog-check 1s)
#     the worker sees the publication fall short, puts the table back and recomputes every live doc:
#     the doc shows the change within 10 s.
#   - The publication narrowed to inserts by hand (SET (publish = 'insert')), then a row updated:
#     the same.
#   - A row filter put on the watched table by hand (ADD TABLE … WHERE), then a filtered row updated:
#     the same, the filter taken off.
#   - An edit undone before the worker looks (the table taken out and put back, the actions narrowed
#     and set back, with an update in between; and the same while the stream reconnects): the
#     worker sees the publication's rows changed and recomputes every live doc all the same, and
#     the slot confirms the edit's position only once the doc shows the update.
#   - A partition of a watched table detached, changed and attached again, or set UNLOGGED, changed
#     and set LOGGED again, with docsync's event triggers disabled: the same.
#   - The publication renamed away and back around an update: pgoutput cannot decode past it, and the
#     worker stops naming the fix (drop the slot); done, every doc is current again.
# Needs the libpq environment of a cluster from packaging/dev-cluster.sh, DOCSYNC_WORKER and jq.
set -euo pipefail
test_name=pgoutput_publication
# shellcheck source=lib/worker_env.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib/worker_env.bash"

setup_db
# The worker keeps its publication itself here: its role may add any table to it.
psql -X -q -v ON_ERROR_STOP=1 -d postgres -c "ALTER ROLE $repl_role SUPERUSER"
sql "CREATE TABLE orders (id int PRIMARY KEY, status text NOT NULL, note text)"
sql "INSERT INTO orders VALUES (1, 'new', 'n'), (2, 'new', 'n')"
order_sql() { echo "SELECT jsonb_build_object('id', o.id, 'status', o.status) FROM orders o WHERE o.id = $1"; }
sql "SELECT docsync.define_query('order', \$q\$$(order_sql '$1')\$q\$, params => ARRAY['id'], watches => 'manual')" >/dev/null 2>&1
sql "SELECT docsync.watch('order', 'orders', params => ARRAY['id'])" >/dev/null
sql "CREATE TABLE pt (id int PRIMARY KEY, v int NOT NULL) PARTITION BY RANGE (id);
     CREATE TABLE pt_1 PARTITION OF pt FOR VALUES FROM (1) TO (100); INSERT INTO pt VALUES (1, 0)"
part_sql() { echo "SELECT jsonb_build_object('v', p.v) FROM pt p WHERE p.id = $1"; }
sql "SELECT docsync.define_query('part', \$q\$$(part_sql '$1')\$q\$, params => ARRAY['id'], watches => 'manual')" >/dev/null 2>&1
sql "SELECT docsync.watch('part', 'pt', params => ARRAY['id'])" >/dev/null
grant_reader

# expect_current WHAT: every order's doc equals a fresh run of its query within 10 s.
expect_current() {
  local i ok
  for i in 1 2; do
    ok=
    for _ in $(seq 1 100); do
      [ "$(doc_equals_query "db:order:$i" "$(order_sql "$i")")" = t ] && { ok=1; break; }
      sleep 0.1
    done
    [ -n "$ok" ] || fail "$1: db:order:$i is $(last_doc "db:order:$i"), its query gives $(sql "$(order_sql "$i")")"
  done
}

# (the role check would refuse a superuser replication role otherwise)
start_worker --plugin pgoutput --log-level info --allow-unsafe-pool --catalog-check 1s
sql "UPDATE orders SET status = 'paid'"
settle 30
expect_current "at start"
[ "$(sql "SELECT count(*) FROM pg_publication_rel r JOIN pg_publication p ON p.oid = r.prpubid
          WHERE p.pubname = 'docsync_$slot' AND r.prattrs IS NOT NULL")" = 0 ] ||
  fail "the publication has a column list: $(sql "SELECT attnames FROM pg_publication_tables WHERE pubname = 'docsync_$slot' AND tablename = 'orders'")"

echo "REPLICA IDENTITY FULL on the watched table leaves the application's writes alone"
sql "ALTER TABLE orders REPLICA IDENTITY FULL"
out=$(sql "UPDATE orders SET status = 'packed' WHERE id = 1" 2>&1) || fail "the application's UPDATE failed: $out"
out=$(sql "DELETE FROM orders WHERE id = 3" 2>&1) || fail "the application's DELETE failed: $out"
expect_current "after REPLICA IDENTITY FULL"

echo "the watched table taken out of the publication by hand: put back, docs recomputed"
sql "ALTER PUBLICATION docsync_$slot DROP TABLE orders"
sql "UPDATE orders SET status = 'shipped' WHERE id = 1"
expect_current "after ALTER PUBLICATION … DROP TABLE"
[ "$(last_doc db:order:1 | jq -r .status)" = shipped ] || fail "db:order:1 is $(last_doc db:order:1)"
[ "$(sql "SELECT count(*) FROM pg_publication_tables WHERE pubname = 'docsync_$slot' AND tablename = 'orders'")" = 1 ] ||
  fail "orders is not back in the publication"
grep -q "does not hold table public.orders" "$tmp/worker.log" || fail "the worker did not log the table it missed"

echo "the publication narrowed to inserts by hand: set back, docs recomputed"
sql "ALTER PUBLICATION docsync_$slot SET (publish = 'insert')"
sql "UPDATE orders SET status = 'delivered' WHERE id = 2"
expect_current "after ALTER PUBLICATION … SET (publish = 'insert')"
[ "$(last_doc db:order:2 | jq -r .status)" = delivered ] || fail "db:order:2 is $(last_doc db:order:2)"
[ "$(sql "SELECT pubupdate AND pubdelete AND pubtruncate FROM pg_publication WHERE pubname = 'docsync_$slot'")" = t ] ||
  fail "the publication does not publish updates again"

echo "a row filter added by hand: taken off, docs recomputed"
# In one transaction, as a DBA would swap the table's entry: the filter drops the changes of order 1.
sql "BEGIN; ALTER PUBLICATION docsync_$slot DROP TABLE orders; ALTER PUBLICATION docsync_$slot ADD TABLE orders WHERE (id <> 1); COMMIT"
sql "UPDATE orders SET status = 'lost' WHERE id = 1"
expect_current "after ALTER PUBLICATION … ADD TABLE orders WHERE (id <> 1)"
[ "$(last_doc db:order:1 | jq -r .status)" = lost ] || fail "db:order:1 is $(last_doc db:order:1)"
[ "$(sql "SELECT count(*) FROM pg_publication_rel pr JOIN pg_publication p ON p.oid = pr.prpubid
           WHERE p.pubname = 'docsync_$slot' AND pr.prqual IS NOT NULL")" = 0 ] || fail "the row filter is still there"
grep -q "holds table public.orders with a row filter" "$tmp/worker.log" || fail "the worker did not log the row filter"

echo "the table taken out and put back, and the actions narrowed and set back, between two looks"
# Each in one transaction, so no catalog check can see the publication fall short: only the edit's
# mark (new rows of pg_publication_rel, a new xmin of pg_publication) tells that pgoutput skipped
# the update in between.
sql "BEGIN; ALTER PUBLICATION docsync_$slot DROP TABLE orders; UPDATE orders SET status = 'hidden' WHERE id = 2;
     ALTER PUBLICATION docsync_$slot ADD TABLE orders; COMMIT"
expect_current "after a table taken out of the publication and put back"
[ "$(last_doc db:order:2 | jq -r .status)" = hidden ] || fail "db:order:2 is $(last_doc db:order:2)"
grep -q "was edited since the stream started, and is whole again" "$tmp/worker.log" ||
  fail "the worker did not log the edit it recomputed for"
sql "BEGIN; ALTER PUBLICATION docsync_$slot SET (publish = 'insert'); UPDATE orders SET status = 'narrowed' WHERE id = 1;
     ALTER PUBLICATION docsync_$slot SET (publish = 'insert, update, delete, truncate'); COMMIT"
expect_current "after the publication's actions were narrowed and set back"
[ "$(last_doc db:order:1 | jq -r .status)" = narrowed ] || fail "db:order:1 is $(last_doc db:order:1)"
# The same while the stream reconnects: the next session finds an edit newer than the slot's
# catalog_xmin, or the pipeline's next look finds the mark moved.
sql "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = '$slot'" >/dev/null
sql "BEGIN; ALTER PUBLICATION docsync_$slot DROP TABLE orders; UPDATE orders SET status = 'unseen' WHERE id = 2;
     ALTER PUBLICATION docsync_$slot ADD TABLE orders; COMMIT"
expect_current "after an edit undone while the stream reconnected"
[ "$(last_doc db:order:2 | jq -r .status)" = unseen ] || fail "db:order:2 is $(last_doc db:order:2)"

echo "an undone edit's position is confirmed only once the change it hid is published"
# What docsync.wait_published trusts: the slot's confirmed position, and no recompute running
# (the portable form's look, sql/portable/50_wait.sql; the extension's C form knows only docsync
# slots). The edit's transaction is empty to pgoutput, so the worker receives its WAL end at once;
# were it confirmed before the next look at the publication (up to a second later), the wait would
# end with the doc still stale.
confirmed_and_settled() {
  sql "SELECT r.confirmed_flush_lsn >= '$1' AND NOT coalesce(w.recompute IS NOT NULL AND w.recompute_finished_at IS NULL, false)
         FROM pg_replication_slots r LEFT JOIN docsync.status w ON w.slot_name = r.slot_name
        WHERE r.slot_name = '$slot'"
}
# expect_published_current WHAT CHANNEL SQL: once what was committed so far is confirmed (and no
# recompute runs), CHANNEL's doc equals SQL's result.
expect_published_current() {
  local target ok=
  target=$(sql "SELECT pg_current_wal_insert_lsn()")
  for _ in $(seq 1 2000); do
    [ "$(confirmed_and_settled "$target")" = t ] && { ok=1; break; }
  done
  [ -n "$ok" ] || fail "$1: $target was not confirmed"
  [ "$(doc_equals_query "$2" "$3")" = t ] || fail "$1: $target was confirmed, but $2 is $(last_doc "$2")"
}
for round in 1 2 3 4 5; do
  sql "BEGIN; ALTER PUBLICATION docsync_$slot DROP TABLE orders; UPDATE orders SET status = 'waited $round' WHERE id = 1;
       ALTER PUBLICATION docsync_$slot ADD TABLE orders; COMMIT"
  expect_published_current "round $round" db:order:1 "$(order_sql 1)"
done

echo "a partition detached, changed and attached again: recomputed before its position is confirmed"
# Without docsync's event triggers (as on a managed server) only the publication's mark, which holds
# the partitions' links to their root, tells; pgoutput publishes through the root and never sent the
# change made while the partition was out.
sql "ALTER EVENT TRIGGER docsync_ddl_command_end DISABLE; ALTER EVENT TRIGGER docsync_sql_drop DISABLE"
sql "UPDATE pt SET v = 1 WHERE id = 1"
for _ in $(seq 1 100); do [ "$(doc_equals_query db:part:1 "$(part_sql 1)")" = t ] && break; sleep 0.1; done
for round in 1 2 3; do
  sql "BEGIN; ALTER TABLE pt DETACH PARTITION pt_1; UPDATE pt_1 SET v = 100 + $round WHERE id = 1;
       ALTER TABLE pt ATTACH PARTITION pt_1 FOR VALUES FROM (1) TO (100); COMMIT"
  expect_published_current "partition round $round" db:part:1 "$(part_sql 1)"
done
# A partition may be set UNLOGGED (a published table may not): its changes then write no WAL.
sql "BEGIN; ALTER TABLE pt_1 SET UNLOGGED; UPDATE pt SET v = 200 WHERE id = 1; ALTER TABLE pt_1 SET LOGGED; COMMIT"
expect_published_current "a partition set UNLOGGED and LOGGED again" db:part:1 "$(part_sql 1)"
sql "ALTER EVENT TRIGGER docsync_ddl_command_end ENABLE; ALTER EVENT TRIGGER docsync_sql_drop ENABLE"

echo "later changes arrive through pgoutput"
sql "UPDATE orders SET status = 'returned' WHERE id = 1"
settle 30
expect_current "after the publication was set right"

stop_worker

echo "the publication renamed away and back: the worker stops naming the fix, which recovers every doc"
# pgoutput looks the publication up by name as of each change: the change made while it was
# renamed fails every session from there on.
start_worker --plugin pgoutput --log-level info --allow-unsafe-pool --catalog-check 1s
settle 30
# (in one transaction: apart, the worker may make the publication anew before the second rename)
sql "BEGIN; ALTER PUBLICATION docsync_$slot RENAME TO docsync_${slot}_away;
     UPDATE orders SET status = 'renamed' WHERE id = 2;
     ALTER PUBLICATION docsync_${slot}_away RENAME TO docsync_$slot; COMMIT"
code=0
timeout 60 tail --pid="$worker_pid" -f /dev/null || fail "the worker did not stop"
wait "$worker_pid" || code=$?
worker_pid=
[ "$code" -ne 0 ] || fail "the worker exited 0"
grep -q "drop the slot (SELECT pg_drop_replication_slot('$slot')) and start the worker again" "$tmp/worker.log" ||
  fail "the worker's log does not name the fix: $(grep -m 3 ERROR "$tmp/worker.log")"
sql "SELECT pg_drop_replication_slot('$slot')" >/dev/null
start_worker --plugin pgoutput --log-level info --allow-unsafe-pool --catalog-check 1s
expect_current "after the slot was dropped and the worker started again"
[ "$(last_doc db:order:2 | jq -r .status)" = renamed ] || fail "db:order:2 is $(last_doc db:order:2)"
stop_worker
echo "PASS worker_pgoutput_publication"
