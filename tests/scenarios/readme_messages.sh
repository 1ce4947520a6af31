#!/usr/bin/env bash
# Every message README.md's Troubleshooting section quotes must be one the code really emits: the
# extension's C and SQL, the worker's C++, or the PostgreSQL server and libpq it runs against (for
# their own messages the README quotes). tests/readme_messages.py does the matching; it fails, naming
# each message, when the README and the code drift apart. Needs no server, only its binary.
set -euo pipefail
src=${DOCSYNC_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
pg_config=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
postgres=${DOCSYNC_PG_BINDIR:-$("$pg_config" --bindir)}/postgres
libpq=$(ldconfig -p 2>/dev/null | awk '/libpq\.so\.5 /{p = $NF} END {print p}')
[ -n "$libpq" ] || libpq=$("$pg_config" --libdir)/libpq.so.5
for f in "$postgres" "$libpq"; do
  [ -f "$f" ] || { echo "FAIL: $f not found (the server and libpq whose messages the README quotes)" >&2; exit 1; }
done
python3 "$src/tests/readme_messages.py" "$src/README.md" "$src" "$postgres" "$libpq"
