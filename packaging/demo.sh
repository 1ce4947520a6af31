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
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$top"
browser=0
case "${1:-}" in
  "") ;;
  --browser) browser=1 ;;
  *) echo "usage: packaging/demo.sh [--browser]" >&2; exit 2 ;;
esac
bash packaging/deps.sh
export PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

targets=(docsync-worker)
if [ $browser -eq 1 ]; then
  targets+=(docsync-gateway)
  say "building the extension, the worker and the gateway"
else
  say "building the extension and the worker"
fi
make -s PG_CONFIG="$PG_CONFIG" >/dev/null
worker=${DOCSYNC_WORKER:-$top/build/release/docsync-worker}
gateway=${DOCSYNC_GATEWAY:-$top/build/release/docsync-gateway}
if [ -z "${DOCSYNC_WORKER:-}" ] || { [ $browser -eq 1 ] && [ -z "${DOCSYNC_GATEWAY:-}" ]; }; then
  cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release -DDOCSYNC_TESTS=OFF >/dev/null
  cmake --build build/release -j "$(nproc)" --target "${targets[@]}" >/dev/null
fi
built_at=$SECONDS

say "starting a throwaway PostgreSQL cluster"
if [ -n "${DOCSYNC_DEMO_PG_PORT:-}" ] && (exec 3<>"/dev/tcp/127.0.0.1/$DOCSYNC_DEMO_PG_PORT") 2>/dev/null; then
  echo "DOCSYNC_DEMO_PG_PORT=$DOCSYNC_DEMO_PG_PORT: something already listens on 127.0.0.1:$DOCSYNC_DEMO_PG_PORT; choose another port, or unset it for a free one" >&2
  exit 1
fi
cluster=$(DOCSYNC_CLUSTER_PORT=${DOCSYNC_DEMO_PG_PORT:-} packaging/dev-cluster.sh start)
work=$(mktemp -d)
worker_pid=
redis_pid=
gateway_pid=
sse_pid=
cleanup() {
  local pid
  for pid in "$sse_pid" "$gateway_pid" "$worker_pid" "$redis_pid"; do
    if [ -n "$pid" ]; then kill -9 "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  done
  packaging/dev-cluster.sh stop "$cluster"
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
# shellcheck disable=SC1091
. "$cluster/cluster.env"
createdb shop
export PGDATABASE=shop
echo "cluster in $cluster (port $PGPORT), database shop"

say "installing docsync, the shop schema, the 'order' doc query and the worker's roles"
psql -X -q -v ON_ERROR_STOP=1 -f packaging/demo/schema.sql
psql -X -c "SELECT name, params, watched_tables FROM docsync.queries"

# A port nobody listens on, below the kernel's ephemeral range (as packaging/dev-cluster.sh picks).
free_port() {
  local port
  for _ in $(seq 1 200); do
    port=$((20000 + RANDOM % 12000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then echo "$port"; return 0; fi
  done
  echo "found no free TCP port on 127.0.0.1" >&2
  exit 1
}

if [ $browser -eq 1 ]; then
  say "starting a throwaway redis-server"
  redis_port=${DOCSYNC_DEMO_REDIS_PORT:-$(free_port)}
  if [ -n "${DOCSYNC_DEMO_REDIS_PORT:-}" ] && (exec 3<>"/dev/tcp/127.0.0.1/$redis_port") 2>/dev/null; then
    echo "DOCSYNC_DEMO_REDIS_PORT=$redis_port: something already listens on 127.0.0.1:$redis_port; choose another port, or unset it for a free one" >&2
    exit 1
  fi
  # In its own session: Ctrl-C in the terminal does not stop it before the worker has drained.
  setsid redis-server --port "$redis_port" --bind 127.0.0.1 --dir "$work" --save '' --appendonly no \
    --daemonize no >"$work/redis.log" 2>&1 &
  redis_pid=$!
  for _ in $(seq 1 100); do [ "$(redis-cli -p "$redis_port" PING 2>/dev/null)" = PONG ] && break; sleep 0.1; done
  [ "$(redis-cli -p "$redis_port" PING 2>/dev/null)" = PONG ] || { echo "redis-server did not start:"; cat "$work/redis.log"; exit 1; }
  echo "redis-server on 127.0.0.1:$redis_port"
  sink=redis://127.0.0.1:$redis_port
  # Orders 1 and 2 exist: computed at start, so that the page and GET /v1/docs have them at once.
  say "starting docsync-worker (Redis sink, --live all)"
  "$worker" --dsn "host=$PGHOST port=$PGPORT dbname=shop user=docsync_repl" \
            --pool-dsn "host=$PGHOST port=$PGPORT dbname=shop user=docsync_reader" \
            --slot docsync_demo --create-slot --sink "$sink" --warm db:order:1 --warm db:order:2 \
            --status-dir "$DOCSYNC_STATUS_DIR" >/dev/null 2>"$work/worker.log" &
  worker_pid=$!
else
  say "starting docsync-worker (stdout sink, --live all)"
  "$worker" --dsn "host=$PGHOST port=$PGPORT dbname=shop user=docsync_repl" \
            --pool-dsn "host=$PGHOST port=$PGPORT dbname=shop user=docsync_reader" \
            --slot docsync_demo --create-slot --sink stdout --status-dir "$DOCSYNC_STATUS_DIR" \
            >"$work/docs.jsonl" 2>"$work/worker.log" &
  worker_pid=$!
fi
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
  say "starting docsync-gateway (tokens signed with a key made here)"
  (umask 077; openssl rand -hex 32 >"$work/gateway.key")
  "$gateway" --redis "$sink" --listen "127.0.0.1:${DOCSYNC_DEMO_PORT:-0}" --jwt-secret-file "$work/gateway.key" \
    --max-connections 1000 2>"$work/gateway.log" &
  gateway_pid=$!
  gateway_port=
  for _ in $(seq 1 100); do
    gateway_port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\) .*/\1/p' "$work/gateway.log" | head -n 1)
    [ -n "$gateway_port" ] && [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$gateway_port/healthz")" = 200 ] && break
    kill -0 "$gateway_pid" 2>/dev/null || { echo "the gateway exited:"; cat "$work/gateway.log"; exit 1; }
    sleep 0.1
  done
  gw=http://127.0.0.1:$gateway_port
  curl -sf "$gw/healthz" >/dev/null || { echo "the gateway is not healthy:"; curl -s "$gw/healthz"; cat "$work/gateway.log"; exit 1; }
  echo "docsync-gateway on $gw for $sink"
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
    kill -0 "$worker_pid" 2>/dev/null || { echo "the worker exited:"; cat "$work/worker.log"; exit 1; }
    sleep 0.1
  done
  [ "$ok" = t ] || { echo "the worker did not catch up in 30 s:"; tail -n 20 "$work/worker.log"; exit 1; }
  if [ $browser -eq 1 ]; then
    show_events
    return
  fi
  local total
  total=$(wc -l <"$work/docs.jsonl")
  if [ "$total" -gt "$shown" ]; then sed -n "$((shown + 1)),${total}p" "$work/docs.jsonl"; else echo "(no doc changed)"; fi
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
  if [ "$total" -gt "$shown" ]; then
    grep '^data: ' "$work/events.txt" | sed -n "$((shown + 1)),${total}p" | sed 's/^data: //'
  else
    echo "(no doc changed)"
  fi
  shown=$total
}

step() {
  say "$1"
  echo "  $2"
  psql -X -q -v ON_ERROR_STOP=1 -c "$2"
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
  say "the docs the page starts with (events of GET /v1/sse?channel=db:order:1&channel=db:order:2&channel=db:order:3; order 3 does not exist yet: null)"
  shown=0
  show_events
  page="$gw/?token=$token&channel=db:order:1&channel=db:order:2&channel=db:order:3"
  say "open the demo page (the token opens db:order:* for an hour)"
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
say "SELECT * FROM docsync.status"
psql -X -x -c "SELECT * FROM docsync.status"
[ "$health" = ok ] || { echo "the worker's health is not ok:"; tail -n 20 "$work/worker.log"; exit 1; }

if [ $browser -eq 1 ]; then
  say "everything keeps running: the page follows every change"
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
      echo "the $p exited:"; tail -n 20 "$work/$p.log"; exit 1
    done
    sleep 1 || true
  done
  trap 'exit 130' INT TERM
  say "stopping the gateway (SIGTERM: closes every connection, exit 0)"
  kill -TERM "$gateway_pid" 2>/dev/null || true
  grc=0
  wait "$gateway_pid" || grc=$?
  gateway_pid=
  echo "gateway exit status: $grc"
  echo "gateway log:"
  sed 's/^/  /' "$work/gateway.log"
  kill "$sse_pid" 2>/dev/null || true
  wait "$sse_pid" 2>/dev/null || true
  sse_pid=
  [ "$grc" -eq 0 ] || exit 1
fi

say "stopping the worker (SIGTERM: drain, final acknowledgement, exit 0)"
kill -TERM "$worker_pid" 2>/dev/null || true
rc=0
wait "$worker_pid" || rc=$?
worker_pid=
echo "worker exit status: $rc"
echo "worker log:"
sed 's/^/  /' "$work/worker.log"
[ "$rc" -eq 0 ] || exit 1
if [ $browser -eq 1 ]; then
  redis-cli -p "$redis_port" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
  wait "$redis_pid" 2>/dev/null || true
  redis_pid=
fi
say "done in $SECONDS s: $built_at s of building (less when already built), $((SECONDS - built_at)) s of demo"
