#!/usr/bin/env bash
# The failover drill: a primary with a streaming standby (two throwaway clusters), the worker on a
# multi-host --dsn and --pool-dsn with target_session_attrs=read-write, a workload running; then
# kill -9 of the primary and promotion of the standby. On PostgreSQL 15 slots do not fail over: the
# worker finds no slot on the new primary, creates it, recomputes every live doc, and every doc
# converges to the new primary's data, including the writes the old primary had not streamed and
# those made after the promotion. Reports the time from promotion to convergence, and checks that
# docsync.status on the new primary says what happened.
set -euo pipefail
test_name=failover
top=${DOCSYNC_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
primary=$("$top/packaging/dev-cluster.sh" start --no-install)
stop_clusters() {
  "$top/packaging/dev-cluster.sh" stop "${standby:-}" >/dev/null 2>&1 || true
  "$top/packaging/dev-cluster.sh" stop "$primary" >/dev/null 2>&1 || true
}
trap stop_clusters EXIT
"$top/packaging/dev-cluster.sh" install "$primary" >/dev/null
# shellcheck disable=SC1091
. "$primary/cluster.env"
# shellcheck source=lib/worker_env.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib/worker_env.bash"
cleanup_hooks+=(stop_clusters)

setup_db
sql "CREATE TABLE acct (id int PRIMARY KEY, bal int NOT NULL)"
sql "INSERT INTO acct SELECT g, 0 FROM generate_series(1, 50) g"
sql "SELECT docsync.define_query('acct', \$q\$SELECT jsonb_build_object('id', a.id, 'bal', a.bal) FROM acct a WHERE a.id = \$1\$q\$, params => ARRAY['id'])" >/dev/null 2>&1
sql "SELECT docsync.watch('acct', 'acct', params => ARRAY['id'])" >/dev/null
grant_reader
standby=$("$top/packaging/dev-cluster.sh" standby "$primary")
standby_host=$(. "$standby/cluster.env"; echo "$PGHOST")
standby_port=$(. "$standby/cluster.env"; echo "$PGPORT")
status_dir="$standby/status"   # docsync.status of the new primary reads its own status directory
multi() { echo "host=$PGHOST,$standby_host port=$PGPORT,$standby_port dbname=$db user=$1 target_session_attrs=read-write connect_timeout=2"; }

"$worker_bin" --dsn "$(multi "$repl_role")" --pool-dsn "$(multi "$reader_role")" --slot "$slot" --create-slot \
  --status-dir "$status_dir" --status-interval 1s --sink "file:$docs" --live all \
  >>"$tmp/worker.out" 2>>"$tmp/worker.log" &
worker_pid=$!
wait_for 60 "SELECT active FROM pg_replication_slots WHERE slot_name = '$slot'" || fail "the worker did not start streaming"
sql "UPDATE acct SET bal = bal + 1"   # every doc once, so --live all follows all 50
settle 60

# A workload on the primary, then the crash in the middle of it.
workload() { # HOST PORT ROUNDS
  for i in $(seq 1 "$3"); do
    PGHOST=$1 PGPORT=$2 psql -X -q -d "$db" -c "UPDATE acct SET bal = bal + $i WHERE id = $(((i % 50) + 1))" >/dev/null 2>&1 || true
  done
}
workload "$PGHOST" "$PGPORT" 100000 &
load_pid=$!
extra_pids+=("$load_pid")
sleep 2
kill -9 "$(head -n 1 "$primary/data/postmaster.pid")"
kill "$load_pid" 2>/dev/null || true
wait "$load_pid" 2>/dev/null || true
promoted_at=$(date +%s%N)
"$top/packaging/dev-cluster.sh" promote "$standby"
echo "primary killed, standby promoted"
# From here on, everything speaks to the new primary.
# shellcheck disable=SC1091
. "$standby/cluster.env"
workload "$PGHOST" "$PGPORT" 200

# Converged: every doc equals the new primary's row.
converged() {
  local expected got
  expected=$(sql "SELECT string_agg(id || ':' || bal, ',' ORDER BY id) FROM acct")
  got=$(jq -r 'select(.channel | startswith("db:acct:")) | "\(.channel | ltrimstr("db:acct:")) \(.doc.bal)"' "$docs" 2>/dev/null |
        awk '{last[$1] = $2} END {for (k in last) print k ":" last[k]}' | sort -n | paste -sd, -)
  [ "$expected" = "$got" ]
}
deadline=$((SECONDS + 120))
until converged; do
  kill -0 "$worker_pid" 2>/dev/null || fail "the worker exited"
  [ $SECONDS -lt $deadline ] || fail "the docs did not converge to the new primary within 120 s of the promotion"
  sleep 0.2
done
took_ms=$((($(date +%s%N) - promoted_at) / 1000000))
echo "converged ${took_ms} ms after the promotion (workload after promotion included)"
wait_for 30 "SELECT active FROM pg_replication_slots WHERE slot_name = '$slot'" || fail "the worker holds no slot on the new primary"
grep -q "created replication slot" "$tmp/worker.log" || fail "the worker did not create the slot on the new primary"
grep -Eq "the server changed under the slot|the slot was created anew" "$tmp/worker.log" || fail "the recompute was not logged"
wait_for 30 "SELECT recompute IN ('new server', 'new slot') AND recompute_finished_at IS NOT NULL FROM docsync.status WHERE slot_name = '$slot'" ||
  fail "docsync.status does not say what happened: $(sql "SELECT row_to_json(s) FROM docsync.status s WHERE slot_name = '$slot'")"
echo "docsync.status: $(sql "SELECT health || ' / ' || recompute || ' recompute of ' || recompute_total || ' docs' FROM docsync.status WHERE slot_name = '$slot'")"
stop_worker
echo "ok"
