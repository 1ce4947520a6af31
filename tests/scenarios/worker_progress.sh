#!/usr/bin/env bash
# Long work shows its progress: a restarted worker recomputes every doc its sink holds (the
# startup recompute). While it runs, docsync.status shows the recompute with done of total, the
# rate and the time left, in its columns and in its reason; the log says when it starts and when
# it is done, with the count and the rate; afterwards the view keeps the finished recompute.
# Needs the libpq environment of a cluster from packaging/dev-cluster.sh and DOCSYNC_WORKER.
set -euo pipefail
test_name=progress
# shellcheck source=lib/worker_env.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib/worker_env.bash"
docs_n=300
row() { sql "SELECT row_to_json(s) FROM docsync.status s WHERE slot_name = '$slot'"; }

setup_db
sql "CREATE TABLE items (id int PRIMARY KEY, v int NOT NULL)"
sql "INSERT INTO items SELECT g, 0 FROM generate_series(1, $docs_n) g"
# Each compute takes 20 ms, so one pool connection needs about 6 s for every doc: long enough to
# watch the recompute run. The sleep is in the result, so it runs once per doc whatever the plan
# (in the WHERE clause a sequential scan may run it for every row of the table).
sql "SELECT docsync.define_query('item', \$q\$SELECT CASE WHEN pg_sleep(0.02) IS NULL THEN NULL ELSE jsonb_build_object('id', i.id, 'v', i.v) END FROM items i WHERE i.id = \$1\$q\$, params => ARRAY['id'])" >/dev/null
sql "SELECT docsync.watch('item', 'items', params => ARRAY['id'])" >/dev/null
grant_reader

echo "a first run makes $docs_n docs live in the sink"
start_worker --pool 4
sql "UPDATE items SET v = 1"
settle 60
[ "$(jq -r .channel "$docs" | sort -u | wc -l)" = "$docs_n" ] || fail "expected $docs_n channels in $docs"
stop_worker
: >"$tmp/worker.log"

echo "a restarted worker recomputes them, and docsync.status shows how far it is"
start_worker --pool 1
wait_for 30 "SELECT recompute = 'startup' AND recompute_finished_at IS NULL AND recompute_total = $docs_n
                    AND recompute_done BETWEEN 1 AND $docs_n - 1 AND recompute_rate > 0 AND recompute_seconds_left > 0
                    AND reason ~ '^startup recompute: [0-9]+ of $docs_n live docs \([0-9]+%\), [0-9]+ docs/s, about [0-9]+ s left$'
               FROM docsync.status WHERE slot_name = '$slot'" ||
  fail "no running startup recompute seen in docsync.status: $(row)"
echo "seen: $(sql "SELECT reason FROM docsync.status WHERE slot_name = '$slot'")"
wait_for 60 "SELECT recompute_done = $docs_n AND recompute_finished_at IS NOT NULL AND recompute_seconds_left IS NULL
                    AND reason LIKE 'streaming;%' FROM docsync.status WHERE slot_name = '$slot'" ||
  fail "the startup recompute did not finish, or the view does not say so: $(row)"
took=$(sql "SELECT extract(epoch FROM recompute_finished_at - recompute_started_at) FROM docsync.status WHERE slot_name = '$slot'")
awk -v t="$took" -v n="$docs_n" 'BEGIN { exit !(t >= n * 0.02 * 0.9) }' ||
  fail "the recompute took $took s, less than $docs_n computes of 20 ms on one connection: it did not recompute them all"

grep -Eq "startup recompute: [0-9]+ of $docs_n live docs" "$tmp/worker.log" || fail "no progress line when the recompute started"
# The view and the log line come from the same status update, the view first.
for _ in $(seq 1 25); do
  grep -Eq "startup recompute done: $docs_n live docs in [0-9.]+ s \([0-9]+ docs/s\)" "$tmp/worker.log" && break
  sleep 0.2
done
grep -Eq "startup recompute done: $docs_n live docs in [0-9.]+ s \([0-9]+ docs/s\)" "$tmp/worker.log" ||
  fail "no line saying the recompute is done"
echo "log: $(grep -E 'startup recompute' "$tmp/worker.log" | sed 's/^.*\] //' | paste -sd '|')"
echo "ok"
