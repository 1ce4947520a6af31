#!/usr/bin/env bash
# What a client can make the worker keep or spend for channels whose key only the server can check
# (docs/design.md, "key identity" and the worker's bounds), with the real worker and Redis; an
# int4[] key is such a key (db:ids:{01} is PostgreSQL's {1}):
#   - a retained non-canonical channel refused by the server check at a --live all start gets the
#     tombstone TTL, the canonical one is kept and computed;
#   - 6000 aliases followed by subscribers (past the 4096 the memory used to hold) are each checked
#     once, then cost no statement while remembered;
#   - with --key-check-rate 50, 1000 new aliases are checked at most 50 a second;
#   - a 256 kB channel warmed is refused and logged by a prefix and its length.
# Needs DOCSYNC_WORKER, redis-server.
set -euo pipefail
test_name=refused_bounds
# shellcheck source=lib/worker_env.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib/worker_env.bash"
# shellcheck source=lib/redis_server.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib/redis_server.bash"
cleanup_hooks+=(stop_redis)

setup_db
sql "CREATE TABLE batches (id int PRIMARY KEY, ids int[] NOT NULL, n int NOT NULL)"
sql "ALTER TABLE batches REPLICA IDENTITY FULL"
sql "INSERT INTO batches VALUES (1, '{1}', 1)"
sql "SELECT docsync.define_query('ids', \$q\$SELECT jsonb_build_object('n', b.n) FROM batches b WHERE b.ids = \$1\$q\$, params => ARRAY['ids'])" >/dev/null
sql "SELECT docsync.watch('ids', 'batches', params => ARRAY['ids'])" >/dev/null
grant_reader
start_redis
checks() { doc_query_calls '%docsync_doc%'; }

# 1. retained copies at a --live all start
env='{"channel":"x","doc":{"n":0},"generation":1,"lsn":"0/1"}'
rc SET 'db:ids:{01}' "$env" >/dev/null
rc SET 'db:ids:{1}' "$env" >/dev/null
start_worker --sink "redis://127.0.0.1:$redis_port?tombstone-ttl=3600" --live all --audit-rate 0
for _ in $(seq 1 100); do grep -q 'refusing channel "db:ids:{01}"' "$tmp/worker.log" && break; sleep 0.2; done
grep -q 'refusing channel "db:ids:{01}"' "$tmp/worker.log" || fail "the server check did not refuse db:ids:{01}"
for _ in $(seq 1 50); do [ "$(rc PTTL 'db:ids:{01}')" -gt 0 ] && break; sleep 0.1; done
[ "$(rc PTTL 'db:ids:{01}')" -gt 0 ] || fail "the refused retained db:ids:{01} has no expiry (PTTL $(rc PTTL 'db:ids:{01}'))"
[ "$(rc PTTL 'db:ids:{1}')" = -1 ] || fail "the canonical db:ids:{1} was given an expiry"
for _ in $(seq 1 50); do [ "$(redis_doc 'db:ids:{1}')" = '{"n":1}' ] && break; sleep 0.1; done
[ "$(redis_doc 'db:ids:{1}')" = '{"n":1}' ] || fail "db:ids:{1} was not computed: $(rc --raw GET 'db:ids:{1}')"
stop_worker
echo "ok: a retained channel the server check refuses expires; the canonical one is kept"

# 2. 6000 aliases, no rate bound: each checked once, then never again while remembered
start_worker --sink "redis://127.0.0.1:$redis_port" --live subscribers --live-poll 200ms --audit-rate 0 --key-check-rate 0
for k in $(seq 1 6000); do printf 'db:ids:{0%d}\n' "$k"; done >"$tmp/aliases"
xargs -d '\n' redis-cli -p "$redis_port" SUBSCRIBE <"$tmp/aliases" >/dev/null 2>&1 &
sub_pid=$!
extra_pids+=("$sub_pid")
c0=$(checks)
for _ in $(seq 1 150); do [ $(($(checks) - c0)) -ge 6000 ] && break; sleep 0.2; done
c1=$(checks)
[ $((c1 - c0)) -ge 6000 ] || fail "6000 aliases were not all checked in 30 s ($((c1 - c0)))"
sleep 5
c2=$(checks)
[ $((c2 - c1)) -lt 100 ] || fail "6000 refused aliases keep the pool checking: $((c2 - c1)) statements in 5 s"
kill "$sub_pid"; wait "$sub_pid" 2>/dev/null || true
stop_worker
echo "ok: 6000 aliases checked once ($((c1 - c0)) statements), then $((c2 - c1)) in 5 s"

# 3. --key-check-rate 50: 1000 new aliases are checked at most 50 a second
start_worker --sink "redis://127.0.0.1:$redis_port" --live subscribers --live-poll 200ms --audit-rate 0 --key-check-rate 50
for k in $(seq 1 1000); do printf 'db:ids:{00%d}\n' "$k"; done >"$tmp/aliases2"
c0=$(checks)
xargs -d '\n' redis-cli -p "$redis_port" SUBSCRIBE <"$tmp/aliases2" >/dev/null 2>&1 &
sub_pid=$!
extra_pids+=("$sub_pid")
sleep 4
c1=$(checks)
[ $((c1 - c0)) -le 300 ] || fail "--key-check-rate 50 let $((c1 - c0)) checks through in 4 s"
[ $((c1 - c0)) -ge 50 ] || fail "no checks ran under --key-check-rate 50 ($((c1 - c0)) in 4 s)"
grep -q -- '--key-check-rate (50 per second) is spent' "$tmp/worker.log" || fail "the spent budget was not logged"
kill "$sub_pid"; wait "$sub_pid" 2>/dev/null || true
echo "ok: $((c1 - c0)) checks in 4 s under --key-check-rate 50"

# 4. a 256 kB channel warmed: refused unread, the log line short
python3 - "$redis_port" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
ch = ("db:ids:{1}" + " " * (256 << 10)).encode()
s.sendall(b"*3\r\n$7\r\nPUBLISH\r\n$12\r\ndocsync:warm\r\n$%d\r\n%s\r\n" % (len(ch), ch))
buf = b""
while not buf.endswith(b"\r\n"):
    buf += s.recv(100)
PY
for _ in $(seq 1 50); do grep -q 'longer than 1024 bytes' "$tmp/worker.log" && break; sleep 0.1; done
line=$(grep 'longer than 1024 bytes' "$tmp/worker.log" || true)
[ -n "$line" ] || fail "the 256 kB channel was not refused as too long"
[ "${#line}" -lt 600 ] || fail "the refusal of a 256 kB channel logged ${#line} bytes"
echo "$line" | grep -q '(262154 bytes)' || fail "the refusal does not give the channel's length: $line"
stop_worker
echo "ok: a 256 kB channel refused in a ${#line}-byte line"
echo "PASS"
