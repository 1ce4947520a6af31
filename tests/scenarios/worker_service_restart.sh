#!/usr/bin/env bash
# The packaged service keeps what a restart must remember. The worker's status file (in the
# --status-dir of packaging/debian/docsync-worker.service's ExecStart) records a recompute of every
# live doc that covers a gap in the stream (changes the stream will never deliver again); the next
# worker of the slot reads it and holds wait_published until that recompute is done again. systemd
# empties a RuntimeDirectory= on every stop, automatic restarts included, unless
# RuntimeDirectoryPreserve= is yes or restart; a StateDirectory= is kept. This test reads the unit
# as systemd would, plays the worker's crash in the middle of such a recompute, does to the status
# directory what systemd does between the crash and the restart, and requires that wait_published
# never answers true while a doc still lacks the change made in the gap.
# Starts a cluster of its own (lib/own_cluster.bash); needs DOCSYNC_WORKER and jq.
set -euo pipefail
test_name=service_restart
# shellcheck source=lib/own_cluster.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib/own_cluster.bash"
unit=$(dirname "${BASH_SOURCE[0]}")/../../packaging/debian/docsync-worker.service

# unit_value KEY: the last assignment of KEY in the unit's [Service] section (empty when none).
unit_value() { awk -F= -v k="$1" '/^\[/{s=$0} s=="[Service]" && $1==k {v=substr($0, length(k) + 2)} END {print v}' "$unit"; }
unit_status_dir=$(unit_value ExecStart | sed -n 's/.*--status-dir \([^ ]*\).*/\1/p')
[ -n "$unit_status_dir" ] || fail "the unit's ExecStart names no --status-dir: $(unit_value ExecStart)"
runtime=$(unit_value RuntimeDirectory)
preserve=$(unit_value RuntimeDirectoryPreserve)
state=$(unit_value StateDirectory)
emptied=no
case "$unit_status_dir" in
  "/run/$runtime" | "/run/$runtime"/*)
    [ -n "$runtime" ] && case "$preserve" in yes | restart) ;; *) emptied=yes ;; esac ;;
  "/var/lib/$state" | "/var/lib/$state"/*) [ -n "$state" ] || fail "--status-dir $unit_status_dir is in no directory the unit declares" ;;
  *) fail "--status-dir $unit_status_dir is in no directory the unit's systemd settings keep or manage" ;;
esac
echo "the unit: --status-dir $unit_status_dir, RuntimeDirectory=$runtime RuntimeDirectoryPreserve=${preserve:-no}: emptied on a restart: $emptied"

setup_db
# About 300 ms per doc, one doc at a time: a recompute of the 20 docs takes about 6 s.
sql "CREATE TABLE item (id int PRIMARY KEY, v int NOT NULL)"
sql "INSERT INTO item SELECT g, 0 FROM generate_series(1, 20) g"
sql "SELECT docsync.define_query('item', \$q\$SELECT jsonb_build_object('id', i.id, 'v', i.v, 'n', (SELECT count(*) FROM generate_series(1, 3000000 + i.id))) FROM item i WHERE i.id = \$1\$q\$, params => ARRAY['id'])" >/dev/null 2>&1
sql "SELECT docsync.watch('item', 'item', params => ARRAY['id'])" >/dev/null
grant_reader
start_worker --pool 1 --batch 1 --threads 1
sql "UPDATE item SET v = 1"
[ "$(sql "CALL docsync.wait_published(timeout => '60s')")" = t ] || fail "the worker did not catch up"

echo "the slot dropped under the worker, every row changed in the gap"
dropped=
for _ in $(seq 1 100); do
  sql "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = '$slot' AND active_pid IS NOT NULL" >/dev/null
  if sql "SELECT pg_drop_replication_slot('$slot')" >/dev/null 2>&1; then
    sql "UPDATE item SET v = 777"
    dropped=1
    break
  fi
  sleep 0.05
done
[ -n "$dropped" ] || fail "could not drop the slot between the worker's reconnects"
wait_for 30 "SELECT recompute = 'new slot' AND recompute_done >= 2 AND recompute_finished_at IS NULL FROM docsync.status WHERE slot_name = '$slot'" ||
  fail "no 'new slot' recompute seen running: $(sql "SELECT recompute, recompute_done, recompute_total FROM docsync.status WHERE slot_name = '$slot'")"
sleep 0.6  # the status file is written every 500 ms
echo "the worker crashes in the middle of that recompute; systemd restarts it"
kill -9 "$worker_pid"
wait "$worker_pid" 2>/dev/null || true
worker_pid=
[ "$emptied" = no ] || rm -f "$status_dir/$db.$slot".*
start_worker --pool 1 --batch 1 --threads 1
answer=$(sql "CALL docsync.wait_published(timeout => '0s')")
lacking=$(sql "SELECT count(*) FROM item" >/dev/null; for id in $(seq 1 20); do last_doc "db:item:$id" | jq -r .v; done | grep -cvx 777 || true)
echo "at the restart: wait_published says $answer, $lacking of 20 docs lack the gap's change"
[ "$answer" = f ] || [ "$lacking" = 0 ] ||
  fail "wait_published returned true after the restart while $lacking of 20 docs lacked the change made in the gap"
[ "$(sql "CALL docsync.wait_published(timeout => '60s')")" = t ] || fail "wait_published stayed false after the restart"
for id in $(seq 1 20); do
  [ "$(last_doc "db:item:$id" | jq -r .v)" = 777 ] || fail "db:item:$id after the wait: $(last_doc "db:item:$id")"
done
stop_worker
echo "ok"
