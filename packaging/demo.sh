#!/usr/bin/env bash
# The main job on the embedded default: a throwaway cluster, the extension, a small shop whose orders
# are docs, the worker with the stdout sink, and a scripted workload. Every doc line and status row
# it prints is real output of the worker and the server. Cleans up after itself, even on failure.
#   packaging/demo.sh             the docs as the worker's stdout sink writes them
#   packaging/demo.sh --browser   the docs in a browser: the worker publishes to a throwaway
#                                 redis-server, docsync-gateway serves them; prints the demo page's
#                                 URL with a token for the order docs, runs the workload slowly,
#                                 then keeps everything running until Ctrl-C
# --browser also reads DOCSYNC_DEMO_SECONDS (stop N seconds after the workload instead of waiting
# for Ctrl-C, and never wait for Enter), DOCSYNC_DEMO_PACE (seconds between the workload's steps,
# default 3) and DOCSYNC_DEMO_PORT (the gateway's port on 127.0.0.1, default a free one).
# Both read DOCSYNC_DEMO_PG_PORT (the cluster's port on 127.0.0.1) and DOCSYNC_DEMO_REDIS_PORT
# (--browser: redis-server's), each a free one by default, and DOCSYNC_WORKER and DOCSYNC_GATEWAY
# (binaries already built: nothing of the worker is built then).
# The demo ends with docsync.status, once the status file reports everything the workload did; it
# fails unless the health there is ok.
# It prints one line per step, and under each workload step the docs it published; what the steps
# ran (package installs, the build, psql, the worker's and the gateway's logs, the full status row)
# goes to a log, DOCSYNC_DEMO_LOG or build/demo.log, which a failed step names with its last lines.
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$top"
browser=0
case "${1:-}" in
  "") ;;
  --browser) browser=1 ;;
  *) echo "usage: packaging/demo.sh [--browser]" >&2; exit 2 ;;
esac
log=${DOCSYNC_DEMO_LOG:-$top/build/demo.log}
mkdir -p "$(dirname "$log")"
: >"$log"
log=$(cd "$(dirname "$log")" && pwd)/$(basename "$log")

# One line per step: begin TEXT prints "TEXT ... " and records the step in the log; done_ [RESULT]
# ends the line. quiet CMD... runs a command with its output in the log. fail WHY ends the demo.
current=
begin() { current=$1; printf '%s ... ' "$1"; printf '\n=== %s\n' "$1" >>"$log"; }
done_() { echo "${1:-ok}"; current=; }
quiet() { "$@" >>"$log" 2>&1; }
fail() { printf 'FAILED: %s\n' "$*" >>"$log"; echo "failed: $*"; current=; exit 1; }
# A failure anywhere names the step, the log and the log's last lines.
on_failure() {
  local rc=$1
  [ "$rc" -eq 0 ] && return 0
  [ -n "$current" ] && echo "failed (exit status $rc)"
  echo "the demo stopped; the details are in $log, which ends:"
  tail -n 15 "$log" | sed 's/^/  | /'
}
trap 'on_failure $?' EXIT

begin "installing the Debian packages docsync needs"
quiet bash packaging/deps.sh || fail "packaging/deps.sh could not install them (run as root, or install what it names)"
done_
export PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}

targets=(docsync-worker)
worker=${DOCSYNC_WORKER:-$top/build/release/docsync-worker}
gateway=${DOCSYNC_GATEWAY:-$top/build/release/docsync-gateway}
if [ $browser -eq 1 ]; then
  targets+=(docsync-gateway)
  begin "building the extension, the worker and the gateway (a few minutes the first time)"
else
  begin "building the extension and the worker (a few minutes the first time)"
fi
quiet make -s PG_CONFIG="$PG_CONFIG" || fail "the extension did not build"
if [ -z "${DOCSYNC_WORKER:-}" ] || { [ $browser -eq 1 ] && [ -z "${DOCSYNC_GATEWAY:-}" ]; }; then
  quiet cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release -DDOCSYNC_TESTS=OFF || fail "cmake could not configure build/release"
  quiet cmake --build build/release -j "$(nproc)" --target "${targets[@]}" || fail "the worker did not build"
  # The Release build prints no warnings; one that appears is named here, not buried in the log.
  warnings=$(grep -c 'warning:' "$log" || true)
  if [ "$warnings" -gt 0 ]; then done_ "ok ($SECONDS s), but with $warnings compiler warning(s): see $log"; else done_ "ok ($SECONDS s)"; fi
else
  done_ "ok (the extension; the worker given: $worker)"
fi
built_at=$SECONDS

begin "starting a throwaway PostgreSQL cluster"
if [ -n "${DOCSYNC_DEMO_PG_PORT:-}" ] && (exec 3<>"/dev/tcp/127.0.0.1/$DOCSYNC_DEMO_PG_PORT") 2>/dev/null; then
  fail "DOCSYNC_DEMO_PG_PORT=$DOCSYNC_DEMO_PG_PORT: something already listens on 127.0.0.1:$DOCSYNC_DEMO_PG_PORT; choose another port, or unset it for a free one"
fi
cluster=
work=$(mktemp -d)
worker_pid=
redis_pid=
gateway_pid=
sse_pid=
cleanup() {
  local rc=$? pid
  trap - EXIT
  on_failure "$rc"
  for pid in "$sse_pid" "$gateway_pid" "$worker_pid" "$redis_pid"; do
    if [ -n "$pid" ]; then kill -9 "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  done
  if [ -n "$cluster" ]; then quiet packaging/dev-cluster.sh stop "$cluster" || true; fi
  # What the worker and the gateway logged, for the record (shown above when a step failed).
  for f in "$work/worker.log" "$work/gateway.log" "$work/redis.log"; do
    [ -s "$f" ] && { printf '\n=== %s\n' "${f##*/}"; cat "$f"; } >>"$log"
  done
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
cluster=$(DOCSYNC_CLUSTER_PORT=${DOCSYNC_DEMO_PG_PORT:-} packaging/dev-cluster.sh start 2>>"$log") ||
  fail "packaging/dev-cluster.sh could not start a cluster"
# shellcheck disable=SC1091
. "$cluster/cluster.env"
quiet createdb shop || fail "createdb shop failed"
export PGDATABASE=shop
done_ "ok (port $PGPORT), database shop"

begin "creating the shop, its 'order' doc query and the worker's two roles"
quiet psql -X -q -v ON_ERROR_STOP=1 -f packaging/demo/schema.sql || fail "packaging/demo/schema.sql failed"
quiet psql -X -c "SELECT name, params, watched_tables FROM docsync.queries"
quiet psql -X -c "SELECT \"table\", kind, origin, mapping FROM docsync.explain('order')"
done_

# A port nobody listens on, below the kernel's ephemeral range (as packaging/dev-cluster.sh picks).
free_port() {
  local port
  for _ in $(seq 1 200); do
    port=$((20000 + RANDOM % 12000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then echo "$port"; return 0; fi
  done
  fail "found no free TCP port on 127.0.0.1"
}

if [ $browser -eq 1 ]; then
  begin "starting a throwaway redis-server"
  redis_port=${DOCSYNC_DEMO_REDIS_PORT:-$(free_port)}
  if [ -n "${DOCSYNC_DEMO_REDIS_PORT:-}" ] && (exec 3<>"/dev/tcp/127.0.0.1/$redis_port") 2>/dev/null; then
    fail "DOCSYNC_DEMO_REDIS_PORT=$redis_port: something already listens on 127.0.0.1:$redis_port; choose another port, or unset it for a free one"
  fi
  # In its own session: Ctrl-C in the terminal does not stop it before the worker has drained.
  setsid redis-server --port "$redis_port" --bind 127.0.0.1 --dir "$work" --save '' --appendonly no \
    --daemonize no >"$work/redis.log" 2>&1 &
  redis_pid=$!
  for _ in $(seq 1 100); do [ "$(redis-cli -p "$redis_port" PING 2>/dev/null)" = PONG ] && break; sleep 0.1; done
  [ "$(redis-cli -p "$redis_port" PING 2>/dev/null)" = PONG ] || fail "redis-server did not start (its log is below)"
  done_ "ok (127.0.0.1:$redis_port)"
  sink=redis://127.0.0.1:$redis_port
  # Orders 1 and 2 exist: computed at start, so that the page and GET /v1/docs have them at once.
  begin "starting docsync-worker (Redis sink, --live all)"
  "$worker" --dsn "host=$PGHOST port=$PGPORT dbname=shop user=docsync_repl" \
            --pool-dsn "host=$PGHOST port=$PGPORT dbname=shop user=docsync_reader" \
            --slot docsync_demo --create-slot --sink "$sink" --warm db:order:1 --warm db:order:2 \
            --status-dir "$DOCSYNC_STATUS_DIR" >/dev/null 2>"$work/worker.log" &
  worker_pid=$!
else
  begin "starting docsync-worker (stdout sink, --live all)"
  "$worker" --dsn "host=$PGHOST port=$PGPORT dbname=shop user=docsync_repl" \
            --pool-dsn "host=$PGHOST port=$PGPORT dbname=shop user=docsync_reader" \
            --slot docsync_demo --create-slot --sink stdout --status-dir "$DOCSYNC_STATUS_DIR" \
            >"$work/docs.jsonl" 2>"$work/worker.log" &
  worker_pid=$!
fi
done_ "ok (pid $worker_pid, slot docsync_demo)"
shown=0

# base64url without padding, of stdin.
b64url() { openssl base64 -A | tr '+/' '-_' | tr -d '='; }
# mint_token CHANNELS_JSON SECONDS: an HS256 JWT opening CHANNELS_JSON for SECONDS, signed with the
# gateway's key (the key file's bytes less its final newline).
mint_token() {
  local head payload sig
  head=$(printf '{"alg":"HS256","typ":"JWT"}' | b64url)
  payload=$(printf '{"exp":%d,"channels":%s}' $(($(date +%s) + $2)) "$1" | b64url)
  sig=$(printf '%s.%s' "$head" "$payload" | openssl dgst -sha256 -hmac "$(cat "$work/gateway.key")" -binary | b64url)
  echo "$head.$payload.$sig"
}

if [ $browser -eq 1 ]; then
  begin "starting docsync-gateway (tokens signed with a key made here)"
  (umask 077; openssl rand -hex 32 >"$work/gateway.key")
  "$gateway" --redis "$sink" --listen "127.0.0.1:${DOCSYNC_DEMO_PORT:-0}" --jwt-secret-file "$work/gateway.key" \
    --max-connections 1000 2>"$work/gateway.log" &
  gateway_pid=$!
  gateway_port=
  for _ in $(seq 1 100); do
    gateway_port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\) .*/\1/p' "$work/gateway.log" | head -n 1)
    [ -n "$gateway_port" ] && [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$gateway_port/healthz")" = 200 ] && break
    kill -0 "$gateway_pid" 2>/dev/null || fail "the gateway exited (its log is below)"
    sleep 0.1
  done
  gw=http://127.0.0.1:$gateway_port
  curl -sf "$gw/healthz" >/dev/null || fail "the gateway is not healthy: $(curl -s "$gw/healthz")"
  done_ "ok ($gw, for $sink)"
  token=$(mint_token '["db:order:*"]' 3600)
  # What the page shows, followed here too: the events of one Server-Sent Events stream.
  curl -sN -H "Authorization: Bearer $token" \
    "$gw/v1/sse?channel=db:order:1&channel=db:order:2&channel=db:order:3" >"$work/events.txt" 2>/dev/null &
  sse_pid=$!
fi

# Waits until the worker has acknowledged everything committed so far (its docs are published),
# then prints the doc lines it wrote since the last call (--browser: the docs the gateway streamed).
settle() {
  local target ok
  target=$(psql -X -At -c "SELECT pg_current_wal_lsn()")
  for _ in $(seq 1 300); do
    ok=$(psql -X -At -c "SELECT coalesce(confirmed_flush_lsn >= '$target', false) FROM pg_replication_slots WHERE slot_name = 'docsync_demo'")
    [ "$ok" = t ] && break
    kill -0 "$worker_pid" 2>/dev/null || fail "the worker exited (its log is below)"
    sleep 0.1
  done
  [ "$ok" = t ] || fail "the worker did not catch up in 30 s (its log is below)"
  if [ $browser -eq 1 ]; then
    show_events
    return
  fi
  local total
  total=$(wc -l <"$work/docs.jsonl")
  print_docs < <(sed -n "$((shown + 1)),${total}p" "$work/docs.jsonl")
  shown=$total
}

# --browser: prints the docs the gateway streamed since the last call (the data of each SSE event).
# Published means sent to the gateway's subscription: the events follow within moments.
show_events() {
  local total
  for _ in $(seq 1 20); do
    [ "$(grep -c '^data: ' "$work/events.txt" || true)" -gt "$shown" ] && break
    sleep 0.1
  done
  sleep 0.2
  total=$(grep -c '^data: ' "$work/events.txt" || true)
  print_docs < <(grep '^data: ' "$work/events.txt" | sed -n "$((shown + 1)),${total}p" | sed 's/^data: //')
  shown=$total
}

# print_docs: ends the step's line with how many docs it published, then prints them, indented.
print_docs() {
  local docs
  docs=$(cat)
  if [ -z "$docs" ]; then done_ "no doc changed"; return; fi
  local n
  n=$(grep -c . <<<"$docs")
  if [ "$n" -eq 1 ]; then done_ "1 doc:"; else done_ "$n docs:"; fi
  sed 's/^/    /' <<<"$docs"
  printf '%s\n' "$docs" >>"$log"
}

step() {
  begin "$1"
  echo "$2" >>"$log"
  quiet psql -X -q -v ON_ERROR_STOP=1 -c "$2" || fail "the workload's statement failed: $2"
  settle
  if [ $browser -eq 1 ]; then sleep "${DOCSYNC_DEMO_PACE:-3}"; fi
}

settle >/dev/null
if [ $browser -eq 1 ]; then
  # The worker computes orders 1 and 2 at start (--warm): the stream begins with them.
  for _ in $(seq 1 100); do
    grep -q '^data: .*"channel":"db:order:1"' "$work/events.txt" &&
      grep -q '^data: .*"channel":"db:order:2"' "$work/events.txt" && break
    sleep 0.1
  done
  begin "the docs the page starts with, from GET /v1/sse (order 3 does not exist yet: null)"
  shown=0
  show_events
  page="$gw/?token=$token&channel=db:order:1&channel=db:order:2&channel=db:order:3"
  echo "open the demo page (the token opens db:order:* for an hour):"
  echo "  $page"
  echo
  echo "  token:  $token"
  echo "  a doc:  curl -H 'Authorization: Bearer $token' $gw/v1/docs/db:order:1"
  echo "  events: curl -N -H 'Authorization: Bearer $token' '$gw/v1/sse?channel=db:order:1'"
  if [ -t 0 ] && [ -z "${DOCSYNC_DEMO_SECONDS:-}" ]; then
    printf '\nPress Enter to run the workload (the page shows each change as it commits). '
    read -r _ || true
  fi
fi
step "a new order with two items" \
  "BEGIN; INSERT INTO orders VALUES (3, 'linus'); INSERT INTO order_items VALUES (4, 3, 1, 1), (5, 3, 2, 1); COMMIT;"
step "an item moves from order 1 to order 2: both docs change" \
  "UPDATE order_items SET order_id = 2 WHERE id = 2;"
step "espresso beans get dearer: every order containing them changes (reverse index)" \
  "UPDATE products SET price = 13.90 WHERE id = 1;"
step "order 2 ships" \
  "UPDATE orders SET status = 'shipped' WHERE id = 2;"
step "order 3 is deleted: its doc becomes null" \
  "BEGIN; DELETE FROM order_items WHERE order_id = 3; DELETE FROM orders WHERE id = 3; COMMIT;"

# The status file is rewritten every half second: wait until it reports the whole workload (its
# acknowledged position at the last commit), so the row below shows what the demo did.
target=$(psql -X -At -c "SELECT pg_current_wal_lsn()")
health=
for _ in $(seq 1 100); do
  health=$(psql -X -At -c "SELECT health FROM docsync.status WHERE slot_name = 'docsync_demo' AND acked_lsn >= '$target' AND publishes > 0")
  [ "$health" = ok ] && break
  sleep 0.1
done
begin "waiting for docsync.status to report the whole workload"
printf 'SELECT * FROM docsync.status\n' >>"$log"
quiet psql -X -x -c "SELECT * FROM docsync.status"
[ "$health" = ok ] || fail "the worker's health is not ok: $(psql -X -At -c "SELECT health || ': ' || reason FROM docsync.status WHERE slot_name = 'docsync_demo'")"
done_ "$(psql -X -At -F ' ' -c "SELECT 'health ' || health || ' (' || reason || '): ' || changes || ' changes, ' || publishes || ' docs published' FROM docsync.status WHERE slot_name = 'docsync_demo'")"

if [ $browser -eq 1 ]; then
  echo "everything keeps running: the page follows every change"
  echo "  $page"
  echo "  change an order and watch it there, e.g.:"
  echo "  PGHOST=$PGHOST PGPORT=$PGPORT PGUSER=$PGUSER psql -d shop -c \"UPDATE orders SET status = 'paid' WHERE id = 1\""
  echo "  /healthz: $(curl -s "$gw/healthz")"
  if [ -n "${DOCSYNC_DEMO_SECONDS:-}" ]; then
    echo "  stopping in $DOCSYNC_DEMO_SECONDS s (DOCSYNC_DEMO_SECONDS), or at Ctrl-C"
    until_s=$((SECONDS + DOCSYNC_DEMO_SECONDS))
  else
    echo "  Ctrl-C stops it all and removes the cluster"
    until_s=
  fi
  # Ctrl-C (or SIGTERM) ends the wait; the stops below then run as without it. The terminal's
  # SIGINT reaches the worker and the gateway too: both stop on it as on SIGTERM, and exit 0.
  stop_now=
  trap 'stop_now=1' INT TERM
  while [ -z "$stop_now" ] && { [ -z "$until_s" ] || [ $SECONDS -lt "$until_s" ]; }; do
    for p in gateway worker; do
      pid_var=${p}_pid
      kill -0 "${!pid_var}" 2>/dev/null && continue
      [ -n "$stop_now" ] && break 2
      fail "the $p exited (its log is below)"
    done
    sleep 1 || true
  done
  trap 'exit 130' INT TERM
  begin "stopping the gateway (SIGTERM: closes every connection)"
  kill -TERM "$gateway_pid" 2>/dev/null || true
  grc=0
  wait "$gateway_pid" || grc=$?
  gateway_pid=
  kill "$sse_pid" 2>/dev/null || true
  wait "$sse_pid" 2>/dev/null || true
  sse_pid=
  [ "$grc" -eq 0 ] || fail "the gateway exited with status $grc (its log is below)"
  done_ "ok (exit status 0)"
fi

begin "stopping the worker (SIGTERM: drain, final acknowledgement)"
kill -TERM "$worker_pid" 2>/dev/null || true
rc=0
wait "$worker_pid" || rc=$?
worker_pid=
[ "$rc" -eq 0 ] || fail "the worker exited with status $rc (its log is below)"
done_ "ok (exit status 0)"
if [ $browser -eq 1 ]; then
  redis-cli -p "$redis_port" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
  wait "$redis_pid" 2>/dev/null || true
  redis_pid=
fi
begin "removing the cluster"
quiet packaging/dev-cluster.sh stop "$cluster" || fail "packaging/dev-cluster.sh could not stop $cluster"
cluster=
done_
echo "done in $SECONDS s ($built_at s of building, $((SECONDS - built_at)) s of demo); what each step ran is in $log"
