#!/usr/bin/env bash
# sql/portable/build.py, which writes docsync-portable.sql (make portable): every C function of
# sql/parts/ needs a portable form. Checked on copies of the parts and forms:
#   - the real parts and forms build, and the script holds no C function, MODULE_PATHNAME, event
#     trigger outside a superuser's DO block, or pg_extension_config_dump;
#   - a C function added to a part without a portable form fails the build, naming it and its part;
#   - a portable form that replaces nothing fails the build, naming it;
#   - each form stands where its statement stood: objects keep the parts' order.
# Needs no server.
set -euo pipefail

top=${DOCSYNC_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
build() { python3 "$top/sql/portable/build.py" "$work/out.sql" --forms "$work/forms" "$work"/parts/*.sql; }

cp -r "$top/sql/parts" "$work/parts"
cp -r "$top/sql/portable" "$work/forms"
build || fail "the parts and forms of this checkout do not build"
! grep -n "MODULE_PATHNAME\|LANGUAGE c\b\|LANGUAGE C\b\|pg_extension_config_dump(" "$work/out.sql" || fail "the script still needs the C library"
if ! grep -q "^BEGIN;" "$work/out.sql" || ! tail -n 3 "$work/out.sql" | grep -q "^COMMIT;"; then
  fail "the script is not one transaction"
fi
# objects in the parts' order: channel() before define_query(), define_query() before the views
a=$(grep -n "^CREATE FUNCTION docsync.channel(query text, VARIADIC" "$work/out.sql" | cut -d: -f1)
b=$(grep -n "^CREATE FUNCTION docsync.define_query(" "$work/out.sql" | cut -d: -f1)
c=$(grep -n "^CREATE VIEW docsync.queries" "$work/out.sql" | cut -d: -f1)
if [ -z "$a" ] || [ -z "$b" ] || [ -z "$c" ] || [ "$a" -ge "$b" ] || [ "$b" -ge "$c" ]; then
  fail "objects out of order ($a, $b, $c)"
fi

# a C function added later without a portable form
cat >>"$work/parts/07_ddl.sql" <<'SQL'

CREATE FUNCTION docsync.derive_something(sql text, search_path text)
RETURNS text LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'docsync_derive_something';
SQL
if out=$(build 2>&1); then fail "a C function without a portable form built"; fi
grep -q "function docsync.derive_something/2 (in .*07_ddl.sql)" <<<"$out" || fail "the failure does not name the function: $out"

# a form that replaces nothing
cp "$top/sql/parts/07_ddl.sql" "$work/parts/07_ddl.sql"
printf -- '-- portable: function docsync.gone/1\nCREATE FUNCTION docsync.gone(x int) RETURNS int LANGUAGE sql AS $$ SELECT x $$;\n' >"$work/forms/99_stale.sql"
if out=$(build 2>&1); then fail "a stale portable form built"; fi
grep -q "replace nothing in sql/parts/: function docsync.gone/1" <<<"$out" || fail "the failure does not name the stale form: $out"
echo "portable_build: ok"
