#!/usr/bin/env bash
# A hot spare (--standby) beside an active worker while the shop workload runs, and the faults of the
# spare that bound no short time (faults_standby.sh has the timed takeovers after kill -9):
#   - a hung active worker (SIGSTOP) is taken over from once the server ended its stream and the slot
#     stayed unstreamed for the hung threshold (20 s; 6 s here, DOCSYNC_TEST_HUNG_AFTER), and, on
#     this host, killed so that its locks go;
#   - a worker without --standby is refused while the lease is held, naming its holder, and a spare
#     whose role cannot log in exits at once;
#   - when the active worker's lease connection is ended, the spare takes over and the old active
#     worker steps down and stands by in its place;
#   - every doc converges and no acknowledgement in any run passed incomplete work (check_acks).
#   DOCSYNC_FAULT_SEED=N  replay a seed
set -uo pipefail
# shellcheck source=faults_common.bash
. "$(dirname "${BASH_SOURCE[0]}")/faults_common.bash"
# shellcheck source=lib/standby.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib/standby.bash"

# Every worker here takes an active worker for hung after 6 s unstreamed (20 s without it): the hung
# takeover below waits seconds, not minutes.
export DOCSYNC_TEST_HUNG_AFTER=6s

start_pair
run_workload "$tmp/workload.sql"

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
echo "workload done; draining"
drain 120
check_convergence
check_acks
[ "$(standbys)" = 1 ] || fail "expected one standby at the end, docsync.workers shows $(standbys)"
echo "PASS faults_standby_hung ($fault_sink sink, seed $seed)"
