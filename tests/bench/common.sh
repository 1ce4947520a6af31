# shellcheck shell=bash
# Shared setup of the worker benchmarks (sourced): a throwaway database with the docsync extension,
# the worker's two roles, and helpers. Expects the environment of a running cluster
# (packaging/dev-cluster.sh start; . "$dir/cluster.env") and sets: top, worker, db, repl, reader.
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
worker=${DOCSYNC_WORKER:-$top/build/rel/docsync-worker}
[ -x "$worker" ] || { echo "no worker at $worker: build it with cmake -S . -B build/rel -DCMAKE_BUILD_TYPE=Release -DDOCSYNC_TESTS=OFF && cmake --build build/rel -j2 --target docsync-worker, or set DOCSYNC_WORKER" >&2; exit 1; }
db=docsync_bench_$$
repl=docsync_bench_repl_$$
reader=docsync_bench_reader_$$
psql() { command psql -X -q -v ON_ERROR_STOP=1 "$@"; }
# shellcheck disable=SC2034 # used by the scripts that source this file
dsn_repl="host=$PGHOST port=$PGPORT dbname=$db user=$repl"
# shellcheck disable=SC2034
dsn_reader="host=$PGHOST port=$PGPORT dbname=$db user=$reader"

bench_pids=()
redis_port=
bench_cleanup() {
  for p in "${bench_pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  for p in "${bench_pids[@]}"; do wait "$p" 2>/dev/null || true; done
  psql -d "$db" -c "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = current_database() AND NOT active" >/dev/null 2>&1 || true
  psql -d postgres -c "DROP DATABASE IF EXISTS $db" >/dev/null 2>&1 || true
  psql -d postgres -c "DROP ROLE IF EXISTS $repl" -c "DROP ROLE IF EXISTS $reader" >/dev/null 2>&1 || true
  [ -n "${bench_tmp:-}" ] && rm -rf "$bench_tmp"
  return 0
}
bench_tmp=$(mktemp -d)

bench_setup_db() {
  psql -d postgres -c "CREATE DATABASE $db"
  psql -d "$db" -c "SET client_min_messages = warning" -c "CREATE EXTENSION docsync" \
       -c "CREATE ROLE $repl LOGIN REPLICATION" -c "SELECT docsync.grant_replication('$repl')" \
       -c "CREATE ROLE $reader LOGIN" -c "SELECT docsync.grant_reader('$reader')" >/dev/null
}

# bench_order_query: the SQL defining the shop's `order` doc (its customer, its items with their
# products, a total), with the two direct watches written by hand: orders(id), order_items(order_id).
bench_order_query() {
  cat <<'SQL'
SELECT docsync.define_query('order', $$
  SELECT json_build_object(
    'id', o.id, 'status', o.status, 'revision', o.revision, 'created_at', o.created_at,
    'updated_at', extract(epoch FROM o.updated_at),
    'customer', json_build_object('id', c.id, 'name', c.name, 'email', c.email, 'city', c.city),
    'items', (SELECT coalesce(json_agg(json_build_object('product', p.name, 'category', p.category,
                                                         'qty', i.qty, 'price', p.price) ORDER BY i.id), '[]')
                FROM order_items i JOIN products p ON p.id = i.product_id WHERE i.order_id = o.id),
    'total', (SELECT coalesce(sum(i.qty * p.price), 0)
                FROM order_items i JOIN products p ON p.id = i.product_id WHERE i.order_id = o.id))
    FROM orders o JOIN customers c ON c.id = o.customer_id WHERE o.id = $1$$,
  params => ARRAY['order_id'], watches => 'manual');
SELECT docsync.watch('order', 'orders', params => ARRAY['id']);
SELECT docsync.watch('order', 'order_items', params => ARRAY['order_id']);
SQL
}

# Starts a private redis-server on a free loopback port; sets redis_port.
# bench_item_table N: the table `item` (id, v) with N rows, granted to the reader, and the doc query
# `item` (db:item:ID) watching it, and the reader role that computes it.
bench_item_table() {
  psql -d "$db" <<SQL >/dev/null
SET client_min_messages = error;
CREATE TABLE item (id int PRIMARY KEY, v int NOT NULL);
INSERT INTO item SELECT g, 0 FROM generate_series(1, $1) g;
GRANT SELECT ON item TO $reader;
SELECT docsync.define_query('item', \$\$SELECT jsonb_build_object('id', i.id, 'v', i.v) FROM item i WHERE i.id = \$1\$\$,
                            params => ARRAY['id']);
SELECT docsync.watch('item', 'item', params => ARRAY['id']);
-- grant_reader makes the reader roles of the definers that exist when it runs: again, now that the
-- definition exists.
SELECT docsync.grant_reader('$reader');
SQL
}

bench_start_redis() {
  redis_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no --daemonize no >"$bench_tmp/redis.log" 2>&1 &
  bench_pids+=("$!")
  for _ in $(seq 1 100); do redis-cli -p "$redis_port" ping >/dev/null 2>&1 && return 0; sleep 0.05; done
  echo "redis-server did not start:" >&2; cat "$bench_tmp/redis.log" >&2; exit 1
}

# Waits (at most $3 seconds) until slot $1 has confirmed $2; prints the seconds waited since $4 (an
# EPOCHREALTIME taken before the consumer started).
bench_wait_confirmed() {
  local slot=$1 target=$2 limit=$3 t0=$4 ok
  local deadline=$(( ${EPOCHREALTIME%.*} + limit ))
  while :; do
    ok=$(command psql -X -At -d "$db" -c "SELECT confirmed_flush_lsn >= '$target' FROM pg_replication_slots WHERE slot_name = '$slot'")
    [ "$ok" = t ] && break
    [ "${EPOCHREALTIME%.*}" -lt "$deadline" ] || { echo "slot $slot did not reach $target in ${limit}s" >&2; return 1; }
    sleep 0.02
  done
  python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.3f}')" "$t0" "$EPOCHREALTIME"
}

# Prints the CPU time (user + system, seconds) the processes $@ have used so far; a process that has
# exited counts nothing.
bench_cpu_seconds() {
  local hz ticks=0 p f
  hz=$(getconf CLK_TCK)
  for p in "$@"; do
    # Fields 14 and 15 (utime, stime), counted after the ")" that ends the command name.
    f=$(sed 's/.*) //' "/proc/$p/stat" 2>/dev/null | awk '{print $12 + $13}') || f=0
    ticks=$((ticks + ${f:-0}))
  done
  echo "scale=3; $ticks / $hz" | bc -l
}

# True when the worker's --help lists the flag $1. The help is read whole first: grep -q would stop
# reading at the match, and under pipefail the worker's SIGPIPE would fail the test.
bench_worker_has_flag() {
  local help
  help=$("$worker" --help 2>&1) || true
  grep -q -- "^ *$1 " <<<"$help"
}
