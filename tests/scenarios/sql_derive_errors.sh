#!/usr/bin/env bash
# Deriving watches turns only "this text cannot be analysed" into an uncovered function: an error
# that says nothing about the text is raised, and the caller's own fallback applies. Two sessions:
#   - a migration holds an ACCESS EXCLUSIVE lock on a table a SQL function's body reads; a
#     define_query (allow_uncovered => true) of a doc query calling that function, under
#     lock_timeout, fails with the lock timeout instead of being defined without the body's table;
#   - once the lock is gone, the same define_query succeeds, the body's table watched (broadcast).
# Needs a running server: PGHOST/PGPORT (packaging/dev-cluster.sh) and DOCSYNC_PG_BINDIR.
set -euo pipefail

: "${PGHOST:?PGHOST not set: run against packaging/dev-cluster.sh}" "${PGPORT:?}"
bindir=${DOCSYNC_PG_BINDIR:-$(dirname "$(command -v psql)")}
export PGUSER=${PGUSER:-postgres}
db=docsync_derive_errors_$$
locker=""
cleanup() {
  [ -z "$locker" ] || kill "$locker" 2>/dev/null || true
  timeout 60 "$bindir/psql" -X -q -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
sql() { timeout 60 "$bindir/psql" -X -q -At -v ON_ERROR_STOP=1 -d "$db" "$@"; }

timeout 60 "$bindir/psql" -X -q -v ON_ERROR_STOP=1 -d postgres -c "CREATE DATABASE $db"
sql <<'SQL'
CREATE EXTENSION docsync;
CREATE TABLE orders (id int PRIMARY KEY, status text);
CREATE TABLE hidden (id int PRIMARY KEY, v text);
CREATE FUNCTION hidden_v(int) RETURNS text LANGUAGE sql STABLE AS $$ SELECT v FROM public.hidden WHERE id = $1 $$;
SQL
define="SELECT docsync.define_query('fbody', \$q\$SELECT jsonb_build_object('id', o.id, 'h', hidden_v(o.id))
  FROM orders o WHERE o.id = \$1\$q\$, params => ARRAY['id'], allow_uncovered => true)"

# the migration: holds the lock until told to stop (its psql ends with the sleep)
timeout 60 "$bindir/psql" -X -q -d "$db" -c "BEGIN" -c "LOCK hidden IN ACCESS EXCLUSIVE MODE" \
  -c "SELECT pg_sleep(30)" -c "COMMIT" >/dev/null 2>&1 &
locker=$!
for _ in $(seq 1 200); do
  [ "$(sql -c "SELECT count(*) FROM pg_locks WHERE relation = 'hidden'::regclass AND granted")" = 1 ] && break
  sleep 0.05
done
[ "$(sql -c "SELECT count(*) FROM pg_locks WHERE relation = 'hidden'::regclass AND granted")" = 1 ] ||
  fail "the migration's lock on hidden was never granted"

if out=$(sql -c "SET lock_timeout = '200ms'" -c "$define" 2>&1); then
  fail "define_query under a lock timeout succeeded: $(sql -c "SELECT string_agg(table_name || ':' || kind, ',' ORDER BY table_name) FROM docsync.watches WHERE query = 'fbody'")"
fi
echo "$out" | grep -q "lock timeout" || fail "define_query failed, but not with the lock timeout: $out"
[ "$(sql -c "SELECT count(*) FROM docsync.queries WHERE name = 'fbody'")" = 0 ] ||
  fail "the failed define_query left its query behind"
echo "ok: a lock timeout inside a function body's analysis fails define_query"

sql -c "SELECT pg_cancel_backend(pid) FROM pg_locks WHERE relation = 'hidden'::regclass AND granted" >/dev/null
wait "$locker" || true
locker=""
sql -c "$define" >/dev/null
got=$(sql -c "SELECT string_agg(table_name || ':' || kind, ',' ORDER BY table_name) FROM docsync.watches WHERE query = 'fbody'")
[ "$got" = "hidden:broadcast,orders:direct" ] || fail "without the lock: watches $got, expected hidden:broadcast,orders:direct"
echo "ok: without the lock the body's table is watched ($got)"
echo PASS
