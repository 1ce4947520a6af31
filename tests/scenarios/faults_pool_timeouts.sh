#!/usr/bin/env bash
# Statement timeouts on every pool connection (invariant 7, docs/design.md) against the real worker:
# a session holds an ACCESS EXCLUSIVE lock on products, which every doc query reads, while orders
# and their items keep changing, so every compute on every one of the --pool 2 connections waits
# until --statement-timeout (1 s) cancels it. Timeouts are permanent outcomes, so while the lock is
# held:
# - every pool connection is seen waiting for the lock at once,
# - the slot keeps advancing past the changes made under the lock (their transactions complete),
# - docsync.query_stats and docsync.status show the timeout (SQLSTATE 57014) and health 'failing'.
# Then the changes stop and the lock goes, and with no further change and no restart every order's
# last published doc converges to a fresh run of its query: only the engine's backoff retry can do
# that. Its bound: a doc that failed k times in a row is retried 1 s × 2^(k-1) later (at most 300 s);
# k is counted per doc from the worker's log, and the test allows the largest such delay plus 10 s.
# No acknowledgement in the debug log passed an incomplete transaction.
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
blocked_max=0 advances=0 status_seen=
mark=
while [ $((SECONDS - t0)) -lt "$hold" ] || [ "$advances" -lt 2 ] || [ -z "$status_seen" ] || [ "$blocked_max" -lt "$pool" ]; do
  [ $((SECONDS - t0)) -lt 60 ] || fail "under the lock after 60 s: pool connections waiting at once $blocked_max of $pool, slot advances $advances, status '${status_seen}'"
  workload_running || fail "the changes under the lock stopped: $(tail -n 3 "$tmp/workload.out")"
  worker_alive
  blocked=$(sql "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
                   AND application_name = 'docsync-worker pool' AND wait_event_type = 'Lock'")
  [ "$blocked" -gt "$blocked_max" ] && blocked_max=$blocked
  # The slot moves on: a position reached under the lock is confirmed while the lock is still held,
  # then a later one.
  if [ -z "$mark" ]; then
    mark=$(sql "SELECT pg_current_wal_lsn()")
  elif lsn_ge "$(confirmed)" "$mark"; then
    advances=$((advances + 1))
    echo "  slot confirmed $mark, reached under the lock, $((SECONDS - t0)) s into it"
    mark=
  fi
  if [ -z "$status_seen" ]; then
    qs=$(sql "SELECT permanent_failures, last_error FROM docsync.query_stats WHERE slot_name = '$slot' AND query = 'order'")
    st=$(sql "SELECT health, last_error FROM docsync.status WHERE slot_name = '$slot'")
    case $qs in *'timed out'*'SQLSTATE 57014'*)
      case $st in failing*'timed out'*) status_seen="query_stats: $qs; status: $st" ;; esac ;;
    esac
  fi
  sleep 0.2
done
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
delay=1; for _ in $(seq 2 "$most"); do [ $delay -lt 300 ] && delay=$((delay * 2)); done
[ $delay -gt 300 ] && delay=300
echo "timeouts under the lock: $(echo "$failures" | wc -l) docs, up to $most in a row; the longest backoff is $delay s"
unblock_docs
t1=$SECONDS
wait_convergence $((delay + 10))
echo "converged $((SECONDS - t1)) s after the lock went, without a change or a restart"
drain 30
check_acks
echo "PASS faults_pool_timeouts (lock held $((t1 - t0)) s, seed $seed)"
