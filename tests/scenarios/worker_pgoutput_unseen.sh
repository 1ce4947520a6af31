#!/usr/bin/env bash
# What pgoutput never shows the worker, and how the worker still keeps every live doc current
# (invariant 2, docs/design.md) with --plugin pgoutput:
#   - A newly watched table's changes made before the publication gains it: docsync.watch of notes
#     while the worker streams. The worker reloads its definitions (recomputing the query's live
#     docs), then starts a session that adds notes to the publication. A transaction that holds
#     notes in SHARE UPDATE EXCLUSIVE mode keeps that ALTER PUBLICATION waiting, inserts a note of
#     order 1 and commits: the note commits after the reload's recompute and before the publication
#     change, so pgoutput never sends it. The doc must show it all the same (the session that changed
#     the publication recomputes every live doc once the change is made).
#   - A change a transaction open across the publication change wrote before it: pgoutput decodes
#     it with the catalog of its own WAL position and never sends it, and the transaction commits
#     after that recompute. The doc must show it (every live doc is recomputed again once the
#     transactions open at the change have ended).
#   - DDL no event trigger sees: ALTER COLUMN … TYPE text USING … of a column the doc reads but the
#     publication does not list (a rewrite: values change, nothing is decoded), once under
#     session_replication_role = replica and once with docsync's event triggers disabled. With
#     --catalog-check 1s, each must reach the docs within 10 s.
# Needs the libpq environment of a cluster from packaging/dev-cluster.sh, DOCSYNC_WORKER and jq.
set -euo pipefail
test_name=pgoutput_unseen
# shellcheck source=lib/worker_env.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib/worker_env.bash"

setup_db
# The worker keeps its publication itself here: its role may add any table to it.
psql -X -q -v ON_ERROR_STOP=1 -d postgres -c "ALTER ROLE $repl_role SUPERUSER"
sql "CREATE TABLE orders (id int PRIMARY KEY, status text NOT NULL)"
sql "CREATE TABLE notes (id int PRIMARY KEY, order_id int NOT NULL, body text NOT NULL)"
sql "ALTER TABLE notes REPLICA IDENTITY FULL"
sql "CREATE TABLE tags (id int PRIMARY KEY, order_id int NOT NULL, tag text NOT NULL)"
sql "ALTER TABLE tags REPLICA IDENTITY FULL"
sql "INSERT INTO orders VALUES (1, 'new'), (2, 'new')"
order_sql() {
  echo "SELECT jsonb_build_object('id', o.id, 'status', o.status, 'notes',
          (SELECT coalesce(jsonb_agg(n.body ORDER BY n.id), '[]') FROM notes n WHERE n.order_id = o.id),
          'tags', (SELECT coalesce(jsonb_agg(t.tag ORDER BY t.id), '[]') FROM tags t WHERE t.order_id = o.id))
        FROM orders o WHERE o.id = $1"
}
sql "SELECT docsync.define_query('order', \$q\$$(order_sql '$1')\$q\$, params => ARRAY['id'], watches => 'manual')" >/dev/null 2>&1
sql "SELECT docsync.watch('order', 'orders', params => ARRAY['id'])" >/dev/null
grant_reader

# (the role check would refuse a superuser replication role otherwise)
start_worker --plugin pgoutput --log-level info --allow-unsafe-pool --catalog-check 1s
sql "UPDATE orders SET status = 'paid'"
settle 30
for i in 1 2; do [ "$(doc_equals_query "db:order:$i" "$(order_sql "$i")")" = t ] || fail "db:order:$i not current: $(last_doc "db:order:$i")"; done

echo "a note committed between the watch's reload and the publication change reaches its doc"
mkfifo "$tmp/locker.in"
psql -X -q -v ON_ERROR_STOP=1 -d "$db" <"$tmp/locker.in" >"$tmp/locker.out" 2>&1 &
extra_pids+=("$!")
exec 7>"$tmp/locker.in"
echo "BEGIN; LOCK TABLE notes IN SHARE UPDATE EXCLUSIVE MODE; SELECT 'locked';" >&7
wait_for 10 "SELECT count(*) = 1 FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
             WHERE c.relname = 'notes' AND l.mode = 'ShareUpdateExclusiveLock' AND l.granted" ||
  fail "the locking session did not lock notes"
sql "SELECT docsync.watch('order', 'notes', params => ARRAY['order_id'])" >/dev/null
wait_for 30 "SELECT count(*) = 1 FROM pg_stat_activity WHERE datname = current_database()
             AND query LIKE 'ALTER PUBLICATION%' AND wait_event_type = 'Lock'" ||
  fail "the worker's session did not wait to add notes to its publication"
# The reload's recompute of the query's docs is long done; the note commits, then the ALTER runs.
sleep 1
echo "INSERT INTO notes VALUES (1, 1, 'unseen by pgoutput'); COMMIT;" >&7
exec 7>&-
wait_for 30 "SELECT count(*) = 0 FROM pg_stat_activity WHERE datname = current_database()
             AND query LIKE 'ALTER PUBLICATION%' AND wait_event_type = 'Lock'" ||
  fail "the worker's ALTER PUBLICATION still waits"
[ "$(sql "SELECT count(*) FROM pg_publication_tables WHERE pubname = 'docsync_$slot' AND tablename = 'notes'")" = 1 ] ||
  fail "notes is not in the publication"
settle 30
ok=
for _ in $(seq 1 100); do
  [ "$(doc_equals_query db:order:1 "$(order_sql 1)")" = t ] && { ok=1; break; }
  sleep 0.1
done
[ -n "$ok" ] || fail "the note committed before the publication change never reached db:order:1: $(last_doc db:order:1)"
grep -q "the publication gained tables or columns" "$tmp/worker.log" || fail "the worker did not log its recompute"
echo "later notes arrive through pgoutput"
sql "INSERT INTO notes VALUES (2, 2, 'seen')"
settle 30
for _ in $(seq 1 100); do [ "$(doc_equals_query db:order:2 "$(order_sql 2)")" = t ] && break; sleep 0.1; done
[ "$(doc_equals_query db:order:2 "$(order_sql 2)")" = t ] || fail "db:order:2 is $(last_doc db:order:2)"

echo "a tag written before the publication change by a transaction that commits after it reaches its doc"
mkfifo "$tmp/straddler.in"
psql -X -q -v ON_ERROR_STOP=1 -d "$db" <"$tmp/straddler.in" >"$tmp/straddler.out" 2>&1 &
extra_pids+=("$!")
exec 8>"$tmp/straddler.in"
echo "BEGIN; INSERT INTO tags VALUES (1, 2, 'written before, committed after'); SELECT pg_current_xact_id();" >&8
wait_for 10 "SELECT count(*) = 1 FROM pg_stat_activity WHERE datname = current_database() AND backend_xid IS NOT NULL
             AND state = 'idle in transaction'" || fail "the straddling transaction did not start"
sql "SELECT docsync.watch('order', 'tags', params => ARRAY['order_id'])" >/dev/null
wait_for 30 "SELECT count(*) = 1 FROM pg_publication_tables WHERE pubname = 'docsync_$slot' AND tablename = 'tags'" ||
  fail "tags is not in the publication"
# The session's recompute of every live doc runs now, without the uncommitted tag.
sleep 2
echo "COMMIT;" >&8
exec 8>&-
settle 30
ok=
for _ in $(seq 1 100); do
  [ "$(doc_equals_query db:order:2 "$(order_sql 2)")" = t ] && { ok=1; break; }
  sleep 0.1
done
[ -n "$ok" ] || fail "the tag written before the publication change never reached db:order:2: $(last_doc db:order:2)"
grep -q "the transactions open when the publication gained" "$tmp/worker.log" || fail "the worker did not log its second recompute"

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
echo "a rewrite under session_replication_role = replica reaches the docs"
psql -X -q -v ON_ERROR_STOP=1 -d "$db" -c "SET session_replication_role = replica" \
  -c "ALTER TABLE orders ALTER COLUMN status TYPE text USING status || '!'"
expect_current "a rewrite with the event triggers skipped"
[ "$(last_doc db:order:1 | jq -r .status)" = 'paid!' ] || fail "db:order:1 is $(last_doc db:order:1)"
echo "a rewrite with docsync's event triggers disabled reaches the docs"
triggers=$(sql "SELECT string_agg(evtname, ' ') FROM pg_event_trigger WHERE evtname LIKE 'docsync%'")
[ -n "$triggers" ] || fail "docsync has no event triggers here"
enable_triggers() { for t in $triggers; do sql "ALTER EVENT TRIGGER $t ENABLE"; done; }
for t in $triggers; do sql "ALTER EVENT TRIGGER $t DISABLE"; done
sql "ALTER TABLE orders ALTER COLUMN status TYPE text USING upper(status)"
enable_triggers
expect_current "a rewrite with the event triggers disabled"
[ "$(last_doc db:order:2 | jq -r .status)" = 'PAID!' ] || fail "db:order:2 is $(last_doc db:order:2)"
grep -q "changed without a definitions message" "$tmp/worker.log" || fail "the worker did not log the catalog check's reload"

stop_worker
echo "PASS worker_pgoutput_unseen"
