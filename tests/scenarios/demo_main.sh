#!/usr/bin/env bash
# packaging/demo.sh, the README's first command, as a new user runs it (with the worker already
# built, on ports chosen with DOCSYNC_DEMO_PG_PORT): it must end on what the README promises. Checked:
# exit 0; the cluster on the chosen port; the closing docsync.status row streaming, health ok, and
# the counters of the workload (7 docs published, 11 changes), never the status file's first
# write; the worker's first connection logged as "connecting", never "reconnecting"; no WARNING or
# ERROR in the worker's log; the output is one line per step (the docs each workload step published
# under it, indented), everything else in the log the demo names (DOCSYNC_DEMO_LOG); a port already
# taken is refused, naming it, and the failure names the log and shows its last lines.
# Needs DOCSYNC_WORKER.
set -euo pipefail
src=${DOCSYNC_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
worker_bin=${DOCSYNC_WORKER:?set DOCSYNC_WORKER to the built docsync-worker}
out=$(mktemp)
log=$(mktemp)
trap 'rm -f "$out" "$log"' EXIT
fail() { echo "FAIL: $*" >&2; echo "--- demo output" >&2; cat "$out" >&2; echo "--- demo log (tail)" >&2; tail -n 40 "$log" >&2; exit 1; }

free_port() {
  local port
  for _ in $(seq 1 200); do
    port=$((20000 + RANDOM % 12000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then echo "$port"; return 0; fi
  done
  echo "no free port" >&2; exit 1
}

port=$(free_port)
echo "packaging/demo.sh on port $port"
rc=0
(cd "$src" && DOCSYNC_WORKER=$worker_bin DOCSYNC_DEMO_PG_PORT=$port DOCSYNC_DEMO_LOG=$log packaging/demo.sh) >"$out" 2>&1 || rc=$?
[ $rc -eq 0 ] || fail "the demo exited $rc"
grep -q "(port $port), database shop" "$out" || fail "the cluster is not on DOCSYNC_DEMO_PG_PORT=$port"
# One line per step: 13 steps, each "TEXT ... RESULT", and the docs of the 5 workload steps under
# them (7 docs, indented); nothing of the build, psql or the worker's log.
steps=$(grep -c -v '^    ' "$out" || true)
docs=$(grep -c '^    {"channel":"db:order:' "$out" || true)
[ "$steps" -eq 14 ] || fail "the demo printed $steps lines that are not docs, not its 13 steps and the closing line"
[ "$docs" -eq 7 ] || fail "the demo printed $docs docs under its steps, not the workload's 7"
if grep -v '^    ' "$out" | grep -v -e ' \.\.\. ' -e '^done in '; then fail "the lines above are not steps"; fi
grep -q "^done in .*; what each step ran is in $log$" "$out" || fail "the last line does not name the log $log"
grep -q 'waiting for docsync.status to report the whole workload ... health ok (.*): 11 changes, 7 docs published$' "$out" ||
  fail "the status step does not say health ok with the workload's 11 changes and 7 docs"
# the closing status row, as psql -x prints it into the log
field() { sed -n '/^SELECT \* FROM docsync.status$/,/^=== stopping the worker/p' "$log" | sed -n "s/^$1 *| \(.*\)$/\1/p" | head -n 1; }
[ "$(field worker_state)" = streaming ] || fail "closing worker_state: $(field worker_state)"
[ "$(field health)" = ok ] || fail "closing health: $(field health) ($(field reason))"
[ "$(field publishes)" = 7 ] || fail "closing publishes: $(field publishes), not the workload's 7"
[ "$(field changes)" = 11 ] || fail "closing changes: $(field changes), not the workload's 11"
[ -z "$(field last_error)" ] || fail "closing last_error: $(field last_error)"
grep -q "INFO \[status\] state connecting " "$log" || fail "the worker's first connection is not logged as connecting"
if grep -q "state reconnecting" "$log"; then fail "the worker's first connection is called reconnecting"; fi
if grep -E " (WARNING|ERROR) \[" "$log"; then fail "the worker logged a warning or an error on the demo"; fi
echo "the demo ends streaming, health ok, 7 docs published; its first connection is 'connecting'"

echo "a DOCSYNC_DEMO_PG_PORT something listens on is refused"
python3 -c 'import socket,sys,time; s=socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(); time.sleep(60)' "$port" &
holder=$!
for _ in $(seq 1 50); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
rc=0
(cd "$src" && DOCSYNC_WORKER=$worker_bin DOCSYNC_DEMO_PG_PORT=$port DOCSYNC_DEMO_LOG=$log packaging/demo.sh) >"$out" 2>&1 || rc=$?
kill "$holder"; wait "$holder" 2>/dev/null || true
[ $rc -ne 0 ] || fail "the demo ran on a port already taken"
grep -q "^starting a throwaway PostgreSQL cluster ... failed: DOCSYNC_DEMO_PG_PORT=$port: something already listens on 127.0.0.1:$port" "$out" ||
  fail "the taken port is not named on the step's line"
grep -q "the details are in $log, which ends:" "$out" || fail "the failure does not name the log $log"
grep -q "^  | FAILED: DOCSYNC_DEMO_PG_PORT=$port" "$out" || fail "the failure does not show the log's last lines"
echo "PASS"
