#!/usr/bin/env bash
# A forgotten watch is loud (docs/design.md, "Recompute causes"): a doc query reads orders and
# order_items but only orders is watched. With the real worker running it, docsync.status shows the
# health warning naming order_items and the watch to run, the worker logs it once (not again at a
# definitions reload), an insert into order_items indeed leaves the doc stale, and once the watch is
# added the health is ok again and the next change reaches the doc.
# Needs the libpq environment of a cluster from packaging/dev-cluster.sh and DOCSYNC_WORKER.
set -euo pipefail
test_name=uncovered
# shellcheck source=lib/worker_env.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib/worker_env.bash"
row() { sql "SELECT row_to_json(s) FROM docsync.status s WHERE slot_name = '$slot'"; }

setup_db
sql "CREATE TABLE orders (id int PRIMARY KEY, status text NOT NULL)"
sql "CREATE TABLE order_items (id int PRIMARY KEY, order_id int NOT NULL, qty int NOT NULL)"
sql "ALTER TABLE order_items REPLICA IDENTITY FULL"
sql "INSERT INTO orders VALUES (1, 'new')"
order_sql="SELECT jsonb_build_object('id', o.id, 'status', o.status, 'qty', (SELECT coalesce(sum(qty), 0) FROM order_items i WHERE i.order_id = o.id)) FROM orders o WHERE o.id = 1"
sql "SELECT docsync.define_query('order', \$q\$$(echo "$order_sql" | sed 's/o.id = 1/o.id = $1/')\$q\$, params => ARRAY['id'], watches => 'manual')" >/dev/null
notice=$(psql -X -q -At -d "$db" -c "SELECT docsync.watch('order', 'orders', params => ARRAY['id'])" 2>&1 >/dev/null)
[[ "$notice" == *"NOTICE:  doc query \"order\" reads public.order_items, which no watch covers"* ]] ||
  fail "the watch that leaves order_items uncovered gave no notice: $notice"
grant_reader
start_worker --warm db:order:1

echo "docsync.status warns, naming the table and the fix"
wait_for 20 "SELECT health = 'warning' AND reason LIKE 'doc query \"order\" reads public.order_items, which no watch covers%docsync.watch(''order'', …)%'
             FROM docsync.status WHERE slot_name = '$slot'" || fail "no warning in docsync.status: $(row)"
sql "INSERT INTO order_items VALUES (1, 1, 5)"
sql "UPDATE orders SET status = 'paid' WHERE id = 1"   # reaches the doc (qty 5 with it)
sql "INSERT INTO order_items VALUES (2, 1, 7)"          # does not: the doc stays at qty 5
settle 30
[ "$(last_doc db:order:1 | jq -r .qty)" = 5 ] || fail "the unwatched insert changed the doc: $(last_doc db:order:1)"

echo "the worker logs it once, not again at a definitions reload"
sql "SELECT docsync.define_query('other', \$q\$SELECT to_jsonb(\$1::int)\$q\$, params => ARRAY['id'])" >/dev/null
settle 30
deadline=$((SECONDS + 10))
until grep -q "definitions changed in-stream" "$tmp/worker.log"; do
  [ $SECONDS -lt $deadline ] || fail "the worker did not reload the definitions"
  sleep 0.2
done
settle 30
n=$(grep -c 'WARNING \[definitions\] doc query "order" reads public.order_items, which no watch covers' "$tmp/worker.log" || true)
[ "$n" = 1 ] || fail "the worker logged the uncovered table $n times: $(grep -n 'no watch covers' "$tmp/worker.log")"

echo "the watch added: health ok, and the next change reaches the doc"
sql "SELECT docsync.watch('order', 'order_items', params => ARRAY['order_id'])" >/dev/null
wait_for 20 "SELECT health = 'ok' FROM docsync.status WHERE slot_name = '$slot'" || fail "still not ok: $(row)"
sql "INSERT INTO order_items VALUES (3, 1, 1)"
settle 30
[ "$(doc_equals_query db:order:1 "$order_sql")" = t ] || fail "the doc is not current once watched: $(last_doc db:order:1)"
stop_worker
echo "ok"
