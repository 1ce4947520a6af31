#!/usr/bin/env bash
# The Redis Cluster sink against the real worker and a real cluster of 3 masters and 3 replicas
# (lib/redis_cluster.bash, built with redis-cli --cluster create), under the seeded shop workload
# of the fault tests (invariants 1, 2 and 7, docs/design.md):
# 1. the workload converges: every order's doc, read from the master that owns its slot, equals a
#    fresh run of its query;
# 2. failover drill: the master owning one order's slot is killed with kill -9 mid-workload; a
#    marker transaction on that order is committed while it is down. Until its replica is promoted,
#    confirmed_flush_lsn never reaches the marker's end (its doc cannot be retained), while a change
#    to an order on another master is published meanwhile. After the promotion (and the old master's
#    return as a replica), every doc converges;
# 3. resharding drill: redis-cli --cluster reshard moves 4000 slots, docs among them, from one master
#    to another while the workload runs; the worker follows through ASK and MOVED (at least one:
#    its publishing map changes only on a redirect or a node's failure;
#    publish_redis_cluster_test.cpp drives each kind deterministically) and every doc converges
#    again;
# 3b. the worker killed and its slot dropped with a change in the gap: the new generation is above
#    the retained docs' (docsync:max_generation) and every doc converges;
# 4. with --live subscribers, a doc with a sharded subscriber follows its row and one without is not
#    recomputed;
# and no acknowledgement in any run's debug log passed an incomplete transaction, and the continuous
# audit found no divergence.
#   DOCSYNC_FAULT_SEED=N replays a seed.
set -uo pipefail
export DOCSYNC_FAULT_SINK=redis-cluster
# shellcheck source=faults_common.bash
. "$(dirname "${BASH_SOURCE[0]}")/faults_common.bash"

confirmed() { sql "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = '$slot'"; }
keep_load() {
  workload_running && return 0
  wait_workload 5
  local f="$tmp/load.$RANDOM$RANDOM.sql"
  write_workload 60 "$f"
  run_workload "$f"
}
# retained_status ORDER: the status in the doc of ORDER its slot's master retains, or empty.
retained_status() {
  local key="{db:order:$1}"
  rcn "$(owner_of_slot "$(key_slot "$key")")" --raw GET "$key" 2>/dev/null | jq -r '.doc.status // empty' 2>/dev/null || true
}

start_cluster own
sql "CREATE EXTENSION pg_walinspect" || fail "pg_walinspect is not installed (it ships with the server)"
start_worker
publish_all

# 1. The shop workload through the cluster.
write_workload 120 "$tmp/load.first.sql"
run_workload "$tmp/load.first.sql"
wait_workload 120
drain 60
check_convergence
echo "masters: $(masters | tr '\n' ' ')"

# 2. Failover drill.
keep_load
sleep_random 200 600
o=$((1 + RANDOM % keys))
victim=$(owner_of_slot "$(key_slot "{db:order:$o}")")
[ -n "$victim" ] || fail "no master owns the slot of order $o"
# An order on another master, to show those keep publishing.
for other in $(seq 1 "$keys"); do [ "$(owner_of_slot "$(key_slot "{db:order:$other}")")" != "$victim" ] && break; done
start_lsn=$(sql "SELECT pg_current_wal_lsn()")
kill_redis_node "$victim"
killed_at=$SECONDS
xid=$(sql "BEGIN; INSERT INTO orders VALUES ($o, 'failover') ON CONFLICT (id) DO UPDATE SET status = 'failover';
           SELECT pg_current_xact_id(); COMMIT;") || fail "the marker transaction failed"
marker=$(sql "SELECT end_lsn FROM pg_get_wal_records_info('$start_lsn', pg_current_wal_flush_lsn())
               WHERE resource_manager = 'Transaction' AND record_type = 'COMMIT' AND xid::text = '$xid'")
[ -n "$marker" ] || fail "no commit record of the marker transaction $xid after $start_lsn"
sql "INSERT INTO orders VALUES ($other, 'elsewhere') ON CONFLICT (id) DO UPDATE SET status = 'elsewhere'" >/dev/null
echo "killed master 127.0.0.1:$victim (order $o's slot); marker transaction $xid ends at $marker; order $other is on another master"
other_seen=
until [ "$(owner_of_slot "$(key_slot "{db:order:$o}")")" != "$victim" ]; do
  at=$(confirmed)
  [ "$(sql "SELECT '$at'::pg_lsn < '$marker'")" = t ] ||
    fail "confirmed_flush_lsn $at reached the end ($marker) of transaction $xid while the master of its doc was down"
  [ -z "$other_seen" ] && [ "$(retained_status "$other")" = elsewhere ] && other_seen=$((SECONDS - killed_at))
  [ $((SECONDS - killed_at)) -lt 30 ] || fail "no replica was promoted within 30 s: $(cluster_nodes)"
  worker_alive
  keep_load
  sleep 0.2
done
promoted=$(owner_of_slot "$(key_slot "{db:order:$o}")")
echo "replica 127.0.0.1:$promoted promoted after $((SECONDS - killed_at)) s; slot at $(confirmed)"
[ -n "$other_seen" ] || {
  for _ in $(seq 1 50); do [ "$(retained_status "$other")" = elsewhere ] && other_seen=late && break; sleep 0.1; done
}
[ -n "$other_seen" ] || fail "order $other's doc, on a live master, was not published during the failover"
echo "order $other (another master) published ${other_seen} s into the outage"
start_redis_node "$victim"   # back as a replica of the promoted one
wait_workload 120
drain 90
wait_cluster_settled 30
wait_convergence 60
[ "$(retained_status "$o")" = failover ] || [ "$(sql "SELECT status FROM orders WHERE id = $o")" != failover ] ||
  fail "order $o's marker change is not retained after the failover"
grep -q 'was promoted to master (failover)' "$tmp/worker.$run.log" ||
  fail "the worker did not notice the failover (no 'was promoted to master' in its log)"

# 3. Resharding drill: move 4000 slots off the master holding the most docs.
keep_load
sleep_random 100 400
from=$(for k in $(seq 1 "$keys"); do owner_of_slot "$(key_slot "{db:order:$k}")"; done | sort | uniq -c | sort -rn | awk 'NR == 1 {print $2}')
to=$(masters | grep -vx "$from" | head -n 1)
before=$(for k in $(seq 1 "$keys"); do owner_of_slot "$(key_slot "{db:order:$k}")"; done | grep -cx "$from")
started=$SECONDS
redis-cli --cluster reshard "127.0.0.1:$from" --cluster-from "$(node_id "$from")" --cluster-to "$(node_id "$to")" \
  --cluster-slots 4000 --cluster-yes >"$tmp/reshard.log" 2>&1 || fail "redis-cli --cluster reshard failed: $(tail -n 5 "$tmp/reshard.log")"
after=$(for k in $(seq 1 "$keys"); do owner_of_slot "$(key_slot "{db:order:$k}")"; done | grep -cx "$from")
echo "resharded 4000 slots from 127.0.0.1:$from to 127.0.0.1:$to in $((SECONDS - started)) s; orders on $from: $before before, $after after"
[ "$after" -lt "$before" ] || fail "the reshard moved no order's slot"
keep_load
wait_workload 120
drain 90
wait_convergence 60
moved=$(grep -c 'DEBUG \[publish\] MOVED: ' "$tmp/worker.$run.log"); asked=$(grep -c 'DEBUG \[publish\] ASK: ' "$tmp/worker.$run.log")
echo "redirects the worker followed: $moved MOVED, $asked ASK"
[ $((moved + asked)) -gt 0 ] || fail "the worker followed no MOVED or ASK redirect, though the orders' slots moved"

# 3b. The worker killed, its slot dropped and a change made in the gap: the next run creates a new
#     slot in a new generation, which docsync:max_generation (on its own slot) was raised to before
#     any doc of it was retained; every live doc, listed by a SCAN of every master, is recomputed.
max_generation() { rcn "$(owner_of_slot "$(key_slot docsync:max_generation)")" GET docsync:max_generation; }
gen_before=$(max_generation)
kill_worker
sql "SELECT pg_drop_replication_slot('$slot')" >/dev/null || fail "could not drop slot $slot"
gap=$((1 + RANDOM % keys))
sql "INSERT INTO orders VALUES ($gap, 'in the gap') ON CONFLICT (id) DO UPDATE SET status = 'in the gap'" >/dev/null
start_worker
deadline=$((SECONDS + 30))
until [ "$(sql "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '$slot' AND active")" = 1 ]; do
  [ $SECONDS -lt $deadline ] || fail "the worker did not create and stream slot $slot again within 30 s"
  worker_alive
  sleep 0.1
done
wait_convergence 60  # only the new slot's recompute brings order $gap's change
gen_after=$(max_generation)
[ -n "$gen_before" ] && [ "${gen_after:-0}" -gt "$gen_before" ] ||
  fail "docsync:max_generation did not rise with the new slot's generation: $gen_before, then $gen_after"
echo "slot dropped: generation $gen_before -> $gen_after, order $gap's change in the gap retained"

# 4. --live subscribers on the cluster: a doc with a sharded subscriber (redis-cli -c SSUBSCRIBE, on
#    the shard owning its slot) follows its row; a doc without one is not recomputed.
kill -TERM "$worker_pid"; wait "$worker_pid" 2>/dev/null; worker_pid=
start_worker --live subscribers --live-poll 200ms
watched=$((1 + RANDOM % keys)); unwatched=$(( (watched % keys) + 1 ))
sql "INSERT INTO orders VALUES ($watched), ($unwatched) ON CONFLICT DO NOTHING" >/dev/null
redis-cli -c -p "$(alive_node)" SSUBSCRIBE "{db:order:$watched}" >"$tmp/ssub.out" 2>&1 &
ssub_pid=$!
deadline=$((SECONDS + 20))
until grep -q "smessage" "$tmp/ssub.out" 2>/dev/null; do
  # Until the worker's poll has seen the subscriber, a change may land before the doc is live.
  sql "UPDATE orders SET status = 'watched $SECONDS' WHERE id = $watched" >/dev/null
  [ $SECONDS -lt $deadline ] || fail "the sharded subscriber of order $watched got no doc within 20 s"
  worker_alive
  sleep 0.3
done
sql "UPDATE orders SET status = 'watched last' WHERE id = $watched" >/dev/null
sql "UPDATE orders SET status = 'unwatched last' WHERE id = $unwatched" >/dev/null
drain 30
[ "$(retained_status "$watched")" = "watched last" ] || fail "order $watched (subscribed) is not current: $(retained_status "$watched")"
[ "$(retained_status "$unwatched")" != "unwatched last" ] ||
  fail "order $unwatched, with no subscriber, was recomputed under --live subscribers"
echo "--live subscribers: order $watched (subscribed) current, order $unwatched (no subscriber) left alone"
kill "$ssub_pid" 2>/dev/null; wait "$ssub_pid" 2>/dev/null
kill -TERM "$worker_pid"; wait "$worker_pid" 2>/dev/null; worker_pid=  # one live doc: no audit wait
check_acks
grep -h 'permanent' "$tmp"/worker.*.log | grep -v DEBUG | head -n 5
echo "PASS faults_redis_cluster (seed $seed)"
