#!/usr/bin/env bash
# A batched form the worker sets aside is shown in docsync.queries, and the grant that fixes it
# brings the query back to batched, through the real worker:
#   - the doc query compares an enum column with its param, so alone it names no type, while its
#     batched form names the param's type (mt.mood[]), which needs USAGE on schema mt;
#   - with that USAGE revoked from the definer's reader role, a change to two docs fails batched
#     (42501) and computes each alone: docsync.queries says 'set aside', and why, naming
#     grant_reader; both docs publish;
#   - grant_reader grants the USAGE again and raises the definitions generation: the worker tries
#     the form again, docsync.queries says 'batched', and the next change to two docs runs as one
#     statement.
set -euo pipefail
test_name=batch_set_aside
# shellcheck source=lib/own_cluster.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib/own_cluster.bash"

setup_db
sql "CREATE SCHEMA mt"
sql "CREATE TYPE mt.mood AS ENUM ('calm', 'happy')"
sql "CREATE TABLE people (id int PRIMARY KEY, m mt.mood NOT NULL, v int NOT NULL)"
sql "ALTER TABLE people REPLICA IDENTITY FULL"
sql "INSERT INTO people VALUES (1, 'calm', 0), (2, 'happy', 0)"
sql "SELECT docsync.define_query('bymood', 'SELECT jsonb_build_object(''sum'', sum(v)) FROM people WHERE m = \$1 AND v >= 0', params => ARRAY['m']);
     SELECT docsync.watch('bymood', 'people', params => ARRAY['m'])" >/dev/null
grant_reader
reader=$(sql "SELECT reader_role FROM docsync.queries WHERE name = 'bymood'")
[ -n "$reader" ] || fail "bymood has no reader role: $(sql "SELECT json_agg(q) FROM docsync.queries q")"
[ "$(sql "SELECT batched FROM docsync.queries WHERE name = 'bymood'")" = batched ] ||
  fail "bymood is not batched before any worker ran: $(sql "SELECT json_agg(q) FROM docsync.queries q")"
sql "REVOKE USAGE ON SCHEMA mt FROM $reader"

start_worker --pool 2
sql "UPDATE people SET v = v + 1"
settle 30
wait_for 15 "SELECT batched = 'set aside' FROM docsync.queries WHERE name = 'bymood'" ||
  fail "docsync.queries does not show the batched form set aside: $(sql "SELECT json_agg(json_build_array(name, batched, batch_set_aside)) FROM docsync.queries")"
why=$(sql "SELECT batch_set_aside FROM docsync.queries WHERE name = 'bymood'")
case "$why" in
  *"doc query \"bymood\": batched form set aside"*42501*grant_reader*"permission denied for schema mt") ;;
  *) fail "batch_set_aside does not say why and what fixes it: $why" ;;
esac
[ "$(sql "SELECT batch_set_aside IS NOT NULL FROM docsync.query_stats WHERE slot_name = '$slot' AND query = 'bymood'")" = t ] ||
  fail "docsync.query_stats does not show the set-aside form"
[ "$(last_doc db:bymood:calm)" = '{"sum":1}' ] && [ "$(last_doc db:bymood:happy)" = '{"sum":1}' ] ||
  fail "the docs computed one by one did not publish: $(last_doc db:bymood:calm) $(last_doc db:bymood:happy)"
echo "set aside: $why"

grant_reader
wait_for 15 "SELECT batched = 'batched' FROM docsync.queries WHERE name = 'bymood'" ||
  fail "docsync.queries still shows the form set aside after grant_reader: $(sql "SELECT batch_set_aside FROM docsync.queries WHERE name = 'bymood'")"
sql "SELECT pg_stat_statements_reset()" >/dev/null
sql "UPDATE people SET v = v + 1"
settle 30
[ "$(last_doc db:bymood:calm)" = '{"sum":2}' ] && [ "$(last_doc db:bymood:happy)" = '{"sum":2}' ] ||
  fail "the docs did not publish after grant_reader: $(last_doc db:bymood:calm) $(last_doc db:bymood:happy)"
batched_calls=$(sql "SELECT coalesce(sum(calls), 0) FROM pg_stat_statements WHERE query LIKE '%unnest(\$1::mt.mood[])%' AND query NOT LIKE '%pg_stat_statements%'")
[ "$batched_calls" -ge 1 ] || fail "the two docs were not computed by the batched form after grant_reader"
[ "$(sql "SELECT batched FROM docsync.queries WHERE name = 'bymood'")" = batched ] ||
  fail "the form was set aside again: $(sql "SELECT batch_set_aside FROM docsync.queries WHERE name = 'bymood'")"
echo "batched again after grant_reader ($batched_calls batched statement(s))"
stop_worker
echo "ok"
