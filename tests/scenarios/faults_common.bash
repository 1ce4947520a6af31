# Shared by the fault tests (faults_*.sh): a private cluster, a shop schema with direct and
# reverse-index watches, the real worker with debug logging and the JSONL file sink or, with
# DOCSYNC_FAULT_SINK=redis, the Redis sink on a private redis-server (lib/redis_server.bash), a
# seeded randomized workload, the drain wait, the convergence check of what the sink holds against
# fresh runs of the doc query, and the acknowledgement-safety check over every worker log. Every
# worker runs the continuous audit at a high rate (DOCSYNC_FAULT_AUDIT_RATE, default 3000%: each live
# doc sampled about every 2 s), and the acknowledgement check also requires that no run reported a
# divergence: through every fault, what the sink retains never disagreed with a fresh compute once
# the acknowledged position covered it.
# Source it; it sets a trap that stops everything it started.

top=${DOCSYNC_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
worker=${DOCSYNC_WORKER:-${DOCSYNC_BUILD_DIR:-$top/build/dev}/docsync-worker}
[ -x "$worker" ] || { echo "FAIL: no worker at $worker (set DOCSYNC_WORKER)" >&2; exit 1; }
seed=${DOCSYNC_FAULT_SEED:-$(( $(date +%s%N) % 1000000 ))}
RANDOM=$seed
echo "seed $seed (rerun with DOCSYNC_FAULT_SEED=$seed)"
keys=20        # order ids 1..keys: every key any change can touch
slot=faults_$$
db=faults_$$
own_cluster=
tmp=$(mktemp -d)
docs=$tmp/docs.jsonl
fault_sink=${DOCSYNC_FAULT_SINK:-file}   # file: JSONL file $docs; redis: a private redis-server;
                                         # redis-cluster: a private Redis Cluster (lib/redis_cluster.bash)
audit_rate=${DOCSYNC_FAULT_AUDIT_RATE:-3000%}  # --audit-rate of every worker; 0 turns the audit off
run=0
worker_pid=
load_pid=
cluster=

fail() {
  echo "FAIL: $* (seed $seed)" >&2
  for f in "$tmp"/worker.*.log; do [ -f "$f" ] && { echo "--- tail of $f" >&2; grep -v ' DEBUG ' "$f" | tail -n 15 >&2; }; done
  exit 1
}
cleanup() {
  [ -n "$worker_pid" ] && kill -9 "$worker_pid" 2>/dev/null
  [ -n "$load_pid" ] && kill -9 "$load_pid" 2>/dev/null
  local job
  for job in $(jobs -p); do kill -9 "$job" 2>/dev/null; done
  [ "$fault_sink" = redis ] && stop_redis
  [ "$fault_sink" = redis-cluster ] && stop_redis_cluster
  wait 2>/dev/null
  if [ -n "$own_cluster" ]; then
    "$top/packaging/dev-cluster.sh" stop "$cluster" >/dev/null 2>&1
  elif [ -n "$cluster" ]; then
    psql -X -q -d "$db" -c "SELECT pg_drop_replication_slot('$slot') FROM pg_replication_slots WHERE slot_name = '$slot'" >/dev/null 2>&1
    psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1
    rm -f "$DOCSYNC_STATUS_DIR/$db.$slot".*
  fi
  if [ -n "${DOCSYNC_FAULT_KEEP:-}" ]; then echo "kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT
case $fault_sink in
  file) ;;
  redis)
    # shellcheck source=lib/redis_server.bash
    . "$(dirname "${BASH_SOURCE[0]}")/lib/redis_server.bash" ;;
  redis-cluster)
    # shellcheck source=lib/redis_cluster.bash
    . "$(dirname "${BASH_SOURCE[0]}")/lib/redis_cluster.bash" ;;
  *) fail "DOCSYNC_FAULT_SINK=$fault_sink: expected file, redis or redis-cluster" ;;
esac
echo "sink $fault_sink"

sql() { psql -X -q -At -v ON_ERROR_STOP=1 -d "$db" -c "$1"; }

# The doc: one order with its items and their product prices. The same text defines the docsync
# query and the expected_doc() function the convergence check compares with.
doc_sql='SELECT jsonb_build_object(
    '"'"'id'"'"', o.id, '"'"'status'"'"', o.status,
    '"'"'items'"'"', (SELECT coalesce(jsonb_agg(jsonb_build_object('"'"'id'"'"', i.id, '"'"'qty'"'"', i.qty,
                     '"'"'price'"'"', p.price) ORDER BY i.id), '"'"'[]'"'"')
               FROM order_items i JOIN products p ON p.id = i.product_id WHERE i.order_id = o.id))
  FROM orders o WHERE o.id = $1'

# start_cluster [own]: a database in the cluster of the calling environment (cluster.env sourced, as
# ctest runs), or with `own` or no such environment a private cluster (needed to restart the server).
# With the Redis sink it also starts redis-server.
start_cluster() {
  if [ "${1:-}" = own ] || [ -z "${DOCSYNC_CLUSTER_DIR:-}" ]; then
    own_cluster=1
    cluster=$("$top/packaging/dev-cluster.sh" start) || fail "could not start a cluster"
    # shellcheck disable=SC1091
    . "$cluster/cluster.env"
  else
    cluster=$DOCSYNC_CLUSTER_DIR
  fi
  export PGHOST PGPORT PGUSER
  createdb "$db" || fail "could not create database $db"
  psql -X -q -v ON_ERROR_STOP=1 -d "$db" >/dev/null <<SQL || fail "could not set up the schema"
CREATE EXTENSION docsync;
CREATE TABLE products (id int PRIMARY KEY, price numeric(10,2) NOT NULL);
CREATE TABLE orders (id int PRIMARY KEY, status text NOT NULL DEFAULT 'open');
CREATE TABLE order_items (id int PRIMARY KEY, order_id int NOT NULL REFERENCES orders,
                          product_id int NOT NULL REFERENCES products, qty int NOT NULL);
ALTER TABLE order_items REPLICA IDENTITY FULL;
CREATE TABLE noise (id bigserial PRIMARY KEY, pad text);  -- unwatched traffic
SELECT docsync.define_query('order', \$q\$$doc_sql\$q\$, params => ARRAY['order_id']);
SELECT docsync.watch('order', 'orders', params => ARRAY['id']);
SELECT docsync.watch('order', 'order_items', params => ARRAY['order_id']);
SELECT docsync.watch('order', 'products',
  keys_sql => \$k\$SELECT DISTINCT order_id FROM order_items WHERE product_id = \$1\$k\$, keys_args => ARRAY['id']);
CREATE FUNCTION expected_doc(int) RETURNS jsonb LANGUAGE sql STABLE AS \$q\$$doc_sql\$q\$;
SELECT 'CREATE ROLE docsync_repl LOGIN REPLICATION'
 WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'docsync_repl') \gexec
SELECT 'CREATE ROLE docsync_reader LOGIN' WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'docsync_reader') \gexec
SELECT docsync.grant_replication('docsync_repl') \g /dev/null
SELECT docsync.grant_reader('docsync_reader') \g /dev/null
INSERT INTO products SELECT g, g * 1.25 FROM generate_series(1, 5) g;
INSERT INTO orders SELECT g FROM generate_series(1, 10) g;
INSERT INTO order_items SELECT g, 1 + g % 10, 1 + g % 5, 1 FROM generate_series(1, 20) g;
SQL
  [ "$fault_sink" = redis ] && start_redis
  [ "$fault_sink" = redis-cluster ] && start_redis_cluster
  return 0
}
sink_url() {
  case $fault_sink in
    file) echo "file:$docs" ;;
    redis) echo "redis://127.0.0.1:$redis_port" ;;
    redis-cluster) redis_cluster_url ;;
  esac
}

# start_worker [extra flags...]: a new run of the real worker, its own debug log.
start_worker() {
  run=$((run + 1))
  "$worker" --dsn "host=$PGHOST port=$PGPORT dbname=$db user=docsync_repl" \
    --pool-dsn "host=$PGHOST port=$PGPORT dbname=$db user=docsync_reader" \
    --slot "$slot" --create-slot --sink "$(sink_url)" --status-dir "$DOCSYNC_STATUS_DIR" \
    --status-interval 200ms --log-level debug --audit-rate "$audit_rate" "$@" >"$tmp/worker.$run.log" 2>&1 &
  worker_pid=$!
}
# publish_all: publishes every existing order once and waits for it. With --live all only docs the
# sink holds are live, and a TRUNCATE (which names no rows) reaches only live docs: an order whose
# first change is a TRUNCATE would otherwise never be published, and the convergence check expects
# every existing order to be.
publish_all() {
  local deadline=$((SECONDS + 30))
  # Changes made before the worker has created its slot would never be decoded.
  until [ "$(sql "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '$slot' AND active")" = 1 ]; do
    [ $SECONDS -lt $deadline ] || fail "the worker did not stream slot $slot within 30 s"
    worker_alive
    sleep 0.1
  done
  sql "UPDATE orders SET status = status"
  drain 30
}
kill_worker() {
  kill -9 "$worker_pid" 2>/dev/null || true
  wait "$worker_pid" 2>/dev/null || true
  worker_pid=
}
worker_alive() { kill -0 "$worker_pid" 2>/dev/null || fail "the worker exited unexpectedly (run $run)"; }

# One random transaction of the workload, as SQL text. Every statement is guarded so it cannot fail:
# a failing transaction would be a rollback, not the change we mean to test.
next_item=1000
random_txn() {
  local o=$((1 + RANDOM % keys)) o2=$((1 + RANDOM % keys)) p=$((1 + RANDOM % 5)) i=$((1 + RANDOM % 40))
  next_item=$((next_item + 1))
  local ins_item="INSERT INTO order_items SELECT $next_item, $o, $p, $((1 + RANDOM % 9)) WHERE EXISTS (SELECT FROM orders WHERE id = $o);"
  local move="UPDATE order_items SET order_id = $o2 WHERE id IN (SELECT id FROM order_items ORDER BY id OFFSET $((RANDOM % 20)) LIMIT 1) AND EXISTS (SELECT FROM orders WHERE id = $o2);"
  case $((RANDOM % 20)) in
    0|1) echo "INSERT INTO orders VALUES ($o) ON CONFLICT DO NOTHING;" ;;
    2|3) echo "$ins_item" ;;
    4|5|6) echo "$move" ;;
    7) echo "UPDATE products SET price = price + 0.01 WHERE id = $p;" ;;   # reverse index
    8) echo "BEGIN; DELETE FROM order_items WHERE order_id = $o; DELETE FROM orders WHERE id = $o; COMMIT;" ;;
    9) echo "DELETE FROM order_items WHERE id = $i;" ;;
    10) echo "UPDATE order_items SET qty = qty + 1 WHERE order_id = $o;" ;;
    11) # multi-statement transaction with a rolled-back subtransaction in the middle
      echo "BEGIN; INSERT INTO orders VALUES ($o) ON CONFLICT DO NOTHING; $ins_item SAVEPOINT s;" \
           "$move UPDATE orders SET status = 'rolled back' WHERE id = $o2; ROLLBACK TO SAVEPOINT s;" \
           "UPDATE orders SET status = 'multi $RANDOM' WHERE id = $o; COMMIT;" ;;
    12) # a subtransaction that commits, then one that rolls back
      echo "BEGIN; SAVEPOINT a; $move RELEASE SAVEPOINT a; SAVEPOINT b; DELETE FROM order_items WHERE order_id = $o;" \
           "ROLLBACK TO SAVEPOINT b; COMMIT;" ;;
    13) [ $((RANDOM % 8)) -eq 0 ] && echo "TRUNCATE order_items;" || echo "$move" ;;
    14) echo "INSERT INTO noise (pad) SELECT repeat('x', 200) FROM generate_series(1, 20);" ;;
    *) echo "UPDATE orders SET status = 'hot $RANDOM' WHERE id = 1;" ;;   # the hot row
  esac
}

# write_workload N FILE: N random transactions.
write_workload() {
  local n=$1 f=$2
  : >"$f"
  local k
  for k in $(seq 1 "$n"); do
    random_txn >>"$f"
    # Paced, so a crash or a server restart lands in the middle of the stream, not after it.
    [ $((k % 10)) -eq 0 ] && echo "SELECT pg_sleep(0.03);" >>"$f"
  done
}

# run_workload FILE: in the background, one psql applying it (errors never stop it: a statement
# killed by a server restart just goes on with the next one).
run_workload() {
  psql -X -q -d "$db" -f "$1" >"$tmp/workload.out" 2>&1 &
  load_pid=$!
}
workload_running() { [ -n "$load_pid" ] && kill -0 "$load_pid" 2>/dev/null; }
wait_workload() {
  local deadline=$((SECONDS + ${1:-120}))
  while workload_running; do
    [ $SECONDS -lt $deadline ] || fail "the workload did not finish in time"
    sleep 0.2
  done
  wait "$load_pid" 2>/dev/null || true
  load_pid=
}

# block_docs: a session holds an ACCESS EXCLUSIVE lock on products, which every doc query reads (as a
# migration or VACUUM FULL would), so every compute waits for it until unblock_docs or its statement
# timeout. Writes that do not touch products (or check a foreign key to it) go on.
lock_pid=
block_docs() {
  psql -X -q -d "$db" -c "SET application_name = 'faults_lock'" \
    -c "BEGIN; LOCK products IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(120)" >/dev/null 2>&1 &
  lock_pid=$!
  for _ in $(seq 1 50); do
    [ "$(sql "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'faults_lock' AND wait_event = 'PgSleep'")" = 1 ] && return 0
    sleep 0.1
  done
  fail "the lock holder did not start"
}
unblock_docs() {
  sql "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'faults_lock'" >/dev/null
  wait "$lock_pid" 2>/dev/null
  lock_pid=
}

# sleep_random MIN_MS MAX_MS
sleep_random() { local ms=$(($1 + RANDOM % ($2 - $1 + 1))); sleep "$(printf '%d.%03d' $((ms / 1000)) $((ms % 1000)))"; }

# drain SECONDS: waits until the slot has confirmed everything written so far.
drain() {
  local target deadline=$((SECONDS + $1)) ok=
  target=$(sql "SELECT pg_current_wal_lsn()")
  while [ $SECONDS -lt $deadline ]; do
    ok=$(sql "SELECT coalesce(bool_or(confirmed_flush_lsn >= '$target'), false) FROM pg_replication_slots WHERE slot_name = '$slot'")
    [ "$ok" = t ] && return 0
    worker_alive
    sleep 0.2
  done
  fail "the worker did not drain to $target in $1 s (slot: $(sql "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = '$slot'"))"
}

# sink_docs FILE: what the sink holds as JSONL envelopes, in publish order: the JSONL file itself, or
# for Redis every retained db:* value (a doc or a tombstone, one per channel).
sink_docs() {
  case $fault_sink in
    file) cp "$docs" "$1" ;;
    redis)
      : >"$1"
      local keys
      keys=$(rc --raw --scan --pattern 'db:*') || fail "SCAN of the retained docs failed"
      [ -z "$keys" ] && return 0
      # shellcheck disable=SC2086 # channels have no blanks (db:order:N)
      rc --raw MGET $keys | grep -v '^$' >"$1"
      [ "$(wc -l <"$1")" -eq "$(echo "$keys" | wc -l)" ] || fail "Redis lost retained docs between SCAN and MGET"
      ;;
    redis-cluster) cluster_docs "$1" ;;
  esac
}

# compare_docs: writes to $tmp/mismatch.txt every key whose current doc in the sink (the last JSONL
# line of its channel, or the value Redis retains) differs from a fresh run of the doc query, and
# every channel the workload never used; true when there is none. A null doc (a JSONL line with
# "doc":null, a Redis tombstone) stands for a gone order; a key never published must be one too.
compare_docs() {
  sink_docs "$tmp/held.jsonl"
  psql -X -q -At -v ON_ERROR_STOP=1 -d "$db" >"$tmp/mismatch.txt" <<SQL || fail "the convergence check could not run"
CREATE TEMP TABLE published (n bigserial, line text);
\copy published (line) FROM '$tmp/held.jsonl' WITH (FORMAT csv, QUOTE e'\x01', DELIMITER e'\x02')
CREATE TEMP TABLE last_doc AS
  SELECT DISTINCT ON (line::jsonb->>'channel') line::jsonb->>'channel' AS channel,
         nullif(line::jsonb->'doc', 'null'::jsonb) AS doc
    FROM published ORDER BY line::jsonb->>'channel', n DESC;
SELECT format('%s: expected %s, %s %s', c, coalesce(e::text, 'null'),
              CASE WHEN '$fault_sink' LIKE 'redis%' THEN 'Redis retains' ELSE 'published' END,
              CASE WHEN l.channel IS NULL THEN 'nothing' ELSE coalesce(l.doc::text, 'null (tombstone)') END)
  FROM generate_series(1, $keys) k, LATERAL (SELECT 'db:order:' || k AS c, expected_doc(k) AS e) x
  LEFT JOIN last_doc l ON l.channel = x.c
 WHERE l.doc IS DISTINCT FROM e;
SELECT format('%s: published for a key the workload never used', channel) FROM last_doc
 WHERE channel NOT IN (SELECT 'db:order:' || k FROM generate_series(1, $keys) k);
SQL
  [ ! -s "$tmp/mismatch.txt" ]
}

# check_convergence: compare_docs must find nothing.
check_convergence() {
  if ! compare_docs; then
    cat "$tmp/mismatch.txt" >&2
    fail "$(wc -l <"$tmp/mismatch.txt") docs differ from a fresh run of their query"
  fi
  case $fault_sink in
    file) echo "converged: $keys keys, $(wc -l <"$docs") doc lines published over $run worker runs" ;;
    redis) echo "converged: $keys keys, $(wc -l <"$tmp/held.jsonl") docs and tombstones retained by Redis after $run worker runs" ;;
    redis-cluster) echo "converged: $keys keys, $(wc -l <"$tmp/held.jsonl") docs and tombstones retained by the cluster's masters after $run worker runs" ;;
  esac
}

# wait_convergence SECONDS: polls compare_docs until it finds nothing; fails after SECONDS.
wait_convergence() {
  local deadline=$((SECONDS + $1))
  until compare_docs; do
    if [ $SECONDS -ge $deadline ]; then
      cat "$tmp/mismatch.txt" >&2
      fail "$(wc -l <"$tmp/mismatch.txt") docs still differ from a fresh run of their query after $1 s"
    fi
    worker_alive
    sleep 0.5
  done
  check_convergence
}

# check_acks: across every worker run, no acknowledgement sent to the server passed (or equalled)
# the end LSN of a registered transaction that had not completed by then (unless a safety-valve
# rebase forgot it on purpose), and acknowledgements never went backwards within a run.
check_acks() {
  local f r=0
  : >"$tmp/events.tsv"
  for f in "$tmp"/worker.*.log; do
    r=$((r + 1))
    grep -E '\] (register|complete|rebase|ack) [0-9A-F]+/[0-9A-F]+$' "$f" |
      awk -v r="$r" '{print r "\t" NR "\t" $(NF-1) "\t" $NF}' >>"$tmp/events.tsv"
  done
  psql -X -q -At -v ON_ERROR_STOP=1 -d "$db" >"$tmp/ackviolations.txt" <<SQL || fail "the acknowledgement check could not run"
CREATE TEMP TABLE ev (run int, seq int, kind text, lsn pg_lsn);
\copy ev FROM '$tmp/events.tsv'
SELECT format('run %s: ack %s (line %s) passed transaction %s registered at line %s and not completed',
              a.run, a.lsn, a.seq, r.lsn, r.seq)
  FROM ev a JOIN ev r ON r.run = a.run AND r.kind = 'register' AND r.seq < a.seq AND r.lsn <= a.lsn
 WHERE a.kind = 'ack'
   AND NOT EXISTS (SELECT FROM ev c WHERE c.run = a.run AND c.kind = 'complete' AND c.lsn = r.lsn
                      AND c.seq > r.seq AND c.seq < a.seq)
   AND NOT EXISTS (SELECT FROM ev b WHERE b.run = a.run AND b.kind = 'rebase' AND b.seq > r.seq AND b.seq < a.seq)
 LIMIT 20;
SELECT format('run %s: transaction %s registered at line %s was already acknowledged by ack %s (line %s)',
              r.run, r.lsn, r.seq, a.lsn, a.seq)
  FROM ev r JOIN ev a ON a.run = r.run AND a.kind = 'ack' AND a.seq < r.seq AND a.lsn >= r.lsn
 WHERE r.kind = 'register'
   AND NOT EXISTS (SELECT FROM ev b WHERE b.run = r.run AND b.kind = 'rebase' AND b.seq > a.seq AND b.seq < r.seq)
 LIMIT 20;
SELECT format('run %s: ack %s (line %s) went back from %s', run, lsn, seq, prev)
  FROM (SELECT *, max(lsn) OVER (PARTITION BY run ORDER BY seq ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev
          FROM ev WHERE kind = 'ack') s
 WHERE lsn < prev
   AND NOT EXISTS (SELECT FROM ev b WHERE b.run = s.run AND b.kind = 'rebase' AND b.seq < s.seq)
 LIMIT 20;
SELECT format('counts: %s acks, %s transactions registered, %s completed',
              count(*) FILTER (WHERE kind = 'ack'), count(*) FILTER (WHERE kind = 'register'),
              count(*) FILTER (WHERE kind = 'complete')) FROM ev;
SQL
  if grep -v '^counts:' "$tmp/ackviolations.txt" | grep -q .; then
    grep -v '^counts:' "$tmp/ackviolations.txt" >&2
    fail "an acknowledgement passed an incomplete transaction"
  fi
  local counts
  counts=$(grep '^counts:' "$tmp/ackviolations.txt")
  echo "acknowledgements safe: $counts"
  case $counts in *" 0 acks"*|*" 0 transactions"*) fail "the debug log has no acknowledgements or transactions to check" ;; esac
  check_audit
}

# check_audit: across every worker run, the continuous audit's samples (a debug line each, or a
# divergence warning) and divergences, printed as "audit: N samples, M divergences"; any divergence
# fails. With the audit on, a suite that sampled nothing fails too: it would prove nothing.
check_audit() {
  local samples=0 divergences=0 f n deadline=$((SECONDS + 30))
  # The last run, still up after the drain, goes on auditing the converged docs: about each key once.
  if [ -n "$worker_pid" ] && kill -0 "$worker_pid" 2>/dev/null; then
    case $audit_rate in 0|0%) ;; *)
      until [ "$(grep -Ec 'DEBUG \[audit\] sampled |WARNING \[audit\] divergence: ' "$tmp/worker.$run.log")" -ge $keys ] ||
            [ $SECONDS -ge $deadline ]; do
        sleep 0.2
      done ;;
    esac
  fi
  for f in "$tmp"/worker.*.log; do
    n=$(grep -c 'DEBUG \[audit\] sampled ' "$f" || true); samples=$((samples + n))
    n=$(grep -c 'WARNING \[audit\] divergence: ' "$f" || true); divergences=$((divergences + n))
  done
  samples=$((samples + divergences))
  echo "audit: $samples samples, $divergences divergences over $run worker runs (--audit-rate $audit_rate)"
  if [ "$divergences" -gt 0 ]; then
    grep -h 'WARNING \[audit\] divergence: ' "$tmp"/worker.*.log >&2
    fail "the continuous audit found $divergences divergences"
  fi
  case $audit_rate in 0|0%) ;; *) [ "$samples" -gt 0 ] || fail "the continuous audit sampled no doc in $run worker runs" ;; esac
}
