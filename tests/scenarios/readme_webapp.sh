#!/usr/bin/env bash
# README.md's "A live web app in ten minutes", as written: every code block there whose info string
# names a `webapp:` step is run here, in the README's order, on a throwaway cluster set up as step 3
# of "Setting docsync up" leaves a server (wal_level = logical, docsync allowed, docsync.status_dir),
# whose pg_hba.conf holds the superuser's own line and Debian's scram-sha-256 line for 127.0.0.1.
# Host-specific names are pointed at the test's own: the server's port 5432, Redis's 6379, the
# gateway's 8080, the page's 8000, /run/docsync, /etc/docsync and the home directory of ~/.pgpass.
# Checked: the README's blocks are exactly the steps run here; step 1 raises no NOTICE or WARNING
# (a correct definition is silent); the worker and the gateway start with the README's commands and
# log no WARNING (the gateway under a descriptor limit of 4096, a common shell's); Chromium opens the
# page with step 4's token and shows the doc; after step 5's UPDATE it shows the new status;
# docsync.status says ok.
# Needs DOCSYNC_WORKER, docsync-gateway beside it (or DOCSYNC_GATEWAY), redis-server, openssl,
# python3 and Chromium at /usr/bin/chromium (or $CHROMIUM; without it the scenario is skipped,
# unless CI is set: then it fails).
set -euo pipefail
src=${DOCSYNC_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
worker_bin=${DOCSYNC_WORKER:?set DOCSYNC_WORKER to the built docsync-worker}
gateway_bin=${DOCSYNC_GATEWAY:-$(dirname "$worker_bin")/docsync-gateway}
chromium=${CHROMIUM:-/usr/bin/chromium}
if [ ! -x "$chromium" ]; then
  [ -n "${CI:-}" ] && { echo "FAIL: no Chromium at $chromium, and CI is set" >&2; exit 1; }
  echo "SKIP: no Chromium at $chromium (apt-get install chromium, or set CHROMIUM)"
  exit 0
fi
[ -x "$gateway_bin" ] || { echo "FAIL: $gateway_bin is not built" >&2; exit 1; }
tmp=$(mktemp -d)
chmod 755 "$tmp"
cl=
worker_pid=
gateway_pid=
serve_pid=
t0=$SECONDS
fail() {
  echo "FAIL: $*" >&2
  for f in "$tmp"/*.log; do [ -f "$f" ] && { echo "--- $f (tail)" >&2; tail -n 20 "$f" >&2; }; done
  exit 1
}
# shellcheck source=lib/redis_server.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib/redis_server.bash"
stop_pid() { [ -n "$1" ] && { kill -9 "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; }; }
cleanup() {
  local rc=$?
  stop_pid "$serve_pid"; stop_pid "$gateway_pid"; stop_pid "$worker_pid"
  stop_redis
  [ -n "$cl" ] && "$src/packaging/dev-cluster.sh" stop "$cl"
  rm -rf "$tmp"
  exit $rc
}
trap cleanup EXIT

# ---- the README's blocks, one file each under $tmp/blocks, in the README's order
mkdir -p "$tmp/blocks"
python3 "$(dirname "${BASH_SOURCE[0]}")/lib/readme_blocks.py" "$src/README.md" "A live web app in ten minutes" webapp "$tmp/blocks" || exit 1
steps="definitions pgpass worker gateway token page serve change"
[ "$(cat "$tmp/blocks/ORDER")" = "$steps" ] ||
  fail "the README's webapp blocks are [$(cat "$tmp/blocks/ORDER")], this test runs [$steps]: run each new step here"

# ---- the server as step 3 of "Setting docsync up" leaves it
cl=$("$src/packaging/dev-cluster.sh" start)
# shellcheck disable=SC1091
. "$cl/cluster.env"
export PGUSER=postgres PGDATABASE=postgres
ctl() { "$src/packaging/dev-cluster.sh" ctl "$cl" "$@"; }
mkdir -p "$tmp/run/docsync" "$tmp/etc" "$tmp/home" "$tmp/bin" "$tmp/www"
chmod 777 "$tmp/run/docsync"
psql -X -q -c "ALTER SYSTEM SET docsync.status_dir = '$tmp/run/docsync'"
printf '%s\n' "local all postgres trust" "host all all 127.0.0.1/32 scram-sha-256" >"$cl/data/pg_hba.conf"
ctl stop
ctl start
start_redis
page_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
gateway_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
ln -s "$(readlink -f "$worker_bin")" "$tmp/bin/docsync-worker"
ln -s "$(readlink -f "$gateway_bin")" "$tmp/bin/docsync-gateway"
# block NAME: the README's block with this host's names pointed at the test's
block() {
  sed -e "s|5432|$PGPORT|g" -e "s|6379|$redis_port|g" -e "s|8080|$gateway_port|g" -e "s|8000|$page_port|g" \
      -e "s|/run/docsync|$tmp/run/docsync|g" -e "s|/etc/docsync|$tmp/etc/docsync|g" "$tmp/blocks/$1"
}
user_env=(env -i HOME="$tmp/home" PATH="$tmp/bin:/usr/local/bin:/usr/bin:/bin")
shop() { psql -X -q -At -v ON_ERROR_STOP=1 -d shop "$@"; }

echo "step 1: database, table, doc query, roles"
psql -X -q -c "CREATE DATABASE shop"
shop -f <(block definitions) >"$tmp/definitions.out" 2>&1 || fail "step 1: $(cat "$tmp/definitions.out")"
if grep -E "NOTICE|WARNING" "$tmp/definitions.out"; then fail "step 1 raised a notice or warning on a correct definition"; fi

echo "step 2: ~/.pgpass and the worker"
"${user_env[@]}" bash -e <(block pgpass) || fail "step 2's ~/.pgpass failed"
( exec "${user_env[@]}" bash -c "exec $(block worker)" ) >"$tmp/worker.log" 2>&1 &
worker_pid=$!
deadline=$((SECONDS + 60))
until [ "$(psql -X -At -c "SELECT coalesce(bool_or(active), false) FROM pg_replication_slots WHERE slot_name = 'docsync_shop'")" = t ]; do
  kill -0 "$worker_pid" 2>/dev/null || { worker_pid=; fail "the worker exited"; }
  [ $SECONDS -lt $deadline ] || fail "the worker did not stream the slot in 60 s"
  sleep 0.2
done

echo "step 3: the gateway (descriptor limit 4096)"
gateway_cmd=$(block gateway)
( ulimit -n 4096; exec "${user_env[@]}" bash -c "$gateway_cmd" ) >"$tmp/gateway.log" 2>&1 &
gateway_pid=$!
deadline=$((SECONDS + 30))
until [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$gateway_port/healthz")" = 200 ]; do
  kill -0 "$gateway_pid" 2>/dev/null || { gateway_pid=; fail "the gateway exited"; }
  [ $SECONDS -lt $deadline ] || fail "the gateway is not healthy in 30 s"
  sleep 0.2
done

echo "step 4: a token; step 5: the page, served"
url=$("${user_env[@]}" bash -e <(block token)) || fail "step 4 failed"
[[ $url == "http://127.0.0.1:$page_port/order.html?token="* ]] || fail "step 4 printed $url"
block page >"$tmp/www/order.html"
( cd "$tmp/www" && exec "${user_env[@]}" bash -c "exec $(block serve)" ) >"$tmp/serve.log" 2>&1 &
serve_pid=$!
for _ in $(seq 1 50); do curl -sf -o /dev/null "http://127.0.0.1:$page_port/order.html" && break; sleep 0.1; done
# page_status: what the page shows once its scripts ran (WebSocket, so virtual time ends)
page_status() {
  "$chromium" --headless=new --no-sandbox --disable-gpu --user-data-dir="$tmp/chromium" --virtual-time-budget=5000 \
    --dump-dom "$url" 2>>"$tmp/chromium.log" | sed -n 's|.*<b id="status">\([^<]*\)</b>.*|\1|p'
}
# page_shows TEXT: until the page shows TEXT (a fresh page load each time)
page_shows() {
  local deadline=$((SECONDS + 40)) got
  while :; do
    got=$(page_status)
    [ "$got" = "$1" ] && return 0
    [ $SECONDS -lt $deadline ] || fail "the page shows \"$got\", not \"$1\""
    sleep 0.5
  done
}
page_shows paid
echo "  the page shows: paid"
shop -f <(block change) || fail "step 5's UPDATE failed"
page_shows shipped
echo "  after the UPDATE the page shows: shipped"

deadline=$((SECONDS + 20))
until [ "$(shop -c "SELECT health FROM docsync.status WHERE slot_name = 'docsync_shop'")" = ok ]; do
  [ $SECONDS -lt $deadline ] || fail "docsync.status: $(shop -c "SELECT health, reason FROM docsync.status")"
  sleep 0.3
done
if grep -E " WARNING \[" "$tmp/worker.log" "$tmp/gateway.log"; then fail "the worker or the gateway logged a warning on a correct setup"; fi
echo "ok ($((SECONDS - t0)) s)"
