#!/usr/bin/env bash
# The status path end to end with the real worker streaming the slot: docsync.status shows it
# streaming with its pid and walsender; a failing doc query shows in docsync.query_stats with its
# error and turns the health to failing, and once the failing doc is published again the health is
# ok at once, its error shown as recovered; a second worker for the same slot is refused naming the
# owner's pid; after kill -9 the row turns `stopped` once the heartbeat is stale and the slot
# inactive, keeping the last values; a new worker takes over. docsync.forget_slot refuses while the
# worker serves the slot; a worker started on a misspelt slot fails and leaves no row; a slot dropped
# for good leaves a stale row saying how to forget it, and forget_slot removes its files and the row.
# Starts a cluster of its own (lib/own_cluster.bash); needs DOCSYNC_WORKER.
set -euo pipefail
test_name=status_it
# shellcheck source=lib/own_cluster.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib/own_cluster.bash"
row() { sql "SELECT row_to_json(s) FROM docsync.status s WHERE slot_name = '$slot'"; }

setup_db
sql "CREATE TABLE orders (id int PRIMARY KEY, amount int NOT NULL)"
sql "INSERT INTO orders SELECT g, 10 FROM generate_series(1, 8) g"
# Key 7 divides by zero: a permanent failure of query "order" for that doc only.
sql "SELECT docsync.define_query('order', \$q\$SELECT jsonb_build_object('id', o.id, 'share', 100 / (o.id - 7) * o.amount) FROM orders o WHERE o.id = \$1\$q\$, params => ARRAY['id'])" >/dev/null
sql "SELECT docsync.watch('order', 'orders', params => ARRAY['id'])" >/dev/null
grant_reader
start_worker

echo "status shows the worker streaming with its pid"
wait_for 20 "SELECT slot_active AND worker_state = 'streaming' FROM docsync.status WHERE slot_name = '$slot'" || fail "never streaming: $(row)"
[ "$(sql "SELECT worker_pid FROM docsync.status WHERE slot_name = '$slot'")" = "$worker_pid" ] || fail "worker_pid is not $worker_pid: $(row)"
sql "UPDATE orders SET amount = amount + 1"
settle 30
wait_for 10 "SELECT walsender_pid IS NOT NULL AND heartbeat_age_seconds < 5 AND live_docs = 8 AND changes >= 8 FROM docsync.status WHERE slot_name = '$slot'" ||
  fail "walsender, heartbeat, live docs or changes wrong: $(row)"

echo "a failing doc query shows in docsync.query_stats with its error, and makes the health failing"
wait_for 10 "SELECT permanent_failures >= 1 AND recomputes >= 8 AND last_error LIKE '%division by zero%22012%' AND last_error LIKE '%db:order:7%'
             AND last_error_at > now() - interval '1 min' AND mean_compute_ms > 0 FROM docsync.query_stats WHERE slot_name = '$slot' AND query = 'order'" ||
  fail "query_stats: $(sql "SELECT json_agg(q) FROM docsync.query_stats q WHERE slot_name = '$slot'")"
wait_for 10 "SELECT health = 'failing' AND reason LIKE 'error % ago: %division by zero%' AND permanent_failures >= 1 FROM docsync.status WHERE slot_name = '$slot'" ||
  fail "health: $(row)"

echo "health follows the recovery: once the failing doc is published, ok again, its error shown as recovered"
sql "DELETE FROM orders WHERE id = 7"   # the doc becomes null: published
wait_for 10 "SELECT health = 'ok' AND last_error LIKE 'recovered: %division by zero%' FROM docsync.status WHERE slot_name = '$slot'" ||
  fail "health after the failing doc was published: $(row)"
wait_for 5 "SELECT last_error LIKE 'recovered: %' FROM docsync.query_stats WHERE slot_name = '$slot' AND query = 'order'" ||
  fail "query_stats after the recovery: $(sql "SELECT json_agg(q) FROM docsync.query_stats q WHERE slot_name = '$slot'")"
sql "INSERT INTO orders VALUES (7, 10)"  # failing again, for what follows

echo "forget_slot refuses while the worker serves the slot, naming its pid"
out=$(sql "SELECT docsync.forget_slot('$slot')" 2>&1) && fail "forget_slot removed the files of a running worker: $out"
echo "$out" | grep -q "docsync-worker pid $worker_pid serves slot \"$slot\"" || fail "forget_slot refusal does not name pid $worker_pid: $out"
[ -f "$status_dir/$db.$slot.status" ] || fail "the refused forget_slot removed the status file"

echo "a second worker on the same slot is refused, naming the owner's pid"
set +e
timeout 60 "$worker_bin" --dsn "$(dsn "$repl_role")" --pool-dsn "$(dsn "$reader_role")" --slot "$slot" \
  --sink "file:$tmp/second.jsonl" --status-dir "$status_dir" >"$tmp/second.out" 2>"$tmp/second.err"
rc=$?
set -e
[ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "the second worker exited $rc, expected a refusal"
grep -q "already served by another docsync-worker (pid $worker_pid" "$tmp/second.err" || fail "refusal does not name pid $worker_pid: $(cat "$tmp/second.err")"
[ "$(sql "SELECT worker_pid = $worker_pid AND slot_active FROM docsync.status WHERE slot_name = '$slot'")" = t ] || fail "the refused worker took over: $(row)"
echo "refused with exit status $rc"

echo "after kill -9 the worker shows stopped at once, while its last heartbeat is still fresh"
[ "$(sql "SELECT lock_held FROM docsync.status_files() WHERE slot_name = '$slot'")" = t ] ||
  fail "the running worker's lock file is not seen held: $(sql "SELECT row_to_json(f) FROM docsync.status_files() f WHERE slot_name = '$slot'")"
# A lock file written on another kernel (a worker on another host sharing the volume) is not one
# this server can see: unknown, so the heartbeat decides.
lock_file="$status_dir/$db.$slot.lock"
real_lock=$(cat "$lock_file")
printf '%s\n%s\n' "$worker_pid" 00000000-0000-0000-0000-000000000000 >"$lock_file"
[ "$(sql "SELECT lock_held IS NULL FROM docsync.status_files() WHERE slot_name = '$slot'")" = t ] ||
  fail "a lock file of another kernel is judged: $(sql "SELECT lock_held FROM docsync.status_files() WHERE slot_name = '$slot'")"
printf '%s\n' "$real_lock" >"$lock_file"
old_pid=$worker_pid
kill -9 "$worker_pid"
wait "$worker_pid" 2>/dev/null || true
worker_pid=
# stopped while the heartbeat is younger than the 5 s that would say so without the lock
wait_for 20 "SELECT NOT slot_active AND worker_state = 'stopped' AND health = 'stopped' AND heartbeat_age_seconds < 5
             FROM docsync.status WHERE slot_name = '$slot'" ||
  fail "not stopped before its heartbeat aged: $(row)"
[ "$(sql "SELECT lock_held FROM docsync.status_files() WHERE slot_name = '$slot'")" = f ] || fail "the dead worker's lock file is seen held"
sql "SELECT reason FROM docsync.status WHERE slot_name = '$slot'" | grep -q "worker pid $old_pid last seen" || fail "reason does not name the dead worker: $(row)"
[ "$(sql "SELECT live_docs FROM docsync.status WHERE slot_name = '$slot'")" = 8 ] || fail "the last values were not kept: $(row)"

echo "a new worker takes the slot over once the old one is gone"
start_worker
wait_for 30 "SELECT worker_pid = $worker_pid AND worker_state = 'streaming' FROM docsync.status WHERE slot_name = '$slot'" || fail "the restarted worker does not show: $(row)"

echo "a worker started on a misspelt slot fails and leaves no row behind"
typo=${slot}x
forget_typo_files() { rm -f "$status_dir/$db.$typo".*; }
cleanup_hooks+=(forget_typo_files)
set +e
timeout 60 "$worker_bin" --dsn "$(dsn "$repl_role")" --pool-dsn "$(dsn "$reader_role")" --slot "$typo" \
  --sink "file:$tmp/typo.jsonl" --status-dir "$status_dir" >"$tmp/typo.out" 2>"$tmp/typo.err"
rc=$?
set -e
[ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "the worker on a missing slot exited $rc"
typo_row() { sql "SELECT row_to_json(s) FROM docsync.status s WHERE slot_name = '$typo'"; }
[ ! -e "$status_dir/$db.$typo.status" ] || fail "the failed start left its status file: $(typo_row)"
[ "$(sql "SELECT count(*) FROM docsync.status WHERE slot_name = '$typo'")" = 0 ] || fail "the failed start left a row: $(typo_row)"
tail -n 1 "$tmp/typo.err" | grep -q "ERROR" || fail "the failed start's last line is not its error: $(tail -n 3 "$tmp/typo.err")"

echo "a slot dropped for good leaves a stale row; forget_slot removes it"
timeout 60 "$worker_bin" --dsn "$(dsn "$repl_role")" --pool-dsn "$(dsn "$reader_role")" --slot "$typo" --create-slot \
  --sink "file:$tmp/typo.jsonl" --status-dir "$status_dir" >"$tmp/typo.out" 2>"$tmp/typo.err" &
typo_pid=$!
wait_for 30 "SELECT worker_state = 'streaming' FROM docsync.status WHERE slot_name = '$typo'" || fail "the second slot's worker never streamed: $(typo_row)"
kill -TERM "$typo_pid"
wait "$typo_pid" || fail "the second slot's worker did not exit 0 on SIGTERM"
wait_for 10 "SELECT NOT active FROM pg_replication_slots WHERE slot_name = '$typo'" || fail "the second slot stays active"
sql "SELECT pg_drop_replication_slot('$typo')" >/dev/null
wait_for 10 "SELECT health = 'stopped' AND reason LIKE 'stale status file: slot $typo does not exist in database $db;%forget it: SELECT docsync.forget_slot(''$typo'');'
             FROM docsync.status WHERE slot_name = '$typo'" || fail "the dropped slot's row: $(typo_row)"
removed=$(sql "SELECT string_agg(f, ' ') FROM docsync.forget_slot('$typo') f")
[ "$removed" = "$status_dir/$db.$typo.status $status_dir/$db.$typo.lock" ] || fail "forget_slot removed: $removed"
[ "$(sql "SELECT count(*) FROM docsync.status WHERE slot_name = '$typo'")" = 0 ] || fail "the forgotten slot still shows: $(typo_row)"
[ "$(sql "SELECT worker_state FROM docsync.status WHERE slot_name = '$slot'")" = streaming ] || fail "the running worker's row changed: $(row)"
echo "ok"
