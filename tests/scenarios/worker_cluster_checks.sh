#!/usr/bin/env bash
# The Redis Cluster sink's positions and break watch (docs/design.md, "restores" and "sink checks"),
# against the real worker and a real cluster of 3 masters and 3 replicas (lib/redis_cluster.bash):
# 1. every master keeps docsync:max_version:{TAG}, at or past each doc it holds;
# 2. a master restarted empty while the worker runs: while it is down docsync.wait_published holds,
#    and whenever it says a commit is published, GET of its docs on that master returns them current
#    (the break watch holds the waits from the moment the master's connection closes until its
#    lost-docs check has run after it answers again);
# 3. a master restarted empty while no worker runs: the next worker reports it (the other masters
#    hold their markers) and recomputes every live doc; every doc converges;
# 4. positions past the server's WAL (a restore of the server no worker saw): the next worker raises
#    the generation and recomputes, and a new commit is published over the old docs;
# 5. a master with an allkeys-* eviction policy stops the start.
set -euo pipefail
test_name=clusterchk
# shellcheck source=lib/own_cluster.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib/own_cluster.bash"
# shellcheck source=lib/redis_cluster.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib/redis_cluster.bash"
cleanup_hooks+=(stop_redis_cluster)
n=30
setup_db
sql "CREATE TABLE item (id int PRIMARY KEY, n int NOT NULL)"
sql "INSERT INTO item SELECT g, 0 FROM generate_series(1, $n) g"
doc_sql() { echo "SELECT jsonb_build_object('id', i.id, 'n', i.n) FROM item i WHERE i.id = $1"; }
sql "SELECT docsync.define_query('item', \$q\$$(doc_sql '$1')\$q\$, params => ARRAY['id'])" >/dev/null 2>&1
sql "SELECT docsync.watch('item', 'item', params => ARRAY['id'])" >/dev/null
grant_reader
start_redis_cluster

# cluster_doc ID: the envelope of db:item:ID on the master owning its slot (empty when missing).
cluster_doc() { local k="{db:item:$1}"; rcn "$(owner_of_slot "$(key_slot "$k")")" --raw GET "$k" 2>/dev/null || true; }
# doc_current ID: t when the retained doc equals a fresh run.
doc_current() {
  local d
  d=$(cluster_doc "$1" | jq -c '.doc' 2>/dev/null || true)
  [ -n "$d" ] || { echo "missing"; return; }
  sql "SELECT \$r\$$d\$r\$::jsonb IS NOT DISTINCT FROM ($(doc_sql "$1"))::jsonb"
}
# all_current SECONDS LABEL: every doc current within SECONDS.
all_current() {
  local deadline=$((SECONDS + $1)) id bad
  for (( ; ; )); do
    bad=
    for id in $(seq 1 $n); do [ "$(doc_current "$id")" = t ] || { bad=$id; break; }; done
    [ -z "$bad" ] && { echo "$2: every doc current"; return 0; }
    [ $SECONDS -lt $deadline ] || fail "$2: db:item:$bad is $(cluster_doc "$bad")"
    sleep 0.3
  done
}
# wipe_restart PORT: kill -9, remove its data (not nodes.conf), start it again: a master back empty.
wipe_restart() {
  kill_redis_node "$1"
  rm -rf "$tmp/rc/$1/appendonlydir" "$tmp/rc/$1"/*.aof "$tmp/rc/$1"/dump.rdb
  start_redis_node "$1"
}
url=$(redis_cluster_url)
start_worker --sink "$url" --live all --audit-rate 0
sql "UPDATE item SET n = n + 1"
target=$(sql "SELECT pg_current_wal_lsn()")
[ "$(sql "CALL docsync.wait_published('$target', '30s')")" = t ] || fail "wait_published never passed $target"
all_current 20 "start"

# 1. Every master holds its position, at or past its docs.
for p in $(masters); do
  key=$(rcn "$p" --scan --pattern 'docsync:max_version:*' | head -n 1)
  [ -n "$key" ] || fail "master $p holds no docsync:max_version:{TAG}"
  pos=$(rcn "$p" --raw GET "$key")
  for k in $(rcn "$p" --scan --pattern '{db:item:*}'); do
    lsn=$(rcn "$p" --raw GET "$k" | jq -r '.lsn')
    [ "$(sql "SELECT '${pos#*/}'::pg_lsn >= '$lsn'::pg_lsn")" = t ] || fail "master $p: $key is $pos, below $k at $lsn"
  done
done
echo "1: every master holds its position"

# 2. The master of db:item:1 restarted empty under the running worker.
victim=$(owner_of_slot "$(key_slot "{db:item:1}")")
kill_redis_node "$victim"
sleep 1.5
[ "$(sql "CALL docsync.wait_published('$target', '10ms')")" = f ] ||
  fail "2: wait_published said $target published while master $victim, which holds db:item:1, is down"
wipe_restart "$victim"
held=0 passed=
for _ in $(seq 1 300); do
  if [ "$(sql "CALL docsync.wait_published('$target', '10ms')")" = t ]; then
    [ "$(doc_current 1)" = t ] ||
      fail "2: wait_published said $target published while db:item:1 on the restarted master is $(cluster_doc 1)"
    passed=1
    break
  fi
  held=$((held + 1))
  sleep 0.05
done
[ -n "$passed" ] || fail "2: wait_published never passed $target after the master came back"
all_current 30 "2: after master $victim restarted empty (the wait held for $held polls)"
wait_cluster_settled 30

# 3. A master restarted empty while no worker runs.
stop_worker
victim=$(owner_of_slot "$(key_slot "{db:item:2}")")
wipe_restart "$victim"
wait_cluster_settled 30
: >"$tmp/worker.log"
start_worker --sink "$url" --live all --audit-rate 0
for _ in $(seq 1 100); do grep -q "held no marker key while the others held theirs.*: recomputing every live doc" "$tmp/worker.log" && break; sleep 0.1; done
grep -q "held no marker key while the others held theirs.*: recomputing every live doc" "$tmp/worker.log" ||
  fail "3: the worker did not report master $victim, restarted empty while it was stopped"
sql "UPDATE item SET n = n + 1"
target=$(sql "SELECT pg_current_wal_lsn()")
[ "$(sql "CALL docsync.wait_published('$target', '30s')")" = t ] || fail "3: wait_published never passed $target"
all_current 30 "3: after master $victim restarted empty while no worker ran"

# 4. Positions past the server's WAL, in the generation the server keeps: a restore no worker saw.
stop_worker
for p in $(masters); do
  key=$(rcn "$p" --scan --pattern 'docsync:max_version:*' | head -n 1)
  [ -n "$key" ] || continue
  gen=$(rcn "$p" --raw GET "$key" | cut -d/ -f1)
  rcn "$p" SET "$key" "$gen/FF/0" >/dev/null
done
: >"$tmp/worker.log"
start_worker --sink "$url" --live all --audit-rate 0
for _ in $(seq 1 100); do grep -q "its history went back" "$tmp/worker.log" && break; sleep 0.1; done
grep -q "its history went back" "$tmp/worker.log" || fail "4: the worker did not see positions past the server's WAL"
sql "UPDATE item SET n = n + 1"
target=$(sql "SELECT pg_current_wal_lsn()")
[ "$(sql "CALL docsync.wait_published('$target', '30s')")" = t ] || fail "4: wait_published never passed $target"
all_current 30 "4: after positions past the server's WAL"
stop_worker

# 5. A master that may evict docs stops the start (every master's maxmemory-policy is read).
evicting=$(masters | tail -n 1)
rcn "$evicting" CONFIG SET maxmemory-policy allkeys-lru >/dev/null
: >"$tmp/worker.log"
code=0
timeout 60 "$worker_bin" --dsn "$(dsn "$repl_role")" --pool-dsn "$(dsn "$reader_role")" --slot "$slot" \
  --status-dir "$status_dir" --sink "$url" --live all >>"$tmp/worker.out" 2>>"$tmp/worker.log" || code=$?
[ "$code" -ne 0 ] && [ "$code" -ne 124 ] || fail "5: the worker did not refuse master $evicting's allkeys-lru (exit $code)"
grep -q "Redis Cluster node 127.0.0.1:$evicting evicts keys under memory pressure (maxmemory-policy allkeys-lru" "$tmp/worker.log" ||
  fail "5: the refusal does not name master $evicting and its policy: $(tail -n 2 "$tmp/worker.log")"
rcn "$evicting" CONFIG SET maxmemory-policy noeviction >/dev/null
echo "5: master $evicting's allkeys-lru refused at start"
echo "PASS worker_cluster_checks"
