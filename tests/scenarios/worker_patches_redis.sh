#!/usr/bin/env bash
# --patches on through the whole worker, against a real redis-server, on the shop workload
# (tests/bench/shop_workload.sql): order docs with their items, created, filled and updated in many
# transactions. A subscriber that rebuilds every doc from the channel messages alone (patches applied
# to the version it holds, whole docs taken, GET on a mismatch: tests/tools/patch_follower.cpp) ends
# byte-identical to every key, most messages were patches, every key holds the whole doc and equals
# a fresh run of its query, and /metrics counts the patches.
set -euo pipefail
test_name=patches_redis
# shellcheck source=lib/worker_env.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib/worker_env.bash"
# shellcheck source=lib/redis_server.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib/redis_server.bash"
cleanup_hooks+=(stop_redis)
follower_bin=${DOCSYNC_BUILD_DIR:?set DOCSYNC_BUILD_DIR to the build directory}/patch_follower
[ -x "$follower_bin" ] || fail "$follower_bin is not built (cmake --build ... --target patch_follower)"
order_sql="SELECT jsonb_build_object('id', o.id, 'status', o.status, 'total', o.total, 'address', o.shipping_address,
  'notes', o.notes, 'items', (SELECT coalesce(jsonb_agg(jsonb_build_object('id', i.id, 'product', i.product_id,
  'qty', i.qty, 'price', i.unit_price, 'description', i.description) ORDER BY i.id), '[]') FROM order_items i
  WHERE i.order_id = o.id)) FROM orders o WHERE o.id"

setup_db
psql -X -q -v ON_ERROR_STOP=1 -d "$db" -f "${DOCSYNC_SOURCE_DIR:?}/tests/bench/shop_workload.sql" >/dev/null
# An item deleted, or moved to another order, names its old order.
sql "ALTER TABLE order_items REPLICA IDENTITY FULL"
sql "SELECT docsync.define_query('order', \$q\$$order_sql = \$1\$q\$, params => ARRAY['id'])" >/dev/null 2>&1
sql "SELECT docsync.watch('order', 'orders', params => ARRAY['id'])" >/dev/null 2>&1
sql "SELECT docsync.watch('order', 'order_items', params => ARRAY['order_id'])" >/dev/null
grant_reader
start_redis

"$follower_bin" "$redis_port" 'db:order:*' >"$tmp/follower.out" 2>&1 &
follower_pid=$!
extra_pids+=("$follower_pid")
for _ in $(seq 1 50); do grep -q subscribed "$tmp/follower.out" && break; sleep 0.1; done
grep -q subscribed "$tmp/follower.out" || fail "the follower did not subscribe: $(cat "$tmp/follower.out")"

metrics_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
start_worker --sink "redis://127.0.0.1:$redis_port" --patches on --patch-min-bytes 256 \
  --metrics-listen "127.0.0.1:$metrics_port"

echo "the shop workload: 30 orders, each created, filled and paid in one transaction"
psql -X -q -v ON_ERROR_STOP=1 -d "$db" -c "CALL bench_workload(30)" >/dev/null
settle 60
echo "then many small changes: items' quantities, statuses, an item added and one removed, a note"
for round in $(seq 1 6); do
  sql "UPDATE order_items SET qty = qty + $round WHERE order_id % 3 = $((round % 3))"
  sql "UPDATE orders SET status = 'step $round', updated_at = now() WHERE id % 2 = $((round % 2))"
  sql "INSERT INTO order_items VALUES ($((100000 + round)), $round, 7, 1, 0.50, 'extra \"é\" ☃ $round')"
  sql "DELETE FROM order_items WHERE id = $((round * 10 + 2))"
  sql "UPDATE orders SET notes = notes || ' and more' WHERE id = $((round + 10))"
done
sql "UPDATE orders SET total = 9999999999.99 WHERE id = 4"
settle 60
sleep 0.5

kill -TERM "$follower_pid"
code=0
wait "$follower_pid" || code=$?
summary=$(tail -n 1 "$tmp/follower.out")
echo "follower: $summary"
[ $code -eq 0 ] || fail "the follower's docs differ from the keys (exit $code): $(cat "$tmp/follower.out")"
case "$summary" in
  "channels=30 "*"mismatches=0") ;;
  *) fail "the follower did not hold all 30 docs: $summary" ;;
esac
patches=$(sed -E 's/.*patches=([0-9]+).*/\1/' <<<"$summary")
wholes=$(sed -E 's/.*wholes=([0-9]+).*/\1/' <<<"$summary")
[ "$patches" -ge 60 ] || fail "only $patches patch messages ($wholes whole): most changes should go as patches"

echo "every key holds the whole doc, equal to a fresh run of its query"
for id in $(seq 1 30); do
  [ "$(rc --raw GET "db:order:$id" | jq -r 'has("doc") and (has("patch") or has("merge") | not)')" = true ] ||
    fail "db:order:$id does not hold a whole doc: $(rc GET "db:order:$id")"
  [ "$(redis_doc_is_current "db:order:$id" "$order_sql = $id")" = t ] ||
    fail "db:order:$id is not current: $(rc GET "db:order:$id")"
done

echo "/metrics counts the patches and the cache"
# /metrics is rendered at each status tick (--status-interval 1s here).
for _ in $(seq 1 50); do
  body=$(curl -fsS "http://127.0.0.1:$metrics_port/metrics")
  published=$(awk '$1 == "docsync_patches_total" {print $2}' <<<"$body")
  [ "${published:-0}" -ge "$patches" ] && break
  sleep 0.2
done
[ "${published:-0}" -ge "$patches" ] || fail "docsync_patches_total is ${published:-missing}, the follower got $patches patches"
entries=$(awk '$1 == "docsync_patch_cache_entries" {print $2}' <<<"$body")
[ "$entries" = 30 ] || fail "docsync_patch_cache_entries is ${entries:-missing}, not 30"
saved=$(awk '$1 == "docsync_patch_bytes_saved_total" {print $2}' <<<"$body")
[ "${saved:-0}" -gt 0 ] || fail "docsync_patch_bytes_saved_total is ${saved:-missing}"
stop_worker
echo "ok ($patches patches, $wholes whole docs, $saved bytes saved)"
