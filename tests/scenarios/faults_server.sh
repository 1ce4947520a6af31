#!/usr/bin/env bash
# Server faults against the real worker (invariants 1, 2 and 6, docs/design.md): while a seeded
# randomized workload runs, the server is restarted with `pg_ctl restart -m fast` and `-m immediate`
# (crash recovery), and the walsender is terminated with pg_terminate_backend; the worker reconnects
# by itself and, once drained, every order's last published doc equals a fresh run of its query.
# Then the WAL safety valve: with --max-retained-wal 2MB, the doc query blocked behind a table lock
# (so its transaction cannot complete and the slot cannot be acknowledged) and unwatched WAL
# traffic, the valve fires, the slot is recreated, the generation rises, and after the lock goes
# every live doc converges. No acknowledgement in any run's debug log passed an incomplete
# transaction.
#   DOCSYNC_FAULT_SEED=N replays a seed; DOCSYNC_TEST_FULL=1 repeats each server fault 3 times.
set -uo pipefail
# shellcheck source=faults_common.bash
. "$(dirname "${BASH_SOURCE[0]}")/faults_common.bash"

rounds=1
[ "${DOCSYNC_TEST_FULL:-0}" = 1 ] && rounds=3   # packaging/run-tests.sh --full

pg_ctl_restart() {
  local cmd=("$DOCSYNC_PG_BINDIR/pg_ctl" -D "$DOCSYNC_CLUSTER_DIR/data" -l "$DOCSYNC_CLUSTER_DIR/server.log" -w -t 60 restart -m "$1")
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "${cmd[@]}" >/dev/null; else "${cmd[@]}" >/dev/null; fi ||
    fail "pg_ctl restart -m $1 failed"
}
walsender_pid() { sql "SELECT active_pid FROM pg_replication_slots WHERE slot_name = '$slot' AND active"; }
# wait_streaming SECONDS OLD_PID: until a walsender other than OLD_PID streams the slot.
wait_streaming() {
  local deadline=$((SECONDS + $1)) pid
  until pid=$(walsender_pid 2>/dev/null) && [ -n "$pid" ] && [ "$pid" != "$2" ]; do
    [ $SECONDS -lt $deadline ] || fail "the worker did not stream again within $1 s"
    worker_alive
    sleep 0.2
  done
}
# A fresh chunk of the workload (a server restart ends the psql that was applying the last one).
# The highest generation in the JSONL file.
max_generation() {
  psql -X -q -At -v ON_ERROR_STOP=1 -d "$db" <<SQL
CREATE TEMP TABLE p (line text);
\\copy p FROM '$docs' WITH (FORMAT csv, QUOTE e'\\x01', DELIMITER e'\\x02')
SELECT coalesce(max((line::jsonb->>'generation')::int), 0) FROM p;
SQL
}
more_workload() {
  local f="$tmp/load.$RANDOM$RANDOM.sql"
  wait_workload 120
  write_workload "$1" "$f"
  run_workload "$f"
}

start_cluster own
start_worker --max-pending-txns 4
publish_all
faults=()
for _ in $(seq 1 "$rounds"); do
  for fault in fast immediate terminate; do
    more_workload 150
    sleep_random 300 1200
    old=$(walsender_pid)
    case $fault in
      fast) # With a transaction pending (its doc query blocked) the worker cannot confirm what the
            # walsender sent, and a fast shutdown waits for that: the worker must leave the stream.
            # With more pending than --max-pending-txns the worker also stops reading, so the
            # walsender cannot even send everything.
            block_docs
            for o in 2 3 4 5 6 7; do sql "UPDATE orders SET status = 'pending at shutdown' WHERE id = $o"; done
            sleep 0.5
            pg_ctl_restart fast
            wait "$lock_pid" 2>/dev/null ;;
      immediate) pg_ctl_restart "$fault" ;;
      terminate) [ -n "$old" ] || fail "no walsender to terminate"
                 [ "$(sql "SELECT pg_terminate_backend($old)")" = t ] || fail "pg_terminate_backend($old) failed" ;;
    esac
    faults+=("$fault")
    worker_alive
    wait_streaming 60 "$old"
  done
done
more_workload 100
wait_workload 120
echo "server faults done (${faults[*]}); draining"
drain 120
check_convergence

# The WAL safety valve. A new run with a small cap and a doc query that cannot finish.
# The lock comes only once the new worker streams: before that, reading the definitions (which
# analyses the doc queries, and so waits for a lock on a table they read) and the start of its
# stream would wait for the lock too, and the valve, which watches a streaming slot, could not fire
# (on a loaded machine the worker is still starting when the test reaches the lock).
old=$(walsender_pid)
kill_worker
start_worker --max-retained-wal 2MB --statement-timeout 10min
wait_streaming 60 "$old"
drain 30
gen_before=$(max_generation)
block_docs
sql "UPDATE orders SET status = 'during valve ' || id WHERE id <= 5"
fired=
for _ in $(seq 1 60); do
  sql "INSERT INTO noise (pad) SELECT repeat(md5(g::text), 8) FROM generate_series(1, 2000) g"
  grep -q 'WAL SAFETY VALVE' "$tmp/worker.$run.log" && { fired=1; break; }
  worker_alive
  sleep 0.2
done
[ -n "$fired" ] || fail "the WAL safety valve did not fire with a blocked doc query and 2MB of retained WAL"
echo "the valve fired: $(grep -m1 -o 'WAL SAFETY VALVE.*' "$tmp/worker.$run.log" | cut -c1-160)"
# Changes while the slot is being recreated, then the lock goes.
sql "UPDATE orders SET status = 'after valve ' || id WHERE id BETWEEN 3 AND 8"
unblock_docs
drain 120
# Drained means the valve's recompute of every live doc is done too: an update committed while the
# slot was being recreated was never decoded, so only that recompute brings its docs up to date, and
# no acknowledgement waits for it. It reports its end in the log and in docsync.status (the status
# board writes both every 500 ms).
reported=
for _ in $(seq 1 150); do
  grep -Eq 'WAL safety valve recompute done: [0-9]+ live docs in' "$tmp/worker.$run.log" &&
    [ "$(sql "SELECT recompute = 'valve' AND recompute_done = recompute_total AND recompute_total > 0
                  AND recompute_finished_at IS NOT NULL FROM docsync.status WHERE slot_name = '$slot'")" = t ] &&
    { reported=1; break; }
  sleep 0.2
done
[ -n "$reported" ] || fail "within 30 s, no log line saying the WAL safety valve recompute is done, or docsync.status does not show it: $(sql "SELECT row_to_json(s) FROM docsync.status s WHERE slot_name = '$slot'")"
echo "$(grep -Eo 'WAL safety valve recompute done: .*' "$tmp/worker.$run.log" | tail -n 1)"
check_convergence
gen_after=$(max_generation)
if [ -z "$gen_after" ] || [ "$gen_after" -le "${gen_before:-0}" ]; then
  fail "the generation did not rise after the valve (before ${gen_before:-none}, after ${gen_after:-none})"
fi
echo "generation rose from $gen_before to $gen_after"
check_acks
echo "PASS faults_server (${faults[*]} valve, seed $seed)"
