#!/usr/bin/env bash
# One doc, one channel (docs/design.md, "one doc, one name, one answer"): the real worker on a real
# Redis with --live subscribers. Spellings PostgreSQL reads as order 1 but prints otherwise
# (db:order:01, db:order:+1, db:order:001, "db:order: 1") and a key that is no integer
# (db:order:abc) arrive by every path a channel comes in by: docsync:warm, docsync:touch, and
# subscribers that the liveness polls see. Nothing is computed or retained for them, each is logged
# once naming the canonical spelling, and after an UPDATE of order 1 its one channel is current.
# Retained channels that name no doc get an expiry when a worker starts with --live all.
set -euo pipefail
test_name=channel_names
# shellcheck source=lib/worker_env.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib/worker_env.bash"
# shellcheck source=lib/redis_server.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib/redis_server.bash"
cleanup_hooks+=(stop_redis)

setup_db
sql "CREATE TABLE orders (id int PRIMARY KEY, v int NOT NULL)"
sql "INSERT INTO orders SELECT g, 1 FROM generate_series(1, 3) g"
sql "SELECT docsync.define_query('order', \$q\$SELECT jsonb_build_object('id', o.id, 'v', o.v) FROM orders o WHERE o.id = \$1\$q\$, params => ARRAY['id'])" >/dev/null 2>&1
sql "SELECT docsync.watch('order', 'orders', params => ARRAY['id'])" >/dev/null 2>&1
grant_reader
start_redis
# --audit-rate 0: an audit sample would be one more doc query of order 1, on a loaded machine
start_worker --sink "redis://127.0.0.1:$redis_port" --live subscribers --live-poll 200ms --audit-rate 0
sql "SELECT pg_stat_statements_reset()" >/dev/null

aliases=("db:order:01" "db:order:+1" "db:order:001" "db:order: 1" "db:order:abc")
# subscribers: the liveness polls list them, poll after poll
for ch in "db:order:1" "db:order:01" "db:order:+1" "db:order:abc"; do
  rc SUBSCRIBE "$ch" >"$tmp/sub_$(echo "$ch" | tr -c 'a-z0-9\n' '_').out" 2>&1 &
  extra_pids+=("$!")
done
for ch in "${aliases[@]}"; do
  rc PUBLISH docsync:warm "$ch" >/dev/null
  rc PUBLISH docsync:touch "$ch" >/dev/null
done
# db:order:1 is made live by its subscriber (the poll): one compute. (A warm of it as well could
# come while that compute runs and compute it again, which is no alias's doing.)
for _ in $(seq 1 100); do [ -n "$(redis_doc db:order:1)" ] && break; sleep 0.1; done
[ "$(redis_doc_is_current db:order:1 "SELECT jsonb_build_object('id', 1, 'v', v) FROM orders WHERE id = 1")" = t ] ||
  fail "db:order:1 was not computed: $(rc GET db:order:1)"
sleep 2   # ten polls more, each listing the aliases' subscribers

sql "UPDATE orders SET v = 2 WHERE id = 1"
settle 30
for _ in $(seq 1 50); do
  [ "$(redis_doc_is_current db:order:1 "SELECT jsonb_build_object('id', 1, 'v', v) FROM orders WHERE id = 1")" = t ] && break
  sleep 0.1
done
[ "$(redis_doc_is_current db:order:1 "SELECT jsonb_build_object('id', 1, 'v', v) FROM orders WHERE id = 1")" = t ] ||
  fail "db:order:1 is not current after the UPDATE: $(rc GET db:order:1)"

# only the canonical channel is retained, and only it was computed (made live, then the UPDATE)
keys=$(rc --raw KEYS 'db:order:*' | sort | tr '\n' ' ')
[ "$keys" = "db:order:1 " ] || fail "channels retained besides db:order:1: $keys"
# a compute retried because its commit was not yet visible to a new snapshot counts once more; the
# status file that counts retries is rewritten on an interval, so it is read again until it has
for _ in $(seq 1 30); do
  calls=$(doc_query_calls '%FROM orders o WHERE o.id%')
  retries=$(sql "SELECT coalesce(sum(not_visible_retries), 0) FROM docsync.status WHERE slot_name = '$slot'")
  [ "$calls" -le $((2 + retries)) ] && break
  sleep 0.2
done
[ "$calls" -le $((2 + retries)) ] ||
  fail "$calls doc queries of 'order' (two expected: db:order:1 made live by its subscriber, and its UPDATE, plus $retries not-visible retries)"
for ch in "${aliases[@]}"; do
  n=$(grep -cF "refusing channel \"$ch\"" "$tmp/worker.log" || true)
  [ "$n" = 1 ] || fail "\"$ch\" was logged $n times, not once"
done
grep -qF 'refusing channel "db:order:01": param 1 (int4): not in canonical form: the same value is spelled "1"' "$tmp/worker.log" ||
  fail "the refusal of db:order:01 does not name the canonical spelling"
grep -qF 'refusing channel "db:order:abc": param 1 (int4): not a valid int4' "$tmp/worker.log" ||
  fail "the refusal of db:order:abc does not say it is no int4"
stop_worker

# Retained channels that name no doc (kept by an older worker, or of a dropped query) are not made
# live at start; they get the tombstone TTL instead of living forever.
envelope='{"channel":"x","doc":{"id":1,"v":1},"generation":1,"lsn":"0/1"}'
rc SET db:order:01 "$envelope" >/dev/null
rc SET db:gone:1 "$envelope" >/dev/null
start_worker --sink "redis://127.0.0.1:$redis_port?tombstone-ttl=3600" --live all
wait_for_orphans() {
  for _ in $(seq 1 100); do grep -q "retained channel(s) name no doc" "$tmp/worker.log" && return 0; sleep 0.1; done
  return 1
}
wait_for_orphans || fail "the worker did not report the retained channels that name no doc"
for key in db:order:01 db:gone:1; do
  ttl=$(rc PTTL "$key")
  [ "$ttl" -gt 0 ] && [ "$ttl" -le 3600000 ] || fail "$key: PTTL $ttl, not the tombstone TTL"
done
[ "$(rc PTTL db:order:1)" = -1 ] || fail "db:order:1, a doc of its own, was given an expiry: $(rc PTTL db:order:1)"
stop_worker
echo "ok: five spellings of order 1 by warm, touch and polls: nothing computed or retained, each logged once; orphans expire"
