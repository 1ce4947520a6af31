#!/usr/bin/env bash
# A hot spare (--standby): two workers for one slot while the shop workload runs. The active one is
# killed with kill -9 several times, alternating between the two processes, and once stopped with
# SIGTERM; each time the killed one is started again as the new spare. Checks:
#   - the spare waits without contending: while the active worker is alive the slot's walsender
#     never changes and the spare never tries START_REPLICATION;
#   - docsync.workers lists one active worker and one standby, and docsync.status counts the spare
#     and says since when it waits;
#   - the spare takes over within 5 s of the kill (the measured times are printed);
#   - a worker without --standby is refused while the lease is held, naming its holder, and a spare
#     whose role cannot log in exits at once;
#   - when the active worker's lease connection is ended, the spare takes over and the old active
#     worker steps down and stands by in its place;
#   - a hung active worker (SIGSTOP) is taken over from once the server ended its stream and the slot
#     stayed unstreamed for the hung threshold (20 s; 6 s here, DOCSYNC_TEST_HUNG_AFTER), and, on
#     this host, killed so that its locks go;
#   - every doc converges and no acknowledgement in any run passed incomplete work (check_acks).
#   DOCSYNC_FAULT_SEED=N  replay a seed          DOCSYNC_FAULT_KILLS=N  stops of the active worker (default 3)
set -uo pipefail
# shellcheck source=faults_common.bash
. "$(dirname "${BASH_SOURCE[0]}")/faults_common.bash"

kills=${DOCSYNC_FAULT_KILLS:-3}
takeover_limit_ms=5000
# Every worker here takes an active worker for hung after 6 s unstreamed (20 s without it): the hung
# takeover below waits seconds, not minutes. A healthy worker's lease session answers every second,
# so the kill -9 and SIGTERM takeovers are the lease's as before.
export DOCSYNC_TEST_HUNG_AFTER=6s

# The OS pid of the worker holding the lease, from its lease connection's application_name
# ("docsync-worker active pid N"), or nothing.
active_pid() {
  sql "SELECT substring(application_name FROM ' pid ([0-9]+)\$') FROM docsync.workers
        WHERE slot_name = '$slot' AND role = 'active'"
}
walsender() { sql "SELECT active_pid FROM pg_replication_slots WHERE slot_name = '$slot' AND active"; }
standbys() { sql "SELECT count(*) FROM docsync.workers WHERE slot_name = '$slot' AND role = 'standby'"; }
now_ms() { date +%s%3N; }

# wait_spare PID: until worker PID is registered as a standby.
wait_spare() {
  local deadline=$((SECONDS + 30))
  until [ "$(sql "SELECT count(*) FROM docsync.workers WHERE slot_name = '$slot' AND role = 'standby'
                    AND application_name LIKE '% standby pid $1'")" = 1 ]; do
    [ $SECONDS -lt $deadline ] || fail "worker pid $1 did not register as a standby within 30 s"
    kill -0 "$1" 2>/dev/null || fail "the spare (pid $1) exited"
    sleep 0.1
  done
}

# wait_takeover OLD_PID T0_MS [SECONDS]: until another worker holds the lease and streams the slot
# (30 s at most by default); prints
# the takeover time in ms and sets worker_pid to the new active worker.
wait_takeover() {
  local old=$1 t0=$2 new ws deadline=$((SECONDS + ${3:-30}))
  for (( ; ; )); do
    new=$(active_pid)
    ws=$(walsender)
    if [ -n "$new" ] && [ "$new" != "$old" ] && [ -n "$ws" ] &&
       [ "$(sql "SELECT count(*) FROM pg_stat_replication WHERE pid = $ws")" = 1 ]; then
      break
    fi
    [ $SECONDS -lt $deadline ] || fail "no worker took over from pid $old within ${3:-30} s (lease: '$new', walsender '$ws')"
    sleep 0.05
  done
  worker_pid=$new
  echo $(($(now_ms) - t0))
}

start_cluster
write_workload 500 "$tmp/workload.sql"
start_worker --standby
first=$worker_pid
publish_all
start_worker --standby
spare=$worker_pid
worker_pid=$first
wait_spare "$spare"
[ "$(active_pid)" = "$first" ] || fail "the first worker (pid $first) does not hold the lease: '$(active_pid)'"

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

# A hung active worker (SIGSTOP): its lease session stays open, and it answers nothing. The server
# ends its stream after wal_sender_timeout (2 s here, 60 s by default); once no walsender has streamed
# the slot for the hung threshold (6 s here; 3 status intervals, 20 s at least, by default) the spare
# takes it for hung, ends its lease
# session and, the hung worker running on this host and holding the slot's lock file (and the JSONL
# file's), kills it, then takes over.
set_sender_timeout() { sql "ALTER SYSTEM SET wal_sender_timeout = '$1'" >/dev/null; sql "SELECT pg_reload_conf()" >/dev/null; }
restore_sender_timeout() { sql "ALTER SYSTEM RESET wal_sender_timeout" >/dev/null 2>&1; sql "SELECT pg_reload_conf()" >/dev/null 2>&1; }
trap 'restore_sender_timeout; cleanup' EXIT
set_sender_timeout 2s
old=$active
t0=$(now_ms)
kill -STOP "$old"
ms=$(wait_takeover "$old" "$t0" 60) || { kill -CONT "$old"; exit 1; }
restore_sender_timeout
active=$(active_pid)
echo "hung worker pid $old (SIGSTOP): the spare (pid $active) took over in $ms ms"
grep -q 'taking it for hung' "$tmp"/worker.*.log || fail "the spare did not log why it took over"
grep -q "killed it (SIGKILL) so that its locks go" "$tmp"/worker.*.log || fail "the spare did not fence the hung worker"
[ "$ms" -le 40000 ] || fail "the takeover from a hung worker took $ms ms"
wait "$old" 2>/dev/null
kill -0 "$old" 2>/dev/null && fail "the hung worker (pid $old) is still there"
worker_pid=$active
start_worker --standby
spare=$worker_pid
worker_pid=$active
wait_spare "$spare"

# A worker without --standby on another host (another status directory: the lock file there is
# free) is refused by the lease, naming its holder.
mkdir -p "$tmp/elsewhere"
DOCSYNC_STATUS_DIR=$tmp/elsewhere start_worker
third=$worker_pid
worker_pid=$active
wait "$third"
code=$?
[ "$code" = 1 ] || fail "a second worker without --standby exited with $code, not 1"
grep -q "the lease of slot \"$slot\" is held by another worker: backend pid [0-9]* (docsync-worker active pid $active" \
  "$tmp/worker.$run.log" || fail "the refusal does not name the lease's holder: $(grep ERROR "$tmp/worker.$run.log")"
grep -q 'start this worker with --standby' "$tmp/worker.$run.log" || fail "the refusal does not say how to run a spare"

# A spare whose role cannot log in is a setting to fix, not a wait: it exits at once, saying why.
timeout 20 "$worker" --dsn "host=$PGHOST port=$PGPORT dbname=$db user=no_such_role_$$" \
  --pool-dsn "host=$PGHOST port=$PGPORT dbname=$db user=docsync_reader" --slot "$slot" --standby \
  --status-dir "$tmp/elsewhere" >"$tmp/badrole.log" 2>&1
code=$?
[ "$code" = 1 ] || fail "a spare with a role that does not exist exited with $code, not 1: $(cat "$tmp/badrole.log")"
grep -q "no_such_role_$$" "$tmp/badrole.log" || fail "the spare's error does not name the role: $(cat "$tmp/badrole.log")"

# The active worker's lease connection is ended (a DBA, a pooler, a network blip). Whichever worker
# takes the lease first is the active one: the spare (polling every 500 ms) or the active one itself
# (checking every second). When it is the spare, the old active worker steps down (drains, leaves the
# slot) and stands by in its place. Either way, one worker streams and the other stands by.
old=$active
other=$spare
stepped() { cat "$tmp"/worker.*.log | grep -c 'stepping down' || true; }
steps_before=$(stepped)
sql "SELECT pg_terminate_backend(backend_pid) FROM docsync.workers WHERE slot_name = '$slot' AND role = 'active'" >/dev/null
deadline=$((SECONDS + 30))
for (( ; ; )); do
  new=$(active_pid)
  ws=$(walsender)
  if [ -n "$new" ] && [ -n "$ws" ] && [ "$(standbys)" = 1 ] &&
     [ "$(sql "SELECT count(*) FROM pg_stat_replication WHERE pid = $ws")" = 1 ]; then
    if [ "$new" = "$other" ]; then
      wait_spare "$old"
      [ "$(stepped)" -gt "$steps_before" ] || fail "the old active worker did not log its step-down"
      echo "lease connection of pid $old ended: the spare (pid $new) took over; pid $old stepped down and stands by"
      break
    elif [ "$new" = "$old" ] && [ "$(stepped)" = "$steps_before" ]; then
      wait_spare "$other"
      echo "lease connection of pid $old ended: it took its lease again before the spare"
      break
    fi
  fi
  [ $SECONDS -lt $deadline ] || fail "30 s after the active worker's lease connection ended: lease '$new', walsender '$ws', $(standbys) standby"
  sleep 0.1
done
kill -0 "$old" && kill -0 "$other" || fail "a worker exited after its lease connection was ended"
worker_pid=$new

wait_workload 300
echo "workload done after $kills takeovers (${takeovers[*]} ms); draining"
drain 120
check_convergence
check_acks
[ "$(standbys)" = 1 ] || fail "expected one standby at the end, docsync.workers shows $(standbys)"
echo "PASS faults_standby ($fault_sink sink, takeovers ${takeovers[*]} ms, seed $seed)"
