#!/usr/bin/env bash
# A stdout sink whose reader stops reading, then one whose reader goes away:
#   - stalled (the reader SIGSTOPped, the pipe full): docsync.status turns `lagging` while the
#     transactions pile up unacknowledged, and SIGTERM ends the worker within --drain-timeout with
#     exit 1 and a line saying why, acknowledging nothing it did not publish;
#   - gone (EPIPE): the worker stops by itself with exit 1 and a line saying why, and the slot stays
#     below the transactions it could not publish.
set -euo pipefail
test_name=stalled
# shellcheck source=lib/own_cluster.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib/own_cluster.bash"

setup_db
sql "CREATE TABLE t (id int PRIMARY KEY, v int NOT NULL)"
sql "INSERT INTO t SELECT g, 0 FROM generate_series(1, 100) g"
sql "SELECT docsync.define_query('t', \$q\$SELECT jsonb_build_object('id', t.id, 'v', t.v, 'pad', repeat('x', 8000)) FROM t WHERE t.id = \$1\$q\$, params => ARRAY['id'])" >/dev/null 2>&1
sql "SELECT docsync.watch('t', 't', params => ARRAY['id'])" >/dev/null
grant_reader
printf '\\set id random(1, 100)\nUPDATE t SET v = v + 1 WHERE id = :id;\n' >"$tmp/bump.sql"
# run_worker FIFO [settings…]: the worker with its stdout sink on FIFO.
run_worker() {
  local fifo=$1
  shift
  "$worker_bin" --dsn "$(dsn "$repl_role")" --pool-dsn "$(dsn "$reader_role")" --slot "$slot" --create-slot \
    --status-dir "$status_dir" --status-interval 1s --sink stdout --live all "$@" >"$fifo" 2>>"$tmp/worker.log" &
  worker_pid=$!
  wait_for 60 "SELECT active FROM pg_replication_slots WHERE slot_name = '$slot'" || fail "the worker did not start streaming"
}

echo "a reader that stops reading"
mkfifo "$tmp/stalled.fifo"
cat "$tmp/stalled.fifo" >"$tmp/stalled.jsonl" &
reader=$!
extra_pids+=("$reader")
run_worker "$tmp/stalled.fifo" --drain-timeout 5s
sql "UPDATE t SET v = 1"
settle 30
kill -STOP "$reader"
pgbench -n -c 2 -t 1500 -f "$tmp/bump.sql" -h "$PGHOST" -p "$PGPORT" "$db" >"$tmp/pgbench.out" 2>&1 ||
  fail "pgbench failed: $(cat "$tmp/pgbench.out")"
target=$(sql "SELECT pg_current_wal_lsn()")
wait_for 40 "SELECT health = 'lagging' FROM docsync.status WHERE slot_name = '$slot'" ||
  fail "docsync.status did not turn lagging behind a stalled sink: $(sql "SELECT health || ': ' || reason FROM docsync.status WHERE slot_name = '$slot'")"
echo "docsync.status: $(sql "SELECT health || ': ' || reason FROM docsync.status WHERE slot_name = '$slot'")"
started=$SECONDS
kill -TERM "$worker_pid"
code=0
wait "$worker_pid" || code=$?
worker_pid=
took=$((SECONDS - started))
[ $code -eq 1 ] || fail "SIGTERM with a stalled sink: exit $code, expected 1"
[ $took -le 15 ] || fail "SIGTERM with a stalled sink took $took s (--drain-timeout 5s)"
grep -q "draining did not finish within --drain-timeout 5s" "$tmp/worker.log" || fail "no line says why the drain was cut short"
[ "$(sql "SELECT confirmed_flush_lsn < '$target' FROM pg_replication_slots WHERE slot_name = '$slot'")" = t ] ||
  fail "the slot was acknowledged past transactions whose docs never reached the stalled reader"
kill -CONT "$reader" 2>/dev/null || true
kill "$reader" 2>/dev/null || true
echo "SIGTERM ended the stalled worker in $took s"

echo "a reader that goes away"
mkfifo "$tmp/gone.fifo"
head -c 100 "$tmp/gone.fifo" >/dev/null &
extra_pids+=("$!")
run_worker "$tmp/gone.fifo"
pgbench -n -c 1 -t 200 -f "$tmp/bump.sql" -h "$PGHOST" -p "$PGPORT" "$db" >"$tmp/pgbench.out" 2>&1 ||
  fail "pgbench failed: $(cat "$tmp/pgbench.out")"
target=$(sql "SELECT pg_current_wal_lsn()")
deadline=$((SECONDS + 60))
while kill -0 "$worker_pid" 2>/dev/null; do
  [ $SECONDS -lt $deadline ] || fail "the worker did not stop after its reader went away"
  sleep 0.2
done
code=0
wait "$worker_pid" || code=$?
worker_pid=
[ $code -eq 1 ] || fail "EPIPE: exit $code, expected 1"
grep -q "went away (EPIPE)" "$tmp/worker.log" || fail "no line says the reader went away"
[ "$(grep -c "went away (EPIPE)" "$tmp/worker.log")" -le 3 ] || fail "EPIPE was retried and logged over and over"
[ "$(sql "SELECT confirmed_flush_lsn < '$target' FROM pg_replication_slots WHERE slot_name = '$slot'")" = t ] ||
  fail "the slot was acknowledged past transactions that were never published"
echo "ok"
