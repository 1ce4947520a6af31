#!/usr/bin/env bash
# Publisher outages against the real worker with the Redis sink (invariants 1, 2 and 7,
# docs/design.md): while a seeded randomized workload keeps committing, redis-server is stopped for
# DOCSYNC_FAULT_OUTAGE seconds (10 here, 30 in faults_redis_outage_long.sh) twice: first SIGSTOPped
# (a hung server: the kernel still accepts connections, no reply ever comes), then shut down and
# restarted on the same port and data directory (refused connections, then a reconnect). During each
# outage:
# - confirmed_flush_lsn never reaches the end of a marker transaction committed just after the
#   outage began (its doc cannot have been retained; its commit's end LSN is read with pg_walinspect),
# - the worker does not exit and docsync.status shows it streaming with transient retries rising,
#   health failing and the publisher's error as its last error,
# and after Redis returns the worker drains without a restart, every order's retained doc equals a
# fresh run of its query (a tombstone for a gone order), and no acknowledgement in any run's debug
# log passed an incomplete transaction.
#   DOCSYNC_FAULT_SEED=N replays a seed; DOCSYNC_FAULT_OUTAGE=S sets the outage length in seconds.
set -uo pipefail
export DOCSYNC_FAULT_SINK=redis
# shellcheck source=faults_common.bash
. "$(dirname "${BASH_SOURCE[0]}")/faults_common.bash"

outage=${DOCSYNC_FAULT_OUTAGE:-10}

status_row() {
  sql "SELECT worker_state, health, transient_retries, coalesce(last_error, ''), reason
         FROM docsync.status WHERE slot_name = '$slot'"
}
confirmed() { sql "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = '$slot'"; }
check_marker() {
  local at
  at=$(confirmed)
  [ "$(sql "SELECT '$at'::pg_lsn < '$marker'")" = t ] ||
    fail "$kind outage: confirmed_flush_lsn $at reached the end ($marker) of transaction $xid, whose doc Redis cannot have retained"
}
# keep_load: a new chunk of the workload when the last one has ended.
keep_load() {
  workload_running && return 0
  wait_workload 5
  local f="$tmp/load.$RANDOM$RANDOM.sql"
  write_workload 80 "$f"
  run_workload "$f"
}

start_cluster own
sql "CREATE EXTENSION pg_walinspect" || fail "pg_walinspect is not installed (it ships with the server)"
start_worker
publish_all
for kind in hung down; do
  keep_load
  sleep_random 300 1000
  case $kind in
    hung) pause_redis ;;
    down) shutdown_redis ;;
  esac
  start_lsn=$(sql "SELECT pg_current_wal_lsn()")
  began=$(sql "SELECT clock_timestamp()")
  before=$(status_row)
  # The marker: a doc-changing transaction committed after the outage began. Nothing can retain its
  # doc before Redis returns, so no acknowledgement may reach its commit record's end.
  o=$((1 + RANDOM % keys))
  xid=$(sql "BEGIN; INSERT INTO orders VALUES ($o, 'outage $kind') ON CONFLICT (id) DO UPDATE SET status = 'outage $kind';
             SELECT pg_current_xact_id(); COMMIT;") || fail "the marker transaction failed"
  marker=$(sql "SELECT end_lsn FROM pg_get_wal_records_info('$start_lsn', pg_current_wal_flush_lsn())
                 WHERE resource_manager = 'Transaction' AND record_type = 'COMMIT' AND xid::text = '$xid'")
  [ -n "$marker" ] || fail "no commit record of the marker transaction $xid after $start_lsn"
  echo "$kind outage (${outage} s): began at $start_lsn, marker transaction $xid (order $o) ends at $marker; slot at $(confirmed)"
  end=$((SECONDS + outage))
  while [ $SECONDS -lt $end ]; do
    keep_load
    check_marker
    worker_alive
    sleep 0.5
  done
  check_marker
  after=$(status_row)
  echo "  docsync.status before: $before"
  echo "  docsync.status at the end of the outage: $after"
  state=$(echo "$after" | cut -d'|' -f1)
  [ "$state" = streaming ] || fail "$kind outage: worker_state is '$state' during a publisher outage: $after"
  [ "$(echo "$after" | cut -d'|' -f3)" -gt "$(echo "$before" | cut -d'|' -f3)" ] ||
    fail "$kind outage: docsync.status shows no transient retries during the outage: before $before, after $after"
  # The operator sees the outage: failing, with the publisher's error as the last error.
  [ "$(sql "SELECT health = 'failing' AND last_error LIKE '%Redis at 127.0.0.1:$redis_port%' AND last_error_at > '$began'
              FROM docsync.status WHERE slot_name = '$slot'")" = t ] ||
    fail "$kind outage: docsync.status does not show the publisher error: $(status_row)"
  case $kind in
    hung) resume_redis ;;
    down) start_redis ;;
  esac
  back=$SECONDS
  wait_workload 120
  drain 90
  echo "  delivered $((SECONDS - back)) s after Redis returned; slot at $(confirmed)"
  check_convergence
done
check_acks
echo "PASS faults_redis_outage (hung and down for $outage s each, seed $seed)"
