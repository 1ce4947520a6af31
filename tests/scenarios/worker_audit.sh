#!/usr/bin/env bash
# The continuous audit (--audit-rate) through the whole worker, on the JSONL file sink and on a real
# redis-server: a clean run, idle and then under a workload of concurrent updates, samples docs and
# finds no divergence; a doc changed behind docsync's back at the same version (the doc of a
# channel's newest line rewritten in place in the file; SET of the Redis key with another body) and
# a Redis key deleted are each found, reported (a warning naming the channel, docsync.status's
# audit_divergences, /metrics's docsync_audit_divergences_total) and healed: what the sink retains
# equals a fresh run of the doc query again. With stdout the audit is off and says so.
# Starts a cluster of its own (lib/own_cluster.bash); needs DOCSYNC_WORKER, jq,
# python3 and redis-server.
set -euo pipefail
test_name=audit
# shellcheck source=lib/own_cluster.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib/own_cluster.bash"
# shellcheck source=lib/redis_server.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib/redis_server.bash"
cleanup_hooks+=(stop_redis)

acct() { echo "SELECT jsonb_build_object('id', a.id, 'balance', a.balance, 'note', a.note) FROM acct a WHERE a.id = $1"; }
row() { sql "SELECT row_to_json(s) FROM docsync.status s WHERE slot_name = '$slot'"; }
audited() { sql "SELECT audit_samples || ' ' || audit_divergences FROM docsync.status WHERE slot_name = '$slot'"; }
# metric NAME: the value of an unlabelled series in a scrape of /metrics.
metric() {
  python3 - "http://127.0.0.1:$port/metrics" "$1" <<'PY'
import sys, urllib.request
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
for line in opener.open(sys.argv[1], timeout=10).read().decode().splitlines():
    if line.split(" ")[0] == sys.argv[2]:
        print(line.split(" ")[1])
PY
}
# wait_samples N: until docsync.status shows at least N audit samples; fails after 90 s.
wait_samples() {
  wait_for 90 "SELECT audit_samples >= $1 FROM docsync.status WHERE slot_name = '$slot'" ||
    fail "fewer than $1 audit samples in 90 s: $(row)"
}
# wait_divergences N: until docsync.status shows N divergences; fails after 90 s.
wait_divergences() {
  wait_for 90 "SELECT audit_divergences >= $1 FROM docsync.status WHERE slot_name = '$slot'" ||
    fail "the audit did not find divergence $1 in 90 s: $(row)"
  [ "$(sql "SELECT audit_divergences FROM docsync.status WHERE slot_name = '$slot'")" = "$1" ] ||
    fail "more divergences than were made: $(row)"
}
# workload SECONDS: concurrent single-row updates of random accounts, in the background.
workload() {
  python3 - "$1" >"$tmp/workload.sql" <<'PY'
import random, sys
random.seed(7)
for i in range(int(sys.argv[1]) * 50):
    print(f"UPDATE acct SET balance = balance + {random.randint(1, 9)} WHERE id = {random.randint(1, 20)};")
    if i % 10 == 9:
        print("SELECT pg_sleep(0.2);")
PY
  psql -X -q -d "$db" -f "$tmp/workload.sql" >/dev/null 2>&1 &
  load_pid=$!
  extra_pids+=("$load_pid")
}

# clean_run: with the worker started, 20 samples idle, 60 under concurrent updates, and no divergence.
clean_run() {
  wait_samples 20
  workload 10
  wait_for 60 "SELECT audit_samples >= 60 FROM docsync.status WHERE slot_name = '$slot'" || fail "few samples under load: $(row)"
  wait "$load_pid" || true
  settle 30
  read -r samples divergences <<<"$(audited)"
  echo "clean run: $samples samples, $divergences divergences"
  [ "$divergences" = 0 ] || fail "a clean run under concurrent updates reported divergences: $(grep 'divergence' "$tmp/worker.log")"
}

setup_db
sql "CREATE TABLE acct (id int PRIMARY KEY, balance int NOT NULL, note text NOT NULL)"
sql "INSERT INTO acct SELECT g, 100 * g, 'account ' || g FROM generate_series(1, 20) g"
sql "SELECT docsync.define_query('acct', \$q\$$(acct '$1')\$q\$, params => ARRAY['id'])" >/dev/null 2>&1
sql "SELECT docsync.watch('acct', 'acct', params => ARRAY['id'])" >/dev/null
grant_reader
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

echo "stdout: nothing retained to compare with, so the audit is off and says why"
start_worker --sink stdout --audit-rate 50%
stop_worker
grep -q 'WARNING \[audit\] --audit-rate 50% cannot audit stdout: it retains no docs' "$tmp/worker.log" ||
  fail "no warning that stdout cannot be audited: $(grep audit "$tmp/worker.log")"
: >"$tmp/worker.log"

echo "file sink: a clean run, idle and under concurrent updates, finds no divergence"
start_worker --sink "file:$docs" --audit-rate 6000% --metrics-listen "127.0.0.1:$port"
grep -q 'continuous audit: 6000% of the live docs per minute' "$tmp/worker.log" || fail "no line saying the audit runs"
sql "UPDATE acct SET note = note"  # every account's doc published once: 20 live docs
settle 30
clean_run

echo "file sink: the newest line of db:acct:7 rewritten in place with another doc, same version"
python3 - "$docs" <<'PY'
import json, sys
path = sys.argv[1]
data = open(path, "rb").read()
start = data.rfind(b'{"channel":"db:acct:7",')
end = data.index(b"\n", start)
line = data[start:end]
env = json.loads(line)
old = str(env["doc"]["balance"]).encode()
new = (b"9" if old[:1] != b"9" else b"1") + old[1:]  # another number of the same length
at = line.index(b'"balance":' + old) + len(b'"balance":')
with open(path, "r+b") as f:
    f.seek(start + at)
    f.write(new)
PY
tail_doc=$(jq -c 'select(.channel == "db:acct:7") | .doc' "$docs" | tail -n 1)
[ "$(sql "SELECT \$d\$$tail_doc\$d\$::jsonb IS DISTINCT FROM ($(acct 7))::jsonb")" = t ] || fail "the tampering did not change the doc"
wait_divergences 1
grep -q "WARNING \[audit\] divergence: the file $docs retains version (generation [0-9]*, lsn [0-9A-F/]*) holding another doc for db:acct:7" \
  "$tmp/worker.log" || fail "no warning naming db:acct:7 and its versions: $(grep '\[audit\]' "$tmp/worker.log" | tail -n 5)"
[ "$(doc_equals_query db:acct:7 "$(acct 7)")" = t ] || fail "db:acct:7 was not healed: $(last_doc db:acct:7)"
[ "$(metric docsync_audit_divergences_total)" = 1 ] || fail "/metrics: docsync_audit_divergences_total is $(metric docsync_audit_divergences_total)"
[ "$(metric docsync_audit_samples_total)" -ge "$samples" ] || fail "/metrics: docsync_audit_samples_total is $(metric docsync_audit_samples_total)"
echo "found and healed: $(audited) (samples, divergences)"
for id in $(seq 1 20); do
  [ "$(doc_equals_query "db:acct:$id" "$(acct "$id")")" = t ] || fail "db:acct:$id differs from its query: $(last_doc "db:acct:$id")"
done
stop_worker
: >"$tmp/worker.log"

echo "Redis sink: a clean run, idle and under concurrent updates, finds no divergence"
start_redis
start_worker --sink "redis://127.0.0.1:$redis_port" --audit-rate 6000% --metrics-listen "127.0.0.1:$port"
sql "UPDATE acct SET note = note"
settle 30
for id in $(seq 1 20); do
  [ "$(redis_doc_is_current "db:acct:$id" "$(acct "$id")")" = t ] || fail "db:acct:$id is not in Redis: $(rc GET "db:acct:$id")"
done
clean_run

echo "Redis sink: db:acct:3 SET with another body at the same version, db:acct:4 deleted"
rc --raw GET db:acct:3 | jq -c '.doc.note = "tampered"' | tr -d '\n' >"$tmp/tampered.json"
rc -x SET db:acct:3 <"$tmp/tampered.json" >/dev/null
[ "$(redis_doc db:acct:3 | jq -r .note)" = tampered ] || fail "the SET did not take: $(rc GET db:acct:3)"
wait_divergences 1
grep -q "WARNING \[audit\] divergence: Redis at 127.0.0.1:$redis_port/0 retains version (generation [0-9]*, lsn [0-9A-F/]*) holding another doc for db:acct:3" \
  "$tmp/worker.log" || fail "no warning naming db:acct:3: $(grep '\[audit\]' "$tmp/worker.log" | tail -n 5)"
[ "$(redis_doc_is_current db:acct:3 "$(acct 3)")" = t ] || fail "db:acct:3 was not healed: $(rc GET db:acct:3)"
rc DEL db:acct:4 >/dev/null
wait_divergences 2
grep -q "WARNING \[audit\] divergence: Redis at 127.0.0.1:$redis_port/0 retains nothing for db:acct:4" "$tmp/worker.log" ||
  fail "no warning naming db:acct:4: $(grep '\[audit\]' "$tmp/worker.log" | tail -n 5)"
[ "$(redis_doc_is_current db:acct:4 "$(acct 4)")" = t ] || fail "db:acct:4 was not healed: $(rc GET db:acct:4)"
[ "$(metric docsync_audit_divergences_total)" = 2 ] || fail "/metrics: docsync_audit_divergences_total is $(metric docsync_audit_divergences_total)"
echo "found and healed: $(audited) (samples, divergences)"
for id in $(seq 1 20); do
  [ "$(redis_doc_is_current "db:acct:$id" "$(acct "$id")")" = t ] || fail "db:acct:$id differs from its query: $(rc GET "db:acct:$id")"
done
stop_worker
echo "ok"
