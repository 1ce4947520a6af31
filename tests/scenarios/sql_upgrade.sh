#!/usr/bin/env bash
# The extension's upgrade path. Convention: sql/docsync--X.Y.sql installs version X.Y from scratch:
# the default version's is generated from sql/parts/, each released version's is kept in the tree as
# it was released (sql/docsync--0.1.sql), so that the server offers it and its update is tested
# here; every release adds one sql/docsync--A--B.sql per version step, even an empty one.
# packaging/upgrade-diff.sh prints what an update misses. This test checks that:
#   - every version the server offers reaches default_version by ALTER EXTENSION … UPDATE;
#   - installing each older version and updating yields exactly the objects, definitions, grants and
#     pg_dump registrations of a fresh install of default_version (catalog fingerprint below);
#   - definitions made before an update survive it, a query keeping watches = 'manual';
#   - a second database of the same cluster installs it while docsync_admin already exists, and a
#     drop and re-create leaves the same fingerprint.
# Needs a running server with this checkout's extension installed (packaging/dev-cluster.sh).
set -euo pipefail

: "${PGHOST:?PGHOST not set: run against packaging/dev-cluster.sh}" "${PGPORT:?}"
bindir=${DOCSYNC_PG_BINDIR:-$(dirname "$(command -v psql)")}
export PGUSER=${PGUSER:-postgres}
top=${DOCSYNC_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
fresh=docsync_upgrade_fresh_$$
other=docsync_upgrade_other_$$
dbs=("$fresh" "$other")

psql_() { timeout 60 "$bindir/psql" -X -q -v ON_ERROR_STOP=1 "$@"; }
cleanup() {
  for db in "${dbs[@]}"; do
    timeout 60 "$bindir/psql" -X -q -d postgres -c "DROP DATABASE IF EXISTS $db" >/dev/null 2>&1 || true
  done
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# Everything an upgrade must reproduce, OIDs left out.
fingerprint() { psql_ -d "$1" -At -f "$top/tests/scenarios/lib/extension_fingerprint.sql"; }

default_version=$(psql_ -d postgres -At -c "SELECT default_version FROM pg_available_extensions WHERE name = 'docsync'")
[ -n "$default_version" ] || fail "the server offers no docsync extension"
ctl_version=$(sed -n "s/^default_version *= *'\(.*\)'/\1/p" "$top/docsync.control")
mk_version=$(sed -n 's/^EXTVERSION *= *//p' "$top/Makefile")
[ "$default_version" = "$ctl_version" ] || fail "server offers default $default_version, docsync.control says $ctl_version"
[ "$mk_version" = "$ctl_version" ] || fail "Makefile EXTVERSION $mk_version differs from docsync.control $ctl_version"
[ -f "$top/sql/docsync--$default_version.sql" ] || fail "no install script sql/docsync--$default_version.sql"
for f in "$top"/sql/docsync--*.sql; do
  base=${f##*/}
  [[ $base =~ ^docsync--[0-9]+\.[0-9]+(--[0-9]+\.[0-9]+)?\.sql$ ]] ||
    fail "$base does not follow docsync--X.Y.sql / docsync--A--B.sql"
done

psql_ -d postgres -c "CREATE DATABASE $fresh"
psql_ -d "$fresh" -c "CREATE EXTENSION docsync"
want=$(fingerprint "$fresh")
[ "$(grep -c '^member ' <<<"$want")" -gt 20 ] || fail "fingerprint of a fresh install looks empty"

# a drop and re-create in a cluster where docsync_admin exists gives the same objects
psql_ -d "$fresh" -c "DROP EXTENSION docsync" -c "CREATE EXTENSION docsync"
[ "$(fingerprint "$fresh")" = "$want" ] || fail "re-creating the extension changed it"
# and so does a second database
psql_ -d postgres -c "CREATE DATABASE $other"
psql_ -d "$other" -c "CREATE EXTENSION docsync"
[ "$(fingerprint "$other")" = "$want" ] || fail "the extension differs in a second database"

# every offered version has an update path to the default, and updating gives a fresh install
mapfile -t versions < <(psql_ -d postgres -At -c \
  "SELECT version FROM pg_available_extension_versions WHERE name = 'docsync' AND version <> '$default_version' ORDER BY 1")
checked=0
for v in "${versions[@]}"; do
  path=$(psql_ -d postgres -At -c "SELECT path FROM pg_extension_update_paths('docsync') WHERE source = '$v' AND target = '$default_version'")
  [ -n "$path" ] || fail "no update path from $v to $default_version: add sql/docsync--$v--<next>.sql"
  db=docsync_upgrade_${v//./_}_$$
  dbs+=("$db")
  psql_ -d postgres -c "CREATE DATABASE $db"
  psql_ -d "$db" -c "CREATE EXTENSION docsync VERSION '$v'"
  { psql_ -d "$db" <<'SQL'
CREATE TABLE t (id int PRIMARY KEY);
SELECT docsync.define_query('t', 'SELECT jsonb_build_object(''id'', $1::int)', params => ARRAY['id']);
SELECT docsync.watch('t', 't', params => ARRAY['id']);
SQL
  } >/dev/null
  psql_ -d "$db" -c "ALTER EXTENSION docsync UPDATE TO '$default_version'"
  got=$(fingerprint "$db")
  if [ "$got" != "$want" ]; then
    diff <(echo "$want") <(echo "$got") >&2 || true
    fail "installing $v and updating ($path) differs from a fresh $default_version install: packaging/upgrade-diff.sh $v shows the definitions to carry into the update script"
  fi
  psql_ -d "$db" -At -c "SELECT count(*) FROM docsync.watches WHERE query = 't'" | grep -qx 1 ||
    fail "definitions made in $v did not survive the update"
  # a query defined before derived watches existed keeps exactly its hand-written watches
  psql_ -d "$db" -At -c "SELECT watches || ' ' || (SELECT count(*) FROM docsync.watch_defs WHERE query = 't' AND origin = 'manual')
                           FROM docsync.query_defs WHERE name = 't'" | grep -qx 'manual 1' ||
    fail "a query defined in $v does not keep watches = 'manual' and its hand-written watch after the update"
  checked=$((checked + 1))
done
echo "sql_upgrade: ok (default $default_version, $checked older version(s) updated)"
