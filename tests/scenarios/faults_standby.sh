#!/usr/bin/env bash
# A hot spare (--standby): two workers for one slot while the shop workload runs. The active one is
# killed with kill -9 several times, alternating between the two processes, and once stopped with
# SIGTERM; each time the killed one is started again as the new spare. Checks:
#   - the spare waits without contending: while the active worker is alive the slot's walsender
#     never changes and the spare never tries START_REPLICATION;
#   - docsync.workers lists one active worker and one standby, and docsync.status counts the spare
#     and says since when it waits;
#   - the spare takes over within 5 s of the kill (the measured times are printed): this bound is why
#     the scenario runs alone (CMakeLists.txt); the rest of the spare's faults are in
#     faults_standby_hung.sh, which runs beside others;
#   - every doc converges and no acknowledgement in any run passed incomplete work (check_acks).
#   DOCSYNC_FAULT_SEED=N  replay a seed          DOCSYNC_FAULT_KILLS=N  stops of the active worker (default 3)
set -uo pipefail
# shellcheck source=faults_common.bash
. "$(dirname "${BASH_SOURCE[0]}")/faults_common.bash"
# shellcheck source=lib/standby.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib/standby.bash"

kills=${DOCSYNC_FAULT_KILLS:-3}
takeover_limit_ms=5000

start_pair

# docsync.status counts the spare and says since when it waits.
read -r n since <<<"$(sql "SELECT standby_workers, standby_since IS NOT NULL FROM docsync.status WHERE slot_name = '$slot'" | tr '|' ' ')"
[ "$n" = 1 ] && [ "$since" = t ] || fail "docsync.status shows standby_workers '$n', standby_since set '$since'"

run_workload "$tmp/workload.sql"
takeovers=()
for k in $(seq 1 "$kills"); do
  # The spare leaves the active worker alone: same walsender throughout, no START_REPLICATION tries.
  ws=$(walsender)
  sleep_random 800 2000
  [ "$(walsender)" = "$ws" ] || fail "the slot's walsender changed while the active worker was alive"
  grep -q 'waiting for the slot' "$tmp/worker.$((run)).log" && fail "the spare tried to take the slot while the active worker was alive"
  worker_alive
  old=$worker_pid
  t0=$(now_ms)
  if [ "$k" -eq "$kills" ]; then
    kill -TERM "$old"  # a clean stop hands over too
  else
    kill -9 "$old"
  fi
  ms=$(wait_takeover "$old" "$t0") || exit 1
  worker_pid=$(active_pid)
  wait "$old" 2>/dev/null
  takeovers+=("$ms")
  echo "takeover $k ($([ "$k" -eq "$kills" ] && echo SIGTERM || echo kill -9)): pid $old -> $worker_pid in $ms ms"
  [ "$ms" -le "$takeover_limit_ms" ] || fail "takeover $k took $ms ms, over $takeover_limit_ms ms"
  # The killed one comes back as the new spare.
  active=$worker_pid
  start_worker --standby
  spare=$worker_pid
  worker_pid=$active
  wait_spare "$spare"
  workload_running || { write_workload 60 "$tmp/more.sql"; run_workload "$tmp/more.sql"; }
done

wait_workload 300
echo "workload done after $kills takeovers (${takeovers[*]} ms); draining"
drain 120
check_convergence
check_acks
[ "$(standbys)" = 1 ] || fail "expected one standby at the end, docsync.workers shows $(standbys)"
echo "PASS faults_standby ($fault_sink sink, takeovers ${takeovers[*]} ms, seed $seed)"
