#!/usr/bin/env bash
# Decodes one workload through docsync, pgoutput (proto_version 1 and 2, a publication with column
# lists), wal2json (format-version 2, add-tables) and test_decoding (skip-empty-xacts), side by side
# in one run, and prints rows, bytes and decode time per plugin with ratios against docsync.
#
#   dir=$(packaging/dev-cluster.sh start); . "$dir/cluster.env"
#   [DOCSYNC_BENCH_CHURN=cycles] tests/bench/plugin_bench.sh [transactions (default 2000)] [repetitions (default 3)]
#
# Workload: each transaction inserts an order, three order items and two unwatched audit rows,
# then updates the order's status; between them, a stream of transactions that touch only the
# unwatched table. The watched columns are orders(id, customer_id, status) and
# order_items(id, order_id, product_id, qty); the other columns (wide text, timestamps) are not
# watched. Every plugin reads the same slot contents with peek (nothing is consumed), round robin,
# the best of the repetitions counting; decode time is the backend's CPU time around the SQL
# decoding call (robust on a loaded machine), with the wall time beside it. The "floor" row decodes
# the same WAL with nothing watched: the server's own share of the work, which every plugin pays.
#
# Then table churn: DOCSYNC_BENCH_CHURN cycles (default 5000; 0 skips it) of CREATE TABLE, INSERT of
# one row and DROP TABLE, each its own transaction, decoded from two slots created just before it,
# through docsync and pgoutput (proto 1, the same tables and publication; neither emits anything)
# side by side in one run, best of the repetitions, with the ratio. Every cycle changes a relation
# the session has never seen and then drops it, so this measures what a plugin's relation cache
# costs when relations come and go.
# Not a timed test: figures depend on the machine.
set -euo pipefail
n=${1:-2000}
reps=${2:-3}
churn=${DOCSYNC_BENCH_CHURN:-5000}
db=docsync_bench_$$
psql() { command psql -X -q -v ON_ERROR_STOP=1 "$@"; }

cleanup() {
  psql -d "$db" -c "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = current_database()" >/dev/null 2>&1 || true
  psql -d postgres -c "DROP DATABASE IF EXISTS $db" >/dev/null 2>&1 || true
}
trap cleanup EXIT
psql -d postgres -c "CREATE DATABASE $db"

psql -d "$db" -f "$(dirname "${BASH_SOURCE[0]}")/shop_workload.sql" >/dev/null
psql -d "$db" <<SQL >/dev/null
SET client_min_messages = warning;
CREATE PUBLICATION bench_pub FOR TABLE orders (id, customer_id, status),
                                 order_items (id, order_id, product_id, qty);
SELECT pg_create_logical_replication_slot('bench_docsync', 'docsync');
SELECT pg_create_logical_replication_slot('bench_pgoutput', 'pgoutput');
SELECT pg_create_logical_replication_slot('bench_wal2json', 'wal2json');
SELECT pg_create_logical_replication_slot('bench_test_decoding', 'test_decoding');
SQL

start=$(date +%s)
psql -d "$db" -c "CALL bench_workload($n)"
echo "workload: $n order transactions + $n unwatched-only transactions in $(( $(date +%s) - start ))s"

# One round-robin measurement of the queries in temp table plugins (plugin, q) into temp table runs:
# rows, bytes, the backend's CPU ms (from /proc/self/schedstat) and wall ms, bench.reps times.
measure=$(cat <<'SQL'
CREATE TEMP TABLE runs (plugin text, rows bigint, bytes bigint, cpu_ms numeric, wall_ms numeric);
CREATE FUNCTION pg_temp.cpu_ns() RETURNS numeric LANGUAGE sql AS
  $$SELECT split_part(pg_read_file('/proc/self/schedstat'), ' ', 1)::numeric$$;
DO $$
DECLARE
  p record;
  t0 timestamptz;
  c0 numeric;
  n bigint;
  b bigint;
BEGIN
  FOR r IN 1..current_setting('bench.reps')::int LOOP
    FOR p IN SELECT * FROM plugins LOOP
      c0 := pg_temp.cpu_ns();
      t0 := clock_timestamp();
      EXECUTE p.q INTO n, b;
      INSERT INTO runs VALUES (p.plugin, n, b, (pg_temp.cpu_ns() - c0) / 1e6,
                               extract(epoch FROM clock_timestamp() - t0) * 1000);
    END LOOP;
  END LOOP;
END $$;
SQL
)

{
  cat <<'SQL'
\pset footer off
-- Each repetition decodes through every plugin in turn (round robin, so a load change on the
-- machine hits them alike); per plugin the best repetition counts. CPU time is the backend's own
-- (from /proc/self/schedstat), which other load on the machine does not inflate; wall time is shown too.
CREATE TEMP TABLE plugins (plugin text, q text);
INSERT INTO plugins VALUES
  ('docsync (binary)', $$SELECT count(*), sum(octet_length(data)) FROM pg_logical_slot_peek_binary_changes('bench_docsync', NULL, NULL,
      'tables', 'public.orders(id, customer_id, status), public.order_items(id, order_id, product_id, qty)')$$),
  ('docsync (text)', $$SELECT count(*), sum(octet_length(data)) FROM pg_logical_slot_peek_changes('bench_docsync', NULL, NULL,
      'format', 'text', 'tables', 'public.orders(id, customer_id, status), public.order_items(id, order_id, product_id, qty)')$$),
  ('floor: docsync, nothing watched', $$SELECT count(*), coalesce(sum(octet_length(data)), 0) FROM pg_logical_slot_peek_binary_changes('bench_docsync', NULL, NULL,
      'tables', 'public.no_such_table')$$),
  ('pgoutput proto 1', $$SELECT count(*), sum(octet_length(data)) FROM pg_logical_slot_peek_binary_changes('bench_pgoutput', NULL, NULL,
      'proto_version', '1', 'publication_names', 'bench_pub')$$),
  ('pgoutput proto 2', $$SELECT count(*), sum(octet_length(data)) FROM pg_logical_slot_peek_binary_changes('bench_pgoutput', NULL, NULL,
      'proto_version', '2', 'publication_names', 'bench_pub')$$),
  ('wal2json v2', $$SELECT count(*), sum(octet_length(data)) FROM pg_logical_slot_peek_changes('bench_wal2json', NULL, NULL,
      'format-version', '2', 'add-tables', 'public.orders,public.order_items')$$),
  ('test_decoding', $$SELECT count(*), sum(octet_length(data)) FROM pg_logical_slot_peek_changes('bench_test_decoding', NULL, NULL,
      'skip-empty-xacts', '1')$$);
SQL
  echo "$measure"
  cat <<'SQL'
CREATE TEMP TABLE results AS
  SELECT plugin, max(rows) AS rows, max(bytes) AS bytes, round(min(cpu_ms), 1) AS cpu_ms,
         round(min(wall_ms), 1) AS wall_ms FROM runs GROUP BY plugin;
SELECT r.plugin, r.rows, r.bytes, r.cpu_ms AS decode_cpu_ms, r.wall_ms AS decode_wall_ms,
       round(r.bytes::numeric / d.bytes, 2) AS bytes_vs_docsync,
       round(r.cpu_ms / nullif(d.cpu_ms, 0), 2) AS cpu_vs_docsync
  FROM results r, results d WHERE d.plugin = 'docsync (binary)'
 ORDER BY r.plugin = 'docsync (binary)' DESC, r.plugin;
SELECT round(d.bytes::numeric / p.bytes, 2) AS "docsync/pgoutput bytes (target <= 0.7)",
       round(d.cpu_ms / p.cpu_ms, 2) AS "docsync/pgoutput time (target <= 1)",
       round(d.cpu_ms / w.cpu_ms, 2) AS "docsync/wal2json time (target <= 0.5)"
  FROM results d, results p, results w
 WHERE d.plugin = 'docsync (binary)' AND p.plugin = 'pgoutput proto 1' AND w.plugin = 'wal2json v2';
SQL
} | PGOPTIONS="-c bench.reps=$reps" psql -d "$db"

[ "$churn" -gt 0 ] || exit 0
psql -d "$db" <<'SQL' >/dev/null
SET client_min_messages = warning;
SELECT pg_create_logical_replication_slot('bench_churn_docsync', 'docsync');
SELECT pg_create_logical_replication_slot('bench_churn_pgoutput', 'pgoutput');
CREATE PROCEDURE bench_churn(n int) LANGUAGE plpgsql AS $$
BEGIN
  FOR i IN 1..n LOOP
    CREATE TABLE bench_churn (id int PRIMARY KEY, v text);
    COMMIT;
    INSERT INTO bench_churn VALUES (i, 'x');
    COMMIT;
    DROP TABLE bench_churn;
    COMMIT;
  END LOOP;
END $$;
SQL
start=$(date +%s)
psql -d "$db" -c "SET synchronous_commit = off" -c "CALL bench_churn($churn)"
echo "churn: $churn cycles of CREATE TABLE / INSERT / DROP TABLE in $(( $(date +%s) - start ))s"

{
  cat <<'SQL'
\pset footer off
CREATE TEMP TABLE plugins (plugin text, q text);
INSERT INTO plugins VALUES
  ('docsync (binary)', $$SELECT count(*), coalesce(sum(octet_length(data)), 0) FROM pg_logical_slot_peek_binary_changes('bench_churn_docsync', NULL, NULL,
      'tables', 'public.orders(id, customer_id, status), public.order_items(id, order_id, product_id, qty)')$$),
  ('pgoutput proto 1', $$SELECT count(*), coalesce(sum(octet_length(data)), 0) FROM pg_logical_slot_peek_binary_changes('bench_churn_pgoutput', NULL, NULL,
      'proto_version', '1', 'publication_names', 'bench_pub')$$);
SQL
  echo "$measure"
  cat <<'SQL'
SELECT plugin AS "table churn: plugin", max(rows) AS rows, max(bytes) AS bytes,
       round(min(cpu_ms) / 1000, 3) AS decode_cpu_s, round(min(wall_ms) / 1000, 3) AS decode_wall_s
  FROM runs GROUP BY plugin ORDER BY plugin;
SELECT round(min(cpu_ms) FILTER (WHERE plugin = 'docsync (binary)') /
             min(cpu_ms) FILTER (WHERE plugin = 'pgoutput proto 1'), 2)
         AS "churn: docsync/pgoutput time (target <= 1.2)"
  FROM runs;
SQL
} | PGOPTIONS="-c bench.reps=$reps" psql -d "$db"
