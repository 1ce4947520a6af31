#!/usr/bin/env bash
# What a first start runs into, through the real worker:
#   - command line mistakes exit 2 with one line naming the option and the fix;
#   - connections that fail (nothing at the port, a database that does not exist, no password or a
#     wrong one) end the start with one line naming --dsn or --pool-dsn, the server's reason and the
#     fix; a --pool-dsn on another database than --dsn's is refused, naming both; the reader role
#     as --dsn (or the two roles swapped) says the roles look swapped;
#   - a JSONL file sink stays empty until a watched row changes, and says so; --warm publishes the
#     docs it names at start, keeps them current, and refuses a pattern or an unknown query.
set -euo pipefail
test_name=first
# shellcheck source=lib/worker_env.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib/worker_env.bash"

setup_db
sql "CREATE TABLE item (id int PRIMARY KEY, v int NOT NULL)"
sql "INSERT INTO item SELECT g, g * 10 FROM generate_series(1, 3) g"
sql "SELECT docsync.define_query('item', \$q\$SELECT jsonb_build_object('id', i.id, 'v', i.v) FROM item i WHERE i.id = \$1\$q\$, params => ARRAY['id'])" >/dev/null 2>&1
sql "SELECT docsync.watch('item', 'item', params => ARRAY['id'])" >/dev/null
grant_reader
item() { echo "SELECT jsonb_build_object('id', id, 'v', v) FROM item WHERE id = $1"; }
repl=$(dsn "$repl_role")
reader=$(dsn "$reader_role")

# run_once SETTINGS...: the worker, which must stop by itself; prints its exit status and the last
# line of its standard error (the error).
run_once() {
  local code=0
  PGPASSFILE=/nonexistent PGPASSWORD= timeout 60 "$worker_bin" --slot "$slot" --status-dir "$status_dir" \
    --sink "file:$docs" "$@" >/dev/null 2>"$tmp/run.log" || code=$?
  echo "$code $(tail -n 1 "$tmp/run.log")"
}
# expect OUTPUT TEXT…: fails unless OUTPUT contains every TEXT (literally).
expect() {
  local out=$1
  shift
  for text in "$@"; do [[ "$out" == *"$text"* ]] || fail "expected \"$text\" in: $out"; done
}

echo "command line mistakes: exit 2, one line naming the option and the fix"
out=$(run_once --dsn "$repl" --pool-dsn "$reader" --max-retaind-wal 1GB)
[ "$out" = "2 docsync-worker: unknown option --max-retaind-wal; did you mean --max-retained-wal?" ] || fail "a misspelt option: $out"
[ "$(wc -l <"$tmp/run.log")" = 1 ] || fail "the usage error is not one line: $(cat "$tmp/run.log")"
out=$(run_once --dsn "$repl" --pool-dsn "$reader" --create-slot yes)
expect "$out" "2 docsync-worker: --create-slot takes no separate value (\"yes\"): write --create-slot to turn it on, or --create-slot=false"
out=$(run_once --dsn "$repl" --pool-dsn "$reader" --pool)
[ "$out" = "2 docsync-worker: --pool needs a value, e.g. --pool 4" ] || fail "a setting without its value: $out"
out=$(run_once --dsn "$repl" --pool-dsn "$reader" --live-poll 5sec)
expect "$out" "2 docsync-worker: --live-poll \"5sec\": unknown duration unit \"sec\"; did you mean 5s?"
out=$(run_once --dsn "$repl" --pool-dsn "$reader" --warm 'db:item:*')
expect "$out" "2 docsync-worker: --warm \"db:item:*\": a pattern cannot be warmed" "--warm db:item:42"

echo "failed connections name the setting, the reason and the fix"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
out=$(run_once --dsn "host=127.0.0.1 port=$port dbname=$db user=$repl_role" --pool-dsn "$reader")
expect "$out" "1 " "ERROR [worker] --dsn: could not connect as user \"$repl_role\" to database \"$db\": connection to server at \"127.0.0.1\", port $port failed: Connection refused" \
  "; no server listens there: start PostgreSQL, or fix host= and port= in --dsn"
out=$(run_once --dsn "$repl" --pool-dsn "host=$PGHOST port=$PGPORT dbname=${db}_typo user=$reader_role")
expect "$out" "1 " "--pool-dsn: could not connect as user \"$reader_role\" to database \"${db}_typo\"" \
  "FATAL: database \"${db}_typo\" does not exist; create the database, or fix dbname= in --pool-dsn"
# Passwords: a role the server asks a password of, through two pg_hba.conf lines put first and taken
# out again. The file is rewritten by the server itself (pg_read_file, COPY … TO), byte for byte.
pw_role=docsync_pw_$$
hba_file=$(psql -X -At -d postgres -c "SHOW hba_file")
# hba_rewrite QUERY: pg_hba.conf becomes the lines QUERY returns from its current lines hba(n, line),
# ordered by n; then the server reloads it.
hba_rewrite() {
  psql -X -q -v ON_ERROR_STOP=1 -d postgres \
    -c "CREATE TEMP TABLE hba AS SELECT n, line FROM regexp_split_to_table(rtrim(pg_read_file('$hba_file'), E'\n'), E'\n') WITH ORDINALITY AS l(line, n)" \
    -c "COPY (SELECT line FROM ($1) x ORDER BY n) TO '$hba_file' WITH (FORMAT csv, DELIMITER E'\x02', QUOTE E'\x01', NULL E'\x03')" \
    -c "SELECT pg_reload_conf()" >/dev/null
}
hba_restore() { hba_rewrite "SELECT n, line FROM hba WHERE line NOT LIKE '%$pw_role%'"; }
drop_pw_role() { psql -X -q -d postgres -c "DROP ROLE IF EXISTS $pw_role" >/dev/null 2>&1; }
early_cleanup_hooks+=(hba_restore)
cleanup_hooks+=(drop_pw_role)
psql -X -q -v ON_ERROR_STOP=1 -d postgres -c "CREATE ROLE $pw_role LOGIN PASSWORD 'right'" >/dev/null
hba_rewrite "SELECT 0 AS n, 'local all $pw_role scram-sha-256' AS line UNION ALL SELECT 0, 'host all $pw_role 127.0.0.1/32 scram-sha-256' UNION ALL SELECT n, line FROM hba"
deadline=$((SECONDS + 30))
until ! PGPASSFILE=/nonexistent PGPASSWORD= psql -X -w -At -d postgres -U "$pw_role" -c "SELECT 1" >/dev/null 2>&1; do
  [ $SECONDS -lt $deadline ] || fail "the server did not ask $pw_role for a password within 30 s of the reload"
  sleep 0.2
done
out=$(run_once --dsn "host=$PGHOST port=$PGPORT dbname=$db user=$pw_role" --pool-dsn "$reader")
expect "$out" "1 " "--dsn: could not connect as user \"$pw_role\"" "no password supplied" \
  "; the server asks for a password and none was given: put it in ~/.pgpass (or the file PGPASSFILE names" "password=… in --dsn"
out=$(run_once --dsn "$repl" --pool-dsn "host=127.0.0.1 port=$PGPORT dbname=$db user=$pw_role password=wrong")
expect "$out" "1 " "--pool-dsn: could not connect as user \"$pw_role\"" "password authentication failed for user \"$pw_role\"" \
  "; the password is wrong: correct it in ~/.pgpass (or the file PGPASSFILE names" "password=… of --pool-dsn"
hba_restore
early_cleanup_hooks=()

echo "a --pool-dsn on another database than --dsn's is refused, naming both"
out=$(run_once --dsn "$repl" --pool-dsn "host=$PGHOST port=$PGPORT dbname=postgres user=$reader_role")
expect "$out" "1 " "--pool-dsn reaches database \"postgres\" of the server with system identifier " \
  ", but --dsn reaches database \"$db\" of the server with system identifier " "point --pool-dsn at dbname=$db"

echo "the reader role given as --dsn, or both roles swapped: the roles look swapped, not a missing grant_replication"
out=$(run_once --dsn "$reader" --pool-dsn "$reader")
expect "$out" "1 " "the --dsn role \"$reader_role\" has no REPLICATION attribute" "the reader role" \
  "--dsn takes the replication role (the one docsync.grant_replication was given) and --pool-dsn the reader role (docsync.grant_reader's)"
[[ "$out" != *"ALTER ROLE"* ]] || fail "the hint leads to making the reader a replication role: $out"
out=$(run_once --dsn "$reader" --pool-dsn "$repl")
expect "$out" "1 " "the pool role \"$repl_role\"" "it looks like the replication role: --dsn and --pool-dsn look swapped"
[[ "$out" != *"ALTER ROLE"* ]] || fail "the hint leads to making the reader a replication role: $out"

echo "a JSONL sink is empty until a watched row changes, and the log says so"
start_worker --live all
grep -q "the sink holds no docs yet: a doc is published when a row it watches changes, or at start when --warm names it" "$tmp/worker.log" ||
  fail "no line says why the sink stays empty"
stop_worker
[ ! -s "$docs" ] || fail "docs were published with no change and no --warm: $(cat "$docs")"

echo "--warm: an unknown query stops the start; the docs it names are published at start and kept current"
out=$(run_once --dsn "$repl" --pool-dsn "$reader" --warm db:itme:1)
expect "$out" "1 " "--warm \"db:itme:1\": no doc query is named \"itme\" (defined: item); fix the channel"
start_worker --warm db:item:1 --warm db:item:3
for id in 1 3; do
  deadline=$((SECONDS + 30))
  until [ "$(doc_equals_query "db:item:$id" "$(item $id)")" = t ]; do
    [ $SECONDS -lt $deadline ] || fail "--warm db:item:$id was not published at start: $(cat "$docs")"
    sleep 0.2
  done
done
[ -z "$(last_doc db:item:2)" ] || fail "db:item:2 was published without a change or a --warm"
sql "UPDATE item SET v = v + 1 WHERE id = 3"
settle 30
[ "$(doc_equals_query db:item:3 "$(item 3)")" = t ] || fail "the warmed db:item:3 is not current after a change: $(last_doc db:item:3)"
stop_worker
echo "ok"
