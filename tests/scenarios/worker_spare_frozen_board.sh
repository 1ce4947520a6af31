#!/usr/bin/env bash
# A spare takes over from a worker that still holds the slot's status file: the active worker A
# (--standby, Redis sink) is frozen (SIGSTOP) and the DBA ends its lease session and walsender; the
# spare B takes the lease. docsync.wait_published reads the slot's status file, so B must own it: it
# fences A (SIGKILL, a docsync-worker of this host holding the file) instead of running without it.
# Then Redis loses every doc (FLUSHALL): until B has recomputed them, wait_published must not answer
# true for a commit whose docs are missing.
# Starts a cluster of its own (lib/own_cluster.bash); needs DOCSYNC_WORKER, jq and
# redis-server.
set -euo pipefail
test_name=spare_board
# shellcheck source=lib/own_cluster.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib/own_cluster.bash"
# shellcheck source=lib/redis_server.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib/redis_server.bash"
cleanup_hooks+=(stop_redis)
cont_all() { for p in "${extra_pids[@]}" $worker_pid; do kill -CONT "$p" 2>/dev/null || true; done; }
early_cleanup_hooks+=(cont_all)

setup_db
sql "CREATE TABLE acct (id int PRIMARY KEY, bal int NOT NULL)"
sql "INSERT INTO acct SELECT g, 0 FROM generate_series(1, 30) g"
# 0.1 s per doc: recomputing every live doc takes ~3 s with one thread, long enough to be seen.
sql "SELECT docsync.define_query('acct', \$q\$SELECT jsonb_build_object('id', a.id, 'bal', a.bal, 'z', (SELECT pg_sleep(0.1))::text) FROM acct a WHERE a.id = \$1\$q\$, params => ARRAY['id'])" >/dev/null
sql "SELECT docsync.watch('acct', 'acct', params => ARRAY['id'])" >/dev/null
grant_reader
start_redis
common=(--sink "redis://127.0.0.1:$redis_port" --live all --threads 1 --batch 1 --audit-rate 0 --standby)
start_worker "${common[@]}"
a=$worker_pid
extra_pids+=("$a")   # killed at the end, whatever happens
"$worker_bin" --dsn "$(dsn "$repl_role")" --pool-dsn "$(dsn "$reader_role")" --slot "$slot" \
  --status-dir "$status_dir" --status-interval 1s "${common[@]}" >>"$tmp/b.out" 2>>"$tmp/b.log" &
b=$!
extra_pids+=("$b")
wait_for 30 "SELECT count(*) = 1 FROM docsync.workers WHERE slot_name = '$slot' AND role = 'standby'" || fail "B never stood by"
sql "UPDATE acct SET bal = bal + 1"
settle 60

echo "A frozen, its sessions ended: B takes the lease and fences A, which holds the status file"
kill -STOP "$a"
sql "SELECT pg_terminate_backend(backend_pid) FROM docsync.workers WHERE slot_name = '$slot' AND role = 'active'" >/dev/null
sql "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = '$slot' AND active_pid IS NOT NULL" >/dev/null
wait_for 60 "SELECT count(*) = 1 FROM docsync.workers WHERE slot_name = '$slot' AND role = 'active' AND application_name LIKE '% active pid $b'" || fail "B is not the active worker: $(tail -n 5 "$tmp/b.log")"
wait_for 30 "SELECT active FROM pg_replication_slots WHERE slot_name = '$slot'" || fail "B never streamed: $(tail -n 5 "$tmp/b.log")"
worker_pid=$b
# B's start-up recompute (about 3 s) ends: waited for, not slept (a busy machine stretches it).
wait_for 60 "SELECT worker_pid = $b AND recompute_finished_at IS NOT NULL FROM docsync.status WHERE slot_name = '$slot'" ||
  fail "B's start-up recompute did not end in 60 s: $(tail -n 5 "$tmp/b.log")"
sql "UPDATE acct SET bal = bal + 1"
target=$(sql "SELECT pg_current_wal_lsn()")
[ "$(sql "CALL docsync.wait_published('$target', '30s')")" = t ] || fail "wait_published never passed before the flush"

echo "Redis loses every doc: wait_published holds until B has recomputed them"
seen=$(grep -c "recomputing every live doc" "$tmp/b.log" || true)
rc FLUSHALL >/dev/null
# The sink watch looks every second (a FLUSHALL breaks no connection): the checks start once B says
# it saw the loss, however long a busy machine makes that.
for _ in $(seq 1 300); do [ "$(grep -c "recomputing every live doc" "$tmp/b.log" || true)" -gt "$seen" ] && break; sleep 0.1; done
[ "$(grep -c "recomputing every live doc" "$tmp/b.log" || true)" -gt "$seen" ] || fail "B did not see the FLUSHALL in 30 s: $(tail -n 5 "$tmp/b.log")"
for _ in $(seq 1 40); do
  if [ "$(sql "CALL docsync.wait_published('$target', '10ms')")" = t ]; then
    missing=$(for i in $(seq 1 30); do [ -n "$(rc --raw GET "db:acct:$i")" ] || echo "$i"; done | wc -l)
    [ "$missing" -eq 0 ] || fail "wait_published('$target') = t while $missing of 30 docs are missing from Redis"
  fi
  sleep 0.1
done
[ "$(sql "CALL docsync.wait_published('$target', '30s')")" = t ] || fail "wait_published never passed after the recompute"
for i in 1 15 30; do
  [ "$(redis_doc_is_current "db:acct:$i" "SELECT jsonb_build_object('id', id, 'bal', bal, 'z', '') FROM acct WHERE id = $i")" = t ] ||
    fail "db:acct:$i not current after the recompute: $(rc GET "db:acct:$i")"
done
grep -q "killed it (SIGKILL), so that the status file is this worker's" "$tmp/b.log" || fail "B did not fence A: $(tail -n 5 "$tmp/b.log")"
kill -0 "$a" 2>/dev/null && fail "A (frozen) still lives"
stop_worker
echo PASS
