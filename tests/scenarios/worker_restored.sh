#!/usr/bin/env bash
# A server restored from a file-level backup under a running worker: the same system identifier and
# timeline, the same slot name, but WAL that ends before what the worker already acknowledged, and
# rows as they were. The worker notices that the server's WAL ends before its acknowledged position,
# starts over from the slot's position there (never acknowledging a position the server has not
# reached), raises the generation and recomputes every live doc, so the docs return to the restored
# rows instead of staying at the lost ones.
set -euo pipefail
test_name=restored
# shellcheck source=lib/own_cluster.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib/own_cluster.bash"

setup_db
sql "CREATE TABLE acct (id int PRIMARY KEY, bal int NOT NULL)"
sql "INSERT INTO acct SELECT g, 0 FROM generate_series(1, 5) g"
sql "SELECT docsync.define_query('acct', \$q\$SELECT jsonb_build_object('id', a.id, 'bal', a.bal) FROM acct a WHERE a.id = \$1\$q\$, params => ARRAY['id'])" >/dev/null 2>&1
sql "SELECT docsync.watch('acct', 'acct', params => ARRAY['id'])" >/dev/null
grant_reader
start_worker --live all
all_current() {
  local id
  for id in 1 2 3 4 5; do
    [ "$(doc_equals_query "db:acct:$id" "SELECT jsonb_build_object('id', a.id, 'bal', a.bal) FROM acct a WHERE a.id = $id")" = t ] || return 1
  done
}
wait_current() {
  local deadline=$((SECONDS + 60))
  until all_current; do
    [ $SECONDS -lt $deadline ] || fail "$1: the docs are $(jq -c 'select(.channel | startswith("db:acct:")) | .doc' "$docs" | tail -n 5 | paste -sd' ')"
    sleep 0.2
  done
}
sql "UPDATE acct SET bal = 1"
settle 30
wait_current "before the backup"

ctl stop -m fast
cp -a "$cluster/data" "$tmp/backup"
ctl start
sql "UPDATE acct SET bal = 2"
settle 60
wait_current "after the backup"
acked=$(sql "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = '$slot'")

echo "restoring the file-level backup under the running worker"
ctl stop -m immediate
rm -rf "$cluster/data"
mv "$tmp/backup" "$cluster/data"
ctl start
[ "$(sql "SELECT max(bal) FROM acct")" = 1 ] || fail "the backup was not restored"
[ "$(sql "SELECT pg_current_wal_lsn() < '$acked'")" = t ] || fail "the restored server's WAL does not end before $acked"
wait_for 60 "SELECT active FROM pg_replication_slots WHERE slot_name = '$slot'" || fail "the worker did not stream the restored server"
wait_current "after the restore"
grep -q "restored from a backup" "$tmp/worker.log" || fail "the restore was not noticed: $(tail -n 20 "$tmp/worker.log")"
wait_for 30 "SELECT recompute = 'new server' FROM docsync.status WHERE slot_name = '$slot'" ||
  fail "docsync.status does not show the recompute: $(sql "SELECT recompute FROM docsync.status WHERE slot_name = '$slot'")"
# The worker acknowledges only what this server has: the slot's position never passes its WAL.
sql "UPDATE acct SET bal = 3 WHERE id = 1"
settle 30
[ "$(sql "SELECT confirmed_flush_lsn <= pg_current_wal_lsn() FROM pg_replication_slots WHERE slot_name = '$slot'")" = t ] ||
  fail "the slot was acknowledged past the server's WAL"
wait_current "after a change on the restored server"
stop_worker
echo "ok"
