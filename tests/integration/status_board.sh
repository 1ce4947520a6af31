#!/usr/bin/env bash
# The status path end to end against the real server: a process holding the worker's status board
# (docsync-status-tool, the same StatusBoard the worker uses) while a real walsender streams the
# slot to pg_recvlogical. docsync.status shows it streaming with its pid; a second board for the
# same slot is refused naming that pid; a failing doc query shows in docsync.query_stats with its
# error; after kill -9 the row turns `stopped` once the heartbeat is stale and the slot inactive.
# When the worker streams itself, start_worker becomes the worker and pg_recvlogical goes away.
# Needs the libpq environment of a cluster from packaging/dev-cluster.sh and DOCSYNC_BUILD_DIR.
set -euo pipefail

tool=${DOCSYNC_BUILD_DIR:?set DOCSYNC_BUILD_DIR to the CMake build directory}/docsync-status-tool
bindir=${DOCSYNC_PG_BINDIR:-$(pg_config --bindir 2>/dev/null || echo /usr/lib/postgresql/15/bin)}
db=docsync_status_it_$$
slot=status_it
tmp=$(mktemp -d)
pids=()

fail() { echo "FAIL: $*" >&2; exit 1; }
sql() { psql -X -q -At -v ON_ERROR_STOP=1 -d "$db" -c "$1"; }
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  psql -X -q -d "$db" -c "SELECT pg_drop_replication_slot('$slot') FROM pg_replication_slots WHERE slot_name = '$slot'" >/dev/null 2>&1 || true
  psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $db" >/dev/null 2>&1 || true
  [ -n "${dir:-}" ] && rm -f "$dir/$db.$slot.status" "$dir/$db.$slot.lock"
  rm -rf "$tmp"
}
trap cleanup EXIT

# wait_for SECONDS SQL: polls until SQL returns t.
wait_for() {
  local deadline=$((SECONDS + $1))
  until [ "$(sql "$2")" = t ]; do
    [ $SECONDS -lt $deadline ] || return 1
    sleep 0.2
  done
}

start_worker() {
  "$tool" run --dir "$dir" --database "$db" --slot "$slot" --max-seconds 120 \
    --query 'order:5:1:2500:division by zero (SQLSTATE 22012)' --query 'customer:3:0:900' \
    --error 'query "order" key 7: division by zero (SQLSTATE 22012)' --live 8 >"$tmp/worker.out" 2>"$tmp/worker.err" &
  worker_pid=$!
  pids+=("$worker_pid")
  for _ in $(seq 1 100); do grep -q '^ready' "$tmp/worker.out" && return 0; sleep 0.1; done
  cat "$tmp/worker.err" >&2
  fail "the status board did not start"
}

psql -X -q -v ON_ERROR_STOP=1 -d postgres -c "CREATE DATABASE $db"
sql "CREATE EXTENSION docsync"
sql "SELECT 'init' FROM pg_create_logical_replication_slot('$slot', 'docsync')" >/dev/null
dir=$(sql "SELECT docsync.status_directory()")
[ -d "$dir" ] || fail "docsync.status_dir ($dir) does not exist"

start_worker
"$bindir/pg_recvlogical" -d "$db" -S "$slot" --start -f /dev/null 2>"$tmp/recv.err" &
pids+=("$!")

echo "status shows the worker streaming with its pid"
wait_for 20 "SELECT slot_active AND worker_state = 'streaming' FROM docsync.status WHERE slot_name = '$slot'" ||
  fail "never streaming: $(sql "SELECT row_to_json(s) FROM docsync.status s WHERE slot_name = '$slot'")"
[ "$(sql "SELECT worker_pid FROM docsync.status WHERE slot_name = '$slot'")" = "$worker_pid" ] || fail "worker_pid is not $worker_pid"
[ "$(sql "SELECT walsender_pid IS NOT NULL AND heartbeat_age_seconds < 5 AND live_docs = 8 FROM docsync.status WHERE slot_name = '$slot'")" = t ] ||
  fail "walsender, heartbeat or live docs wrong: $(sql "SELECT row_to_json(s) FROM docsync.status s WHERE slot_name = '$slot'")"

echo "a failing doc query shows in docsync.query_stats with its error, and makes the health failing"
[ "$(sql "SELECT health = 'failing' AND reason LIKE 'error % ago: query \"order\" key 7%' FROM docsync.status WHERE slot_name = '$slot'")" = t ] ||
  fail "health: $(sql "SELECT health || ': ' || reason FROM docsync.status WHERE slot_name = '$slot'")"
[ "$(sql "SELECT failures = 1 AND recomputes = 5 AND last_error LIKE '%22012%' FROM docsync.query_stats WHERE slot_name = '$slot' AND query = 'order'")" = t ] ||
  fail "query_stats: $(sql "SELECT json_agg(q) FROM docsync.query_stats q WHERE slot_name = '$slot'")"
[ "$(sql "SELECT last_error LIKE 'query \"order\" key 7%' FROM docsync.status WHERE slot_name = '$slot'")" = t ] || fail "last_error missing"

echo "a second worker on the same slot is refused, naming the owner's pid"
set +e
"$tool" run --dir "$dir" --database "$db" --slot "$slot" --max-seconds 5 >"$tmp/second.out" 2>"$tmp/second.err"
rc=$?
set -e
[ $rc -eq 3 ] || fail "the second worker exited $rc, expected 3 (refused)"
grep -q "already served by another docsync-worker (pid $worker_pid" "$tmp/second.err" || fail "refusal does not name pid $worker_pid: $(cat "$tmp/second.err")"
[ "$(sql "SELECT worker_pid FROM docsync.status WHERE slot_name = '$slot'")" = "$worker_pid" ] || fail "the refused worker touched the status file"

echo "after kill -9 the worker shows stopped"
for p in "${pids[@]}"; do kill -9 "$p"; done
wait 2>/dev/null || true
pids=()
wait_for 30 "SELECT NOT slot_active AND worker_state = 'stopped' AND health = 'stopped' FROM docsync.status WHERE slot_name = '$slot'" ||
  fail "never stopped: $(sql "SELECT row_to_json(s) FROM docsync.status s WHERE slot_name = '$slot'")"
sql "SELECT reason FROM docsync.status WHERE slot_name = '$slot'" | grep -q "worker pid $worker_pid last seen" || fail "reason does not name the dead worker"
[ "$(sql "SELECT live_docs FROM docsync.status WHERE slot_name = '$slot'")" = 8 ] || fail "the last values were not kept"

echo "a new worker takes the slot over once the old one is gone"
start_worker
wait_for 10 "SELECT worker_pid = $worker_pid AND worker_state = 'streaming' FROM docsync.status WHERE slot_name = '$slot'" || fail "the restarted worker does not show"
echo "ok"
