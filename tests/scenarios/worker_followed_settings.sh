#!/usr/bin/env bash
# Settings a doc query's result depends on and docsync does not pin are followed from the server
# (docs/design.md, "pinned and followed settings"): ALTER DATABASE … SET default_text_search_config
# (to_tsvector with one argument), ALTER ROLE <pool role> SET quote_all_identifiers (quote_ident),
# and a reloaded configuration (ALTER SYSTEM SET array_nulls; pg_reload_conf) fire no event trigger;
# the worker notices each, renews its pool's sessions and recomputes every live doc, so each doc
# equals a fresh run again, and a later change of another row is computed with the new setting too.
set -euo pipefail
test_name=followed
# shellcheck source=lib/own_cluster.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib/own_cluster.bash"
reset_system() {
  psql -X -q -d postgres -c "ALTER SYSTEM RESET array_nulls" -c "SELECT pg_reload_conf()" >/dev/null 2>&1 || true
}
early_cleanup_hooks+=(reset_system)
setup_db
sql "CREATE TABLE t (id int PRIMARY KEY, n int NOT NULL, body text NOT NULL)"
sql "INSERT INTO t VALUES (1, 1, 'running dogs'), (2, 2, 'jumping cats')"
doc_sql() {
  echo "SELECT jsonb_build_object('n', t.n, 'ts', to_tsvector(t.body), 'q', quote_ident('x' || t.id),
          'a', '{NULL}'::text[]) FROM t WHERE t.id = $1"
}
sql "SELECT docsync.define_query('thing', \$q\$$(doc_sql '$1')\$q\$, params => ARRAY['id'])" >/dev/null 2>&1
sql "SELECT docsync.watch('thing', 't', params => ARRAY['id'])" >/dev/null
grant_reader
# fresh DOC_ID: a fresh run as the pool role, in a new session (its role's defaults apply).
# The query runs as its definer's reader role (SET ROLE keeps the session's settings), as computes do.
fresh() { psql -X -q -At -d "$db" -U "$reader_role" -c "SET ROLE $compute_role" -c "$(doc_sql "$1")"; }
compute_role=$(sql "SELECT docsync.worker_definitions()->'queries'->0->>'reader_role'")
[ -n "$compute_role" ] || fail "no reader role in docsync.worker_definitions()"
# all_fresh LABEL: both docs equal a fresh run within 20 s.
all_fresh() {
  local deadline=$((SECONDS + 20)) id ok
  for (( ; ; )); do
    ok=1
    for id in 1 2; do
      [ "$(sql "SELECT \$r\$$(last_doc "db:thing:$id")\$r\$::jsonb = \$r\$$(fresh "$id")\$r\$::jsonb")" = t ] || ok=
    done
    [ -n "$ok" ] && { echo "$1: docs equal a fresh run"; return 0; }
    [ $SECONDS -lt $deadline ] ||
      fail "$1: db:thing:1 is $(last_doc db:thing:1), a fresh run gives $(fresh 1)"
    sleep 0.3
  done
}
start_worker --audit-rate 0
sql "UPDATE t SET n = n"
settle
all_fresh "at start"
before=$(last_doc db:thing:1)

sql "ALTER DATABASE $db SET default_text_search_config = 'simple'"
all_fresh "ALTER DATABASE SET default_text_search_config"
[ "$(last_doc db:thing:1)" != "$before" ] || fail "db:thing:1 did not change with default_text_search_config"
grep -q "database or role defaults of settings changed" "$tmp/worker.log" || fail "no line names the changed defaults"
[ "$(sql "SELECT recompute FROM docsync.status WHERE slot_name = '$slot'")" = settings ] ||
  fail "docsync.status.recompute is $(sql "SELECT recompute FROM docsync.status WHERE slot_name = '$slot'")"

psql -X -q -d postgres -c "ALTER ROLE $reader_role SET quote_all_identifiers = on"
all_fresh "ALTER ROLE <pool role> SET quote_all_identifiers"

psql -X -q -d postgres -c "ALTER SYSTEM SET array_nulls = off" -c "SELECT pg_reload_conf()" >/dev/null
all_fresh "ALTER SYSTEM SET array_nulls, reloaded"
grep -q "array_nulls is now 'off'" "$tmp/worker.log" || fail "no line names array_nulls"

# A later change of one row is computed by renewed sessions.
sql "UPDATE t SET n = 5 WHERE id = 2"
settle
all_fresh "then UPDATE t SET n = 5 WHERE id = 2"
[ "$(last_doc db:thing:2 | jq -r .n)" = 5 ] || fail "db:thing:2 is $(last_doc db:thing:2)"
stop_worker
echo "PASS worker_followed_settings"
