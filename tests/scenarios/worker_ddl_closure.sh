#!/usr/bin/env bash
# When unsure, recompute: DDL that changes a doc without changing a row, on anything in its doc
# query's dependency closure, recomputes the doc (the 'recompute causes' rule, docs/design.md). One
# doc reads a column rewritten by ALTER COLUMN … TYPE <same type> USING, an enum column, a composite
# column, a text array ordered by a column's collation, a function called through a plpgsql function,
# and a count over an inheritance parent. After each of these, with the continuous audit off, the doc
# must equal a fresh run of its query within 15 s:
#   ALTER COLUMN n TYPE int USING n + 10 (a table rewrite, no change decoded);
#   ALTER TYPE … RENAME VALUE on the enum; RENAME ATTRIBUTE and ADD ATTRIBUTE on the composite;
#   ALTER COLUMN label TYPE text COLLATE <a collation that orders 'a' and 'B' the other way>;
#   CREATE OR REPLACE of the function the plpgsql function calls;
#   ALTER TABLE child INHERIT parent.
# Every step is checked, and the failures are reported together.
# Needs the libpq environment of a cluster from packaging/dev-cluster.sh, DOCSYNC_WORKER and jq.
set -euo pipefail
test_name=ddl_closure
# shellcheck source=lib/worker_env.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib/worker_env.bash"

doc_sql() {
  echo "SELECT jsonb_build_object('n', t.n, 'm', t.m, 'p', to_jsonb(t.p), 'f', outer_f(t.n),
          'labels', (SELECT jsonb_agg(l.label ORDER BY l.label) FROM labels l),
          'tree', (SELECT count(*) FROM parent)) FROM t WHERE t.id = $1"
}
setup_db
sql "CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy')"
sql "CREATE TYPE point2 AS (x int, y int)"
sql "CREATE TABLE t (id int PRIMARY KEY, n int NOT NULL, m mood NOT NULL, p point2 NOT NULL)"
sql "INSERT INTO t VALUES (1, 1, 'ok', '(1,2)'), (2, 2, 'ok', '(3,4)')"
sql "CREATE TABLE labels (id int PRIMARY KEY, label text NOT NULL)"
sql "INSERT INTO labels VALUES (1, 'a'), (2, 'B')"
sql "CREATE TABLE parent (id int)"
sql "CREATE TABLE child (id int)"
sql "INSERT INTO child SELECT generate_series(1, 3)"
sql "CREATE FUNCTION inner_f(int) RETURNS int LANGUAGE sql AS 'SELECT \$1 + 1'"
sql "CREATE FUNCTION outer_f(int) RETURNS int LANGUAGE plpgsql AS 'BEGIN RETURN inner_f(\$1); END'"
sql "SELECT docsync.define_query('thing', \$q\$$(doc_sql '$1')\$q\$, params => ARRAY['id'])" >/dev/null 2>&1
sql "SELECT docsync.watch('thing', 't', params => ARRAY['id'])" >/dev/null
grant_reader
# The collation that orders 'a' and 'B' unlike the column's own.
other=
for c in C und-x-icu en-x-icu en_US.utf8; do
  [ "$(sql "SELECT count(*) FROM pg_collation WHERE collname = '$c'")" -ge 1 ] || continue
  if [ "$(sql "SELECT ('a' < 'B' COLLATE \"$c\") <> ('a'::text < 'B'::text)")" = t ]; then other=$c; break; fi
done
[ -n "$other" ] || fail "no collation here orders 'a' and 'B' unlike the database's default"

start_worker --audit-rate 0
sql "UPDATE t SET n = n"
settle 30
for id in 1 2; do
  [ "$(doc_equals_query "db:thing:$id" "$(doc_sql "$id")")" = t ] || fail "db:thing:$id at start: $(last_doc "db:thing:$id")"
done

failures=()
# step NAME DDL: runs DDL, then waits up to 15 s for both docs to equal their query.
step() {
  local name=$1 ddl=$2 ok deadline
  sql "$ddl"
  deadline=$((SECONDS + 15))
  for (( ; ; )); do
    ok=1
    for id in 1 2; do [ "$(doc_equals_query "db:thing:$id" "$(doc_sql "$id")")" = t ] || ok=; done
    [ -z "$ok" ] || break
    if [ $SECONDS -ge $deadline ]; then
      echo "   $name: STALE after 15 s: $(last_doc db:thing:1) vs $(sql "$(doc_sql 1)")"
      failures+=("$name")
      return
    fi
    sleep 0.3
  done
  echo "   $name: recomputed"
}
echo "DDL on what the doc query reads, without a row changed"
step "ALTER COLUMN n TYPE int USING n + 10" "ALTER TABLE t ALTER COLUMN n TYPE int USING n + 10"
step "ALTER TYPE mood RENAME VALUE" "ALTER TYPE mood RENAME VALUE 'ok' TO 'fine'"
step "ALTER TYPE point2 RENAME ATTRIBUTE" "ALTER TYPE point2 RENAME ATTRIBUTE y TO z"
step "ALTER TYPE point2 ADD ATTRIBUTE" "ALTER TYPE point2 ADD ATTRIBUTE w int"
step "ALTER COLUMN label TYPE text COLLATE \"$other\"" "ALTER TABLE labels ALTER COLUMN label TYPE text COLLATE \"$other\""
step "CREATE OR REPLACE of a function called through another" \
  "CREATE OR REPLACE FUNCTION inner_f(int) RETURNS int LANGUAGE sql AS 'SELECT \$1 + 100'"
step "ALTER TABLE child INHERIT parent" "ALTER TABLE child INHERIT parent"
[ ${#failures[@]} -eq 0 ] || fail "docs left stale by: $(printf '%s; ' "${failures[@]}")"
stop_worker
echo "ok"
