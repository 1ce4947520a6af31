#!/usr/bin/env bash
# No acknowledgement without a durable outcome, across restarts (docs/design.md, "durable
# outcomes"). A migration holds a table every doc query and a reverse-index keys query read for
# longer than --statement-timeout; meanwhile order 99 is inserted and a customer renamed. The
# timeouts are failures of the environment: they hold the slot, so wait_published stays false and
# the slot does not confirm the changes. The worker is then killed (kill -9), the lock released and
# a worker started: the changes come again from the slot, db:order:99 is published and the
# customer's orders carry the new name.
set -euo pipefail
test_name=durable
# shellcheck source=lib/own_cluster.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib/own_cluster.bash"

setup_db
sql "CREATE TABLE customers (id int PRIMARY KEY, name text NOT NULL)"
sql "CREATE TABLE orders (id int PRIMARY KEY, customer_id int NOT NULL, total int NOT NULL)"
# What the migration locks: read by the doc query and by the keys query.
sql "CREATE TABLE settings (currency text NOT NULL)"
sql "INSERT INTO settings VALUES ('EUR')"
sql "INSERT INTO customers SELECT g, 'customer ' || g FROM generate_series(1, 5) g"
doc="SELECT jsonb_build_object('id', o.id, 'total', o.total, 'customer', c.name,
            'currency', (SELECT currency FROM settings LIMIT 1))
       FROM orders o JOIN customers c ON c.id = o.customer_id WHERE o.id = \$1"
doc_of() { echo "${doc//\$1/$1}"; }
sql "SELECT docsync.define_query('order', \$q\$$doc\$q\$, params => ARRAY['id'])" >/dev/null 2>&1
sql "SELECT docsync.watch('order', 'orders', params => ARRAY['id'])" >/dev/null
sql "SELECT docsync.watch('order', 'customers',
       keys_sql => \$q\$SELECT o.id FROM orders o WHERE o.customer_id = \$1 AND EXISTS (SELECT FROM settings)\$q\$,
       keys_args => ARRAY['id'])" >/dev/null
grant_reader

start_worker --statement-timeout 1s --live all
sql "INSERT INTO orders SELECT g, 1 + g % 5, 10 * g FROM generate_series(1, 10) g"
settle 30
for id in 1 5 10; do
  [ "$(doc_equals_query "db:order:$id" "$(doc_of "$id")")" = t ] || fail "db:order:$id is $(last_doc "db:order:$id")"
done

echo "a migration holds settings past --statement-timeout; order 99 is inserted, customer 2 renamed"
psql -X -q -d "$db" -v ON_ERROR_STOP=1 -c "BEGIN" -c "LOCK TABLE settings IN ACCESS EXCLUSIVE MODE" \
  -c "SELECT pg_sleep(600)" >"$tmp/lock.out" 2>&1 &
lock_pid=$!
extra_pids+=($lock_pid)
wait_for 10 "SELECT count(*) > 0 FROM pg_locks WHERE relation = 'settings'::regclass AND mode = 'AccessExclusiveLock' AND granted" ||
  fail "the lock on settings was not taken"
sql "INSERT INTO orders VALUES (99, 3, 990)"
order_lsn=$(sql "SELECT pg_current_wal_lsn()")
sql "UPDATE customers SET name = 'renamed' WHERE id = 2"
rename_lsn=$(sql "SELECT pg_current_wal_lsn()")
# Each compute and each lookup times out (1 s) a few times over.
wait_for 30 "SELECT last_error LIKE '%timed out%' FROM docsync.status WHERE slot_name = '$slot'" ||
  fail "docsync.status shows no timeout: $(sql "SELECT row_to_json(s) FROM docsync.status s WHERE slot_name = '$slot'")"
[ "$(sql "CALL docsync.wait_published('$order_lsn', '4s')")" = f ] ||
  fail "wait_published called order 99 published while its doc query timed out (db:order:99: $(last_doc db:order:99))"
[ "$(sql "CALL docsync.wait_published('$rename_lsn', '1s')")" = f ] ||
  fail "wait_published called the rename published while its keys lookup timed out"
[ "$(sql "SELECT confirmed_flush_lsn < '$order_lsn' FROM pg_replication_slots WHERE slot_name = '$slot'")" = t ] ||
  fail "the slot confirmed order 99's commit, whose doc has no outcome"
[ -z "$(last_doc db:order:99)" ] || fail "db:order:99 was published under the lock: $(last_doc db:order:99)"
echo "  held: wait_published false, the slot below order 99; $(sql "SELECT left(last_error, 100) FROM docsync.status WHERE slot_name = '$slot'")"

echo "kill -9 of the worker, the lock released, a new worker"
kill -9 "$worker_pid"
wait "$worker_pid" 2>/dev/null || true
worker_pid=
kill "$lock_pid" 2>/dev/null || true
sql "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE '%pg_sleep(600)%' AND pid <> pg_backend_pid()" >/dev/null
wait "$lock_pid" 2>/dev/null || true
start_worker --statement-timeout 1s --live all
[ "$(sql "CALL docsync.wait_published('$rename_lsn', '30s')")" = t ] || fail "wait_published never passed the rename"
[ "$(doc_equals_query db:order:99 "$(doc_of 99)")" = t ] || fail "after the restart db:order:99 is '$(last_doc db:order:99)'"
for id in 1 6; do  # customer 2's orders
  [ "$(doc_equals_query "db:order:$id" "$(doc_of "$id")")" = t ] || fail "after the restart db:order:$id is $(last_doc "db:order:$id")"
done
stop_worker
echo "PASS worker_timeout_durable"
