# shellcheck shell=bash disable=SC2154,SC2034  # slot, tmp and the pids: faults_common.bash and the scenario
# The hot spare scenarios' helpers (faults_standby.sh, faults_standby_hung.sh), after
# faults_common.bash: who holds a slot's lease, waiting for a spare or a takeover, and the start of
# an active worker with a spare beside it.

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

# start_pair: a cluster of its own with the shop, an active worker (--standby, first to take the
# lease) with every doc published, and a spare registered beside it; sets first, spare, active and
# worker_pid (the active one).
start_pair() {
  start_cluster own
  write_workload 500 "$tmp/workload.sql"
  start_worker --standby
  first=$worker_pid
  publish_all
  start_worker --standby
  spare=$worker_pid
  worker_pid=$first
  active=$first
  wait_spare "$spare"
  [ "$(active_pid)" = "$first" ] || fail "the first worker (pid $first) does not hold the lease: '$(active_pid)'"
}
