#!/usr/bin/env bash
# kill -9 during the recompute that follows a restore no worker saw (docs/design.md, "restores"):
# the first worker finds the restore, raises the generation and starts the gap recompute; some docs
# are recomputed (at the new generation, at positions of the restored server), others are held by a
# lock. The worker is killed and restarted (as a supervisor would). The next worker finds the sink's
# highest version at the server's generation and below its WAL end, so the sink alone shows no
# restore: what carries the unfinished gap is the status file (the recompute flagged as a gap). Until
# every doc holds the restored server's content, wait_published must stay false.
set -euo pipefail
test_name=restkill
# shellcheck source=lib/own_cluster.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib/own_cluster.bash"
# shellcheck source=lib/redis_server.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib/redis_server.bash"
cleanup_hooks+=(stop_redis)
n=10
setup_db
sql "CREATE TABLE acct (id int PRIMARY KEY, bal int NOT NULL)"
sql "INSERT INTO acct SELECT g, 0 FROM generate_series(1, $n) g"
# gate(id) waits while someone holds advisory lock (7, id) exclusively.
sql "CREATE FUNCTION gate(int) RETURNS int LANGUAGE sql AS \$f\$SELECT 1 FROM (SELECT pg_advisory_xact_lock_shared(7, \$1)) s\$f\$"
doc_sql() { echo "SELECT jsonb_build_object('id', a.id, 'bal', a.bal, 'g', gate(a.id)) FROM acct a WHERE a.id = $1"; }
sql "SELECT docsync.define_query('acct', \$q\$SELECT jsonb_build_object('id', a.id, 'bal', a.bal, 'g', gate(a.id)) FROM acct a WHERE a.id = \$1\$q\$, params => ARRAY['id'])" >/dev/null 2>&1
sql "SELECT docsync.watch('acct', 'acct', params => ARRAY['id'])" >/dev/null
grant_reader
start_redis
sink="redis://127.0.0.1:$redis_port"
cur() { [ "$(redis_doc_is_current "db:acct:$1" "$(doc_sql "$1")")" = t ]; }
all_current() { local id; for id in $(seq 1 $n); do cur "$id" || return 1; done; }
wait_current() { local d=$((SECONDS + 60)); until all_current; do [ $SECONDS -lt $d ] || fail "$1: not current"; sleep 0.2; done; }
start_worker --sink "$sink" --live all --batch 1 --threads 12 --statement-timeout 2s
sql "UPDATE acct SET bal = 1"
settle 30; wait_current "before the copy"
stop_worker
ctl stop -m fast; cp -a "$cluster/data" "$tmp/backup"; ctl start
start_worker --sink "$sink" --live all --batch 1 --threads 12 --statement-timeout 2s
for i in 2 3 4 5 6; do sql "UPDATE acct SET bal = $i"; done
settle 30; wait_current "the lost future"
stop_worker
echo "restoring the copy (bal = 1); the sink holds the lost future (bal = 6)"
ctl stop -m immediate; rm -rf "$cluster/data"; mv "$tmp/backup" "$cluster/data"; ctl start
[ "$(sql "SELECT max(bal) FROM acct")" = 1 ] || fail "the copy was not restored"
# Hold the computes of docs 2..n (not doc 1) for a while.
psql -X -q -d "$db" -c "SELECT pg_advisory_lock(7, g) FROM generate_series(2, $n) g" -c "SELECT pg_sleep(40)" >/dev/null 2>&1 &
lock_pid=$!; extra_pids+=($lock_pid)
wait_for 10 "SELECT count(*) = $((n - 1)) FROM pg_locks WHERE locktype = 'advisory' AND classid = 7 AND granted" || fail "locks not taken"
sql "UPDATE acct SET bal = 100 WHERE id = 1"
target=$(sql "SELECT pg_current_wal_lsn()")
start_worker --sink "$sink" --live all --batch 1 --threads 12 --statement-timeout 2s
for _ in $(seq 1 100); do cur 1 && break; sleep 0.2; done
cur 1 || fail "doc 1 was not recomputed by the first worker after the restore"
grep -q "restored from a backup" "$tmp/worker.log" || fail "the first worker did not find the restore"
echo "first worker: restore found, doc 1 recomputed ($(rc --raw GET db:acct:1 | jq -c '[.generation,.lsn,.doc.bal]')), doc 2 still $(rc --raw GET db:acct:2 | jq -c '[.generation,.lsn,.doc.bal]')"
echo "first wait: $(sql "CALL docsync.wait_published('$target', '1s')")"
kill -9 "$worker_pid"; wait "$worker_pid" 2>/dev/null || true; worker_pid=
: >"$tmp/worker.log.2"; mv "$tmp/worker.log" "$tmp/worker.log.1"
start_worker --sink "$sink" --live all --batch 1 --threads 12 --statement-timeout 2s
sleep 4
wp=$(sql "CALL docsync.wait_published('$target', '3s')")
d2=$(rc --raw GET db:acct:2 | jq -c '.doc.bal')
wm=$(rc --raw GET docsync:watermark || true)
echo "second worker, recompute still held: wait_published($target) = $wp, db:acct:2 bal = $d2 (server: $(sql "SELECT bal FROM acct WHERE id = 2")), watermark $wm"
wait "$lock_pid" || true
if [ "$wp" = t ] && [ "$d2" != 1 ]; then fail "wait_published true while db:acct:2 shows the lost future (bal $d2)"; fi
wait_current "after the lock"
[ "$(sql "CALL docsync.wait_published('$target', '30s')")" = t ] || fail "wait_published never passed $target"
stop_worker
echo "PASS worker_restore_recompute_kill9"
