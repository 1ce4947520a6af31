#!/usr/bin/env bash
# Convergence under worker crashes (invariants 1 and 2, docs/design.md): a seeded randomized
# workload (inserts, updates that move items between orders, deletes, truncates, multi-statement
# transactions, rolled-back subtransactions, a hot row, product price changes that reach orders
# through a reverse index, unwatched traffic) runs while the real worker is kill -9ed at random
# moments and restarted. After the workload stops and the worker drains, every order's current doc
# in the sink (its last JSONL line, or the value Redis retains) equals a fresh run of its query
# (null for a deleted order), and no acknowledgement in any run's debug log passed a transaction
# that had not completed.
#   DOCSYNC_FAULT_SEED=N  replay a seed          DOCSYNC_FAULT_KILLS=N  crashes (default 3)
#   DOCSYNC_FAULT_LONG=1  the long version, faults_convergence_long.sh (12 crashes, a longer workload)
#   DOCSYNC_FAULT_SINK=redis  the Redis sink, faults_redis_convergence.sh and its _long.sh
set -uo pipefail
# shellcheck source=faults_common.bash
. "$(dirname "${BASH_SOURCE[0]}")/faults_common.bash"

kills=${DOCSYNC_FAULT_KILLS:-3}
txns=400
if [ "${DOCSYNC_FAULT_LONG:-0}" = 1 ]; then kills=${DOCSYNC_FAULT_KILLS:-12}; txns=2500; fi

start_cluster own
write_workload "$txns" "$tmp/workload.sql"
start_worker
publish_all
run_workload "$tmp/workload.sql"
done_kills=0
while [ "$done_kills" -lt "$kills" ]; do
  sleep_random 300 1500
  worker_alive
  kill_worker
  done_kills=$((done_kills + 1))
  # Sometimes the worker stays down while transactions pile up, sometimes it is back at once.
  [ $((RANDOM % 2)) -eq 0 ] && sleep_random 0 800
  start_worker
  # The workload may end before the crashes do: keep changes flowing so each crash lands mid-stream.
  workload_running || { write_workload 60 "$tmp/more.sql"; run_workload "$tmp/more.sql"; }
done
wait_workload 300
echo "workload done after $done_kills kill -9s; draining"
drain 120
check_convergence
check_acks
echo "PASS faults_convergence ($fault_sink sink, $done_kills kill -9s, seed $seed)"
