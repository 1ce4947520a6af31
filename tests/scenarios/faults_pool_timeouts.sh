#!/usr/bin/env bash
# Statement timeouts on every pool connection (invariant 7, docs/design.md) against the real worker:
# a session holds an ACCESS EXCLUSIVE lock on products, which every doc query reads, while orders
# and their items keep changing, so every compute on every one of the --pool 2 connections waits
# until --statement-timeout (1 s) cancels it. A timeout is a failure of the environment, not an
# outcome (docs/design.md, "durable outcomes"), so while the lock is held:
# - every pool connection is seen waiting for the lock at once,
# - the slot never confirms a change made under the lock (its docs have no outcome), nor does
#   docsync.wait_published call it published,
# - docsync.status shows the timeout and health 'failing', and docsync.query_stats records no
#   permanent failure.
# Then the changes stop and the lock goes, and with no further change and no restart every order's
# last published doc converges to a fresh run of its query and the slot passes every change: only
# the engine's retry can do that. Its bound: a doc that failed k times in a row is retried
# 100 ms × 2^(k-1) later (at most 10 s); k is counted per doc from the worker's log, and the test
# allows the largest such delay plus 10 s. No acknowledgement in the debug log passed an
# incomplete transaction.
#   DOCSYNC_FAULT_SEED=N replays a seed; DOCSYNC_FAULT_LOCK=S holds the lock S seconds (default 6).
set -uo pipefail
# shellcheck source=faults_common.bash
. "$(dirname "${BASH_SOURCE[0]}")/faults_common.bash"

pool=2
hold=${DOCSYNC_FAULT_LOCK:-6}
confirmed() { sql "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = '$slot'"; }
lsn_ge() { [ "$(sql "SELECT '$1'::pg_lsn >= '$2'::pg_lsn")" = t ]; }
# Changes that reach docs and do not touch products (a status, the quantities of an order), about
# 15 a second, applied by one psql named faults_changes until stop_changes.
start_changes() {
  local k o
  for k in $(seq 1 3000); do
    o=$((1 + RANDOM % keys))
    if [ $((RANDOM % 2)) -eq 0 ]; then
      echo "UPDATE orders SET status = 'locked $k' WHERE id = $o;"
    else
      echo "UPDATE order_items SET qty = qty + 1 WHERE order_id = $o;"
    fi
    echo "SELECT pg_sleep(0.05);"
  done >"$tmp/changes.sql"
  PGAPPNAME=faults_changes run_workload "$tmp/changes.sql"
}
stop_changes() {
  sql "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'faults_changes'" >/dev/null
  wait_workload 10
}

start_cluster
start_worker --pool "$pool" --statement-timeout 1s
publish_all
write_workload 150 "$tmp/workload.sql"
run_workload "$tmp/workload.sql"
wait_workload 120
drain 60
check_convergence
log=$tmp/worker.$run.log
failed_before=$(grep -c 'computing db:order:[0-9]* failed' "$log")

lines_before=$(wc -l <"$docs")
block_docs
t0=$SECONDS
start_changes
blocked_max=0 status_seen= first_change=
while [ $((SECONDS - t0)) -lt "$hold" ] || [ -z "$status_seen" ] || [ "$blocked_max" -lt "$pool" ]; do
  [ $((SECONDS - t0)) -lt 60 ] || fail "under the lock after 60 s: pool connections waiting at once $blocked_max of $pool, status '${status_seen}'"
  workload_running || fail "the changes under the lock stopped: $(tail -n 3 "$tmp/workload.out")"
  worker_alive
  blocked=$(sql "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
                   AND application_name = 'docsync-worker pool' AND wait_event_type = 'Lock'")
  [ "$blocked" -gt "$blocked_max" ] && blocked_max=$blocked
  # A position after the first changes made under the lock (about 15 a second).
  [ -n "$first_change" ] || [ $((SECONDS - t0)) -lt 2 ] || first_change=$(sql "SELECT pg_current_wal_lsn()")
  if [ -z "$status_seen" ]; then
    st=$(sql "SELECT health, last_error FROM docsync.status WHERE slot_name = '$slot'")
    case $st in failing*'timed out'*) status_seen="status: $st" ;; esac
  fi
  sleep 0.2
done
[ -n "$first_change" ] || first_change=$(sql "SELECT pg_current_wal_lsn()")
if lsn_ge "$(confirmed)" "$first_change"; then
  fail "the slot confirmed $(confirmed), past changes made under the lock ($first_change) whose docs have no outcome"
fi
[ "$(sql "CALL docsync.wait_published('$first_change', '1s')")" = f ] ||
  fail "wait_published called $first_change published while every doc query timed out"
[ "$(sql "SELECT permanent_failures FROM docsync.query_stats WHERE slot_name = '$slot' AND query = 'order'")" = 0 ] ||
  fail "a timeout was recorded as a permanent outcome: $(sql "SELECT last_error FROM docsync.query_stats WHERE slot_name = '$slot' AND query = 'order'")"
echo "  the slot held below $first_change; wait_published false"
stop_changes
[ "$(sql "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid)
           WHERE a.application_name = 'faults_lock' AND l.mode = 'AccessExclusiveLock' AND l.granted")" -ge 1 ] ||
  fail "the lock was no longer held at the end of the check"
[ "$(wc -l <"$docs")" -eq "$lines_before" ] || fail "a doc was published while no doc query could run"
echo "under the lock for $((SECONDS - t0)) s: $blocked_max of $pool pool connections waiting at once, nothing published"
echo "  $status_seen"

# No more changes. A doc's next try is its backoff after its last timeout.
failures=$(grep -o 'computing db:order:[0-9]* failed' "$log" | tail -n +"$((failed_before + 1))" | sort | uniq -c | sort -rn)
most=$(echo "$failures" | awk 'NR == 1 {print $1}')
[ -n "$most" ] || fail "no doc compute failed under the lock"
delay=100; for _ in $(seq 2 "$most"); do [ $delay -lt 10000 ] && delay=$((delay * 2)); done
[ $delay -gt 10000 ] && delay=10000
delay=$(((delay + 999) / 1000))
echo "timeouts under the lock: $(echo "$failures" | wc -l) docs, up to $most in a row; the longest backoff is $delay s"
unblock_docs
t1=$SECONDS
wait_convergence $((delay + 10))
echo "converged $((SECONDS - t1)) s after the lock went, without a change or a restart"
drain 30
lsn_ge "$(confirmed)" "$first_change" || fail "the slot never passed the changes made under the lock"
check_acks
echo "PASS faults_pool_timeouts (lock held $((t1 - t0)) s, seed $seed)"
