#!/usr/bin/env bash
# Read-your-writes against the real server, worker and Redis:
#   1. $DOCSYNC_RYW_ITERATIONS times (default 400, 2 000 with DOCSYNC_TEST_FULL=1, as
#      packaging/run-tests.sh --full sets): commit an update, CALL docsync.wait_published(),
#      GET the doc's key: the doc always reflects the commit;
#   2. as many times: commit an update, wait until docsync:watermark is at or past the commit's LSN
#      (pg_current_wal_flush_lsn() after the synchronous commit; GET, then its channel), GET the doc:
#      likewise;
#   3. a CALL outside a transaction block waits holding no snapshot (pg_stat_activity.backend_xmin is
#      NULL), inside one it cannot release it;
#   4. WAL after the commit that the worker publishes nothing for does not hold a wait back: a
#      commit to an unwatched table (acknowledged by the server's keepalive, which arrives while the
#      watched commit's doc is still being published), and a non-transactional message written by a
#      transaction that rolled back, which nothing flushes (like the page pruning of a doc query in
#      the worker's read-only transactions);
#   5. with the worker stopped, wait_published returns false at its timeout, and true once a worker
#      is back; the watermark never moved back across the restart;
#   6. the slot dropped under the worker and a change committed before it is created anew: while the
#      recompute of every live doc that covers the gap runs, wait_published is false and the watermark
#      stays below the change (its generation rises), and both pass it once the recompute is done.
# Prints p50/p99 of both waits (measured from the commit's return to the doc being readable).
set -euo pipefail
test_name=ryw
# shellcheck source=lib/own_cluster.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib/own_cluster.bash"
# shellcheck source=lib/redis_server.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib/redis_server.bash"
cleanup_hooks+=(stop_redis)
iterations=${DOCSYNC_RYW_ITERATIONS:-400}
[ "${DOCSYNC_TEST_FULL:-0}" = 1 ] && iterations=${DOCSYNC_RYW_ITERATIONS:-2000}   # packaging/run-tests.sh --full
libpq=$(ldconfig -p 2>/dev/null | awk '/libpq\.so\.5 /{p = $NF} END {print p}')
[ -n "$libpq" ] || fail "libpq.so.5 not found"

setup_db
sql "CREATE TABLE item (id int PRIMARY KEY, v int NOT NULL)"
sql "INSERT INTO item SELECT g, 0 FROM generate_series(1, 20) g"
sql "SELECT docsync.define_query('item', \$q\$SELECT jsonb_build_object('id', i.id, 'v', i.v) FROM item i WHERE i.id = \$1\$q\$, params => ARRAY['id'])" >/dev/null
sql "SELECT docsync.watch('item', 'item', params => ARRAY['id'])" >/dev/null
grant_reader
start_redis
start_worker --sink "redis://127.0.0.1:$redis_port"

# The loops (tests/ryw_client.py): one libpq connection in autocommit, plain RESP connections to
# Redis. Each prints "<p50 ms> <p99 ms> <max ms>".
client=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/ryw_client.py
conninfo="host=$PGHOST port=$PGPORT dbname=$db user=${PGUSER:-postgres}"

# measure MODE NAME VAR: runs the loop; prints p50, p99 and max (ms) and sets VAR50 and VAR99.
measure() {
  local t0=$SECONDS a b c
  read -r a b c < <(python3 "$client" "$libpq" "$conninfo" "$redis_port" "$1" "$iterations") ||
    fail "the $2 loop failed"
  [ -n "${c:-}" ] || fail "the $2 loop failed"
  echo "   $2: p50 $a ms, p99 $b ms, max $c ms ($((SECONDS - t0)) s)"
  printf -v "${3}50" %s "$a"
  printf -v "${3}99" %s "$b"
}

echo "1. $iterations x: commit, CALL docsync.wait_published(), GET: the doc reflects the commit"
measure procedure wait_published p
echo "2. $iterations x: commit, wait for docsync:watermark to pass it, GET: the doc reflects the commit"
measure watermark docsync:watermark w

echo "3. a CALL outside a transaction block waits without a snapshot; inside one it holds its own"
# xmin_while_waiting BEGIN|'': the backend_xmin of a CALL waiting for a position no one reaches.
xmin_while_waiting() {
  local app=ryw_wait_$$_$RANDOM
  PGAPPNAME=$app psql -X -q -At -d "$db" ${1:+-c "$1"} -c "CALL docsync.wait_published('FFFFFFFF/0', '3s')" \
    >"$tmp/$app.out" 2>&1 &
  local pid=$!
  wait_for 10 "SELECT EXISTS (SELECT FROM pg_stat_activity WHERE application_name = '$app' AND wait_event = 'Extension')" ||
    fail "the CALL did not start waiting: $(cat "$tmp/$app.out")"
  sql "SELECT coalesce(backend_xmin::text, 'none') FROM pg_stat_activity WHERE application_name = '$app'"
  wait "$pid" || fail "the waiting CALL failed: $(cat "$tmp/$app.out")"
  [ "$(tail -n 1 "$tmp/$app.out")" = f ] || fail "a wait for FFFFFFFF/0 did not return false: $(cat "$tmp/$app.out")"
}
xmin=$(xmin_while_waiting '')
[ "$xmin" = none ] || fail "a CALL outside a transaction block waits holding backend_xmin $xmin"
xmin=$(xmin_while_waiting BEGIN)
[ "$xmin" != none ] || fail "a CALL inside a transaction block shows no backend_xmin: the check above proves nothing"

echo "4. WAL after the commit that publishes nothing does not hold a wait back"
sql "CREATE TABLE unwatched (id int PRIMARY KEY, v int NOT NULL)"
sql "INSERT INTO unwatched VALUES (1, 0)"
for i in $(seq 1 20); do
  out=$(psql -X -q -At -d "$db" -c "UPDATE item SET v = v + 1 WHERE id = 1" -c "UPDATE unwatched SET v = v + 1" \
          -c "CALL docsync.wait_published(timeout => '3s')" | tail -n 1)
  [ "$out" = t ] || fail "round $i: a wait past a commit to an unwatched table returned $out"
  out=$(psql -X -q -At -d "$db" -c "UPDATE item SET v = v + 1 WHERE id = 1" \
          -c "BEGIN" -c "SELECT FROM pg_logical_emit_message(false, 'not-docsync', 'x')" -c "ROLLBACK" \
          -c "CALL docsync.wait_published(timeout => '3s')" | tail -n 1)
  [ "$out" = t ] || fail "round $i: a wait past an unflushed message returned $out"
done

echo "5. with the worker stopped, wait_published returns false at its timeout; the watermark holds"
watermark_before=$(rc GET docsync:watermark)
stop_worker
sql "UPDATE item SET v = -1 WHERE id = 2"
started=$(date +%s%N)
out=$(sql "CALL docsync.wait_published(timeout => '500ms')")
took=$((($(date +%s%N) - started) / 1000000))
[ "$out" = f ] || fail "wait_published returned $out with the worker stopped"
[ "$took" -ge 500 ] || fail "wait_published returned after $took ms, before its 500 ms timeout"
start_worker --sink "redis://127.0.0.1:$redis_port"
[ "$(sql "CALL docsync.wait_published(timeout => '30s')")" = t ] || fail "wait_published stayed false with the worker back"
[ "$(rc --raw GET db:item:2 | jq -c '.doc.v')" = -1 ] || fail "db:item:2 after the restart: $(rc GET db:item:2)"
watermark_after=$(rc GET docsync:watermark)
[ "$(sql "SELECT '$watermark_after'::pg_lsn > '$watermark_before'::pg_lsn")" = t ] ||
  fail "docsync:watermark went from $watermark_before to $watermark_after across a restart"
stop_worker

echo "6. a recompute that covers a gap (the slot dropped and created anew): the waits and the watermark hold until it is done"
# About 100 ms per doc, one doc at a time: the recompute of the 20 docs takes seconds.
sql "SELECT docsync.define_query('item', \$q\$SELECT jsonb_build_object('id', i.id, 'v', i.v, 'n', (SELECT count(*) FROM generate_series(1, 1000000 + i.id))) FROM item i WHERE i.id = \$1\$q\$, params => ARRAY['id'], or_replace => true)" >/dev/null
start_worker --sink "redis://127.0.0.1:$redis_port" --pool 1 --batch 1 --threads 1
[ "$(sql "CALL docsync.wait_published(timeout => '60s')")" = t ] || fail "the worker did not catch up"
generation_before=$(rc GET docsync:watermark_generation)
dropped=
for _ in $(seq 1 100); do
  sql "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = '$slot' AND active_pid IS NOT NULL" >/dev/null
  # The slot dropped and a change committed before the worker creates it anew: only the recompute of
  # every live doc can bring that change to its doc.
  if sql "SELECT pg_drop_replication_slot('$slot')" >/dev/null 2>&1; then
    sql "UPDATE item SET v = 777 WHERE id = 20"
    dropped=1
    break
  fi
  sleep 0.05
done
[ -n "$dropped" ] || fail "could not drop the slot between the worker's reconnects"
wait_for 30 "SELECT active FROM pg_replication_slots WHERE slot_name = '$slot'" || fail "the worker did not create the slot anew"
wait_for 10 "SELECT recompute = 'new slot' FROM docsync.status WHERE slot_name = '$slot'" ||
  fail "docsync.status shows no 'new slot' recompute: $(sql "SELECT recompute, recompute_done, recompute_total FROM docsync.status WHERE slot_name = '$slot'")"
target=$(sql "SELECT pg_current_wal_flush_lsn()")
early=$(sql "CALL docsync.wait_published(timeout => '0s')")
early_running=$(sql "SELECT recompute_finished_at IS NULL FROM docsync.status WHERE slot_name = '$slot'")
early_watermark=$(rc GET docsync:watermark)
[ "$early_running" = t ] || fail "the recompute was over before the check: make its doc query slower"
[ "$early" = f ] || fail "wait_published returned $early while the recompute that covers the gap ran"
[ "$(sql "SELECT '$early_watermark'::pg_lsn < '$target'::pg_lsn")" = t ] ||
  fail "docsync:watermark was $early_watermark, at or past $target, while the recompute that covers the gap ran"
[ "$(rc GET docsync:watermark_generation)" -gt "$generation_before" ] || fail "docsync:watermark_generation did not rise"
started=$(date +%s%N)
[ "$(sql "CALL docsync.wait_published(timeout => '60s')")" = t ] || fail "wait_published stayed false after the gap"
held=$((($(date +%s%N) - started) / 1000000))
[ "$(sql "SELECT recompute_finished_at IS NOT NULL FROM docsync.status WHERE slot_name = '$slot'")" = t ] ||
  fail "wait_published returned before the recompute finished"
[ "$(rc --raw GET db:item:20 | jq -c '.doc.v')" = 777 ] || fail "db:item:20 after the wait: $(rc GET db:item:20)"
wait_for 10 "SELECT '$(rc GET docsync:watermark)'::pg_lsn >= '$target'::pg_lsn" || true
[ "$(sql "SELECT '$(rc GET docsync:watermark)'::pg_lsn >= '$target'::pg_lsn")" = t ] ||
  fail "docsync:watermark is $(rc GET docsync:watermark) after the recompute, below $target"
echo "   the wait held $held ms, until the recompute of every live doc was done"
stop_worker
echo "ok (wait_published p50 ${p50} ms p99 ${p99} ms; docsync:watermark p50 ${w50} ms p99 ${w99} ms)"
