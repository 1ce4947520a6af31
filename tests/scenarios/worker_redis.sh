#!/usr/bin/env bash
# The Redis sink through the whole worker, against a real redis-server (appendonly, fsync always):
# a subscriber receives each new doc and GET returns the current one; CLIENT PAUSE WRITE holds
# confirmed_flush_lsn back until the pause ends; a kill -9 and restart of Redis in the middle of a
# workload loses nothing; with --live all (the default) docsync:warm and docsync:touch compute a doc
# Redis lacks; with --live subscribers only subscribed channels are computed and a PUBLISH
# docsync:warm computes a missing doc; a Redis that wants a password stops the start with a line
# naming --sink and the fix.
set -euo pipefail
test_name=redis
# shellcheck source=lib/worker_env.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib/worker_env.bash"
# shellcheck source=lib/redis_server.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib/redis_server.bash"
cleanup_hooks+=(stop_redis)
item() { echo "SELECT jsonb_build_object('id', id, 'v', v) FROM item WHERE id = $1"; }

setup_db
sql "CREATE TABLE item (id int PRIMARY KEY, v int NOT NULL)"
sql "INSERT INTO item SELECT g, 0 FROM generate_series(1, 20) g"
sql "CREATE TABLE sub (id int PRIMARY KEY, v int NOT NULL)"
sql "INSERT INTO sub SELECT g, 0 FROM generate_series(1, 10) g"
sql "SELECT docsync.define_query('item', \$q\$SELECT jsonb_build_object('id', i.id, 'v', i.v) FROM item i WHERE i.id = \$1\$q\$, params => ARRAY['id'])" >/dev/null
sql "SELECT docsync.watch('item', 'item', params => ARRAY['id'])" >/dev/null
sql "SELECT docsync.define_query('sub', \$q\$SELECT jsonb_build_object('id', s.id, 'v', s.v) FROM sub s WHERE s.id = \$1\$q\$, params => ARRAY['id'])" >/dev/null
sql "SELECT docsync.watch('sub', 'sub', params => ARRAY['id'])" >/dev/null
grant_reader
start_redis

echo "--live all: a subscriber receives each new doc, GET returns the current one"
start_worker --sink "redis://127.0.0.1:$redis_port" --live all
# PUBLISH answers how many clients received the message: the worker's listener, once subscribed.
receivers=0
for _ in $(seq 1 100); do
  receivers=$(rc PUBLISH docsync:warm db:item:5)
  [ "$receivers" = 1 ] && break
  sleep 0.1
done
[ "$receivers" = 1 ] || fail "PUBLISH docsync:warm reached $receivers receivers with --live all: the worker does not listen"
[ "$(rc PUBLISH docsync:touch db:item:6)" = 1 ] || fail "PUBLISH docsync:touch reached no receiver with --live all"
for _ in $(seq 1 100); do [ -n "$(redis_doc db:item:5)" ] && [ -n "$(redis_doc db:item:6)" ] && break; sleep 0.1; done
[ "$(redis_doc_is_current db:item:5 "$(item 5)")" = t ] || fail "docsync:warm db:item:5 with --live all: $(rc GET db:item:5)"
[ "$(redis_doc_is_current db:item:6 "$(item 6)")" = t ] || fail "docsync:touch db:item:6 with --live all: $(rc GET db:item:6)"
rc SUBSCRIBE db:item:1 >"$tmp/sub_item.out" 2>&1 &
extra_pids+=("$!")
sleep 0.5
for v in 1 2 3; do
  sql "UPDATE item SET v = $v WHERE id = 1"
  settle 30
  [ "$(redis_doc_is_current db:item:1 "$(item 1)")" = t ] || fail "GET db:item:1 is not current after v = $v: $(rc GET db:item:1)"
done
for _ in $(seq 1 50); do [ "$(grep -c '"channel":"db:item:1"' "$tmp/sub_item.out")" -ge 3 ] && break; sleep 0.1; done
grep '"channel":"db:item:1"' "$tmp/sub_item.out" | jq -c '.doc.v' | tr '\n' ' ' >"$tmp/seen"
[ "$(cat "$tmp/seen")" = "1 2 3 " ] || fail "the subscriber saw v = $(cat "$tmp/seen"), expected 1 2 3: $(cat "$tmp/sub_item.out")"

echo "CLIENT PAUSE WRITE holds confirmed_flush_lsn back until it ends"
ms() { echo $(($(date +%s%N) / 1000000)); }
paused_at=$(ms)
rc CLIENT PAUSE 5000 WRITE >/dev/null
sql "UPDATE item SET v = 10 WHERE id = 2"
target=$(sql "SELECT pg_current_wal_lsn()")
sleep 2
elapsed=$(($(ms) - paused_at))
[ $elapsed -lt 4500 ] || fail "the machine is too slow to observe the pause (${elapsed} ms)"
[ "$(sql "SELECT confirmed_flush_lsn < '$target' FROM pg_replication_slots WHERE slot_name = '$slot'")" = t ] ||
  fail "confirmed_flush_lsn passed a transaction whose doc Redis has not taken"
[ -z "$(redis_doc db:item:2)" ] || fail "db:item:2 was retained during the pause"
settle 30
[ "$(redis_doc_is_current db:item:2 "$(item 2)")" = t ] || fail "db:item:2 not current after the pause"

echo "Redis killed and restarted (appendonly) in the middle of a workload loses nothing"
(
  for round in $(seq 1 20); do
    psql -X -q -d "$db" -c "UPDATE item SET v = v + 1 WHERE id = $((round % 20 + 1))" >/dev/null || exit 1
    sleep 0.05
  done
) &
load_pid=$!
extra_pids+=("$load_pid")
sleep 0.5
stop_redis
sleep 1
start_redis
wait "$load_pid" || fail "the workload failed"
t0=$SECONDS
settle 60
echo "drained $((SECONDS - t0)) s after the workload"
# Every row changed; one MGET and one query compare all 20 docs (a missing doc makes the array short).
all=$(rc --raw MGET $(seq -f 'db:item:%g' 1 20) | jq -cs 'map(.doc)')
[ "$(sql "SELECT \$r\$$all\$r\$::jsonb = (SELECT jsonb_agg(jsonb_build_object('id', id, 'v', v) ORDER BY id) FROM item)")" = t ] ||
  fail "Redis lost docs: $all"
stop_worker

echo "--live subscribers: only subscribed channels are computed; docsync:warm computes a missing doc"
start_worker --sink "redis://127.0.0.1:$redis_port" --live subscribers --live-poll 300ms
rc SUBSCRIBE db:sub:1 >"$tmp/sub_sub.out" 2>&1 &
extra_pids+=("$!")
sleep 1.5
sql "SELECT pg_stat_statements_reset()" >/dev/null
sql "UPDATE sub SET v = v + 1"   # all 10 rows, one transaction
sql "UPDATE sub SET v = v + 1 WHERE id > 1"
settle 30
for _ in $(seq 1 50); do grep -q '"channel":"db:sub:1"' "$tmp/sub_sub.out" && break; sleep 0.1; done
[ "$(redis_doc_is_current db:sub:1 "SELECT jsonb_build_object('id', id, 'v', v) FROM sub WHERE id = 1")" = t ] ||
  fail "the subscribed db:sub:1 is not current: $(rc GET db:sub:1)"
grep '"channel":"db:sub:1"' "$tmp/sub_sub.out" | jq -e 'select(.doc.v == 1)' >/dev/null || fail "the subscriber did not receive db:sub:1: $(cat "$tmp/sub_sub.out")"
[ "$(rc EXISTS db:sub:2 db:sub:3 db:sub:4 db:sub:5 db:sub:6 db:sub:7 db:sub:8 db:sub:9 db:sub:10)" = 0 ] ||
  fail "docs without subscribers were computed: $(rc --raw KEYS 'db:sub:*' | tr '\n' ' ')"
calls=$(doc_query_calls '%FROM sub s WHERE s.id%')
[ "$calls" -le 2 ] || fail "$calls doc queries of 'sub' for one subscribed doc (19 row changes)"
rc PUBLISH docsync:warm db:sub:5 >/dev/null
for _ in $(seq 1 100); do [ -n "$(redis_doc db:sub:5)" ] && break; sleep 0.1; done
[ "$(redis_doc_is_current db:sub:5 "SELECT jsonb_build_object('id', id, 'v', v) FROM sub WHERE id = 5")" = t ] ||
  fail "PUBLISH docsync:warm db:sub:5 did not compute it: $(rc GET db:sub:5)"
stop_worker

echo "a Redis that wants a password: the start fails on one line naming --sink and the fix"
rc CONFIG SET requirepass docsync-test >/dev/null
# start_sink_check SINK: the worker's exit status and its last log line (the error).
start_sink_check() {
  local code=0
  "$worker_bin" --dsn "$(dsn "$repl_role")" --pool-dsn "$(dsn "$reader_role")" --slot "$slot" \
    --status-dir "$status_dir" --sink "$1" >/dev/null 2>"$tmp/sink_error.log" || code=$?
  echo "$code $(tail -n 1 "$tmp/sink_error.log")"
}
out=$(start_sink_check "redis://127.0.0.1:$redis_port")
case "$out" in
  "1 "*"--sink: Redis at 127.0.0.1:$redis_port/0 requires a password (NOAUTH"*"give it in --sink redis://:PASSWORD@HOST:PORT"*) ;;
  *) fail "no password: $out" ;;
esac
out=$(start_sink_check "redis://:wrong@127.0.0.1:$redis_port")
case "$out" in
  "1 "*"--sink: AUTH failed on Redis at 127.0.0.1:$redis_port/0: WRONGPASS"*"fix [USER]:PASSWORD@ in --sink"*) ;;
  *) fail "a wrong password: $out" ;;
esac
echo "ok ($calls doc queries of 'sub' for 19 row changes with one subscriber)"
