#!/usr/bin/env bash
# The whole worker under load, in one run:
#   1. commit-to-publish latency p50/p99 under a steady ~1 000 txn/s (pgbench -R 1000) spread over
#      10 000 live docs, JSONL sink on stdout read through a pipe;
#   2. worker memory per live doc: resident memory with no doc, then with the 10 000 docs live;
#   3. database queries per change on a hot-row storm: one row updated in separate transactions as
#      fast as pgbench can, the worker's statements counted by pg_stat_statements.
#
#   dir=$(packaging/dev-cluster.sh start); . "$dir/cluster.env"
#   tests/bench/latency.sh [seconds of load (default 30)] [docs (default 10000)] [rate (default 1000)]
#   (DOCSYNC_WORKER=path/to/docsync-worker, default build/rel/docsync-worker, a Release build)
#
# Method. Table items(id, v, committed_at); the doc query 'item' returns the row as JSON, with no
# clock of its own: {"id", "v", "ts"} where ts is committed_at, written by the transaction itself
# (UPDATE items SET v = v + 1, committed_at = clock_timestamp() WHERE id = :id, one statement per
# transaction, so ts is taken just before COMMIT and the latency includes the commit's own WAL flush).
# The worker runs with --sink stdout --live all; a reader on the other end of the pipe stamps every
# line with the same machine's clock the moment it arrives. Latency of a publish = arrival - ts of
# the newest commit the doc reflects. A publish that covers more than one commit of its doc (v moved
# by more than one: changes coalesced while a round of that doc was pending or paced) is counted, so
# the older commits' longer wait is not hidden. Docs are made live first (one UPDATE of every row,
# every doc computed once); only publishes of commits made during the steady load count.
# Not a timed test: figures depend on the machine.
set -euo pipefail
seconds=${1:-30}
docs=${2:-10000}
rate=${3:-1000}
# shellcheck source=tests/bench/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
trap bench_cleanup EXIT
bench_setup_db

psql -d "$db" <<SQL >/dev/null
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pg_stat_statements;
CREATE TABLE items (id int PRIMARY KEY, v int NOT NULL, committed_at timestamptz NOT NULL);
INSERT INTO items SELECT g, 0, now() FROM generate_series(1, $docs) g;
GRANT SELECT ON items TO $reader;
SELECT docsync.define_query('item', \$\$SELECT jsonb_build_object('id', id, 'v', v,
  'ts', extract(epoch FROM committed_at)) FROM items WHERE id = \$1\$\$, params => ARRAY['id']);
SELECT docsync.watch('item', 'items', params => ARRAY['id']);
SQL
slot=bench_latency_$$
cat >"$bench_tmp/reader.py" <<'PY'
import sys, time
out = open(sys.argv[1], "w", buffering=1)
src = sys.stdin.buffer
while True:
    line = src.readline()
    if not line:
        break
    out.write(f"{time.time():.6f} {line.decode()}")
PY
# The server's status directory (a dev cluster exports it), so docsync.status reads the worker's counters.
status_dir=${DOCSYNC_STATUS_DIR:-$bench_tmp}
# "<not-visible retries> <computes>" from docsync.status, or "- -" when the server cannot read the file.
status_counts() {
  local row
  row=$(psql -At -F ' ' -d "$db" -c "SELECT not_visible_retries, recomputes FROM docsync.status WHERE slot_name = '$slot' AND read_error IS NULL AND not_visible_retries IS NOT NULL")
  echo "${row:-- -}"
}
mkfifo "$bench_tmp/docs"
python3 "$bench_tmp/reader.py" "$bench_tmp/arrivals" <"$bench_tmp/docs" &
bench_pids+=("$!")
"$worker" --dsn "$dsn_repl" --pool-dsn "$dsn_reader" --slot "$slot" --create-slot --sink stdout --live all \
  --status-dir "$status_dir" --log-level warning >"$bench_tmp/docs" 2>"$bench_tmp/worker.log" &
wpid=$!
bench_pids+=("$wpid")

# Waits until the worker has acknowledged everything committed so far.
settle() {
  local target
  target=$(psql -At -d "$db" -c "SELECT pg_current_wal_lsn()")
  for _ in $(seq 1 3000); do
    kill -0 "$wpid" 2>/dev/null || { echo "the worker exited:" >&2; cat "$bench_tmp/worker.log" >&2; exit 1; }
    [ "$(psql -At -d "$db" -c "SELECT coalesce(confirmed_flush_lsn >= '$target', false) FROM pg_replication_slots WHERE slot_name = '$slot'")" = t ] && return 0
    sleep 0.1
  done
  echo "the worker did not catch up in 300 s" >&2; tail -n 20 "$bench_tmp/worker.log" >&2; exit 1
}
rss_kb() { awk -v k="$2" '$1 == k":" {print $2}' "/proc/$1/status"; }
settle
rss0=$(rss_kb "$wpid" VmRSS)

t=$EPOCHREALTIME
psql -d "$db" -c "UPDATE items SET v = v + 1, committed_at = clock_timestamp()"
settle
live=$(wc -l <"$bench_tmp/arrivals")
printf 'warm-up: %d docs computed and published in %.1fs\n' "$live" "$(echo "$EPOCHREALTIME - $t" | bc -l)"
[ "$live" -ge "$docs" ] || { echo "expected $docs docs, the sink got $live" >&2; exit 1; }
sleep 1
rss1=$(rss_kb "$wpid" VmRSS)
hwm=$(rss_kb "$wpid" VmHWM)

cat >"$bench_tmp/load.sql" <<SQL
\set id random(1, $docs)
UPDATE items SET v = v + 1, committed_at = clock_timestamp() WHERE id = :id;
SQL
read -r nv0 computes0 < <(status_counts)
load_start=$EPOCHREALTIME
pgbench -n -d "$db" -f "$bench_tmp/load.sql" -R "$rate" -T "$seconds" -c 4 -j 2 >"$bench_tmp/pgbench.log" 2>&1 || { cat "$bench_tmp/pgbench.log" >&2; exit 1; }
settle
sleep 1  # the status file is refreshed every 500 ms
commits=$(awk '/number of transactions actually processed/ {print $NF}' "$bench_tmp/pgbench.log" | cut -d/ -f1)
lag=$(awk '/schedule lag/ {print $0}' "$bench_tmp/pgbench.log")
read -r nv1 computes1 < <(status_counts)

echo "== latency: $seconds s at -R $rate over $docs live docs ($commits commits; pgbench $lag)"
python3 - "$bench_tmp/arrivals" "$load_start" "$commits" <<'PY'
import json, sys
arrivals, start, commits = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
last_v, last_at, lat, coalesced, paced, paced_lat = {}, {}, [], 0, 0, []
for row in open(arrivals):
    at, line = row.split(" ", 1)
    env = json.loads(line)
    doc = env["doc"]
    prev = last_v.get(doc["id"])
    prev_at = last_at.get(doc["id"])
    last_v[doc["id"]] = doc["v"]
    last_at[doc["id"]] = float(at)
    if doc["ts"] < start:
        continue
    ms = (float(at) - doc["ts"]) * 1000
    lat.append(ms)
    if prev is not None and doc["v"] - prev > 1:
        coalesced += doc["v"] - prev - 1
    # Committed less than min_round_interval (100 ms) after the doc's previous publish: the engine
    # may hold this round back until the interval has passed.
    if prev_at is not None and doc["ts"] - prev_at < 0.1:
        paced += 1
        paced_lat.append(ms)
lat.sort()
q = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))]
print(f"publishes {len(lat)} for {commits} commits ({coalesced} commits coalesced into a later publish of their doc)")
print(f"commit-to-publish ms: p50 {q(0.50):.2f}  p90 {q(0.90):.2f}  p99 {q(0.99):.2f}  max {lat[-1]:.2f}   (targets p50 < 5, p99 < 50)")
over = sum(1 for x in lat if x >= 50)
print(f"{over} publishes ({100 * over / len(lat):.2f} %) took 50 ms or more; {paced} ({100 * paced / len(lat):.2f} %) were of a doc "
      f"published less than 100 ms before the commit (min_round_interval pacing applies), of which "
      f"{sum(1 for x in paced_lat if x >= 50)} took 50 ms or more")
PY
if [ "$nv0" != - ] && [ "$nv1" != - ]; then
  echo "computes retried because their commit was not yet visible: $((nv1 - nv0)) (doc computes: $((computes1 - computes0)))"
else
  echo "not-visible retries unknown: docsync.status cannot read the worker's status file in $status_dir"
fi

echo "== memory: $docs live docs"
printf 'worker RSS %.1f MB with no doc, %.1f MB with %d live docs (peak %.1f MB): %.0f bytes per live doc\n' \
  "$(echo "$rss0 / 1024" | bc -l)" "$(echo "$rss1 / 1024" | bc -l)" "$docs" "$(echo "$hwm / 1024" | bc -l)" \
  "$(echo "($rss1 - $rss0) * 1024 / $docs" | bc -l)"

storm=${DOCSYNC_BENCH_STORM:-2000}
echo "== hot-row storm: row 1 updated $storm times, one transaction each, as fast as pgbench can"
psql -d "$db" -c "SELECT pg_stat_statements_reset()" >/dev/null
echo 'UPDATE items SET v = v + 1, committed_at = clock_timestamp() WHERE id = 1;' >"$bench_tmp/storm.sql"
t=$EPOCHREALTIME
pgbench -n -d "$db" -f "$bench_tmp/storm.sql" -t "$storm" -c 1 >"$bench_tmp/storm.log" 2>&1 || { cat "$bench_tmp/storm.log" >&2; exit 1; }
settle
elapsed=$(echo "$EPOCHREALTIME - $t" | bc -l)
psql -d "$db" -At -F ' ' -c "
  SELECT coalesce(sum(s.calls) FILTER (WHERE s.query LIKE '%jsonb_build_object%'), 0),
         coalesce(sum(s.calls), 0)
    FROM pg_stat_statements s JOIN pg_roles r ON r.oid = s.userid
   WHERE s.dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
     AND r.rolname IN ('$repl', '$reader')" | {
  read -r doc_queries all_queries
  printf 'doc queries %d, all worker statements %d for %d changes in %.1fs: %.4f doc queries per change, %.4f statements per change\n' \
    "$doc_queries" "$all_queries" "$storm" "$elapsed" "$(echo "$doc_queries / $storm" | bc -l)" "$(echo "$all_queries / $storm" | bc -l)"
}
kill -TERM "$wpid"
wait "$wpid" || { echo "the worker failed:" >&2; cat "$bench_tmp/worker.log" >&2; exit 1; }
