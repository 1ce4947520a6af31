#!/usr/bin/env bash
# The continuous audit never blames a correct doc under asynchronous commit: with
# synchronous_commit = off and wal_writer_delay = 1s, a commit is visible to new snapshots up to
# about a second before its WAL is written, and so before the walsender can send it. A sample taken
# then must not be judged until the acknowledged position covers every commit its snapshot sees
# (its version is the WAL insert position read after the snapshot, not the write position). Runs the
# audit at 6000% of the live docs per minute beside a workload of asynchronous updates and fails on
# any divergence. The workload runs 20 s (about 200 samples), 2 min with DOCSYNC_TEST_FULL=1
# (packaging/run-tests.sh --full). Starts a cluster of its own (lib/own_cluster.bash); needs
# DOCSYNC_WORKER, jq and python3.
set -euo pipefail
test_name=audit_async
# shellcheck source=lib/own_cluster.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib/own_cluster.bash"

restore_wal_writer() {
  psql -X -q -d postgres -c "ALTER SYSTEM RESET wal_writer_delay" -c "SELECT pg_reload_conf()" >/dev/null 2>&1
}
early_cleanup_hooks+=(restore_wal_writer)
audited() { sql "SELECT audit_samples || ' ' || audit_divergences FROM docsync.status WHERE slot_name = '$slot'"; }
acct() { echo "SELECT jsonb_build_object('id', a.id, 'balance', a.balance) FROM acct a WHERE a.id = $1"; }

setup_db
psql -X -q -v ON_ERROR_STOP=1 -d postgres -c "ALTER SYSTEM SET wal_writer_delay = '1s'" -c "SELECT pg_reload_conf()" >/dev/null
sql "CREATE TABLE acct (id int PRIMARY KEY, balance int NOT NULL)"
sql "INSERT INTO acct SELECT g, 100 * g FROM generate_series(1, 10) g"
sql "SELECT docsync.define_query('acct', \$q\$$(acct '$1')\$q\$, params => ARRAY['id'])" >/dev/null 2>&1
sql "SELECT docsync.watch('acct', 'acct', params => ARRAY['id'])" >/dev/null
grant_reader

start_worker --audit-rate 6000% --log-level debug
sql "UPDATE acct SET balance = balance"  # every doc published once: 10 live docs
settle 30

# 20 s (--full: 2 min) of asynchronous single-row updates, a few per second, none of them waiting
# for its WAL.
rounds=200
[ "${DOCSYNC_TEST_FULL:-0}" = 1 ] && rounds=1200
python3 - "$rounds" <<'PY' >"$tmp/workload.sql"
import random
import sys
random.seed(11)
for i in range(int(sys.argv[1])):
    print(f"UPDATE acct SET balance = balance + {random.randint(1, 9)} WHERE id = {random.randint(1, 10)};")
    print("SELECT pg_sleep(0.1);")
PY
PGOPTIONS="-c synchronous_commit=off" psql -X -q -d "$db" -f "$tmp/workload.sql" >/dev/null
sleep 4  # the WAL writer writes the last asynchronous commits (wal_writer_delay 1s, 3 rounds at most)
settle 60
read -r samples divergences <<<"$(audited)"
echo "asynchronous commits: $samples samples, $divergences divergences"
[ "$samples" -ge 50 ] || fail "too few audit samples under the workload: $samples"
[ "$divergences" = 0 ] ||
  fail "the audit blamed docs that were right: $(grep -E 'divergence|differs from the sink' "$tmp/worker.log" | head -n 5)"
for id in $(seq 1 10); do
  [ "$(doc_equals_query "db:acct:$id" "$(acct "$id")")" = t ] || fail "db:acct:$id differs from its query: $(last_doc "db:acct:$id")"
done
stop_worker
echo "ok"
