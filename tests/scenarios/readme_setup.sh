#!/usr/bin/env bash
# README.md's "Setting docsync up on your own database", step by step, as written: every code block
# there whose info string names a `setup:` step is run here, in the README's order, on a throwaway
# cluster whose pg_hba.conf holds the superuser's own line and the README's lines, nothing else, with
# scram-sha-256 passwords. Host-specific names are pointed at the cluster's own: /run/postgresql (the
# socket directory), the server's port 5432, /run/docsync,
# /var/lib/docsync, Redis's port 6379, the worker's OS user docsync (the user running this) and the
# server's group postgres. The worker runs from a clean environment (HOME, PATH, PGPORT), so it finds
# its passwords only in the ~/.pgpass the README writes.
# Checked: the README's blocks are exactly the steps run here; a role cannot connect before its
# password is in ~/.pgpass; with the JSONL sink the warmed doc appears at start, others after a
# change (through a direct watch and the reverse index), and at the next start every doc in the file
# is recomputed (a change the slot no longer carries included); docsync.status shows the worker ok
# (so status_dir and --status-dir agree); with the Redis sink a doc Redis lacks gives (nil) to GET,
# PUBLISH docsync:warm has the worker compute it, a redis-cli SUBSCRIBE follower receives it and
# then every change.
# Needs DOCSYNC_WORKER, redis-server, jq; runs as root (or as the server's OS user).
set -euo pipefail
src=${DOCSYNC_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
worker_bin=${DOCSYNC_WORKER:?set DOCSYNC_WORKER to the built docsync-worker}
[ -x "$worker_bin" ] || { echo "FAIL: $worker_bin is not executable" >&2; exit 1; }
tmp=$(mktemp -d)
chmod 755 "$tmp"   # the server's OS user reaches the status directory below it
cl=
worker_pid=
follow_pid=
t0=$SECONDS

fail() {
  echo "FAIL: $*" >&2
  for f in "$tmp"/worker*.log; do [ -f "$f" ] && { echo "--- $f (tail)" >&2; tail -n 20 "$f" >&2; }; done
  exit 1
}
# shellcheck source=lib/redis_server.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib/redis_server.bash"
cleanup() {
  local rc=$?
  [ -n "$worker_pid" ] && { kill -9 "$worker_pid" 2>/dev/null || true; wait "$worker_pid" 2>/dev/null || true; }
  [ -n "$follow_pid" ] && { kill -9 -- "-$follow_pid" 2>/dev/null || true; wait "$follow_pid" 2>/dev/null || true; }
  stop_redis
  [ -n "$cl" ] && "$src/packaging/dev-cluster.sh" stop "$cl"
  rm -rf "$tmp"
  exit $rc
}
trap cleanup EXIT

# ---- the README's blocks, one file each under $tmp/blocks, in the README's order
mkdir -p "$tmp/blocks"
python3 "$(dirname "${BASH_SOURCE[0]}")/lib/readme_blocks.py" "$src/README.md" "Setting docsync up on your own database" setup "$tmp/blocks" || exit 1
# step 1's apt-get (not run here) installs what packaging/deps.sh lists for building, nothing unknown
python3 - "$src/README.md" "$src/packaging/deps.sh" <<'PY' || fail "step 1's package list and packaging/deps.sh differ"
import re, sys
text = open(sys.argv[1], encoding="utf-8").read()
section = re.search(r"^## Setting docsync up on your own database\n(.*?)^## ", text, re.S | re.M).group(1)
m = re.search(r"apt-get install ((?:[^\n]*\\\n)*[^\n]*)", section)
readme = set(m.group(1).replace("\\", " ").split()) if m else set()
build, known, kind = set(), set(), None
for line in open(sys.argv[2], encoding="utf-8"):
    line = line.strip()
    if line.startswith("PACKAGES=("):
        kind = ""
    elif kind is not None and line == ")":
        break
    elif kind is not None and line.startswith("#"):
        kind = line
    elif kind is not None and line:
        known.update(line.split())
        if kind.startswith("# build"):
            build.update(line.split())
missing = build - {"postgresql-15"} - readme   # the server itself is there already
unknown = readme - known
if missing or unknown:
    sys.exit("README step 1 misses %s and names %s, unknown to packaging/deps.sh" % (sorted(missing), sorted(unknown)))
PY
steps="postgresql.conf plugin-list status-dir tables definitions roles pg_hba.conf pgpass worker-jsonl status worker-redis subscribe get-warm"
[ "$(cat "$tmp/blocks/ORDER")" = "$steps" ] ||
  fail "the README's setup blocks are [$(cat "$tmp/blocks/ORDER")], this test runs [$steps]: run each new step here"

# ---- a throwaway cluster: the server's defaults for what the README sets
cl=$("$src/packaging/dev-cluster.sh" start)
# shellcheck disable=SC1091
. "$cl/cluster.env"
export PGUSER=postgres PGDATABASE=postgres
sock=$PGHOST
server_group=$(stat -c %G "$cl/data")
ctl() { "$src/packaging/dev-cluster.sh" ctl "$cl" "$@"; }
su_sql() { psql -X -q -v ON_ERROR_STOP=1 "$@"; }
# block NAME: the README's block with this host's names pointed at the throwaway's
block() {
  sed -e "s|/run/postgresql|$sock|g" -e "s|port=5432|port=$PGPORT|g" -e "s|/run/docsync|$tmp/run/docsync|g" \
      -e "s|/var/lib/docsync|$tmp/var/lib/docsync|g" -e "s|6379|$redis_port|g" \
      -e "s|-o docsync |-o $(id -un) |g" -e "s|-g postgres |-g $server_group |g" "$tmp/blocks/$1"
}
mkdir -p "$tmp/home" "$tmp/bin" "$tmp/var/lib/docsync"
ln -s "$(readlink -f "$worker_bin")" "$tmp/bin/docsync-worker"
# as_user: what the worker's OS user runs, in a clean environment
user_env=(env -i HOME="$tmp/home" PATH="$tmp/bin:/usr/local/bin:/usr/bin:/bin" PGPORT="$PGPORT")
as_user() { "${user_env[@]}" "$@"; }

ctl stop
# the cluster's own output_plugin_libraries is the server's default again: the README must add docsync
sed -i -e '/^output_plugin_libraries/d' -e '/^docsync.status_dir/d' "$cl/data/postgresql.conf"
echo "local all postgres trust" >"$cl/data/pg_hba.conf"   # the superuser's own access (Debian: peer)

echo "step 2: postgresql.conf, restart; output_plugin_libraries"
block postgresql.conf >>"$cl/data/postgresql.conf"
ctl start
su_sql -f <(block plugin-list) >/dev/null
[ "$(psql -X -At -c 'SHOW wal_level')" = logical ] || fail "wal_level is not logical after step 2"

echo "step 3: the status directory"
as_user bash -e <(block status-dir) || fail "step 3 failed"
[ -d "$tmp/run/docsync" ] || fail "step 3 made no $tmp/run/docsync"

# the user's own database, before docsync: the README's example tables
su_sql -c "CREATE DATABASE app"
su_sql -d app -f <(block tables) >/dev/null || fail "step 4's tables failed"
su_sql -d app <<'SQL'
INSERT INTO orders VALUES (7, 'new'), (42, 'new'), (50, 'new');
INSERT INTO products VALUES (1, 'pen', 2), (2, 'ink', 5);
INSERT INTO order_items VALUES (1, 7, 1, 3), (2, 42, 1, 1), (3, 42, 2, 2), (4, 50, 2, 1);
SQL
doc_sql() {
  echo "SELECT jsonb_build_object('id', o.id, 'status', o.status, 'items',
          (SELECT coalesce(jsonb_agg(jsonb_build_object('product', p.name, 'price', p.price, 'qty', i.qty) ORDER BY i.id), '[]')
             FROM order_items i JOIN products p ON p.id = i.product_id WHERE i.order_id = o.id))
          FROM orders o WHERE o.id = $1"
}
app() { psql -X -q -At -v ON_ERROR_STOP=1 -d app -c "$1"; }
# is_current JSON ORDER: t when JSON is the order's doc now
is_current() { app "SELECT \$j\$$1\$j\$::jsonb IS NOT DISTINCT FROM ($(doc_sql "$2"))"; }

echo "step 4: the extension and the doc definitions"
su_sql -d app -f <(block definitions) >"$tmp/definitions.out" 2>&1 || fail "step 4: $(cat "$tmp/definitions.out")"
if grep -E "NOTICE|WARNING" "$tmp/definitions.out"; then fail "step 4 raised a notice or warning on a correct definition"; fi
[ "$(app "SELECT count(*) FROM docsync.queries WHERE warning IS NOT NULL")" = 0 ] ||
  fail "docsync.queries warns after step 4: $(app "SELECT string_agg(warning, '; ') FROM docsync.queries")"
[ "$(app "SELECT count(*) FROM docsync.watched_tables WHERE warning IS NOT NULL")" = 0 ] ||
  fail "docsync.watched_tables warns after step 4: $(app "SELECT string_agg(warning, '; ') FROM docsync.watched_tables")"

echo "step 5: roles, pg_hba.conf, ~/.pgpass"
su_sql -d app -f <(block roles) >/dev/null
block pg_hba.conf >>"$cl/data/pg_hba.conf"
su_sql -c "SELECT pg_reload_conf()" >/dev/null
sleep 0.3
out=$(as_user "$DOCSYNC_PG_BINDIR/psql" -X -At -w "host=$sock dbname=app user=docsync_repl" -c "SELECT 1" 2>&1) &&
  fail "docsync_repl connected without a password: $out"
echo "$out" | grep -q "no password supplied" || fail "docsync_repl without a password: $out"
as_user bash -e <(block pgpass) || fail "step 5's ~/.pgpass failed"
[ "$(stat -c %a "$tmp/home/.pgpass")" = 600 ] || fail "$tmp/home/.pgpass has mode $(stat -c %a "$tmp/home/.pgpass")"
for role in docsync_repl docsync_reader; do
  out=$(as_user "$DOCSYNC_PG_BINDIR/psql" -X -At -w "host=$sock dbname=app user=$role" -c "SELECT current_user" 2>&1) || fail "$role cannot connect after step 5: $out"
done
out=$(as_user "$DOCSYNC_PG_BINDIR/psql" -X -At -w "host=$sock dbname=app user=docsync_repl replication=database" -c "IDENTIFY_SYSTEM" 2>&1) ||
  fail "docsync_repl cannot open a logical replication connection after step 5: $out"

# run_worker STEP LOG: the README's worker command, in the background, as the worker's user
run_worker() {
  # exec all the way down: $! is the worker's own pid
  exec_cmd=$(block "$1")
  ( exec "${user_env[@]}" bash -c "exec $exec_cmd" ) >>"$tmp/$2" 2>&1 &
  worker_pid=$!
  local deadline=$((SECONDS + 60))
  until [ "$(psql -X -At -c "SELECT coalesce(bool_or(active), false) FROM pg_replication_slots WHERE slot_name = 'docsync'")" = t ]; do
    kill -0 "$worker_pid" 2>/dev/null || { worker_pid=; fail "the worker of $1 exited: $(tail -n 5 "$tmp/$2")"; }
    [ $SECONDS -lt $deadline ] || fail "the worker of $1 did not stream the slot in 60 s"
    sleep 0.2
  done
}
# stop_worker SIGNAL: the worker must drain, acknowledge and exit 0
stop_worker() {
  local code=0
  kill -"$1" "$worker_pid"
  wait "$worker_pid" || code=$?
  worker_pid=
  [ $code -eq 0 ] || fail "the worker exited $code on SIG$1"
}
docs=$tmp/var/lib/docsync/docs.jsonl
last_doc() { jq -c --arg ch "$1" 'select(.channel == $ch) | .doc' "$docs" 2>/dev/null | tail -n 1; }
# wait_jsonl ORDER: until the file's last doc of the order is current
wait_jsonl() {
  local deadline=$((SECONDS + 30)) d
  while :; do
    d=$(last_doc "db:order:$1")
    [ -n "$d" ] && [ "$(is_current "$d" "$1")" = t ] && return 0
    [ $SECONDS -lt $deadline ] || fail "db:order:$1 in $docs is not current: ${d:-no doc}"
    sleep 0.2
  done
}

echo "step 6: the worker with the JSONL sink"
run_worker worker-jsonl worker-jsonl.log
wait_jsonl 42   # warmed: published at start, before any change
[ -z "$(last_doc db:order:7)" ] || fail "db:order:7, neither warmed nor changed, was published at start"
app "UPDATE orders SET status = 'paid' WHERE id = 42"
wait_jsonl 42
app "UPDATE products SET price = 3 WHERE id = 1"   # through the reverse index: orders 7 and 42
wait_jsonl 7
wait_jsonl 42
deadline=$((SECONDS + 20))
until [ "$(su_sql -At -d app -f <(block status) | cut -d'|' -f2)" = ok ]; do
  [ $SECONDS -lt $deadline ] || fail "docsync.status after step 6: $(su_sql -At -d app -f <(block status))"
  sleep 0.3
done
echo "  docsync.status: $(su_sql -At -d app -f <(block status))"
stop_worker INT
# while no worker runs, a change the slot will not carry (as after a slot recreated): only the
# recompute of the file's docs at start can bring order 7 up to date
app "UPDATE orders SET status = 'shipped' WHERE id = 7"
app "SELECT pg_replication_slot_advance('docsync', pg_current_wal_lsn())" >/dev/null
run_worker worker-jsonl worker-jsonl-2.log
wait_jsonl 7
[ -z "$(last_doc db:order:50)" ] || fail "db:order:50, never changed, was published"
stop_worker INT

echo "step 7: the worker with the Redis sink; a redis-cli follower"
start_redis
run_worker worker-redis worker-redis.log
# the docs the worker kept current with the file it publishes to Redis at start (the live journal)
deadline=$((SECONDS + 20))
until [ "$(is_current "$(rc --raw GET db:order:42 | jq -c .doc)" 42)" = t ]; do
  [ $SECONDS -lt $deadline ] || fail "db:order:42, kept current with the file, is not in Redis after the start: $(rc --raw GET db:order:42)"
  sleep 0.1
done
setsid bash -c "exec $(block subscribe)" >"$tmp/follow.out" 2>&1 </dev/null &
follow_pid=$!
for _ in $(seq 1 50); do [ "$(rc PUBSUB NUMSUB db:order:50 | tail -n 1)" = 1 ] && break; sleep 0.1; done
[ "$(rc PUBSUB NUMSUB db:order:50 | tail -n 1)" = 1 ] || fail "the README's SUBSCRIBE did not subscribe: $(cat "$tmp/follow.out")"
bash -e <(block get-warm) >"$tmp/get-warm.out" 2>&1 || fail "step 7's GET and PUBLISH failed: $(cat "$tmp/get-warm.out")"
[ "$(sed -n 1p "$tmp/get-warm.out")" = "" ] || fail "GET db:order:50 gave $(sed -n 1p "$tmp/get-warm.out") before the warm, not (nil)"
receivers=$(sed -n 2p "$tmp/get-warm.out")
[ "$receivers" -ge 1 ] 2>/dev/null ||
  fail "PUBLISH docsync:warm db:order:50 reached $receivers clients: the worker (README's settings, --live all) does not listen on docsync:warm"
# follow_doc N: the doc of the follower's Nth message on db:order:50
follow_doc() { awk 'prev == "db:order:50" && /^\{/ {print} {prev = $0}' "$tmp/follow.out" | sed -n "$1p" | jq -c .doc; }
deadline=$((SECONDS + 20))
until [ -n "$(follow_doc 1)" ]; do
  [ $SECONDS -lt $deadline ] || fail "the follower received no doc after the warm: $(cat "$tmp/follow.out")"
  sleep 0.1
done
[ "$(is_current "$(follow_doc 1)" 50)" = t ] || fail "the warmed doc is not current: $(follow_doc 1)"
[ "$(is_current "$(rc --raw GET db:order:50 | jq -c .doc)" 50)" = t ] || fail "GET after the warm: $(rc --raw GET db:order:50)"
app "INSERT INTO order_items VALUES (5, 50, 2, 7)"
deadline=$((SECONDS + 20))
until [ -n "$(follow_doc 2)" ]; do
  [ $SECONDS -lt $deadline ] || fail "the follower received nothing after a change: $(cat "$tmp/follow.out")"
  sleep 0.1
done
[ "$(is_current "$(follow_doc 2)" 50)" = t ] || fail "the followed doc after a change is not current: $(follow_doc 2)"
stop_worker TERM
echo "ok ($((SECONDS - t0)) s)"
