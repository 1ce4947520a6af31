#!/usr/bin/env bash
# Never stale after the worker drains, through the whole worker and a real Redis:
#   1. a restart after a redefinition: the startup recompute's version is the compute's snapshot, so
#      Redis keeps the new doc (it kept the old one when the recompute was versioned 0/0);
#   2. DDL that changes a doc query's result without changing a row: ALTER COLUMN … TYPE … USING,
#      ADD/DROP/RENAME COLUMN under to_jsonb(row), ATTACH PARTITION, DROP TABLE of a partition,
#      CREATE OR REPLACE VIEW;
#   3. the slot dropped while the worker was reconnecting, with a change in the gap: the worker
#      creates the slot anew and recomputes every live doc;
#   5. a sink that forgot what it acknowledged: Redis FLUSHALL, Redis restarted without its data, and
#      a JSONL file truncated by hand;
#   6. definitions changed by a transaction that stays invisible for more than 30 s (a synchronous
#      replication stall): the worker waits for it, says so in docsync.status, then uses them.
set -euo pipefail
test_name=never_stale
# shellcheck source=lib/own_cluster.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib/own_cluster.bash"
# shellcheck source=lib/redis_server.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib/redis_server.bash"
cleanup_hooks+=(stop_redis)
reset_sync() {
  psql -X -q -d postgres -c "ALTER SYSTEM RESET synchronous_standby_names" -c "SELECT pg_reload_conf()" >/dev/null 2>&1
}
early_cleanup_hooks+=(reset_sync)

redis_doc() { rc --raw GET "$1" | jq -c '.doc' 2>/dev/null || true; }
# current KEY SQL [SECONDS]: waits until the doc Redis retains at KEY equals a fresh run of SQL.
current() {
  local deadline=$((SECONDS + ${3:-30})) d
  while :; do
    d=$(redis_doc "$1")
    if [ -n "$d" ] && [ "$(sql "SELECT \$r\$$d\$r\$::jsonb IS NOT DISTINCT FROM ($2)::jsonb")" = t ]; then return 0; fi
    [ $SECONDS -lt $deadline ] || return 1
    sleep 0.2
  done
}
expect_current() { current "$1" "$2" "${3:-30}" || fail "$4: GET $1 is $(redis_doc "$1"), expected $(sql "$2")"; }

setup_db
sql "CREATE TABLE item (id int PRIMARY KEY, v int NOT NULL)"
sql "INSERT INTO item SELECT g, g FROM generate_series(1, 3) g"
sql "CREATE TABLE product (id int PRIMARY KEY, name text, price numeric)"
sql "INSERT INTO product VALUES (1, 'pen', 1.26), (2, 'ink', 2.50)"
sql "CREATE TABLE ev (id int NOT NULL, grp int NOT NULL) PARTITION BY RANGE (id)"
sql "CREATE TABLE ev_a PARTITION OF ev FOR VALUES FROM (1) TO (100)"
sql "CREATE TABLE ev_b (id int NOT NULL, grp int NOT NULL)"
sql "INSERT INTO ev_a VALUES (1, 1), (2, 1)"
sql "INSERT INTO ev_b VALUES (100, 1), (101, 1), (102, 1)"
sql "CREATE VIEW cheap AS SELECT id, name FROM product WHERE name <> 'nib'"
define() { sql "SELECT docsync.define_query('$1', \$q\$$2\$q\$, params => ARRAY['id'], or_replace => true)" >/dev/null; }
define item "SELECT jsonb_build_object('id', i.id, 'v', i.v) FROM item i WHERE i.id = \$1"
define product "SELECT to_jsonb(p) FROM product p WHERE p.id = \$1"
define evc "SELECT jsonb_build_object('n', count(*)) FROM ev WHERE grp = \$1"
define cheap "SELECT jsonb_build_object('cheap', coalesce(jsonb_agg(c.name ORDER BY c.id), '[]')) FROM cheap c WHERE c.id >= \$1"
sql "SELECT docsync.watch('item', 'item', params => ARRAY['id'])" >/dev/null
sql "SELECT docsync.watch('product', 'product', params => ARRAY['id'])" >/dev/null
sql "SELECT docsync.watch('evc', 'ev', params => ARRAY['grp'], allow_broadcast => true)" >/dev/null
sql "SELECT docsync.watch('cheap', 'product', params => ARRAY['id'])" >/dev/null
grant_reader
start_redis

item1="SELECT jsonb_build_object('id', i.id, 'v', i.v) FROM item i WHERE i.id = 1"
product1="SELECT to_jsonb(p) FROM product p WHERE p.id = 1"
evc1="SELECT jsonb_build_object('n', count(*)) FROM ev WHERE grp = 1"
cheap1="SELECT jsonb_build_object('cheap', coalesce(jsonb_agg(c.name ORDER BY c.id), '[]')) FROM cheap c WHERE c.id >= 1"
start_worker --sink "redis://127.0.0.1:$redis_port" --live all
# every doc once, so --live all follows it
sql "UPDATE item SET v = v WHERE id = 1; UPDATE product SET price = price WHERE id = 1; INSERT INTO ev_a VALUES (3, 2); DELETE FROM ev_a WHERE id = 3"
sql "INSERT INTO ev_a VALUES (3, 1)"
settle 30
expect_current db:item:1 "$item1" 10 "start"
expect_current db:product:1 "$product1" 10 "start"
expect_current db:evc:1 "$evc1" 10 "start"
expect_current db:cheap:1 "$cheap1" 10 "start"
[ "$(rc --raw GET db:item:1 | jq -r .lsn)" != "0/0" ] || fail "a doc was versioned 0/0"

echo "1. a redefinition while the worker is down reaches Redis at the restart"
stop_worker
define item "SELECT jsonb_build_object('id', i.id, 'v', i.v, 'twice', i.v * 2) FROM item i WHERE i.id = \$1"
item1="SELECT jsonb_build_object('id', i.id, 'v', i.v, 'twice', i.v * 2) FROM item i WHERE i.id = 1"
start_worker --sink "redis://127.0.0.1:$redis_port" --live all
expect_current db:item:1 "$item1" 30 "after a redefinition and a restart"
grep -q "startup recompute" "$tmp/worker.log" || fail "no startup recompute was logged"

echo "2. DDL that changes results without changing rows"
# ddl DDL KEY SQL: runs DDL, drains, and waits until the doc at KEY equals a fresh run of SQL.
ddl() { sql "$1"; settle 30; expect_current "$2" "$3" 20 "$1"; }
ddl "ALTER TABLE product ALTER COLUMN price TYPE numeric(10,0) USING round(price * 2)" db:product:1 "$product1"
ddl "ALTER TABLE product ADD COLUMN stock int NOT NULL DEFAULT 7" db:product:1 "$product1"
ddl "ALTER TABLE product RENAME COLUMN stock TO on_hand" db:product:1 "$product1"
ddl "ALTER TABLE product DROP COLUMN on_hand" db:product:1 "$product1"
ddl "ALTER TABLE ev ATTACH PARTITION ev_b FOR VALUES FROM (100) TO (200)" db:evc:1 "$evc1"
ddl "DROP TABLE ev_b" db:evc:1 "$evc1"
ddl "CREATE OR REPLACE VIEW cheap AS SELECT id, name FROM product WHERE name <> 'pen'" db:cheap:1 "$cheap1"
[ "$(sql "SELECT count(*) FROM docsync.queries WHERE name = 'item' AND 'item'::regclass = ANY (watched_tables)")" = 1 ] ||
  fail "docsync.queries lost a watch"

echo "3. the slot dropped while the worker reconnects, a change in the gap"
for _ in $(seq 1 100); do
  sql "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = '$slot' AND active_pid IS NOT NULL" >/dev/null
  if sql "SELECT pg_drop_replication_slot('$slot')" >/dev/null 2>&1; then dropped=1; break; fi
  sleep 0.05
done
[ "${dropped:-}" = 1 ] || fail "could not drop the slot between the worker's reconnects"
sql "UPDATE item SET v = 1000 WHERE id = 1"
wait_for 60 "SELECT active FROM pg_replication_slots WHERE slot_name = '$slot'" || fail "the worker did not create the slot again"
expect_current db:item:1 "$item1" 30 "an update made while the slot did not exist"
grep -q "the slot was created anew" "$tmp/worker.log" || fail "the new slot's recompute was not logged"
wait_for 15 "SELECT recompute = 'new slot' FROM docsync.status WHERE slot_name = '$slot'" ||
  fail "docsync.status does not show the new slot's recompute: $(sql "SELECT recompute FROM docsync.status WHERE slot_name = '$slot'")"

echo "5. sinks that forget: FLUSHALL, Redis restarted without its data"
rc FLUSHALL >/dev/null
expect_current db:item:1 "$item1" 20 "after FLUSHALL"
grep -q "no longer holds the marker key" "$tmp/worker.log" || fail "FLUSHALL was not reported"
stop_redis
rm -rf "$tmp/redis" && mkdir -p "$tmp/redis"
start_redis
expect_current db:product:1 "$product1" 30 "after Redis restarted without its data"
grep -q "restarted (run_id" "$tmp/worker.log" || fail "the Redis restart was not reported"
wait_for 15 "SELECT recompute = 'sink reset' FROM docsync.status WHERE slot_name = '$slot'" ||
  fail "docsync.status does not show the sink reset"

echo "6. definitions behind a synchronous replication stall"
sql "CREATE TABLE late (id int PRIMARY KEY, v int NOT NULL)"
sql "INSERT INTO late VALUES (1, 1)"
sql "GRANT SELECT ON late TO docsync_reader_postgres"   # the definer's reader role (grant_reader made it)
settle 30
# From here every commit waits for a standby that never comes, until reset_sync.
psql -X -q -d postgres -c "ALTER SYSTEM SET synchronous_standby_names = 'docsync_nobody'" -c "SELECT pg_reload_conf()" >/dev/null
# This commit waits for a standby that never comes: decoded, never visible until the wait is cancelled.
psql -X -q -d "$db" -c "SET synchronous_commit = on" \
  -c "SELECT docsync.define_query('late', \$q\$SELECT jsonb_build_object('v', l.v) FROM late l WHERE l.id = \$1\$q\$, params => ARRAY['id'])" \
  >"$tmp/stalled.out" 2>&1 &
stalled=$!
extra_pids+=("$stalled")
# the worker says so once it has waited 5 s (DefinitionsSource::wait_visible)
wait_for 30 "SELECT reason LIKE '%waiting % s for transaction % which changed the definitions, to become visible%' FROM docsync.status WHERE slot_name = '$slot'" ||
  fail "docsync.status does not say what the worker waits for: $(sql "SELECT health || ': ' || reason FROM docsync.status WHERE slot_name = '$slot'")"
sql "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE wait_event = 'SyncRep'" >/dev/null
wait "$stalled" || true
reset_sync
sql "SELECT docsync.watch('late', 'late', params => ARRAY['id'])" >/dev/null
sql "UPDATE late SET v = 2 WHERE id = 1"
settle 30
expect_current db:late:1 "SELECT jsonb_build_object('v', l.v) FROM late l WHERE l.id = 1" 20 "a query defined behind a stall"
grep -q "is visible now" "$tmp/worker.log" || fail "the end of the wait was not logged"
stop_worker

echo "5b. a JSONL file truncated by hand"
start_worker --live all
sql "UPDATE item SET v = 5 WHERE id = 2"
settle 30
[ -n "$(last_doc db:item:2)" ] || fail "db:item:2 was not published to the file"
: >"$docs"
for _ in $(seq 1 100); do [ -n "$(last_doc db:item:2)" ] && break; sleep 0.2; done
[ "$(doc_equals_query db:item:2 "SELECT jsonb_build_object('id', i.id, 'v', i.v, 'twice', i.v * 2) FROM item i WHERE i.id = 2")" = t ] ||
  fail "db:item:2 did not come back after the file was truncated: $(last_doc db:item:2)"
grep -q "shrank from" "$tmp/worker.log" || fail "the truncated file was not reported"
stop_worker
echo "ok"
