#!/usr/bin/env bash
# A file-level restore made while no worker ran (docs/design.md, "restores"): a copy of the stopped
# cluster (its slot comes with it), five more updates published to Redis, the worker stopped, the
# copy restored, a new worker started. The server has the same system identifier and timeline and
# a slot at the copy's position; only the sink still holds the lost future's docs, at positions
# past the restored server's WAL end. The new worker must see that, raise the generation (so Redis
# takes the recompute instead of refusing it as older), recompute every live doc while
# wait_published and docsync:watermark hold, and then publish new commits.
set -euo pipefail
test_name=unseen
# shellcheck source=lib/own_cluster.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib/own_cluster.bash"
# shellcheck source=lib/redis_server.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib/redis_server.bash"
cleanup_hooks+=(stop_redis)

n=20
setup_db
sql "CREATE TABLE acct (id int PRIMARY KEY, bal int NOT NULL)"
sql "INSERT INTO acct SELECT g, 0 FROM generate_series(1, $n) g"
# gate() waits while the test holds advisory lock 42: it holds computes back, not definitions.
sql "CREATE FUNCTION gate() RETURNS int LANGUAGE sql AS \$f\$SELECT 1 FROM (SELECT pg_advisory_xact_lock_shared(42)) s\$f\$"
doc_sql() { echo "SELECT jsonb_build_object('id', a.id, 'bal', a.bal, 'g', gate()) FROM acct a WHERE a.id = $1"; }
sql "SELECT docsync.define_query('acct', \$q\$SELECT jsonb_build_object('id', a.id, 'bal', a.bal, 'g', gate()) FROM acct a WHERE a.id = \$1\$q\$, params => ARRAY['id'])" >/dev/null 2>&1
sql "SELECT docsync.watch('acct', 'acct', params => ARRAY['id'])" >/dev/null
grant_reader
start_redis
sink="redis://127.0.0.1:$redis_port"
all_current() {
  local id
  for id in $(seq 1 $n); do [ "$(redis_doc_is_current "db:acct:$id" "$(doc_sql "$id")")" = t ] || return 1; done
}
wait_current() {
  local deadline=$((SECONDS + ${2:-60}))
  until all_current; do
    [ $SECONDS -lt $deadline ] || fail "$1: db:acct:1 is $(redis_doc db:acct:1), the row $(sql "$(doc_sql 1)")"
    sleep 0.2
  done
}
version() { rc --raw GET "$1" | jq -c '[.generation, .lsn]'; }

start_worker --sink "$sink" --live all
sql "UPDATE acct SET bal = 1"
settle 30
wait_current "before the copy"
stop_worker

echo "copying the stopped cluster, slot included"
ctl stop -m fast
cp -a "$cluster/data" "$tmp/backup"
ctl start
start_worker --sink "$sink" --live all
for i in 2 3 4 5 6; do sql "UPDATE acct SET bal = $i"; done
settle 30
wait_current "after five more updates"
lost=$(version db:acct:1)
stop_worker
echo "the lost future's docs: version $lost"

echo "restoring the copy; then a new worker"
ctl stop -m immediate
rm -rf "$cluster/data"
mv "$tmp/backup" "$cluster/data"
ctl start
[ "$(sql "SELECT max(bal) FROM acct")" = 1 ] || fail "the copy was not restored"
# Hold the recompute's doc queries so that the hold of wait_published and the watermark can be seen.
psql -X -q -d "$db" -v ON_ERROR_STOP=1 -c "SELECT pg_advisory_lock(42)" -c "SELECT pg_sleep(8)" >"$tmp/lock.out" 2>&1 &
lock_pid=$!
extra_pids+=($lock_pid)
wait_for 10 "SELECT count(*) > 0 FROM pg_locks WHERE locktype = 'advisory' AND objid = 42 AND granted" ||
  fail "advisory lock 42 was not taken"
sql "UPDATE acct SET bal = 100 WHERE id = 1"
start_worker --sink "$sink" --live all
target=$(sql "SELECT pg_current_wal_lsn()")
# While the recompute is held back by the lock: the waits must not call anything published.
if [ "$(sql "CALL docsync.wait_published('$target', '1s')")" = t ]; then
  fail "wait_published said published while the recompute after the restore was held back (db:acct:1 is $(redis_doc db:acct:1))"
fi
wm=$(rc --raw GET docsync:watermark || true)
wm_gen=$(rc --raw GET docsync:watermark_generation || true)
if [ "$wm_gen" -gt "$(jq -r '.[0]' <<<"$lost")" ] && [ -n "$wm" ] &&
   [ "$(sql "SELECT '$wm'::pg_lsn >= '$target'")" = t ]; then
  fail "docsync:watermark is at $wm (generation $wm_gen), past $target, while the recompute was held back"
fi
echo "  during the recompute: wait_published false, docsync:watermark '$wm' (generation $wm_gen)"
wait "$lock_pid" || true
wait_current "after the restore" 60
after=$(version db:acct:1)
echo "the restore's recompute: version $after"
[ "$(jq -r '.[0]' <<<"$after")" -gt "$(jq -r '.[0]' <<<"$lost")" ] ||
  fail "the generation did not rise above the lost future's: $after after $lost"
grep -q "restored from a backup" "$tmp/worker.log" || fail "the restore was not logged: $(tail -n 20 "$tmp/worker.log")"
[ "$(sql "CALL docsync.wait_published('$target', '30s')")" = t ] || fail "wait_published never passed $target"
# A new commit on the restored server is published and waited for.
sql "UPDATE acct SET bal = 7 WHERE id = 2"
target=$(sql "SELECT pg_current_wal_lsn()")
[ "$(sql "CALL docsync.wait_published('$target', '30s')")" = t ] || fail "wait_published never passed $target"
[ "$(redis_doc_is_current db:acct:2 "$(doc_sql 2)")" = t ] ||
  fail "wait_published passed $target but db:acct:2 is $(redis_doc db:acct:2)"
wait_current "after a new commit"
stop_worker
echo "PASS worker_restored_unseen"
