#!/usr/bin/env bash
# Equal keys name one doc, and text arrives as UTF-8, whatever the roles and the environment say:
#   - the replication role prints timestamptz in America/New_York and the pool role in Asia/Tokyo
#     (ALTER ROLE … SET TimeZone), yet a change seen by the plugin and the same key returned by a
#     keys query name one channel, spelled in UTC;
#   - the worker runs with PGCLIENTENCODING=LATIN1 and the pool role has client_encoding LATIN1, yet
#     a UTF8 database's 'café' names db:lk:café with its doc, not null;
#   - CREATE EXTENSION refuses a LATIN1 database, saying why and what to do.
set -euo pipefail
test_name=key_forms
# shellcheck source=lib/worker_env.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib/worker_env.bash"
latin1_db=docsync_latin1_$$
drop_latin1() { psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $latin1_db" >/dev/null 2>&1; }
cleanup_hooks+=(drop_latin1)

setup_db
psql -X -q -v ON_ERROR_STOP=1 -d postgres -c "ALTER ROLE $repl_role SET TimeZone = 'America/New_York'" \
  -c "ALTER ROLE $reader_role SET TimeZone = 'Asia/Tokyo'" -c "ALTER ROLE $reader_role SET client_encoding = 'LATIN1'" \
  -c "ALTER ROLE $repl_role SET DateStyle = 'SQL, DMY'" -c "ALTER ROLE $reader_role SET DateStyle = 'German'"
sql "CREATE TABLE ev (id int PRIMARY KEY, at timestamptz NOT NULL, v int NOT NULL)"
sql "ALTER TABLE ev REPLICA IDENTITY FULL"
sql "CREATE TABLE tag (id int PRIMARY KEY, ev_id int NOT NULL)"
sql "ALTER TABLE tag REPLICA IDENTITY FULL"
sql "CREATE TABLE names (id int PRIMARY KEY, name text NOT NULL)"
sql "ALTER TABLE names REPLICA IDENTITY FULL"
sql "INSERT INTO ev VALUES (1, '2026-01-01 00:00:00+00', 1)"
sql "INSERT INTO names VALUES (1, 'café')"
sql "SELECT docsync.define_query('byat', \$q\$SELECT jsonb_build_object('v', sum(v)) FROM ev WHERE at = \$1\$q\$, params => ARRAY['at'])" >/dev/null 2>&1
sql "SELECT docsync.watch('byat', 'ev', params => ARRAY['at'])" >/dev/null
sql "SELECT docsync.watch('byat', 'tag', keys_sql => \$q\$SELECT e.at FROM ev e WHERE e.id = \$1\$q\$, keys_args => ARRAY['ev_id'])" >/dev/null
sql "SELECT docsync.define_query('lk', \$q\$SELECT jsonb_build_object('name', n.name) FROM names n WHERE n.name = \$1\$q\$, params => ARRAY['name'])" >/dev/null 2>&1
sql "SELECT docsync.watch('lk', 'names', params => ARRAY['name'])" >/dev/null
grant_reader
PGCLIENTENCODING=LATIN1 PGTZ=Europe/Paris start_worker --live all
sql "UPDATE ev SET v = 2 WHERE id = 1"
settle 30
sql "INSERT INTO tag VALUES (1, 1)"
settle 30
sql "UPDATE names SET name = name WHERE id = 1"
settle 30
channels=$(jq -r 'select(.channel | startswith("db:byat:")) | .channel' "$docs" | sort -u)
[ "$channels" = "db:byat:2026-01-01 00%3A00%3A00+00" ] ||
  fail "one timestamptz key named these channels, expected one spelled in UTC: $(echo "$channels" | paste -sd' ')"
[ "$(jq -r 'select(.channel | startswith("db:byat:")) | .channel' "$docs" | wc -l)" -ge 2 ] ||
  fail "the keys query's lookup did not publish the doc again"
[ "$(last_doc 'db:lk:café')" = '{"name":"café"}' ] || fail "db:lk:café is $(last_doc 'db:lk:café'), expected its doc"
[ "$(jq -r '.channel' "$docs" | grep -c '^db:lk:')" = "$(jq -r '.channel' "$docs" | grep -c '^db:lk:café$')" ] ||
  fail "another spelling of café named a channel: $(jq -r '.channel' "$docs" | grep '^db:lk:' | sort -u | paste -sd' ')"
stop_worker
echo "one channel per key and UTF-8 text under hostile role and environment settings"

psql -X -q -v ON_ERROR_STOP=1 -d postgres -c "CREATE DATABASE $latin1_db ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0"
if out=$(psql -X -q -v ON_ERROR_STOP=1 -d "$latin1_db" -c "CREATE EXTENSION docsync" 2>&1); then
  fail "CREATE EXTENSION docsync succeeded in a LATIN1 database"
fi
case $out in
  *"docsync needs a UTF8 database; database \"$latin1_db\" is LATIN1"*"ENCODING 'UTF8'"*) ;;
  *) fail "the LATIN1 refusal does not say why and what to do: $out" ;;
esac
echo "ok"
