#!/usr/bin/env bash
# What an update script still misses: installs the default version fresh in one scratch database,
# an older version (FROM, default: every version the server offers besides the default) updated by
# ALTER EXTENSION docsync UPDATE in another, and prints how their catalog fingerprints
# (tests/scenarios/lib/extension_fingerprint.sql) differ: "-" lines are what a fresh install has and
# the update lacks, "+" lines what the update leaves that a fresh install has not. For each function
# or view whose definition differs it then prints the unified diff of the two definitions, so the
# change to carry into sql/docsync--A--B.sql reads off directly. Exit status 0 when every update
# equals a fresh install, 1 when one differs, other on an error (the server's error is printed).
#
#   upgrade-diff.sh [FROM]
#
# Needs a running server with this checkout's extension installed: packaging/dev-cluster.sh start,
# . DIR/cluster.env, and packaging/dev-cluster.sh install DIR after each change to sql/.
set -euo pipefail

: "${PGHOST:?PGHOST not set: run against packaging/dev-cluster.sh (. DIR/cluster.env)}"
bindir=${DOCSYNC_PG_BINDIR:-$(dirname "$(command -v psql)")}
export PGUSER=${PGUSER:-postgres}
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
fingerprint_sql=$top/tests/scenarios/lib/extension_fingerprint.sql
fresh=docsync_updiff_fresh_$$
dbs=("$fresh")
work=$(mktemp -d)

psql_() { timeout 120 "$bindir/psql" -X -q -v ON_ERROR_STOP=1 "$@"; }
cleanup() {
  for db in "${dbs[@]}"; do
    timeout 60 "$bindir/psql" -X -q -d postgres -c "DROP DATABASE IF EXISTS $db" >/dev/null 2>&1 || true
  done
  rm -rf "$work"
}
trap cleanup EXIT
die() { echo "upgrade-diff: $*" >&2; exit 2; }

default_version=$(psql_ -d postgres -At -c "SELECT default_version FROM pg_available_extensions WHERE name = 'docsync'") ||
  die "cannot reach the server"
[ -n "$default_version" ] || die "the server offers no docsync extension: packaging/dev-cluster.sh install DIR"
if [ $# -gt 0 ]; then
  versions=("$@")
else
  mapfile -t versions < <(psql_ -d postgres -At -c \
    "SELECT version FROM pg_available_extension_versions WHERE name = 'docsync' AND version <> '$default_version' ORDER BY 1")
  [ ${#versions[@]} -gt 0 ] || die "the server offers only docsync $default_version: no update to compare"
fi

# each member function and view with its definition on one line (newlines as \x1f), to show the ones that differ
function_defs() {
  psql_ -d "$1" -At -F $'\x1e' <<'SQL'
SELECT p.oid::regprocedure::text, replace(pg_get_functiondef(p.oid), E'\n', E'\x1f')
  FROM pg_depend d JOIN pg_extension e ON d.refobjid = e.oid AND e.extname = 'docsync'
  JOIN pg_proc p ON d.classid = 'pg_proc'::regclass AND p.oid = d.objid
 WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e' AND p.prokind <> 'a'
UNION ALL
SELECT c.oid::regclass::text, replace(pg_get_viewdef(c.oid), E'\n', E'\x1f')
  FROM pg_depend d JOIN pg_extension e ON d.refobjid = e.oid AND e.extname = 'docsync'
  JOIN pg_class c ON d.classid = 'pg_class'::regclass AND c.oid = d.objid AND c.relkind IN ('v', 'm')
 WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
SQL
}
show_function() { awk -F '\x1e' -v f="$2" '$1 == f { gsub(/\x1f/, "\n", $2); print $2 }' "$1"; }

psql_ -d postgres -c "CREATE DATABASE $fresh" >/dev/null
psql_ -d "$fresh" -c "CREATE EXTENSION docsync" >/dev/null
psql_ -d "$fresh" -At -f "$fingerprint_sql" >"$work/fresh.fp"
function_defs "$fresh" >"$work/fresh.defs"

status=0
for v in "${versions[@]}"; do
  [ "$v" != "$default_version" ] || die "$v is the default version: name an older one"
  db=docsync_updiff_${v//[^0-9a-zA-Z]/_}_$$
  dbs+=("$db")
  psql_ -d postgres -c "CREATE DATABASE $db" >/dev/null
  psql_ -d "$db" -c "CREATE EXTENSION docsync VERSION '$v'" >/dev/null ||
    die "installing docsync $v failed (is sql/docsync--$v.sql installed?)"
  psql_ -d "$db" -c "ALTER EXTENSION docsync UPDATE TO '$default_version'" >/dev/null ||
    die "ALTER EXTENSION docsync UPDATE from $v to $default_version failed (error above)"
  psql_ -d "$db" -At -f "$fingerprint_sql" >"$work/updated.fp"
  if diff -q "$work/fresh.fp" "$work/updated.fp" >/dev/null; then
    echo "== $v updated to $default_version: same as a fresh install"
    continue
  fi
  status=1
  echo "== $v updated to $default_version differs from a fresh install (- fresh only, + update only)"
  diff "$work/fresh.fp" "$work/updated.fp" | grep '^[<>]' | sed 's/^< /- /; s/^> /+ /' || true
  function_defs "$db" >"$work/updated.defs"
  # functions and views present on both sides whose definition differs
  mapfile -t changed < <(diff "$work/fresh.fp" "$work/updated.fp" |
    sed -n 's/^[<>] function \(.*)\) [0-9a-f]\{32\} .*$/\1/p; s/^[<>] relation \([^ ]*\) [vm] .* [0-9a-f]\{32\}$/\1/p' | sort | uniq -d)
  for f in "${changed[@]}"; do
    show_function "$work/fresh.defs" "$f" >"$work/a.sql"
    show_function "$work/updated.defs" "$f" >"$work/b.sql"
    cmp -s "$work/a.sql" "$work/b.sql" && continue  # only its grants differ
    echo "-- definition of $f"
    diff -u --label "fresh $default_version" --label "$v updated" "$work/a.sql" "$work/b.sql" || true
  done
done
exit "$status"
