#!/usr/bin/env bash
# A spare takes over from a frozen worker that still holds the JSONL sink file's lock: the active
# worker A (--standby) is frozen (SIGSTOP) and the DBA ends its lease session and walsender; the
# spare B takes the lease. B reports to a status directory of its own here, so that only the sink's
# lock stands in its way: B must fence A (SIGKILL, a docsync-worker of this host holding the lock),
# not exit, and publish the change made meanwhile.
# Starts a cluster of its own (lib/own_cluster.bash); needs DOCSYNC_WORKER and jq.
set -euo pipefail
test_name=spare_jsonl
# shellcheck source=lib/own_cluster.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib/own_cluster.bash"
cont_all() { for p in "${extra_pids[@]}" $worker_pid; do kill -CONT "$p" 2>/dev/null || true; done; }
early_cleanup_hooks+=(cont_all)

setup_db
sql "CREATE TABLE acct (id int PRIMARY KEY, bal int NOT NULL)"
sql "INSERT INTO acct SELECT g, 0 FROM generate_series(1, 5) g"
sql "SELECT docsync.define_query('acct', \$q\$SELECT jsonb_build_object('id', a.id, 'bal', a.bal) FROM acct a WHERE a.id = \$1\$q\$, params => ARRAY['id'])" >/dev/null
sql "SELECT docsync.watch('acct', 'acct', params => ARRAY['id'])" >/dev/null
grant_reader
start_worker --standby --live all
a=$worker_pid
extra_pids+=("$a")   # killed at the end, whatever happens
mkdir "$tmp/b_status"
"$worker_bin" --dsn "$(dsn "$repl_role")" --pool-dsn "$(dsn "$reader_role")" --slot "$slot" \
  --status-dir "$tmp/b_status" --status-interval 1s --sink "file:$docs" --standby --live all >>"$tmp/b.out" 2>>"$tmp/b.log" &
b=$!
extra_pids+=("$b")
wait_for 30 "SELECT count(*) = 1 FROM docsync.workers WHERE slot_name = '$slot' AND role = 'standby'" || fail "B never stood by"
sql "UPDATE acct SET bal = 1 WHERE id = 1"
settle 60
doc_sql="SELECT jsonb_build_object('id', id, 'bal', bal) FROM acct WHERE id = 1"
[ "$(doc_equals_query db:acct:1 "$doc_sql")" = t ] || fail "db:acct:1 not current before A froze"

echo "A frozen, its sessions ended: B takes the lease, fences A, which holds the file's lock, and publishes"
kill -STOP "$a"
sql "SELECT pg_terminate_backend(backend_pid) FROM docsync.workers WHERE slot_name = '$slot' AND role = 'active'" >/dev/null
sql "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = '$slot' AND active_pid IS NOT NULL" >/dev/null
sql "UPDATE acct SET bal = 2 WHERE id = 1"
deadline=$((SECONDS + 30))
until [ "$(doc_equals_query db:acct:1 "$doc_sql")" = t ]; do
  kill -0 "$b" 2>/dev/null || { code=0; wait "$b" || code=$?; fail "B exited $code: $(tail -n 3 "$tmp/b.log")"; }
  [ $SECONDS -lt $deadline ] || fail "db:acct:1 lacks the update 30 s after A froze: $(last_doc db:acct:1); B: $(tail -n 3 "$tmp/b.log")"
  sleep 0.5
done
grep -q "is still locked by docsync-worker pid $a, which lost the lease" "$tmp/b.log" || fail "B did not say it fenced A: $(tail -n 5 "$tmp/b.log")"
kill -0 "$a" 2>/dev/null && fail "A (frozen) still lives"
worker_pid=$b
stop_worker
echo PASS
