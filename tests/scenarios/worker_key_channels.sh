#!/usr/bin/env bash
# One doc, one channel, at the edges only the real programs have (docs/design.md, "one doc, one
# name, one answer"):
#   - a doc keyed by a timestamp (its canonical text holds a space) is served by docsync-gateway at
#     its channel (%20 in the URL), and the 'T' spelling is refused naming the channel escaped;
#   - docsync:key_types follows a redefinition made while Redis was down: once Redis is back (its
#     AOF holding the old list) the worker writes it again and the gateway serves the new key type;
#   - a key type changed by ALTER TABLE drops the old spelling: a tombstone replaces its copy, and
#     a subscriber still listing it does not make it live again;
#   - keys of types only the server can spell-check (a composite, a time of day; beside a char(3)
#     domain, which the worker checks itself): docsync:warm of another spelling computes and retains
#     nothing, the spelling PostgreSQL prints is published.
# Needs DOCSYNC_WORKER, docsync-gateway beside it (or DOCSYNC_GATEWAY), redis-server, curl, jq.
set -euo pipefail
test_name=key_channels
# shellcheck source=lib/worker_env.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib/worker_env.bash"
# shellcheck source=lib/redis_server.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib/redis_server.bash"
gateway_bin=${DOCSYNC_GATEWAY:-$(dirname "$worker_bin")/docsync-gateway}
gw_pid=
stop_gw() { if [ -n "$gw_pid" ]; then kill "$gw_pid" 2>/dev/null || true; wait "$gw_pid" 2>/dev/null || true; fi; }
cleanup_hooks+=(stop_gw stop_redis)
fail() { echo "FAIL: $*"; echo "--- worker log"; tail -n 30 "$tmp/worker.log" || true; exit 1; }

setup_db
sql "ALTER DATABASE $db SET TimeZone = 'UTC'"
sql "CREATE TABLE ev (at timestamp PRIMARY KEY, v int NOT NULL)"
sql "INSERT INTO ev VALUES ('2026-01-01 00:00:00', 1)"
sql "SELECT docsync.define_query('byat', \$q\$SELECT jsonb_build_object('v', e.v) FROM ev e WHERE e.at = \$1\$q\$, params => ARRAY['at'])" >/dev/null
sql "SELECT docsync.watch('byat', 'ev', params => ARRAY['at'])" >/dev/null
sql "CREATE TABLE items (k text PRIMARY KEY)"
sql "CREATE DOMAIN code3 AS char(3)"
sql "CREATE TABLE countries (code code3 PRIMARY KEY, n int NOT NULL)"
sql "INSERT INTO countries VALUES ('FR', 1)"
sql "SELECT docsync.define_query('country', \$q\$SELECT jsonb_build_object('n', c.n) FROM countries c WHERE c.code = \$1::code3\$q\$, params => ARRAY['code'])" >/dev/null
sql "SELECT docsync.define_query('slot', \$q\$SELECT jsonb_build_object('at', \$1::time)\$q\$, params => ARRAY['at'])" >/dev/null
sql "CREATE TYPE pair AS (a int, b int)"
sql "SELECT docsync.define_query('pair', \$q\$SELECT jsonb_build_object('sum', (\$1::pair).a + (\$1::pair).b)\$q\$, params => ARRAY['p'])" >/dev/null
sql "SELECT docsync.define_query('item', \$q\$SELECT jsonb_build_object('k', \$1::int4)\$q\$, params => ARRAY['k'])" >/dev/null
grant_reader
start_redis
start_worker --sink "redis://127.0.0.1:$redis_port" --live subscribers --live-poll 200ms
for _ in $(seq 1 100); do [ -n "$(rc --raw GET docsync:key_types)" ] && break; sleep 0.1; done

start_gateway() {
  gw_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  "$gateway_bin" --redis "redis://127.0.0.1:$redis_port" --listen "127.0.0.1:$gw_port" --public 'db:*' >>"$tmp/gw.log" 2>&1 &
  gw_pid=$!
  for _ in $(seq 1 100); do curl -s "http://127.0.0.1:$gw_port/healthz" | grep -q '"ok"' && break; sleep 0.1; done
}
# GET /v1/docs/PATH until it is not 404 (the worker computes the doc on the first request)
get_doc() {
  for _ in $(seq 1 20); do
    code=$(curl -s -o "$tmp/body" -w '%{http_code}' "http://127.0.0.1:$gw_port/v1/docs/$1")
    [ "$code" = 404 ] || break
    sleep 0.3
  done
}
start_gateway

# 1. the timestamp key: served at its channel, the 'T' spelling refused naming it
get_doc 'db:byat:2026-01-01%2000%253A00%253A00'
[ "$code" = 200 ] && jq -e '.doc.v == 1' "$tmp/body" >/dev/null || fail "the timestamp doc was not served: $code $(cat "$tmp/body")"
get_doc 'db:byat:2026-01-01T00%253A00%253A00'
[ "$code" = 400 ] || fail "the 'T' spelling was not refused: $code"
grep -qF '"db:byat:2026-01-01 00%3A00%3A00\"' "$tmp/body" || fail "the refusal does not name the channel escaped: $(cat "$tmp/body")"

# 2. docsync:key_types after a redefinition made while Redis was down
stop_gw
stop_redis
sql "SELECT docsync.define_query('item', \$q\$SELECT jsonb_build_object('k', \$1::text)\$q\$, params => ARRAY['k'], or_replace => true)" >/dev/null
sleep 2
start_redis
for _ in $(seq 1 100); do rc --raw GET docsync:key_types 2>/dev/null | grep -q '"item":\["text"\]' && break; sleep 0.1; done
rc --raw GET docsync:key_types | grep -q '"item":\["text"\]' || fail "docsync:key_types was not written again: $(rc --raw GET docsync:key_types)"
# the worker listens for docsync:warm again before the gateway asks it for a doc
for _ in $(seq 1 100); do [ "$(grep -c 'listening on docsync:warm' "$tmp/worker.log")" -ge 2 ] && break; sleep 0.1; done
start_gateway
get_doc 'db:item:abc'
[ "$code" = 200 ] || fail "the gateway refuses the redefined query's channel: $code $(cat "$tmp/body")"

# 3. a key type changed by ALTER TABLE: the old spelling is dropped and its copy is a tombstone
old='db:byat:2026-01-01 00%3A00%3A00'
rc SUBSCRIBE "$old" >/dev/null 2>&1 & extra_pids+=("$!")
sleep 1
sql "ALTER TABLE ev ALTER COLUMN at TYPE timestamptz USING at AT TIME ZONE 'UTC'"
settle 30
sql "UPDATE ev SET v = 2"
settle 30
sleep 1
held=$(rc --raw GET "$old")
[ -z "$held" ] || [ "$(jq -r '.doc' <<<"$held")" = null ] || fail "the old spelling still holds a doc: $held"
[ -z "$held" ] || [ "$(rc PTTL "$old")" -gt 0 ] || fail "the old spelling's tombstone does not expire"
grep -q "names no doc since its key type changed" "$tmp/worker.log" || fail "the drop was not logged"

# 4. keys the server spell-checks: only the printed spelling computes and is retained
variants=('db:country:FR' 'db:pair:("1",2)' 'db:pair:( 1,2)' 'db:pair:(x' 'db:slot:12%3A34' 'db:slot:12%3A34%3A00.0')
for ch in "${variants[@]}" 'db:country:FR ' 'db:pair:(1,2)' 'db:slot:12%3A34%3A00'; do
  rc PUBLISH docsync:warm "$ch" >/dev/null
done
for _ in $(seq 1 100); do
  [ -n "$(rc --raw GET 'db:pair:(1,2)')" ] && [ -n "$(rc --raw GET 'db:country:FR ')" ] &&
    [ -n "$(rc --raw GET 'db:slot:12%3A34%3A00')" ] && break
  sleep 0.1
done
[ "$(rc --raw GET 'db:country:FR ' | jq -r '.doc.n')" = 1 ] || fail "the char(3) doc was not published at 'db:country:FR '"
[ "$(rc --raw GET 'db:pair:(1,2)' | jq -r '.doc.sum')" = 3 ] || fail "the composite doc was not published at 'db:pair:(1,2)'"
[ "$(rc --raw GET 'db:slot:12%3A34%3A00' | jq -r '.doc.at')" = 12:34:00 ] || fail "the time doc was not published"
sleep 1
for ch in "${variants[@]}"; do
  [ "$(rc EXISTS "$ch")" = 0 ] || fail "the variant spelling '$ch' was computed and retained: $(rc --raw GET "$ch")"
done
grep -qF "refusing channel \"db:pair:(\"1\",2)\": param 1 is not as PostgreSQL prints it; the doc's channel is \"db:pair:(1,2)\"" \
  "$tmp/worker.log" || fail "the composite variant was not refused naming the doc's channel"
grep -qF "refusing channel \"db:slot:12%3A34\": param 1 is not as PostgreSQL prints it; the doc's channel is \"db:slot:12%3A34%3A00\"" \
  "$tmp/worker.log" || fail "the time variant was not refused naming the doc's channel"
grep -qF 'PostgreSQL refused its key' "$tmp/worker.log" || fail "the unreadable composite was not refused"
echo "PASS"
