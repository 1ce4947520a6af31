# Shared by tests/scenarios/worker_*.sh: a private database with docsync and pg_stat_statements,
# the two least-privilege roles, the real docsync-worker with a JSONL sink, and bounded waits.
# Needs the libpq environment of a cluster from packaging/dev-cluster.sh (PGHOST, PGPORT, ...)
# and DOCSYNC_WORKER (ctest passes both; by hand: DOCSYNC_WORKER=build/dev/docsync-worker).
# Sourced, not run: the caller has `set -euo pipefail`.

worker_bin=${DOCSYNC_WORKER:?set DOCSYNC_WORKER to the built docsync-worker}
[ -x "$worker_bin" ] || { echo "FAIL: $worker_bin is not executable" >&2; exit 1; }
test_name=${test_name:-worker}
db=docsync_${test_name}_$$
repl_role=docsync_repl_$$
reader_role=docsync_reader_$$
slot=${test_name}_$$
tmp=$(mktemp -d)
docs=$tmp/docs.jsonl
worker_pid=
extra_pids=()
early_cleanup_hooks=()  # run first, before the database is dropped (server settings a drop would wait on)
cleanup_hooks=()

fail() {
  echo "FAIL: $*" >&2
  if [ -f "$tmp/worker.log" ]; then echo "--- worker log (tail)" >&2; tail -n 30 "$tmp/worker.log" >&2; fi
  exit 1
}
sql() { psql -X -q -At -v ON_ERROR_STOP=1 -d "$db" -c "$1"; }
worker_cleanup() {
  local rc=$?
  if [ -n "$worker_pid" ]; then kill -9 "$worker_pid" 2>/dev/null || true; wait "$worker_pid" 2>/dev/null || true; fi
  for p in "${extra_pids[@]}"; do kill -9 "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  for h in "${early_cleanup_hooks[@]}"; do $h || true; done
  if [ -n "${status_dir:-}" ]; then rm -f "$status_dir/$db.$slot".* 2>/dev/null || true; fi
  psql -X -q -d postgres -c "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = '$slot' AND active_pid IS NOT NULL" >/dev/null 2>&1 || true
  psql -X -q -d postgres -c "SELECT pg_drop_replication_slot('$slot') FROM pg_replication_slots WHERE slot_name = '$slot'" >/dev/null 2>&1 || true
  psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true
  for h in "${cleanup_hooks[@]}"; do $h || true; done   # after the database: roles it granted to
  psql -X -q -d postgres -c "DROP ROLE IF EXISTS $repl_role" >/dev/null 2>&1 || true
  psql -X -q -d postgres -c "DROP ROLE IF EXISTS $reader_role" >/dev/null 2>&1 || true
  rm -rf "$tmp"
  exit $rc
}
trap worker_cleanup EXIT

# wait_for SECONDS SQL: polls until SQL returns t.
wait_for() {
  local deadline=$((SECONDS + $1))
  until [ "$(sql "$2" 2>/dev/null)" = t ]; do
    [ $SECONDS -lt $deadline ] || return 1
    sleep 0.2
  done
}

# setup_db: the database, docsync, pg_stat_statements and the roles of the recommended setup.
setup_db() {
  psql -X -q -v ON_ERROR_STOP=1 -d postgres -c "CREATE DATABASE $db"
  sql "CREATE EXTENSION docsync"
  sql "CREATE EXTENSION pg_stat_statements"
  psql -X -q -v ON_ERROR_STOP=1 -d postgres -c "CREATE ROLE $repl_role LOGIN REPLICATION" -c "CREATE ROLE $reader_role LOGIN"
  sql "SELECT docsync.grant_replication('$repl_role')" >/dev/null
  status_dir=$(sql "SELECT docsync.status_directory()")
  [ -d "$status_dir" ] || fail "docsync.status_dir ($status_dir) does not exist"
}
# grant_reader: after the customer tables exist (grant_reader grants SELECT on what exists).
grant_reader() { sql "SELECT docsync.grant_reader('$reader_role')" >/dev/null; }

dsn() { echo "host=$PGHOST port=$PGPORT dbname=$db user=$1"; }

# start_worker [settings...]: the real worker on the slot, JSONL sink unless a --sink is given.
start_worker() {
  local sink=(--sink "file:$docs")
  case " $* " in *" --sink "*) sink=() ;; esac
  "$worker_bin" --dsn "$(dsn "$repl_role")" --pool-dsn "$(dsn "$reader_role")" --slot "$slot" --create-slot \
    --status-dir "$status_dir" --status-interval 1s "${sink[@]}" "$@" >>"$tmp/worker.out" 2>>"$tmp/worker.log" &
  worker_pid=$!
  wait_for 60 "SELECT active FROM pg_replication_slots WHERE slot_name = '$slot'" ||
    fail "the worker did not start streaming the slot in 60 s"
}

# stop_worker: SIGTERM; the worker must drain, acknowledge and exit 0.
stop_worker() {
  local code=0
  kill -TERM "$worker_pid"
  wait "$worker_pid" || code=$?
  worker_pid=
  [ $code -eq 0 ] || fail "SIGTERM: the worker exited $code"
}

# settle [SECONDS]: waits until the worker has acknowledged everything committed so far.
settle() {
  local target
  target=$(sql "SELECT pg_current_wal_lsn()")
  local deadline=$((SECONDS + ${1:-60}))
  until [ "$(sql "SELECT coalesce(confirmed_flush_lsn >= '$target', false) FROM pg_replication_slots WHERE slot_name = '$slot'")" = t ]; do
    kill -0 "$worker_pid" 2>/dev/null || fail "the worker exited"
    [ $SECONDS -lt $deadline ] || fail "the worker did not acknowledge $target in ${1:-60} s"
    sleep 0.2
  done
}

# last_doc CHANNEL: the doc of the last line published for CHANNEL (jq's compact JSON), or empty.
last_doc() { jq -c --arg ch "$1" 'select(.channel == $ch) | .doc' "$docs" 2>/dev/null | tail -n 1; }
# doc_equals_query CHANNEL SQL: t when the channel's last doc equals a fresh run of SQL.
doc_equals_query() {
  local d
  d=$(last_doc "$1")
  [ -n "$d" ] || { echo "no doc"; return; }
  sql "SELECT \$docsync_doc\$$d\$docsync_doc\$::jsonb IS NOT DISTINCT FROM ($2)::jsonb"
}
# doc_query_calls PATTERN: pg_stat_statements calls of statements matching PATTERN (LIKE) run by the
# reader: the pool role, or the definers' reader roles its computes run as (docsync.compute_as).
doc_query_calls() {
  sql "SELECT coalesce(sum(calls), 0) FROM pg_stat_statements s JOIN pg_roles r ON r.oid = s.userid
        WHERE (r.rolname = '$reader_role'
               OR (r.rolname LIKE 'docsync\\_reader\\_%' AND pg_has_role('$reader_role', r.oid, 'MEMBER')))
          AND s.dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND s.query LIKE '$1'"
}
