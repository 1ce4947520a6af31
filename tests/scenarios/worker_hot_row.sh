#!/usr/bin/env bash
# Invariant 4 (docs/design.md) through the whole worker: one row updated 5 000 times, each in its
# own transaction, while the real worker streams the slot. After it drains, the published doc equals
# a fresh run of the doc query, and the doc query ran (pg_stat_statements, the reader role's calls)
# for at most a few percent of the changes: changes that arrive during a compute coalesce into one
# more round.
set -euo pipefail
test_name=hot_row
# shellcheck source=lib/worker_env.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib/worker_env.bash"
updates=${DOCSYNC_HOT_ROW_UPDATES:-5000}

setup_db
sql "CREATE TABLE hot (id int PRIMARY KEY, n int NOT NULL, note text NOT NULL DEFAULT '')"
sql "INSERT INTO hot VALUES (1, 0), (2, 0)"
sql "SELECT docsync.define_query('hot', \$q\$SELECT jsonb_build_object('id', h.id, 'n', h.n, 'note', h.note) FROM hot h WHERE h.id = \$1\$q\$, params => ARRAY['id'])" >/dev/null
sql "SELECT docsync.watch('hot', 'hot', params => ARRAY['id'])" >/dev/null
grant_reader

start_worker
# A first change makes db:hot:1 live; count from a clean slate after it is published.
sql "UPDATE hot SET note = 'start' WHERE id = 1"
settle
[ "$(doc_equals_query db:hot:1 "SELECT jsonb_build_object('id', id, 'n', n, 'note', note) FROM hot WHERE id = 1")" = t ] ||
  fail "the first doc is wrong: $(last_doc db:hot:1)"
sql "SELECT pg_stat_statements_reset()" >/dev/null

echo "updating one row $updates times, one transaction each"
printf 'UPDATE hot SET n = n + 1 WHERE id = 1;\n' >"$tmp/hot.sql"
start=$SECONDS
pgbench -n -c 1 -t "$updates" -f "$tmp/hot.sql" -h "$PGHOST" -p "$PGPORT" "$db" >"$tmp/pgbench.out" 2>&1 ||
  fail "pgbench failed: $(cat "$tmp/pgbench.out")"
settle 60
echo "workload and drain took $((SECONDS - start)) s"

[ "$(sql "SELECT n FROM hot WHERE id = 1")" = "$updates" ] || fail "the workload did not commit $updates updates"
[ "$(doc_equals_query db:hot:1 "SELECT jsonb_build_object('id', id, 'n', n, 'note', note) FROM hot WHERE id = 1")" = t ] ||
  fail "the final doc $(last_doc db:hot:1) is not the row's current state"
calls=$(doc_query_calls '%FROM hot h WHERE h.id%')
published=$(jq -c 'select(.channel == "db:hot:1")' "$docs" | wc -l)
echo "doc query calls: $calls for $updates changes; $published docs published for db:hot:1"
[ "$calls" -ge 1 ] || fail "pg_stat_statements saw no doc query run by $reader_role (is it preloaded?)"
# "a few percent": at most 5 % of the changes.
[ "$calls" -le $((updates / 20)) ] || fail "$calls doc queries for $updates changes: the hot row stampedes"
# Nothing else was touched: db:hot:2 was never computed.
[ -z "$(last_doc db:hot:2)" ] || fail "db:hot:2 was published although its row never changed"

# The same guarantee through a reverse index: one category row updated 2 000 times reaches its 5
# items' docs through keys_sql; lookups coalesce like doc computes and never starve them.
sql "CREATE TABLE cat (id int PRIMARY KEY, bump int NOT NULL)"
sql "CREATE TABLE item (id int PRIMARY KEY, cat_id int NOT NULL)"
sql "INSERT INTO cat VALUES (1, 0)"
sql "INSERT INTO item SELECT g, 1 FROM generate_series(1, 5) g"
sql "SELECT docsync.define_query('item', \$q\$SELECT jsonb_build_object('id', i.id, 'bump', c.bump) FROM item i JOIN cat c ON c.id = i.cat_id WHERE i.id = \$1\$q\$, params => ARRAY['id'])" >/dev/null 2>&1
sql "SELECT docsync.watch('item', 'item', params => ARRAY['id'])" >/dev/null
sql "SELECT docsync.watch('item', 'cat', keys_sql => \$q\$SELECT i.id FROM item i WHERE i.cat_id = \$1\$q\$, keys_args => ARRAY['id'])" >/dev/null
grant_reader
sql "UPDATE item SET cat_id = cat_id"   # every item doc once
settle 60
sql "SELECT pg_stat_statements_reset()" >/dev/null
reverse_updates=$((updates * 2 / 5))
printf 'UPDATE cat SET bump = bump + 1 WHERE id = 1;\n' >"$tmp/cat.sql"
pgbench -n -c 1 -t "$reverse_updates" -f "$tmp/cat.sql" -h "$PGHOST" -p "$PGPORT" "$db" >"$tmp/pgbench.out" 2>&1 ||
  fail "pgbench failed: $(cat "$tmp/pgbench.out")"
settle 60
for id in 1 2 3 4 5; do
  [ "$(doc_equals_query "db:item:$id" "SELECT jsonb_build_object('id', i.id, 'bump', c.bump) FROM item i JOIN cat c ON c.id = i.cat_id WHERE i.id = $id")" = t ] ||
    fail "db:item:$id is $(last_doc "db:item:$id"), not current"
done
keys_calls=$(doc_query_calls '%FROM item i WHERE i.cat_id%')
item_calls=$(doc_query_calls '%FROM item i JOIN cat c%')
echo "reverse index: $keys_calls keys queries and $item_calls doc queries for $reverse_updates changes of one row"
[ "$keys_calls" -ge 1 ] || fail "no keys query ran"
[ "$keys_calls" -le $((reverse_updates / 20)) ] || fail "$keys_calls keys queries for $reverse_updates changes: lookups stampede"
[ "$item_calls" -le $((reverse_updates * 5 / 20)) ] || fail "$item_calls doc queries for $reverse_updates changes of 5 docs"
echo "ok"
