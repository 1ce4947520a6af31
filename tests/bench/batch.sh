#!/usr/bin/env bash
# Batched recomputes: the worker with --batch 1 (one doc per statement) against --batch N (N docs of
# one query computed by one statement), side by side in one run on the same data, on a shop's order
# doc (an order, its customer and its items with their products' prices):
#   1. a full recompute of every live doc at start (10 000 and 100 000 docs by default): docs/s, the
#      CPU of the database backends serving the worker's pool and of the worker;
#   2. the pool role's SQL statements per doc during it (pg_stat_statements);
#   3. one product's price change reaching 5 000 orders: commit -> the last of their docs published;
#   4. UPDATE of the 1 000 products of one category, reaching 20 000 orders: commit -> last doc;
#   5. commit-to-publish p50/p99 under a steady 1 000 txn/s over 10 000 live docs, with no load added
#      and while a parallel build loads the machine.
#
#   tests/bench/batch.sh [live docs of the full recompute ... (default 10000 100000)]
#   DOCSYNC_WORKER=path/to/docsync-worker   (default build/rel/docsync-worker, a Release build)
#   DOCSYNC_BENCH_BATCH=N                   the batched setting (default: the worker's --batch default)
#   DOCSYNC_BENCH_ORDERS=N                  orders in the shop (default 100000, or the largest
#                                           argument when larger); figures 3 and 4 reach N/20 and N/5
#   DOCSYNC_BENCH_SECONDS=N, DOCSYNC_BENCH_RATE=N   figure 5's load: 30 s at 1 000 txn/s by default
#   DOCSYNC_BENCH_SINK=file|redis           the sink that retains figures 1-2's docs (default file)
#   DOCSYNC_BENCH_CHANGES=0                 figures 1-2 only (to compare sinks, say)
#   DOCSYNC_BENCH_RECOMPUTE=0               figures 3-5 only
#   DOCSYNC_BENCH_LOAD=build|spin|none      what loads the machine for figure 5's second run: a fresh
#                                           Release build of this tree with -j2 (default), two busy
#                                           loops, or nothing
# Starts a throwaway cluster (packaging/dev-cluster.sh) unless the environment names one
# (dir=$(packaging/dev-cluster.sh start); . "$dir/cluster.env"), whose status directory the worker
# must share (docsync.status gives the recompute's progress). Prints a Markdown table. Takes about
# 8 minutes with the defaults on 2 cores, most of it the --batch 1 runs. When the worker has no
# --batch flag, both runs compute one doc per statement, and the table says so.
#
# Method. Shop: 10 000 customers, 10 000 products (category = id % 10), N orders of 3 items each;
# product 1 is in every order with id % 20 = 1, the products of category 3 in every order with
# id % 5 = 0 (20 orders each), the other items are spread over the other products. Doc query 'order'
# (json_build_object of the order, its customer, its items and their total), watched directly through
# orders.id and order_items.order_id and by reverse index from customers (keys: the customer's
# orders) and products (keys: the orders holding the product).
#   Figures 1-2: a JSONL file sink retains its docs, so at start the worker recomputes every doc the
# file holds (docsync.status: its recompute at start, 'startup', or 'sink reset' when the copied file is older than the last run's). The file is written beforehand with one envelope
# per order 1..D, copied afresh for each run, and the worker started on it with --live all (with
# DOCSYNC_BENCH_SINK=redis, a private Redis holds the same envelopes at db:order:N, set afresh for
# each run, and the worker walks them at start); the rate is D over recompute_started_at ..
# recompute_finished_at of docsync.status. The database CPU is utime + stime of the pool role's
# backends (/proc/PID/stat), which connect when the worker starts, read once the recompute is done,
# over the same interval (cores busy = CPU seconds / wall seconds); the worker's CPU is its whole
# process's, start-up included. pg_stat_statements is reset before the worker starts, and the pool
# role's calls are summed once the recompute is done (the worker's start-up checks included, a few
# dozen statements).
#   Figures 3-5: the worker writes JSONL to a pipe (--sink stdout, --live all: every affected doc is
# computed and published, live before or not); a reader stamps each line on arrival with this
# machine's clock. A change's transaction selects clock_timestamp() just before its COMMIT; its
# latency is the last arrival of its docs minus that stamp (and the first arrival, for the spread).
# Figure 5 is tests/bench/latency.sh's method on the order doc: pgbench updates one order per
# transaction (revision + 1, updated_at = clock_timestamp()), the doc carries both, and a publish's
# latency is its arrival minus the updated_at it reflects; the 10 000 docs are made live first (one
# UPDATE of the 10 000 orders, timed as well).
# Not a timed test: figures depend on the machine, and nothing here passes or fails on them.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
recompute_docs=("$@")
[ ${#recompute_docs[@]} -gt 0 ] || recompute_docs=(10000 100000)
orders=${DOCSYNC_BENCH_ORDERS:-100000}
for d in "${recompute_docs[@]}"; do
  [[ $d =~ ^[1-9][0-9]*$ ]] || { echo "usage: $0 [live docs ...] (whole numbers)" >&2; exit 2; }
  [ "$d" -le "$orders" ] || orders=$d
done
seconds=${DOCSYNC_BENCH_SECONDS:-30}
rate=${DOCSYNC_BENCH_RATE:-1000}
load=${DOCSYNC_BENCH_LOAD:-build}
retain=${DOCSYNC_BENCH_SINK:-file}
case "$retain" in file | redis) ;; *) echo "DOCSYNC_BENCH_SINK=$retain: use file or redis" >&2; exit 2 ;; esac
latency_docs=10000
[ "$latency_docs" -le "$orders" ] || latency_docs=$orders

cluster=
if [ -z "${PGHOST:-}" ]; then
  cluster=$("$here/../../packaging/dev-cluster.sh" start)
  # shellcheck disable=SC1091
  . "$cluster/cluster.env"
fi
# shellcheck source=tests/bench/common.sh
. "$here/common.sh"
load_pid=
stop_load() {
  if [ -n "$load_pid" ]; then
    kill -TERM -- "-$load_pid" 2>/dev/null || true
    wait "$load_pid" 2>/dev/null || true
    load_pid=
  fi
}
cleanup() {
  stop_load
  bench_cleanup
  if [ -n "$cluster" ]; then "$top/packaging/dev-cluster.sh" stop "$cluster" >/dev/null 2>&1 || true; fi
}
trap cleanup EXIT
status_dir=${DOCSYNC_STATUS_DIR:-$bench_tmp}
slot=bench_batch_$$
results=$bench_tmp/results
: >"$results"
# result FIGURE SETTING VALUE: one cell of the table.
result() { printf '%s\t%s\t%s\n' "$1" "$2" "$3" >>"$results"; }

if bench_worker_has_flag --batch; then
  # The worker's default, from its --help ("[128]" ends the flag's description).
  help=$("$worker" --help 2>&1) || true
  batch=${DOCSYNC_BENCH_BATCH:-$(awk '/^ *--batch /{f=1} f && /\[[0-9]+\]$/ {sub(/.*\[/, ""); sub(/\]$/, ""); print; exit}' <<<"$help")}
  settings=(1 "${batch:-128}")
  batch_flag=1
else
  settings=(1 1)
  batch_flag=0
  echo "note: $worker has no --batch flag: both runs compute one doc per statement" >&2
fi
# The worker flags of run $1 (0: batch 1, 1: batched).
worker_flags() {
  [ "$batch_flag" = 1 ] && echo "--batch ${settings[$1]}"
  return 0
}

# The tree the worker and the extension were presumably built from, as the run starts.
tree=$(git -C "$top" log -1 --format='%h %cs' 2>/dev/null || echo unknown)
dirty=$(git -C "$top" status --porcelain -- worker plugin sql 2>/dev/null | wc -l)
[ "$dirty" -eq 0 ] || tree="$tree with $dirty changed file(s) under worker/, plugin/ or sql/"

bench_setup_db
echo "== shop: $orders orders, 3 items each, 10 000 products, 10 000 customers"
psql -d "$db" <<SQL >/dev/null
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pg_stat_statements;
CREATE TABLE customers (id int PRIMARY KEY, name text NOT NULL, email text NOT NULL, city text NOT NULL);
CREATE TABLE products (id int PRIMARY KEY, category int NOT NULL, price numeric(10,2) NOT NULL, name text NOT NULL);
CREATE TABLE orders (id int PRIMARY KEY, customer_id int NOT NULL REFERENCES customers, status text NOT NULL,
                     revision int NOT NULL, created_at timestamptz NOT NULL, updated_at timestamptz NOT NULL);
CREATE TABLE order_items (id bigint PRIMARY KEY, order_id int NOT NULL REFERENCES orders,
                          product_id int NOT NULL REFERENCES products, qty int NOT NULL);
INSERT INTO customers SELECT g, 'customer ' || g, 'c' || g || '@example.com', 'city ' || g % 50
  FROM generate_series(1, 10000) g;
INSERT INTO products SELECT g, g % 10, 1 + (g * 37 % 10000) / 100.0, 'product ' || g
  FROM generate_series(1, 10000) g;
INSERT INTO orders SELECT g, 1 + g % 10000, 'paid', 0, now() - interval '1 day', now() - interval '1 day'
  FROM generate_series(1, $orders) g;
-- Item 1 of every 20th order is product 1; item 2 of every 5th order a product of category 3 (ids
-- 3, 13, ... 9993, 20 orders each); every other item a product of neither.
INSERT INTO order_items
SELECT o * 4 + k, o,
       CASE WHEN k = 1 AND o % 20 = 1 THEN 1
            WHEN k = 2 AND o % 5 = 0 THEN 3 + 10 * ((o / 5) % 1000)
            WHEN p % 10 = 3 THEN p + 1
            WHEN p = 1 THEN 2
            ELSE p END,
       1 + (o + k) % 3
  FROM generate_series(1, $orders) o, generate_series(1, 3) k, LATERAL (SELECT 1 + (o * 7 + k * 131) % 10000 AS p) x;
CREATE INDEX ON order_items (order_id);
CREATE INDEX ON order_items (product_id);
CREATE INDEX ON orders (customer_id);
CREATE INDEX ON products (category);
ALTER TABLE order_items REPLICA IDENTITY FULL;
VACUUM ANALYZE customers, products, orders, order_items;
$(bench_order_query)
SELECT docsync.watch('order', 'customers',
  keys_sql => \$\$SELECT id FROM orders WHERE customer_id = \$1\$\$, keys_args => ARRAY['id']);
SELECT docsync.watch('order', 'products',
  keys_sql => \$\$SELECT DISTINCT i.order_id FROM order_items i WHERE i.product_id = \$1\$\$, keys_args => ARRAY['id']);
SELECT docsync.grant_reader('$reader');
SQL
hot_orders=$(psql -At -d "$db" -c "SELECT count(DISTINCT order_id) FROM order_items WHERE product_id = 1")
cat3_orders=$(psql -At -d "$db" -c "SELECT count(DISTINCT i.order_id) FROM order_items i JOIN products p ON p.id = i.product_id WHERE p.category = 3")
cat3_products=$(psql -At -d "$db" -c "SELECT count(*) FROM products WHERE category = 3")

wpid=
# start_worker LOG SINK RUN: starts the worker of run RUN (0: batch 1, 1: batched) on SINK, its stdout
# where the caller redirected it; sets wpid.
start_worker() {
  local log=$1 sink=$2 run=$3
  # shellcheck disable=SC2046 # worker_flags is empty or two words
  "$worker" --dsn "$dsn_repl" --pool-dsn "$dsn_reader" --slot "$slot" --create-slot --sink "$sink" --live all \
    --status-dir "$status_dir" --log-level warning $(worker_flags "$run") 2>"$log" &
  wpid=$!
  bench_pids+=("$wpid")
}
# stop_worker LOG: stops it with SIGTERM, and shows what it logged (warnings and errors only).
stop_worker() {
  kill -TERM "$wpid"
  wait "$wpid" || { echo "the worker failed:" >&2; tail -n 20 "$1" >&2; exit 1; }
  if [ -s "$1" ]; then
    echo "the worker logged $(wc -l <"$1") warning(s) or error(s), the first ones:"
    head -n 5 "$1" | sed 's/^/  /'
  fi
}
# settle LOG: waits until the worker has acknowledged everything committed so far.
settle() {
  local target
  target=$(psql -At -d "$db" -c "SELECT pg_current_wal_lsn()")
  for _ in $(seq 1 6000); do
    kill -0 "$wpid" 2>/dev/null || { echo "the worker exited:" >&2; tail -n 20 "$1" >&2; exit 1; }
    [ "$(psql -At -d "$db" -c "SELECT coalesce(confirmed_flush_lsn >= '$target', false) FROM pg_replication_slots WHERE slot_name = '$slot'")" = t ] && return 0
    sleep 0.05
  done
  echo "the worker did not catch up in 300 s" >&2; tail -n 20 "$1" >&2; exit 1
}
# The pool role's statements (its own, and those it ran as the definers' reader roles) since
# pg_stat_statements was last reset: "all doc_calls doc_rows doc_ms
# keys_calls keys_rows keys_ms" (the doc query and the products' keys query, batched or not).
pool_statements() {
  psql -At -F ' ' -d "$db" -c "
    SELECT coalesce(sum(calls), 0),
           coalesce(sum(calls) FILTER (WHERE doc), 0), coalesce(sum(rows) FILTER (WHERE doc), 0),
           round(coalesce(sum(total_exec_time) FILTER (WHERE doc), 0)),
           coalesce(sum(calls) FILTER (WHERE keys), 0), coalesce(sum(rows) FILTER (WHERE keys), 0),
           round(coalesce(sum(total_exec_time) FILTER (WHERE keys), 0))
      FROM (SELECT s.*, s.query LIKE '%json_build_object%' AS doc, s.query LIKE '%WHERE i.product_id =%' AS keys
              FROM pg_stat_statements s JOIN pg_roles r ON r.oid = s.userid
             WHERE s.dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
               AND (r.rolname = '$reader' OR r.rolname LIKE 'docsync\\_reader\\_%')) s"
}
reset_statements() { psql -d "$db" -c "SELECT pg_stat_statements_reset()" >/dev/null; }
# pool_statements in words.
describe_statements() {
  pool_statements | awk '{
    printf "pool statements %d: %d doc queries (%d rows, %.1f each, %.2f ms each)", $1, $2, $3, $2 ? $3 / $2 : 0, $2 ? $4 / $2 : 0
    if ($5) printf ", %d keys queries of products (%d rows, %.2f ms each)", $5, $6, $7 / $5
  }'
}
pool_pids() {
  psql -At -d "$db" -c "SELECT pid FROM pg_stat_activity WHERE usename = '$reader' AND datname = current_database()"
}

# ---- figures 1 and 2: the full recompute at start -------------------------------------------------
[ "${DOCSYNC_BENCH_RECOMPUTE:-1}" = 0 ] && recompute_docs=()
[ "$retain" = redis ] && [ ${#recompute_docs[@]} -gt 0 ] && bench_start_redis
for docs in "${recompute_docs[@]}"; do
  retained=$bench_tmp/retained.jsonl
  # What a worker leaves in its sink: one envelope per doc (the start reads only channels and versions).
  awk -v n="$docs" 'BEGIN { for (i = 1; i <= n; i++) printf "{\"channel\":\"db:order:%d\",\"doc\":{\"id\":%d},\"generation\":1,\"lsn\":\"0/1\"}\n", i, i }' >"$retained"
  for run in 0 1; do
    setting=${settings[$run]}
    echo "== full recompute of $docs live docs at start, batch $setting, $retain sink"
    if [ "$retain" = redis ]; then
      redis-cli -p "$redis_port" FLUSHALL >/dev/null
      # SET db:order:N <envelope>, in the protocol redis-cli --pipe sends as it is.
      awk '{ key = "db:order:" NR; printf "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", length(key), key, length($0), $0 }' "$retained" |
        redis-cli -p "$redis_port" --pipe >/dev/null
      sink=redis://127.0.0.1:$redis_port
    else
      cp "$retained" "$bench_tmp/sink.jsonl"
      sink=file:$bench_tmp/sink.jsonl
    fi
    reset_statements
    log=$bench_tmp/worker_recompute_${docs}_$run.log
    start_worker "$log" "$sink" "$run" >/dev/null
    row=
    for _ in $(seq 1 6000); do
      kill -0 "$wpid" 2>/dev/null || { echo "the worker exited:" >&2; tail -n 20 "$log" >&2; exit 1; }
      row=$(psql -At -F ' ' -d "$db" -c "
        SELECT recompute_total, extract(epoch FROM recompute_finished_at - recompute_started_at), recomputes, publishes
          FROM docsync.status
         WHERE slot_name = '$slot' AND worker_pid = $wpid AND recompute IS NOT NULL AND recompute_finished_at IS NOT NULL")
      [ -n "$row" ] && break
      sleep 0.2
    done
    [ -n "$row" ] || { echo "no finished startup recompute in docsync.status after 20 min (is $status_dir the server's docsync.status_dir?)" >&2; exit 1; }
    read -r total wall computes published <<<"$row"
    # shellcheck disable=SC2046 # one pid per word
    db_cpu=$(bench_cpu_seconds $(pool_pids))
    worker_cpu=$(bench_cpu_seconds "$wpid")
    read -r statements _ < <(pool_statements)
    stats=$(describe_statements)
    stop_worker "$log"
    if [ "$total" -ne "$docs" ] || [ "$published" -lt "$docs" ]; then
      echo "expected $docs docs recomputed and published, got $total recomputed, $published published" >&2
      exit 1
    fi
    python3 - "$docs" "$wall" "$db_cpu" "$worker_cpu" "$statements" "$computes" "$stats" <<'PY' | tee -a "$bench_tmp/lines"
import sys
docs, wall, db_cpu, worker_cpu = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
statements, computes, stats = int(sys.argv[5]), int(sys.argv[6]), sys.argv[7]
print(f"{docs} docs in {wall:.2f} s: {docs / wall:.0f} docs/s; pool backends {db_cpu:.2f} s CPU "
      f"({db_cpu / wall:.2f} cores), worker {worker_cpu:.2f} s CPU ({worker_cpu / wall:.2f} cores); "
      f"{statements / docs:.4f} pool statements per doc; {stats}; docsync.status recomputes {computes}")
PY
    # Nothing changes the shop while it runs: a doc computed twice is work the rate pays for.
    [ "$computes" -le "$docs" ] ||
      echo "note: $((computes - docs)) computes more than the $docs live docs (docsync.status recomputes $computes)" |
        tee -a "$bench_tmp/lines"
    result "recompute_rate_$docs" "$run" "$(echo "$docs / $wall" | bc -l)"
    result "recompute_wall_$docs" "$run" "$wall"
    result "recompute_dbcpu_$docs" "$run" "$db_cpu"
    result "recompute_workercpu_$docs" "$run" "$worker_cpu"
    result "recompute_statements_$docs" "$run" "$(echo "$statements / $docs" | bc -l)"
  done
done

# ---- figures 3, 4 and 5: changes that reach many docs, and latency under load --------------------
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
# event ARRIVALS OFFSET STAMP EXPECTED: the docs that arrived after byte OFFSET, measured from the
# commit stamp; prints "last_s first_s docs".
event() {
  python3 - "$@" <<'PY'
import json, sys
path, offset, stamp, expected = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
with open(path) as f:
    f.seek(offset)
    arrivals = [(float(at), json.loads(line)["channel"]) for at, line in (row.split(" ", 1) for row in f)]
docs = len({c for _, c in arrivals})
if docs < expected:
    sys.exit(f"expected {expected} docs after the commit, {docs} arrived")
print(f"{max(a for a, _ in arrivals) - stamp:.3f} {min(a for a, _ in arrivals) - stamp:.3f} {docs}")
PY
}
# commit_stamped SQL: runs SQL in a transaction that selects clock_timestamp() just before COMMIT;
# prints that stamp.
commit_stamped() {
  psql -At -d "$db" -c "BEGIN" -c "$1" -c "SELECT extract(epoch FROM clock_timestamp())" -c "COMMIT" | tail -n 1
}
start_load() {
  case "$load" in
    build)
      rm -rf "$bench_tmp/loadbuild"
      setsid bash -c "cmake -S '$top' -B '$bench_tmp/loadbuild' -DCMAKE_BUILD_TYPE=Release -DDOCSYNC_TESTS=OFF && cmake --build '$bench_tmp/loadbuild' -j2" \
        >"$bench_tmp/loadbuild.log" 2>&1 &
      load_pid=$!
      sleep 10  # past the configure step, into the compiles
      ;;
    spin)
      setsid bash -c 'for _ in 1 2; do (while :; do :; done) & done; wait' &
      load_pid=$!
      sleep 2
      ;;
    none) ;;
    *) echo "DOCSYNC_BENCH_LOAD=$load: use build, spin or none" >&2; exit 2 ;;
  esac
}
cat >"$bench_tmp/load.sql" <<SQL
\set id random(1, $latency_docs)
UPDATE orders SET revision = revision + 1, updated_at = clock_timestamp() WHERE id = :id;
SQL
# steady LABEL: figure 5's load, then its latencies: prints a line and writes "p50_ms p99_ms" to
# $bench_tmp/steady.
steady() {
  local start commits lag pids db_cpu worker_cpu cpu
  reset_statements
  pids=$(pool_pids)
  # shellcheck disable=SC2086 # one pid per word
  db_cpu=$(bench_cpu_seconds $pids)
  worker_cpu=$(bench_cpu_seconds "$wpid")
  start=$EPOCHREALTIME
  pgbench -n -d "$db" -f "$bench_tmp/load.sql" -R "$rate" -T "$seconds" -c 4 -j 2 >"$bench_tmp/pgbench.log" 2>&1 ||
    { cat "$bench_tmp/pgbench.log" >&2; exit 1; }
  settle "$log"
  # shellcheck disable=SC2086
  cpu=$(awk -v d="$(bench_cpu_seconds $pids)" -v d0="$db_cpu" -v w="$(bench_cpu_seconds "$wpid")" -v w0="$worker_cpu" \
    -v s="$seconds" 'BEGIN { printf "%.2f %.2f", (d - d0) / s, (w - w0) / s }')
  sleep 0.5
  commits=$(awk '/number of transactions actually processed/ {print $NF}' "$bench_tmp/pgbench.log" | cut -d/ -f1)
  lag=$(sed -n 's/.*schedule lag: //p' "$bench_tmp/pgbench.log")
  python3 - "$arrivals" "$bench_tmp/steady" "$start" "$commits" "$1" "$lag" "$(cut -d' ' -f1-3 /proc/loadavg)" "$(describe_statements)" "$cpu" <<'PY'
import json, sys
path, out, start, commits, label, lag, loadavg, stats, cpu = sys.argv[1:10]
db_cores, worker_cores = cpu.split()
start, commits = float(start), int(commits)
last, lat, coalesced, windows = {}, [], 0, {}
with open(path) as f:
    for row in f:
        at, line = row.split(" ", 1)
        doc = json.loads(line)["doc"]
        prev = last.get(doc["id"])
        last[doc["id"]] = doc["revision"]
        if doc["updated_at"] < start:
            continue
        lat.append((float(at) - doc["updated_at"]) * 1000)
        windows.setdefault(int((doc["updated_at"] - start) / 5), []).append(lat[-1])
        if prev is not None and doc["revision"] - prev > 1:
            coalesced += doc["revision"] - prev - 1
def q(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(p * len(values)))]
lat.sort()
profile = " ".join(f"{q(windows[w], 0.99):.0f}" for w in sorted(windows))
print(f"{label}: {commits} commits, {len(lat)} publishes ({coalesced} commits coalesced into a later publish); "
      f"commit-to-publish ms p50 {q(lat, 0.5):.2f} p90 {q(lat, 0.9):.2f} p99 {q(lat, 0.99):.2f} max {lat[-1]:.2f}; "
      f"p99 ms of each 5 s of commits: {profile}; pgbench schedule lag {lag}; load average {loadavg}; "
      f"cores busy: pool backends {db_cores}, worker {worker_cores}; {stats}")
open(out, "w").write(f"{q(lat, 0.5):.3f} {q(lat, 0.99):.3f}\n")
PY
}

change_runs=(0 1)
[ "${DOCSYNC_BENCH_CHANGES:-1}" = 0 ] && change_runs=()
for run in "${change_runs[@]}"; do
  setting=${settings[$run]}
  echo "== changes through the stdout sink, batch $setting"
  log=$bench_tmp/worker_changes_$run.log
  arrivals=$bench_tmp/arrivals_$run
  : >"$arrivals"  # the reader creates it only once the worker opens the pipe
  rm -f "$bench_tmp/docs"
  mkfifo "$bench_tmp/docs"
  python3 "$bench_tmp/reader.py" "$arrivals" <"$bench_tmp/docs" &
  bench_pids+=("$!")
  start_worker "$log" stdout "$run" >"$bench_tmp/docs"
  settle "$log"

  offset=$(stat -c %s "$arrivals")
  reset_statements
  stamp=$(commit_stamped "UPDATE orders SET revision = revision + 1, updated_at = clock_timestamp() WHERE id <= $latency_docs")
  settle "$log"; sleep 0.5
  out=$(event "$arrivals" "$offset" "$stamp" "$latency_docs")
  read -r last first n <<<"$out"
  echo "one transaction updating $latency_docs orders (making them live): first doc after ${first} s, last after ${last} s ($n docs); $(describe_statements)" | tee -a "$bench_tmp/lines"
  result "live_$latency_docs" "$run" "$last"

  lasts=()
  for rep in 1 2 3; do
    offset=$(stat -c %s "$arrivals")
    reset_statements
    stamp=$(commit_stamped "UPDATE products SET price = price + 0.01 WHERE id = 1")
    settle "$log"; sleep 0.5
    out=$(event "$arrivals" "$offset" "$stamp" "$hot_orders")
    read -r last first n <<<"$out"
    echo "product 1's price ($rep of 3): first of its $n orders' docs after ${first} s, last after ${last} s; $(describe_statements)" | tee -a "$bench_tmp/lines"
    lasts+=("$last")
  done
  result hot_product "$run" "$(printf '%s\n' "${lasts[@]}" | sort -n | sed -n 2p)"

  offset=$(stat -c %s "$arrivals")
  reset_statements
  stamp=$(commit_stamped "UPDATE products SET price = price * 1.01 WHERE category = 3")
  settle "$log"; sleep 0.5
  out=$(event "$arrivals" "$offset" "$stamp" "$cat3_orders")
  read -r last first n <<<"$out"
  echo "the $cat3_products products of category 3: first of their $n orders' docs after ${first} s, last after ${last} s; $(describe_statements)" | tee -a "$bench_tmp/lines"
  result category "$run" "$last"

  steady "$rate txn/s over $latency_docs live docs, no load added" | tee -a "$bench_tmp/lines"
  read -r p50 p99 <"$bench_tmp/steady"
  result steady_p50 "$run" "$p50"
  result steady_p99 "$run" "$p99"
  if [ "$load" != none ]; then
    start_load
    steady "$rate txn/s over $latency_docs live docs, loaded by $load" | tee -a "$bench_tmp/lines"
    read -r p50 p99 <"$bench_tmp/steady"
    stop_load
    result loaded_p99 "$run" "$p99"
  fi
  stop_worker "$log"
done

# ---- the table --------------------------------------------------------------------------------------
echo
echo "worker $worker ($("$worker" --version 2>&1), built $(date -r "$worker" '+%F %T')), tree at start $tree; $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
[ "$batch_flag" = 1 ] || echo "the worker has no --batch flag: the 'batched' column is one doc per statement as well"
python3 - "$results" "${settings[1]}" "$batch_flag" "$hot_orders" "$cat3_products" "$cat3_orders" "$rate" "$latency_docs" "$load" "$retain" "${recompute_docs[@]}" <<'PY'
import sys
path, batch, flag, hot, cat3p, cat3o, rate, live, load, retain = sys.argv[1:11]
recompute_docs = sys.argv[11:]
cells = {}
for row in open(path):
    key, run, value = row.rstrip("\n").split("\t")
    cells.setdefault(key, {})[run] = float(value)
def n(x): return f"{x:,.0f}".replace(",", " ")
rows = []
# A row: label, the cell of each run (fmt(value, run)), and the gain of the batched run on the value
# scale(value, run) (higher is better, or lower).
def add(label, key, fmt, target, better="higher", scale=lambda x, run: x):
    if key not in cells: return
    a, b = cells[key].get("0"), cells[key].get("1")
    if a is None or b is None: return
    sa, sb = scale(a, "0"), scale(b, "1")
    ratio = (sb / sa if better == "higher" else sa / sb) if sa and sb else float("nan")
    rows.append((label, fmt(a, "0"), fmt(b, "1"), f"{ratio:.2f}×", target))
for d in recompute_docs:
    wall = cells[f"recompute_wall_{d}"]
    per_doc = lambda x, run, d=d: x / int(d) * 1e6
    cpu = lambda x, run, d=d, wall=wall: f"{x / wall[run]:.2f} ({n(x / int(d) * 1e6)} µs/doc)"
    add(f"full recompute at start, {n(int(d))} live docs ({retain} sink): docs/s", f"recompute_rate_{d}",
        lambda x, run: n(x), "≥ 10×")
    add("… pool backends' CPU: cores busy (per doc)", f"recompute_dbcpu_{d}", cpu, "—", "lower", per_doc)
    add("… worker's CPU, start-up included: cores busy (per doc)", f"recompute_workercpu_{d}", cpu, "—", "lower", per_doc)
    add("… pool statements per doc", f"recompute_statements_{d}", lambda x, run: f"{x:.4f}", "≤ 0.05", "lower")
s = lambda x, run: f"{x:.3f} s"
ms = lambda x, run: f"{x:.2f} ms"
add(f"one UPDATE of {n(int(live))} orders → last doc", f"live_{live}", s, "—", "lower")
add(f"product 1's price → last of its {n(int(hot))} orders' docs (median of 3)", "hot_product", s, "≤ 0.5 s", "lower")
add(f"UPDATE of category 3 ({n(int(cat3p))} products) → last of {n(int(cat3o))} docs", "category", s, "≤ 2 s", "lower")
add(f"{n(int(rate))} txn/s over {n(int(live))} live docs: p50", "steady_p50", ms, "< 3 ms", "lower")
add(f"… p99", "steady_p99", ms, "< 20 ms", "lower")
loaded_by = {"build": "a parallel Release build (-j2)", "spin": "two busy loops"}.get(load, load)
add(f"… p99 with {loaded_by} running", "loaded_p99", ms, "< 50 ms", "lower")
head = f"batch {batch}" if flag == "1" else "batch 1 (no --batch flag)"
print()
print(f"| figure | batch 1 | {head} | gain | target |")
print("| --- | ---: | ---: | ---: | --- |")
for r in rows:
    print("| " + " | ".join(r) + " |")
print("\ngain: batched over batch 1 (docs/s), or batch 1 over batched (times, CPU per doc, statements).")
PY
