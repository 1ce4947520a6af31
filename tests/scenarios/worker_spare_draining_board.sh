#!/usr/bin/env bash
# A spare takes over from a worker that drains behind a lock, holding the slot's status file: a
# migration locks a table the doc query reads, so the active worker A's compute blocks; the DBA ends
# A's lease session; A steps down and drains (blocked); the spare B takes the lease, fences A and
# starts, itself waiting behind the lock to read the definitions. Redis then loses every doc
# (FLUSHALL): docsync.wait_published must hold until B has recomputed them; what was published
# before the flush is published meanwhile.
# Starts a cluster of its own (lib/own_cluster.bash); needs DOCSYNC_WORKER, jq and
# redis-server.
set -euo pipefail
test_name=spare_drain
# shellcheck source=lib/own_cluster.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib/own_cluster.bash"
# shellcheck source=lib/redis_server.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib/redis_server.bash"
cleanup_hooks+=(stop_redis)

setup_db
sql "CREATE TABLE acct (id int PRIMARY KEY, bal int NOT NULL)"
sql "CREATE TABLE info (note text)"
sql "INSERT INTO info VALUES ('x')"
sql "INSERT INTO acct SELECT g, 0 FROM generate_series(1, 20) g"
sql "BEGIN; SELECT docsync.define_query('acct', \$q\$SELECT jsonb_build_object('id', a.id, 'bal', a.bal, 'n', (SELECT note FROM info LIMIT 1)) FROM acct a WHERE a.id = \$1\$q\$, params => ARRAY['id']); SELECT docsync.watch('acct', 'acct', params => ARRAY['id']); COMMIT;" >/dev/null 2>&1
grant_reader
start_redis
common=(--sink "redis://127.0.0.1:$redis_port" --live all --audit-rate 0 --standby --statement-timeout 60s)
start_worker "${common[@]}"
"$worker_bin" --dsn "$(dsn "$repl_role")" --pool-dsn "$(dsn "$reader_role")" --slot "$slot" \
  --status-dir "$status_dir" --status-interval 1s "${common[@]}" >>"$tmp/b.out" 2>>"$tmp/b.log" &
b=$!
extra_pids+=("$b")
wait_for 30 "SELECT count(*) = 1 FROM docsync.workers WHERE slot_name = '$slot' AND role = 'standby'" || fail "B never stood by"
sql "UPDATE acct SET bal = bal + 1"
target0=$(sql "SELECT pg_current_wal_lsn()")
settle 60

echo "a migration holds info for 25 s; A blocks on it, loses the lease and drains; B fences A"
psql -X -q -d "$db" -c "BEGIN; LOCK TABLE info IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(25); COMMIT;" >/dev/null 2>&1 &
extra_pids+=("$!")
sleep 1
sql "UPDATE acct SET bal = bal + 1 WHERE id = 1"
sleep 1
# Once A's lease session ends, whichever worker looks first takes the lease: the spare (every 500 ms)
# or A itself (every second), which is not what this test is about; so the DBA ends A's lease
# session again each time A took it back, until the spare holds it.
b_active="SELECT count(*) = 1 FROM docsync.workers WHERE slot_name = '$slot' AND role = 'active' AND application_name LIKE '% active pid $b'"
for attempt in $(seq 1 10); do
  sql "SELECT pg_terminate_backend(backend_pid) FROM docsync.workers WHERE slot_name = '$slot' AND role = 'active'
         AND application_name NOT LIKE '% active pid $b'" >/dev/null
  wait_for 3 "$b_active" && break
  [ "$attempt" -lt 10 ] || fail "B is not the active worker after ten ends of A's lease session: $(tail -n 3 "$tmp/b.log")"
done
[ "$attempt" -eq 1 ] || echo "A took its lease back $((attempt - 1)) time(s) before B took it"
sleep 7     # B waits 5 s for the status file, fences A, and starts behind the lock
[ "$(sql "CALL docsync.wait_published('$target0', '2s')")" = t ] || fail "$target0, published before, is not while B starts"

echo "Redis loses every doc while B starts: wait_published holds until B has recomputed them"
rc FLUSHALL >/dev/null
sleep 2     # the watch looks every second (a FLUSHALL breaks no connection)
for _ in $(seq 1 20); do
  if [ "$(sql "CALL docsync.wait_published('$target0', '10ms')")" = t ]; then
    missing=$(for i in $(seq 1 20); do [ -n "$(rc --raw GET "db:acct:$i")" ] || echo "$i"; done | wc -l)
    [ "$missing" -eq 0 ] || fail "wait_published('$target0') = t while $missing of 20 docs are missing from Redis"
  fi
  sleep 0.2
done
# What B recomputes once the lock goes is what it knows of the sink's docs: a sink emptied before a
# worker knew its docs is the sink's record's concern (docs/design.md, "Sink checks"), not this test's.
kill -0 "$b" 2>/dev/null || fail "B exited: $(tail -n 3 "$tmp/b.log")"
grep -q "killed it (SIGKILL), so that the status file is this worker's" "$tmp/b.log" || fail "B did not fence A: $(tail -n 3 "$tmp/b.log")"
worker_pid=$b
stop_worker
echo PASS
