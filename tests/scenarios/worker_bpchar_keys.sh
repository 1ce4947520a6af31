#!/usr/bin/env bash
# One doc, one channel for char(n) keys (docs/design.md, "key identity"): a doc query whose param is
# a char(n) column's (`code = $1`, typed plain bpchar, without the column's width) reads "FR",
# "FR " and "FR  " as one value, since trailing spaces are no part of a bpchar. The real worker,
# docsync-gateway and Redis, with --live subscribers:
#   - docsync:warm, docsync:touch and subscribers of the padded spellings compute and retain
#     nothing, each refusal naming db:country:FR; the gateway refuses them naming it too;
#   - a change of a char(3) column (whose key the plugin prints padded, "FR ") and a row of a
#     reverse index's keys query returning char(3) refresh the one channel, db:<query>:FR;
#   - a domain over char(5) keeps its own canonical text, padded to its size;
#   - a char(3)[] key (bpchar[], spell-checked by the server) is spelled with its elements trimmed,
#     {FR,DE}, by the server check and for a change's key alike;
#   - a retained padded channel is an orphan at a --live all start (the tombstone TTL);
#   - hostile spellings: a tab, a no-break space and an all-blank key are values of their own
#     ("FR<tab>" is no "FR"), except that blanks alone are the empty value.
# Needs DOCSYNC_WORKER, docsync-gateway beside it (or DOCSYNC_GATEWAY), redis-server, curl, jq.
set -euo pipefail
test_name=bpchar_keys
# shellcheck source=lib/worker_env.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib/worker_env.bash"
# shellcheck source=lib/redis_server.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib/redis_server.bash"
gateway_bin=${DOCSYNC_GATEWAY:-$(dirname "$worker_bin")/docsync-gateway}
gw_pid=
stop_gw() { if [ -n "$gw_pid" ]; then kill "$gw_pid" 2>/dev/null || true; wait "$gw_pid" 2>/dev/null || true; fi; }
cleanup_hooks+=(stop_gw stop_redis)

setup_db
sql "CREATE TABLE countries (code char(2) PRIMARY KEY, n int NOT NULL)"
sql "INSERT INTO countries VALUES ('FR', 1), ('', 7)"
sql "CREATE TABLE regions (code char(3) PRIMARY KEY, n int NOT NULL)"
sql "INSERT INTO regions VALUES ('FR', 1)"
sql "CREATE TABLE cities (id int PRIMARY KEY, country char(3) NOT NULL, name text NOT NULL)"
sql "INSERT INTO cities VALUES (1, 'FR', 'Lyon')"
sql "CREATE DOMAIN code5 AS char(5)"
sql "CREATE TABLE zones (code code5 PRIMARY KEY, n int NOT NULL)"
sql "INSERT INTO zones VALUES ('FR', 1)"
sql "CREATE TABLE shipments (id int PRIMARY KEY, codes char(3)[] NOT NULL, n int NOT NULL)"
sql "ALTER TABLE shipments REPLICA IDENTITY FULL"
sql "INSERT INTO shipments VALUES (1, '{FR,DE}', 1)"
# country: a char(2) column's param; region: char(3), its changes' keys printed padded ("FR ");
# region also follows cities through a keys query returning char(3); zone: a domain over char(5)
sql "SELECT docsync.define_query('country', \$q\$SELECT jsonb_build_object('n', c.n) FROM countries c WHERE c.code = \$1\$q\$, params => ARRAY['code'])" >/dev/null
sql "SELECT docsync.watch('country', 'countries', params => ARRAY['code'])" >/dev/null
sql "SELECT docsync.define_query('region', \$q\$SELECT jsonb_build_object('n', r.n, 'cities', (SELECT jsonb_agg(ci.name ORDER BY ci.name) FROM cities ci WHERE ci.country = r.code)) FROM regions r WHERE r.code = \$1\$q\$, params => ARRAY['code'])" >/dev/null 2>&1
sql "SELECT docsync.watch('region', 'regions', params => ARRAY['code'])" >/dev/null 2>&1
sql "SELECT docsync.watch('region', 'cities', keys_sql => \$k\$SELECT country FROM cities WHERE id = \$1\$k\$, keys_args => ARRAY['id'])" >/dev/null
sql "SELECT docsync.define_query('zone', \$q\$SELECT jsonb_build_object('n', z.n) FROM zones z WHERE z.code = \$1::code5\$q\$, params => ARRAY['code'])" >/dev/null
sql "SELECT docsync.watch('zone', 'zones', params => ARRAY['code'])" >/dev/null
sql "SELECT docsync.define_query('codes', \$q\$SELECT jsonb_build_object('n', s.n) FROM shipments s WHERE s.codes = \$1\$q\$, params => ARRAY['codes'])" >/dev/null
sql "SELECT docsync.watch('codes', 'shipments', params => ARRAY['codes'])" >/dev/null
[ "$(sql "SELECT array_to_string(docsync.stored_key_types('country') || docsync.stored_key_types('zone'), ',')")" = "bpchar,bpchar(5)" ] ||
  fail "unexpected key types: $(sql "SELECT docsync.stored_key_types('country') || docsync.stored_key_types('zone')")"
grant_reader
start_redis
start_worker --sink "redis://127.0.0.1:$redis_port" --live subscribers --live-poll 200ms --audit-rate 0
for _ in $(seq 1 100); do [ -n "$(rc --raw GET docsync:key_types)" ] && break; sleep 0.1; done

tab=$'\t'
nbsp=$'\xc2\xa0'
# spellings of a doc that has another channel, and the channel each refusal must name
padded=('db:country:FR ' 'db:country:FR  ' 'db:region:FR ' 'db:country:   ' 'db:zone:FR' 'db:zone:FR     '
        'db:codes:{"FR ",DE}' 'db:codes:{"FR ","DE "}')
names=('db:country:FR' 'db:country:FR' 'db:region:FR' 'db:country:' 'db:zone:FR   ' 'db:zone:FR   '
       'db:codes:{FR,DE}' 'db:codes:{FR,DE}')
rc SUBSCRIBE 'db:country:FR ' 'db:region:FR ' >"$tmp/sub.out" 2>&1 &
extra_pids+=("$!")
for ch in "${padded[@]}"; do
  rc PUBLISH docsync:warm "$ch" >/dev/null
  rc PUBLISH docsync:touch "$ch" >/dev/null
done
# values of their own: a tab or a no-break space is a character, not padding
for ch in 'db:country:FR' 'db:region:FR' 'db:zone:FR   ' 'db:codes:{FR,DE}' 'db:country:' "db:country:FR%09" "db:country:FR$nbsp"; do
  rc PUBLISH docsync:warm "$ch" >/dev/null
done
for _ in $(seq 1 100); do
  [ -n "$(redis_doc db:country:FR)" ] && [ -n "$(redis_doc db:region:FR)" ] && [ -n "$(redis_doc 'db:zone:FR   ')" ] &&
    [ -n "$(redis_doc 'db:codes:{FR,DE}')" ] &&
    [ -n "$(rc --raw GET "db:country:FR$nbsp")" ] && [ -n "$(rc --raw GET "db:country:FR%09")" ] && break
  sleep 0.1
done
[ "$(redis_doc db:country:FR)" = '{"n":1}' ] || fail "db:country:FR was not published: $(rc --raw GET db:country:FR)"
[ "$(redis_doc 'db:country:')" = '{"n":7}' ] || fail "the empty code was not published at db:country: $(rc --raw GET db:country:)"
[ "$(redis_doc db:region:FR)" = '{"n":1,"cities":["Lyon"]}' ] || fail "db:region:FR was not published: $(rc --raw GET db:region:FR)"
[ "$(redis_doc 'db:zone:FR   ')" = '{"n":1}' ] || fail "the char(5) domain's doc was not published at its padded channel"
[ "$(redis_doc 'db:codes:{FR,DE}')" = '{"n":1}' ] || fail "the char(3)[] doc was not published at db:codes:{FR,DE}"
for ch in "db:country:FR%09" "db:country:FR$nbsp"; do
  [ "$(redis_doc "$ch")" = null ] || fail "'$ch' names a code of its own (no row), yet holds $(rc --raw GET "$ch")"
done
sleep 1.5   # a few liveness polls listing the padded subscribers
for i in "${!padded[@]}"; do
  ch=${padded[$i]}
  [ "$(rc EXISTS "$ch")" = 0 ] || fail "the padded spelling '$ch' was computed and retained: $(rc --raw GET "$ch")"
  grep -qF "refusing channel \"$ch\": " "$tmp/worker.log" || fail "'$ch' was not refused"
  grep -F "refusing channel \"$ch\": " "$tmp/worker.log" | grep -qF "the doc's channel is \"${names[$i]}\"" ||
    fail "the refusal of '$ch' does not name ${names[$i]}: $(grep -F "refusing channel \"$ch\"" "$tmp/worker.log")"
  n=$(grep -cF "refusing channel \"$ch\": " "$tmp/worker.log" || true)
  [ "$n" = 1 ] || fail "'$ch' was logged $n times, not once"
done

# changes: the plugin prints a char(3) key padded ("FR "); the keys query returns it padded too
sql "UPDATE countries SET n = 2 WHERE code = 'FR'"
sql "UPDATE regions SET n = 2 WHERE code = 'FR'"
sql "INSERT INTO cities VALUES (2, 'FR ', 'Paris')"
sql "UPDATE zones SET n = 2"
sql "UPDATE shipments SET n = 2"
settle 30
for _ in $(seq 1 50); do
  [ "$(redis_doc db:country:FR)" = '{"n":2}' ] && [ "$(redis_doc db:region:FR)" = '{"n":2,"cities":["Lyon","Paris"]}' ] &&
    [ "$(redis_doc 'db:zone:FR   ')" = '{"n":2}' ] && [ "$(redis_doc 'db:codes:{FR,DE}')" = '{"n":2}' ] && break
  sleep 0.1
done
[ "$(redis_doc db:country:FR)" = '{"n":2}' ] || fail "db:country:FR is not current after the UPDATE: $(rc --raw GET db:country:FR)"
[ "$(redis_doc db:region:FR)" = '{"n":2,"cities":["Lyon","Paris"]}' ] ||
  fail "db:region:FR is not current after the UPDATE and the city (reverse index): $(rc --raw GET db:region:FR)"
[ "$(redis_doc 'db:zone:FR   ')" = '{"n":2}' ] || fail "the char(5) domain's doc is not current: $(rc --raw GET 'db:zone:FR   ')"
[ "$(redis_doc 'db:codes:{FR,DE}')" = '{"n":2}' ] ||
  fail "db:codes:{FR,DE} is not current after the UPDATE (its change's key is {\"FR \",\"DE \"}): $(rc --raw GET 'db:codes:{FR,DE}')"
keys=$(rc --raw KEYS 'db:*' | sort | tr '\n' '|')
expected=$(printf '%s\n' 'db:codes:{FR,DE}' 'db:country:' 'db:country:FR' "db:country:FR$nbsp" 'db:country:FR%09' 'db:region:FR' 'db:zone:FR   ' | sort | tr '\n' '|')
[ "$keys" = "$expected" ] || fail "retained channels: $keys (expected $expected)"

# the gateway refuses the padded spellings before following them, naming the doc's channel
gw_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$gateway_bin" --redis "redis://127.0.0.1:$redis_port" --listen "127.0.0.1:$gw_port" --public 'db:*' >>"$tmp/gw.log" 2>&1 &
gw_pid=$!
for _ in $(seq 1 100); do curl -s "http://127.0.0.1:$gw_port/healthz" | grep -q '"ok"' && break; sleep 0.1; done
code=$(curl -s -o "$tmp/body" -w '%{http_code}' "http://127.0.0.1:$gw_port/v1/docs/db:country:FR%20")
[ "$code" = 400 ] && grep -qF '"db:country:FR\"' "$tmp/body" || fail "the gateway did not refuse db:country:FR%20 naming db:country:FR: $code $(cat "$tmp/body")"
code=$(curl -s -o "$tmp/body" -w '%{http_code}' "http://127.0.0.1:$gw_port/v1/docs/db:country:FR")
[ "$code" = 200 ] && jq -e '.doc.n == 2' "$tmp/body" >/dev/null || fail "the gateway did not serve db:country:FR: $code $(cat "$tmp/body")"
stop_gw
gw_pid=
stop_worker

# a padded channel retained by an older worker names no doc: not made live, given the tombstone TTL
rc SET 'db:country:FR ' '{"channel":"x","doc":{"n":1},"generation":1,"lsn":"0/1"}' >/dev/null
start_worker --sink "redis://127.0.0.1:$redis_port?tombstone-ttl=3600" --live all
for _ in $(seq 1 100); do grep -q "retained channel(s) name no doc" "$tmp/worker.log" && break; sleep 0.1; done
ttl=$(rc PTTL 'db:country:FR ')
[ "$ttl" -gt 0 ] && [ "$ttl" -le 3600000 ] || fail "the retained 'db:country:FR ': PTTL $ttl, not the tombstone TTL"
[ "$(rc PTTL db:country:FR)" = -1 ] || fail "db:country:FR, a doc of its own, was given an expiry"
stop_worker
echo "ok: padded char(n) spellings refused by warm, touch, polls and the gateway; changes and keys queries name the one channel"
