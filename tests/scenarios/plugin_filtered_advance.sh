#!/usr/bin/env bash
# Over the replication protocol, a slot whose traffic the plugin filters out entirely still
# advances: pg_recvlogical streams with a `tables` option that matches nothing while unwatched
# transactions (one of them large) commit, and the slot's confirmed position must pass them.
# Needs the libpq environment of a dev cluster (packaging/dev-cluster.sh).
set -euo pipefail
bindir=${DOCSYNC_PG_BINDIR:-/usr/lib/postgresql/15/bin}
slot=filtered_advance_$$
table=filtered_advance_t_$$
out=$(mktemp)
q() { psql -X -q -At -v ON_ERROR_STOP=1 -c "$1"; }
cleanup() {
  if [ -n "${recv:-}" ]; then kill "$recv" 2>/dev/null || true; wait "$recv" 2>/dev/null || true; fi
  q "SELECT pg_drop_replication_slot('$slot') FROM pg_replication_slots WHERE slot_name = '$slot'" >/dev/null 2>&1 || true
  q "DROP TABLE IF EXISTS $table" >/dev/null 2>&1 || true
  rm -f "$out"
}
trap 'rc=$?; set +e; cleanup; exit $rc' EXIT

q "CREATE TABLE $table (id int PRIMARY KEY, v text)"
q "SELECT 'init' FROM pg_create_logical_replication_slot('$slot', 'docsync')" >/dev/null
"$bindir/pg_recvlogical" -d "${PGDATABASE:-postgres}" --slot "$slot" --start -o tables=no_such_table -o format=binary \
  --status-interval 1 --fsync-interval 1 -f "$out" &
recv=$!

q "INSERT INTO $table SELECT g, 'x' FROM generate_series(1, 20000) g"   # one large filtered transaction
for i in $(seq 1 20); do q "UPDATE $table SET v = 'y$i' WHERE id = $i"; done
target=$(q "SELECT pg_current_wal_lsn()")

for _ in $(seq 1 60); do
  if [ "$(q "SELECT confirmed_flush_lsn >= '$target' FROM pg_replication_slots WHERE slot_name = '$slot'")" = t ]; then
    kill -0 "$recv" || { echo "FAIL: pg_recvlogical exited"; exit 1; }
    if [ -s "$out" ]; then echo "FAIL: filtered traffic produced output"; exit 1; fi
    echo "ok: the slot advanced past $target with nothing emitted"
    exit 0
  fi
  sleep 0.5
done
echo "FAIL: confirmed_flush_lsn $(q "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = '$slot'") did not reach $target in 30s"
exit 1
