#!/usr/bin/env bash
# The portable install's batched forms against the extension's (docs/portable.md, "Batched forms"):
# one cluster, the extension in one database and the portable script (make portable) in another, the
# same tables, types and corpus of doc and keys queries (tests/scenarios/lib/batch_corpus.sql: the
# batched queries and batch problems of regress/sql/31_sqlapi_batch.sql and 33_sqlapi_batch_types.sql,
# hostile lexing — $1 in strings, E'' strings and their continuation, comments, dollar quotes and
# quoted identifiers, U& identifiers with and without UESCAPE, identifiers holding $, $10 against
# $1, and 80 queries of four such fragments each under column aliases that may spell the batched
# form's own — params of composite, array, domain, char(n) and bit(n) types, every base type of
# pg_catalog and type modifiers):
#   - docsync.batch_sql() gives the same statement in both, or both none with the same reason
#     (docsync.batch_problem()), or both raise;
#   - in the portable install, each batched form returns for every param set what the query
#     returns alone on it (real data, the worker's array literals).
# Starts a cluster of its own (packaging/dev-cluster.sh), stopped at exit.
set -euo pipefail
top=${DOCSYNC_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
export PG_CONFIG
work=$(mktemp -d)
dir=""
cleanup() { [ -z "$dir" ] || "$top/packaging/dev-cluster.sh" stop "$dir" >/dev/null 2>&1 || true; rm -rf "$work"; }
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

make -s -C "$top" PG_CONFIG="$PG_CONFIG" portable
dir=$("$top/packaging/dev-cluster.sh" start --no-install)
"$top/packaging/dev-cluster.sh" install "$dir" >/dev/null
# shellcheck disable=SC1091
. "$dir/cluster.env"
psql_() { local db=$1; shift; timeout 120 "$DOCSYNC_PG_BINDIR/psql" -X -q -At -v ON_ERROR_STOP=1 -U postgres -d "$db" "$@"; }

psql_ postgres -c "CREATE DATABASE ext" -c "CREATE DATABASE port"
psql_ ext -c "CREATE EXTENSION docsync"
psql_ port -f "$top/sql/docsync-portable.sql" >/dev/null 2>&1 || fail "the portable script does not install"
[ "$(psql_ port -c "SELECT docsync.install_kind()")" = portable ] || fail "the second database holds no portable install"
for db in ext port; do psql_ "$db" -f "$top/tests/scenarios/lib/batch_corpus.sql" >/dev/null; done
count=$(psql_ port -c "SELECT count(*) FROM bc.corpus")

# the same statements, or the same reasons
for db in ext port; do
  psql_ "$db" -c "SET search_path = bc" -c "CREATE TABLE forms_out AS SELECT * FROM forms()" \
    -c "SELECT id, form FROM forms_out ORDER BY id" >"$work/$db"
done
if ! diff "$work/ext" "$work/port" >"$work/diff"; then
  head -c 6000 "$work/diff" >&2
  fail "batch_sql differs between the extension and the portable install"
fi
batched=$(grep -c '^[0-9]*|SELECT ' "$work/port" || true)
problems=$(grep -c '^[0-9]*|no batched form: ' "$work/port" || true)
raises=$(grep -c '^[0-9]*|raises$' "$work/port" || true)
# the corpus holds each kind, and the hostile lines were batched
if [ "$batched" -le 100 ] || [ "$problems" -lt 8 ] || [ "$raises" -lt 3 ]; then
  fail "corpus of $count: $batched batched, $problems not, $raises raise"
fi

# batched equals alone, in the portable install
out=$(psql_ port -c "SET search_path = bc" -c "SET client_min_messages = warning" \
        -c "SELECT c.id || ': ' || d FROM corpus c JOIN forms_out f USING (id), LATERAL differences(c.sql, c.args, f.form) d
            WHERE f.form LIKE 'SELECT %' ORDER BY c.id")
[ -z "$out" ] || fail "batched and alone differ: $out"
echo "portable_batch: ok ($count queries: $batched batched, $problems without a batched form, $raises raise)"
