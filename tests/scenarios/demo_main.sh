#!/usr/bin/env bash
# packaging/demo.sh, the README's first command, as a new user runs it (with the worker already
# built, on ports chosen with DOCSYNC_DEMO_PG_PORT): it must end on what the README promises. Checked:
# exit 0; the cluster on the chosen port; the closing docsync.status row streaming, health ok, and
# the counters of the workload (7 docs published, 11 changes), never the status file's first
# write; the worker's first connection logged as "connecting", never "reconnecting"; no WARNING or
# ERROR in the worker's log; a port already taken is refused, naming it.
# Needs DOCSYNC_WORKER.
set -euo pipefail
src=${DOCSYNC_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
worker_bin=${DOCSYNC_WORKER:?set DOCSYNC_WORKER to the built docsync-worker}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
fail() { echo "FAIL: $*" >&2; echo "--- demo output" >&2; cat "$out" >&2; exit 1; }

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
(cd "$src" && DOCSYNC_WORKER=$worker_bin DOCSYNC_DEMO_PG_PORT=$port packaging/demo.sh) >"$out" 2>&1 || rc=$?
[ $rc -eq 0 ] || fail "the demo exited $rc"
grep -q "(port $port), database shop" "$out" || fail "the cluster is not on DOCSYNC_DEMO_PG_PORT=$port"
# the closing status row, as psql -x prints it
field() { sed -n '/== SELECT \* FROM docsync.status/,/== stopping the worker/p' "$out" | sed -n "s/^$1 *| \(.*\)$/\1/p" | head -n 1; }
[ "$(field worker_state)" = streaming ] || fail "closing worker_state: $(field worker_state)"
[ "$(field health)" = ok ] || fail "closing health: $(field health) ($(field reason))"
[ "$(field publishes)" = 7 ] || fail "closing publishes: $(field publishes), not the workload's 7"
[ "$(field changes)" = 11 ] || fail "closing changes: $(field changes), not the workload's 11"
[ -z "$(field last_error)" ] || fail "closing last_error: $(field last_error)"
grep -q "INFO \[status\] state connecting " "$out" || fail "the worker's first connection is not logged as connecting"
if grep -q "state reconnecting" "$out"; then fail "the worker's first connection is called reconnecting"; fi
if grep -E " (WARNING|ERROR) \[" "$out"; then fail "the worker logged a warning or an error on the demo"; fi
echo "the demo ends streaming, health ok, 7 docs published; its first connection is 'connecting'"

echo "a DOCSYNC_DEMO_PG_PORT something listens on is refused"
python3 -c 'import socket,sys,time; s=socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(); time.sleep(60)' "$port" &
holder=$!
for _ in $(seq 1 50); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
rc=0
(cd "$src" && DOCSYNC_WORKER=$worker_bin DOCSYNC_DEMO_PG_PORT=$port packaging/demo.sh) >"$out" 2>&1 || rc=$?
kill "$holder"; wait "$holder" 2>/dev/null || true
[ $rc -ne 0 ] || fail "the demo ran on a port already taken"
grep -q "DOCSYNC_DEMO_PG_PORT=$port: something already listens on 127.0.0.1:$port" "$out" || fail "the taken port is not named"
echo "PASS"
