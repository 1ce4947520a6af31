#!/usr/bin/env bash
# docsync-gateway in a real browser, end to end: PostgreSQL, the worker with the Redis sink, a
# redis-server and the gateway (with a secret for HS256 tokens minted here with openssl).
# - The client library's unit tests (node --test tests/browser/).
# - Headless Chromium opens the gateway's demo page with a token; a committed change must reach the
#   page's DOM within 10 s, over WebSocket and over SSE; a deleted row shows as "deleted"; a change
#   made while the gateway restarts shows once the page has reconnected (tests/browser/demo.test.js,
#   which prints the commit→DOM time).
# - Refusals reach the library's error event: a channel the token does not name (forbidden, the
#   others go on), a token past its exp or signed with another key, no token
#   (tests/browser/refusals.test.js).
# - The library on the gateway's page follows a doc with tokens that expire every 4 s: it must
#   refresh them with no error, lost connection or lost change (tests/browser/refresh.test.js).
# - SIGTERM: the gateway exits 0.
# Screenshots and logs stay in $DOCSYNC_BUILD_DIR/scenario-output/gateway_browser/.
# Needs node and npm (tests/browser/install.sh fills tests/browser/node_modules once, by npm ci
# from the npm registry; it downloads no browser) and Chromium at /usr/bin/chromium (or $CHROMIUM). Without Chromium the
# scenario is skipped, unless CI is set: then it fails.
set -euo pipefail
test_name=gateway_browser
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
top=${DOCSYNC_SOURCE_DIR:-$(cd "$here/../.." && pwd)}
build=${DOCSYNC_BUILD_DIR:-$top/build/dev}
# shellcheck source=lib/browser.bash
. "$here/lib/browser.bash"
gateway_bin=$build/docsync-gateway
[ -x "$gateway_bin" ] || { echo "FAIL: $gateway_bin is not built" >&2; exit 1; }
out=$build/scenario-output/$test_name
rm -rf "$out"
mkdir -p "$out"

# shellcheck source=lib/worker_env.bash
. "$here/lib/worker_env.bash"
# shellcheck source=lib/redis_server.bash
. "$here/lib/redis_server.bash"
gateway_pid=
fail() {
  echo "FAIL: $*" >&2
  for log in worker gateway; do
    if [ -s "$tmp/$log.log" ]; then echo "--- $log log (tail)" >&2; tail -n 30 "$tmp/$log.log" >&2; fi
  done
  exit 1
}
keep_logs() { cp "$tmp/worker.log" "$tmp/gateway.log" "$out/" 2>/dev/null || true; }
stop_gateway_hard() {
  if [ -n "$gateway_pid" ]; then kill -9 "$gateway_pid" 2>/dev/null || true; wait "$gateway_pid" 2>/dev/null || true; fi
  gateway_pid=
}
early_cleanup_hooks+=(stop_gateway_hard)
cleanup_hooks+=(stop_redis keep_logs)

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# mint_token SECONDS CHANNELS_JSON: an HS256 JWT with exp SECONDS from now, signed with $secret_file.
b64url() { openssl base64 -A | tr '+/' '-_' | tr -d '='; }
mint_token() {
  local head payload key sig
  head=$(printf '{"alg":"HS256","typ":"JWT"}' | b64url)
  payload=$(printf '{"exp":%d,"channels":%s}' $(($(date +%s) + $1)) "$2" | b64url)
  key=$(head -c -1 "$secret_file" | od -An -v -tx1 | tr -d ' \n')  # the file less its newline
  sig=$(printf '%s.%s' "$head" "$payload" | openssl dgst -sha256 -mac HMAC -macopt "hexkey:$key" -binary | b64url)
  echo "$head.$payload.$sig"
}

echo "tests/browser/node_modules (npm ci, kept while package-lock.json is unchanged)"
browser_npm_ci

echo "the client library's unit tests"
node --test --test-reporter=spec "$browser_dir/" >"$tmp/unit.log" 2>&1 ||
  { cat "$tmp/unit.log" >&2; fail "node --test tests/browser/ failed"; }
grep -E '^ℹ (pass|fail|skipped) ' "$tmp/unit.log" | tr '\n' ' '
echo

setup_db
sql "CREATE TABLE orders (id int PRIMARY KEY, status text NOT NULL, n int NOT NULL DEFAULT 0)"
sql "INSERT INTO orders (id, status) VALUES (42, 'new'), (43, 'new'), (44, 'new')"
sql "SET client_min_messages = warning; SELECT docsync.define_query('order', \$q\$SELECT jsonb_build_object('id', o.id, 'status', o.status, 'n', o.n) FROM orders o WHERE o.id = \$1\$q\$, params => ARRAY['id'])" >/dev/null
sql "SELECT docsync.watch('order', 'orders', params => ARRAY['id'])" >/dev/null
grant_reader
start_redis
# --live subscribers: a doc is kept current only while someone follows it; the page's channels
# become live through the gateway's subscription (and its docsync:warm, nothing being retained yet).
start_worker --sink "redis://127.0.0.1:$redis_port" --live subscribers --live-poll 1s

secret_file=$tmp/jwt-secret
(umask 077; head -c 32 /dev/urandom | od -An -v -tx1 | tr -d ' \n' >"$secret_file"; echo >>"$secret_file")
gw_port=$(free_port)
gw=http://127.0.0.1:$gw_port
# start_gateway: on $gw_port, until GET /healthz answers 200.
start_gateway() {
  "$gateway_bin" --redis "redis://127.0.0.1:$redis_port" --listen "127.0.0.1:$gw_port" \
    --jwt-secret-file "$secret_file" >>"$tmp/gateway.log" 2>&1 &
  gateway_pid=$!
  for _ in $(seq 1 100); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "$gw/healthz" 2>/dev/null)" = 200 ] && return 0
    kill -0 "$gateway_pid" 2>/dev/null || fail "the gateway exited at start"
    sleep 0.1
  done
  fail "GET /healthz: $(curl -s "$gw/healthz")"
}
# stop_gateway: SIGTERM; the gateway must exit 0 within 10 s.
stop_gateway() {
  local code=0
  kill -TERM "$gateway_pid"
  for _ in $(seq 1 100); do kill -0 "$gateway_pid" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$gateway_pid" 2>/dev/null && fail "the gateway did not exit within 10 s of SIGTERM"
  wait "$gateway_pid" || code=$?
  gateway_pid=
  [ $code -eq 0 ] || fail "SIGTERM: the gateway exited $code"
}
start_gateway

echo "the gateway serves the page and the library; a stream without a token is refused with JSON"
# (read whole first: grep -q ending the pipe early fails curl, and so the pipeline, with pipefail)
page=$(curl -sf "$gw/") || fail "GET / failed"
grep -q 'src="/docsync-client.js"' <<<"$page" || fail "GET / is not the demo page"
cmp -s <(curl -sf "$gw/docsync-client.js") "$top/worker/gateway/assets/docsync-client.js" ||
  fail "GET /docsync-client.js differs from worker/gateway/assets/docsync-client.js (rebuild the gateway)"
code=$(curl -s -o "$tmp/refused.json" -w '%{http_code}' "$gw/v1/sse?channel=db:order:42")
if [ "$code" != 401 ] || [ "$(jq -r .error "$tmp/refused.json" 2>/dev/null)" != missing_token ]; then
  fail "GET /v1/sse without a token: $code $(cat "$tmp/refused.json")"
fi

token=$(mint_token 3600 '["db:order:*"]')
commit_ms="SELECT round(extract(epoch FROM clock_timestamp()) * 1000, 3)"
psql_cmd="psql -X -q -At -v ON_ERROR_STOP=1 -d $db"
# demo TRANSPORT SQL EXPECT [NAME]: the demo page over TRANSPORT watches db:order:42 (and
# db:order:43); SQL must make pre.doc show EXPECT. UPDATE_CMD prints the commit's time (ms since the
# epoch): clock_timestamp() in a second transaction on the same connection, right after the commit.
demo() {
  echo "the demo page over $1: $2"
  GATEWAY_URL=$gw TOKEN=$token CHANNEL=db:order:42 ALSO_CHANNELS=db:order:43 TRANSPORT=$1 \
    UPDATE_CMD="$psql_cmd -c \"$2\" -c '$commit_ms'" EXPECT=$3 SCREENSHOT_DIR=$out/$1-${4:-update} CHROMIUM=$chromium \
    node --test --test-reporter=spec "$browser_dir/demo.test.js" >"$tmp/demo.log" 2>&1 ||
    { cat "$tmp/demo.log" >&2; fail "the demo page over $1 ($2)"; }
  grep -E '^(ws|sse): ' "$tmp/demo.log"
}
demo ws "UPDATE orders SET status = 'paid' WHERE id = 42" '"status": "paid"'
demo sse "UPDATE orders SET status = 'shipped' WHERE id = 42" '"status": "shipped"'
demo ws "DELETE FROM orders WHERE id = 42" 'deleted' delete

# restart_demo TRANSPORT STATUS: the page is up; the gateway stops, the row changes, the gateway
# starts again: the page reconnects and shows the change (the test waits in UPDATE_CMD meanwhile).
restart_demo() {
  local test_pid ms
  echo "the demo page over $1 while the gateway restarts: status $2"
  rm -f "$tmp/go" "$tmp/done"
  GATEWAY_URL=$gw TOKEN=$token CHANNEL=db:order:43 TRANSPORT=$1 EXPECT="\"status\": \"$2\"" \
    UPDATE_CMD="touch '$tmp/go'; for _ in \$(seq 1 400); do [ -s '$tmp/done' ] && break; sleep 0.05; done; cat '$tmp/done'" \
    SCREENSHOT_DIR=$out/$1-restart CHROMIUM=$chromium \
    node --test --test-reporter=spec "$browser_dir/demo.test.js" >"$tmp/demo.log" 2>&1 &
  test_pid=$!
  until [ -f "$tmp/go" ]; do
    kill -0 $test_pid 2>/dev/null || { wait $test_pid || true; cat "$tmp/demo.log" >&2; fail "the demo page over $1 (before the restart)"; }
    sleep 0.05
  done
  stop_gateway
  ms=$($psql_cmd -c "UPDATE orders SET status = '$2' WHERE id = 43" -c "$commit_ms")
  start_gateway
  echo "$ms" >"$tmp/done"
  wait $test_pid || { cat "$tmp/demo.log" >&2; fail "the demo page over $1 across a gateway restart"; }
  grep -E '^(ws|sse): ' "$tmp/demo.log"
}
restart_demo ws packed
restart_demo sse delivered

for transport in ws sse; do
  echo "refusals over $transport: a channel the token does not name, an expired or foreign token, no token"
  GATEWAY_URL=$gw JWT_SECRET_FILE=$secret_file CHANNEL=db:order:43 OTHER_CHANNEL=db:secret:1 TRANSPORT=$transport \
    CHROMIUM=$chromium node --test --test-reporter=spec "$browser_dir/refusals.test.js" >"$tmp/refusals.log" 2>&1 ||
    { cat "$tmp/refusals.log" >&2; fail "refusals over $transport"; }
done

for transport in ws sse; do
  echo "tokens of 4 s refreshed over $transport while db:order:43 changes"
  GATEWAY_URL=$gw JWT_SECRET_FILE=$secret_file CHANNEL=db:order:43 TRANSPORT=$transport FIELD=n \
    TICK_CMD="$psql_cmd -c 'UPDATE orders SET n = n + 1 WHERE id = 43 RETURNING n'" CHROMIUM=$chromium \
    node --test --test-reporter=spec "$browser_dir/refresh.test.js" >"$tmp/refresh.log" 2>&1 ||
    { cat "$tmp/refresh.log" >&2; fail "token refresh over $transport"; }
  grep -E '^(ws|sse): ' "$tmp/refresh.log"
done

echo "liveness: a doc nobody follows is not computed; the followed ones are current"
sql "UPDATE orders SET status = 'unwatched' WHERE id = 44"
sql "CALL docsync.wait_published()" >/dev/null
[ -z "$(rc GET db:order:44)" ] || fail "db:order:44 was computed though no client follows it: $(rc GET db:order:44)"
[ "$(redis_doc_is_current db:order:43 "SELECT jsonb_build_object('id', o.id, 'status', o.status, 'n', o.n) FROM orders o WHERE o.id = 43")" = t ] ||
  fail "db:order:43 is not current: $(rc GET db:order:43)"

echo "SIGTERM: the gateway exits 0"
stop_gateway
stop_worker
echo "ok (screenshots in $out)"
