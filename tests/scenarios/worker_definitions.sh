#!/usr/bin/env bash
# Definition changes while the real worker streams: docsync.watch of another table re-plans the
# stream and that table's changes reach their docs; define_query(..., or_replace => true) changes a
# query and its live docs are recomputed without any row change; a new query on a new table is
# served; ALTER TABLE ... RENAME of a watched table keeps its docs flowing (the worker names tables
# by OID); a watch whose table was dropped unseen by the event triggers is logged as not used.
set -euo pipefail
test_name=definitions
# shellcheck source=lib/worker_env.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib/worker_env.bash"

setup_db
sql "CREATE TABLE acct (id int PRIMARY KEY, v int NOT NULL)"
sql "CREATE TABLE label (id int PRIMARY KEY, label text NOT NULL)"
sql "INSERT INTO acct SELECT g, 0 FROM generate_series(1, 3) g"
sql "INSERT INTO label SELECT g, 'l' || g FROM generate_series(1, 3) g"
# The doc query reads acct through a view, which binds by OID: a RENAME of acct leaves it working.
sql "CREATE VIEW acct_v AS SELECT id, v FROM acct"
acct_sql() { echo "SELECT jsonb_build_object('id', a.id, 'v', a.v, 'label', (SELECT l.label FROM label l WHERE l.id = a.id)$1) FROM acct_v a WHERE a.id = \$1"; }
fresh() { echo "SELECT jsonb_build_object('id', a.id, 'v', a.v, 'label', (SELECT l.label FROM label l WHERE l.id = a.id)$2) FROM acct_v a WHERE a.id = $1"; }
sql "SELECT docsync.define_query('acct', \$q\$$(acct_sql "")\$q\$, params => ARRAY['id'], watches => 'manual')" >/dev/null
sql "SELECT docsync.watch('acct', 'acct', params => ARRAY['id'])" >/dev/null
grant_reader   # SELECT on the view acct_v (not on acct behind it) to the definer's reader role

start_worker
sql "UPDATE acct SET v = 1"
settle 30
for i in 1 2 3; do [ "$(doc_equals_query "db:acct:$i" "$(fresh "$i" "")")" = t ] || fail "db:acct:$i not current: $(last_doc "db:acct:$i")"; done

echo "a label change before label is watched does not reach the doc"
sql "UPDATE label SET label = 'before' WHERE id = 1"
settle 30
[ "$(last_doc db:acct:1 | jq -r .label)" = l1 ] || fail "an unwatched table's change was handled: $(last_doc db:acct:1)"

echo "docsync.watch of label while the worker streams: its changes reach the docs"
sql "SELECT docsync.watch('acct', 'label', params => ARRAY['id'])" >/dev/null
sql "UPDATE label SET label = 'after' WHERE id = 2"
settle 30
for _ in $(seq 1 100); do [ "$(last_doc db:acct:2 | jq -r .label)" = after ] && break; sleep 0.1; done
[ "$(doc_equals_query db:acct:2 "$(fresh 2 "")")" = t ] || fail "after watch(label): db:acct:2 is $(last_doc db:acct:2)"
grep -q "definitions generation" "$tmp/worker.log" || fail "the worker did not log a re-plan"

echo "define_query(or_replace => true): every live doc is recomputed with the new query"
sql "SELECT docsync.define_query('acct', \$q\$$(acct_sql ", 'version', 2")\$q\$, params => ARRAY['id'], or_replace => true, watches => 'manual')" >/dev/null
settle 30
for i in 1 2 3; do
  for _ in $(seq 1 100); do [ "$(last_doc "db:acct:$i" | jq -r .version)" = 2 ] && break; sleep 0.1; done
  [ "$(doc_equals_query "db:acct:$i" "$(fresh "$i" ", 'version', 2")")" = t ] || fail "db:acct:$i was not recomputed: $(last_doc "db:acct:$i")"
done

echo "a new query on a new table, defined while the worker streams"
sql "CREATE TABLE note (id int PRIMARY KEY, body text NOT NULL)"
sql "SELECT docsync.define_query('note', \$q\$SELECT jsonb_build_object('id', n.id, 'body', n.body) FROM note n WHERE n.id = \$1\$q\$, params => ARRAY['id'], watches => 'manual')" >/dev/null
sql "SELECT docsync.watch('note', 'note', params => ARRAY['id'])" >/dev/null
grant_reader   # the definer's reader role is granted the new table
sql "INSERT INTO note VALUES (1, 'hello')"
settle 30
[ "$(doc_equals_query db:note:1 "SELECT jsonb_build_object('id', id, 'body', body) FROM note WHERE id = 1")" = t ] ||
  fail "db:note:1 is $(last_doc db:note:1)"

echo "ALTER TABLE acct RENAME keeps its docs flowing"
sql "ALTER TABLE acct RENAME TO account"
sql "UPDATE account SET v = 42 WHERE id = 3"
settle 30
for _ in $(seq 1 100); do [ "$(last_doc db:acct:3 | jq -r .v)" = 42 ] && break; sleep 0.1; done
[ "$(doc_equals_query db:acct:3 "$(fresh 3 ", 'version', 2")")" = t ] || fail "after RENAME: db:acct:3 is $(last_doc db:acct:3)"
sql "UPDATE label SET label = 'renamed' WHERE id = 3"
settle 30
for _ in $(seq 1 100); do [ "$(last_doc db:acct:3 | jq -r .label)" = renamed ] && break; sleep 0.1; done
[ "$(doc_equals_query db:acct:3 "$(fresh 3 ", 'version', 2")")" = t ] || fail "after RENAME, a label change: db:acct:3 is $(last_doc db:acct:3)"
echo "a watch whose table is dropped unseen by the event triggers is reported by the worker, and the rest flows"
sql "CREATE TABLE ghost (id int PRIMARY KEY)"
sql "SELECT docsync.watch('note', 'ghost', params => ARRAY['id'])" >/dev/null
psql -X -q -v ON_ERROR_STOP=1 -d "$db" -c "SET session_replication_role = replica" -c "DROP TABLE ghost"
sql "SELECT docsync.define_query('note', \$q\$SELECT jsonb_build_object('id', n.id, 'body', n.body, 'v', 2) FROM note n WHERE n.id = \$1\$q\$, params => ARRAY['id'], or_replace => true, watches => 'manual')" >/dev/null
sql "UPDATE note SET body = 'still' WHERE id = 1"
settle 30
for _ in $(seq 1 100); do [ "$(last_doc db:note:1 | jq -r .body)" = still ] && break; sleep 0.1; done
[ "$(last_doc db:note:1 | jq -r .body)" = still ] || fail "db:note:1 stopped flowing: $(last_doc db:note:1)"
grep -q 'not used: watch [0-9]* of query \\"note\\": table public.ghost does not exist' "$tmp/worker.log" ||
  grep -q 'not used: watch [0-9]* of query "note": table public.ghost does not exist' "$tmp/worker.log" ||
  fail "the worker did not report the dangling watch: $(grep -i ghost "$tmp/worker.log" | head -3)"
kill -0 "$worker_pid" || fail "the worker exited"
echo "ok"
