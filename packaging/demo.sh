#!/usr/bin/env bash
# The main job on the embedded default: a throwaway cluster, the extension, a small shop whose orders
# are docs, the worker with the stdout sink, and a scripted workload. Every doc line and status row
# it prints is real output of the worker and the server. Cleans up after itself, even on failure.
#   packaging/demo.sh
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$top"
bash packaging/deps.sh
export PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

say "building the extension and the worker"
make -s PG_CONFIG="$PG_CONFIG" >/dev/null
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release -DDOCSYNC_TESTS=OFF >/dev/null
cmake --build build/release -j "$(nproc)" --target docsync-worker >/dev/null
worker=$top/build/release/docsync-worker
built_at=$SECONDS

say "starting a throwaway PostgreSQL cluster"
cluster=$(packaging/dev-cluster.sh start)
work=$(mktemp -d)
worker_pid=
cleanup() {
  [ -n "$worker_pid" ] && kill -9 "$worker_pid" 2>/dev/null
  packaging/dev-cluster.sh stop "$cluster"
  rm -rf "$work"
}
trap cleanup EXIT
# shellcheck disable=SC1091
. "$cluster/cluster.env"
createdb shop
export PGDATABASE=shop
echo "cluster in $cluster (port $PGPORT), database shop"

say "installing docsync, the shop schema, the 'order' doc query and the worker's roles"
psql -X -q -v ON_ERROR_STOP=1 -f packaging/demo/schema.sql
psql -X -c "SELECT name, params, watched_tables FROM docsync.queries"

say "starting docsync-worker (stdout sink, --live all)"
"$worker" --dsn "host=$PGHOST port=$PGPORT dbname=shop user=docsync_repl" \
          --pool-dsn "host=$PGHOST port=$PGPORT dbname=shop user=docsync_reader" \
          --slot docsync_demo --create-slot --sink stdout --status-dir "$DOCSYNC_STATUS_DIR" \
          >"$work/docs.jsonl" 2>"$work/worker.log" &
worker_pid=$!
shown=0

# Waits until the worker has acknowledged everything committed so far (its docs are published),
# then prints the doc lines it wrote since the last call.
settle() {
  local target ok
  target=$(psql -X -At -c "SELECT pg_current_wal_lsn()")
  for _ in $(seq 1 300); do
    ok=$(psql -X -At -c "SELECT coalesce(confirmed_flush_lsn >= '$target', false) FROM pg_replication_slots WHERE slot_name = 'docsync_demo'")
    [ "$ok" = t ] && break
    kill -0 "$worker_pid" 2>/dev/null || { echo "the worker exited:"; cat "$work/worker.log"; exit 1; }
    sleep 0.1
  done
  [ "$ok" = t ] || { echo "the worker did not catch up in 30 s:"; tail -n 20 "$work/worker.log"; exit 1; }
  local total
  total=$(wc -l <"$work/docs.jsonl")
  if [ "$total" -gt "$shown" ]; then sed -n "$((shown + 1)),${total}p" "$work/docs.jsonl"; else echo "(no doc changed)"; fi
  shown=$total
}

step() {
  say "$1"
  echo "  $2"
  psql -X -q -v ON_ERROR_STOP=1 -c "$2"
  settle
}

settle >/dev/null
step "a new order with two items" \
  "BEGIN; INSERT INTO orders VALUES (3, 'linus'); INSERT INTO order_items VALUES (4, 3, 1, 1), (5, 3, 2, 1); COMMIT;"
step "an item moves from order 1 to order 2: both docs change" \
  "UPDATE order_items SET order_id = 2 WHERE id = 2;"
step "espresso beans get dearer: every order containing them changes (reverse index)" \
  "UPDATE products SET price = 13.90 WHERE id = 1;"
step "order 2 ships" \
  "UPDATE orders SET status = 'shipped' WHERE id = 2;"
step "order 3 is deleted: its doc becomes null" \
  "BEGIN; DELETE FROM order_items WHERE order_id = 3; DELETE FROM orders WHERE id = 3; COMMIT;"

say "SELECT * FROM docsync.status"
psql -X -x -c "SELECT * FROM docsync.status"

say "stopping the worker (SIGTERM: drain, final acknowledgement, exit 0)"
kill -TERM "$worker_pid"
rc=0
wait "$worker_pid" || rc=$?
worker_pid=
echo "worker exit status: $rc"
echo "worker log:"
sed 's/^/  /' "$work/worker.log"
[ "$rc" -eq 0 ] || exit 1
say "done in $SECONDS s: $built_at s of building (less when already built), $((SECONDS - built_at)) s of demo"
