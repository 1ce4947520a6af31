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
# Then one query per case, each equal to a fresh run (as the compute role, under its stored
# search_path) within 15 s of:
#   CREATE FUNCTION app.f / CREATE TABLE app.t shadowing public.f / public.t under 'app, public'
#     (the pool's prepared statements are not re-planned for a shadowing object);
#   CREATE OR REPLACE AGGREGATE with another initial state;
#   a table rewrite of a table read only through a string-bodied SQL function;
#   REFRESH MATERIALIZED VIEW CONCURRENTLY;
#   ALTER TEXT SEARCH CONFIGURATION … ALTER MAPPING;
#   a partition of a watched table detached, changed and attached again with the same bounds.
# (A policy change cannot change a doc: a doc query reading a table under row-level security is
# refused, directly or through a view whose owner the policies apply to: 39_sqlapi_derived_refusal.)
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
sql "SELECT docsync.define_query('thing', \$q\$$(doc_sql '$1')\$q\$, params => ARRAY['id'], watches => 'manual')" >/dev/null 2>&1
sql "SELECT docsync.watch('thing', 't', params => ARRAY['id'])" >/dev/null
# The collation that orders 'a' and 'B' unlike the column's own.
other=
for c in C und-x-icu en-x-icu en_US.utf8; do
  [ "$(sql "SELECT count(*) FROM pg_collation WHERE collname = '$c'")" -ge 1 ] || continue
  if [ "$(sql "SELECT ('a' < 'B' COLLATE \"$c\") <> ('a'::text < 'B'::text)")" = t ]; then other=$c; break; fi
done
[ -n "$other" ] || fail "no collation here orders 'a' and 'B' unlike the database's default"

# One query per case below: each reads one thing only the fix for that case notices.
sql "CREATE SCHEMA app"
sql "CREATE FUNCTION public.f(int) RETURNS text LANGUAGE sql IMMUTABLE BEGIN ATOMIC SELECT 'public.f'; END"
sql "CREATE FUNCTION add1(int, int) RETURNS int LANGUAGE sql IMMUTABLE BEGIN ATOMIC SELECT \$1 + \$2; END"
sql "CREATE AGGREGATE mysum(int) (sfunc = add1, stype = int, initcond = '0')"
sql "CREATE TABLE side (id int PRIMARY KEY, v int NOT NULL); INSERT INTO side VALUES (1, 5), (2, 6)"
sql "CREATE FUNCTION side_v(int) RETURNS int LANGUAGE sql STABLE AS 'SELECT v FROM public.side WHERE id = \$1'"
sql "CREATE TABLE mbase (id int PRIMARY KEY, q int NOT NULL); INSERT INTO mbase VALUES (1, 5), (2, 6)"
sql "CREATE MATERIALIZED VIEW mv AS SELECT id, q * 10 AS total FROM mbase; CREATE UNIQUE INDEX ON mv (id)"
sql "CREATE TEXT SEARCH CONFIGURATION mycfg (COPY = simple)"
sql "CREATE TABLE pt (id int PRIMARY KEY, v int NOT NULL) PARTITION BY RANGE (id);
     CREATE TABLE pt_1 PARTITION OF pt FOR VALUES FROM (1) TO (100); INSERT INTO pt VALUES (1, 10), (2, 20)"
declare -A case_sql=(
  [shadow]="SELECT jsonb_build_object('n', t.n, 'f', f(t.id)) FROM t WHERE t.id = \$1"
  [agg]="SELECT jsonb_build_object('n', t.n, 's', (SELECT mysum(x) FROM generate_series(1, 3) x)) FROM t WHERE t.id = \$1"
  [opaque]="SELECT jsonb_build_object('n', t.n, 'side', side_v(t.id)) FROM t WHERE t.id = \$1"
  [mat]="SELECT jsonb_build_object('n', t.n, 'total', (SELECT m.total FROM mv m WHERE m.id = t.id)) FROM t WHERE t.id = \$1"
  [ts]="SELECT jsonb_build_object('n', t.n, 'ts', to_tsvector('mycfg', 'running dogs')) FROM t WHERE t.id = \$1"
  [part]="SELECT jsonb_build_object('n', t.n, 'v', (SELECT p.v FROM pt p WHERE p.id = t.id)) FROM t WHERE t.id = \$1"
)
for q in "${!case_sql[@]}"; do
  path=; [ "$q" != shadow ] || path=", search_path => 'app, public'"
  sql "SELECT docsync.define_query('$q', \$q\$${case_sql[$q]}\$q\$, params => ARRAY['id']$path, watches => 'manual')" >/dev/null 2>&1
  sql "SELECT docsync.watch('$q', 'public.t', params => ARRAY['id'])" >/dev/null
done
# every table it reads watched: a query with an unwatched table is not the case here
sql "SELECT docsync.watch('opaque', 'public.side', params => ARRAY['id'])" >/dev/null
sql "SELECT docsync.watch('part', 'public.pt', params => ARRAY['id'])" >/dev/null

grant_reader
compute_role=$(sql "SELECT reader FROM docsync.reader_roles")
sql "GRANT USAGE ON SCHEMA app TO $compute_role; ALTER DEFAULT PRIVILEGES IN SCHEMA app GRANT SELECT ON TABLES TO $compute_role"
sql "GRANT SELECT ON side, mv TO $compute_role"
# case_fresh QUERY ID: t when db:QUERY:ID equals a fresh run as the compute role under its search_path.
case_fresh() {
  local d path; d=$(last_doc "db:$1:$2"); [ -n "$d" ] || { echo "no doc"; return; }
  path=public; [ "$1" != shadow ] || path="app, public"
  psql -X -q -At -v ON_ERROR_STOP=1 -d "$db" -c "BEGIN" -c "SET LOCAL ROLE $compute_role" \
    -c "SET LOCAL search_path = $path" \
    -c "SELECT \$dd\$$d\$dd\$::jsonb IS NOT DISTINCT FROM ($(sed "s/\\\$1/$2/" <<<"${case_sql[$1]}"))::jsonb" -c "COMMIT"
}

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
# case_step QUERY NAME DDL: runs DDL, then waits up to 15 s for db:QUERY:1 and 2 to equal fresh runs.
case_step() {
  local q=$1 name=$2 ddl=$3 ok deadline id
  sql "$ddl"
  deadline=$((SECONDS + 15))
  for (( ; ; )); do
    ok=1
    for id in 1 2; do [ "$(case_fresh "$q" "$id")" = t ] || ok=; done
    [ -z "$ok" ] || break
    if [ $SECONDS -ge $deadline ]; then
      echo "   $name: STALE after 15 s: $(last_doc "db:$q:1")"
      failures+=("$name")
      return
    fi
    sleep 0.3
  done
  echo "   $name: recomputed"
}
for q in "${!case_sql[@]}"; do
  for id in 1 2; do
    deadline=$((SECONDS + 20))
    until [ "$(case_fresh "$q" "$id")" = t ]; do
      [ $SECONDS -lt $deadline ] || fail "db:$q:$id at start: $(last_doc "db:$q:$id")"
      sleep 0.3
    done
  done
done
echo "DDL on what one query reads, each noticed by its own rule"
case_step shadow "CREATE FUNCTION app.f(int) shadowing public.f" \
  "CREATE FUNCTION app.f(int) RETURNS text LANGUAGE sql IMMUTABLE BEGIN ATOMIC SELECT 'app.f'; END"
case_step shadow "CREATE TABLE app.t shadowing public.t" \
  "CREATE TABLE app.t (id int, n int); INSERT INTO app.t VALUES (1, 100), (2, 200)"
case_step agg "CREATE OR REPLACE AGGREGATE with another initial state" \
  "CREATE OR REPLACE AGGREGATE mysum(int) (sfunc = add1, stype = int, initcond = '1000')"
case_step opaque "a rewrite of a table read through a string-bodied function" \
  "ALTER TABLE side ALTER COLUMN v TYPE int USING v + 10"
# mbase is read by no doc query, so its change reaches the doc only through the refresh
sql "UPDATE mbase SET q = q + 1"
case_step mat "REFRESH MATERIALIZED VIEW CONCURRENTLY" "REFRESH MATERIALIZED VIEW CONCURRENTLY mv"
case_step ts "ALTER TEXT SEARCH CONFIGURATION ... ALTER MAPPING" \
  "ALTER TEXT SEARCH CONFIGURATION mycfg ALTER MAPPING FOR asciiword WITH english_stem"
# the partition's change while it is out is no change of the watched root: never decoded as one
case_step part "a partition detached, changed and attached again with the same bounds" \
  "BEGIN; ALTER TABLE pt DETACH PARTITION pt_1; UPDATE pt_1 SET v = v + 1;
   ALTER TABLE pt ATTACH PARTITION pt_1 FOR VALUES FROM (1) TO (100); COMMIT"
[ ${#failures[@]} -eq 0 ] || fail "docs left stale by: $(printf '%s; ' "${failures[@]}")"
stop_worker
echo "ok"
