#!/usr/bin/env bash
# The server setting docsync.status_dir, set the way docs/monitoring.md says, from fresh sessions of a server
# whose configuration files do not name it (the state of a server docsync was just installed on):
#   - docs/monitoring.md's `sql status-dir` block (ALTER SYSTEM from psql) works in a session that has not
#     used docsync yet, and after the reload every new session sees the value (SHOW, and the
#     directory docsync.status reads);
#   - the premise: without the block's LOAD, PostgreSQL 15 refuses ALTER SYSTEM and SHOW for the
#     setting with "unrecognized configuration parameter" (the README's troubleshooting entry);
#   - ALTER SYSTEM RESET, the same way, returns it to the default.
# Starts a cluster of its own (packaging/dev-cluster.sh), since it rewrites the server's settings.
set -euo pipefail

top=${DOCSYNC_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
cluster=""
cleanup() { [ -z "$cluster" ] || "$top/packaging/dev-cluster.sh" stop "$cluster" >/dev/null 2>&1 || true; }
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

cluster=$("$top/packaging/dev-cluster.sh" start | tail -n 1)
# shellcheck source=/dev/null
. "$cluster/cluster.env"
bindir=$DOCSYNC_PG_BINDIR
# A new psql, so a new backend, each call: nothing of docsync is loaded unless the SQL loads it.
fresh() { timeout 60 "$bindir/psql" -X -q -At -v ON_ERROR_STOP=1 -d postgres "$@"; }

# The server as installed: docsync.status_dir in no configuration file.
sed -i '/^docsync\.status_dir/d' "$cluster/data/postgresql.conf"
"$top/packaging/dev-cluster.sh" ctl "$cluster" restart >/dev/null
fresh -c "CREATE EXTENSION docsync" 2>/dev/null

# The premise: a fresh session does not know the setting.
for sql in "SHOW docsync.status_dir" "ALTER SYSTEM SET docsync.status_dir = '/tmp'"; do
  if out=$(fresh -c "$sql" 2>&1); then
    fail "'$sql' worked in a fresh session without LOAD ($out): the LOAD of docs/monitoring.md and this test are moot"
  fi
  grep -q 'unrecognized configuration parameter "docsync.status_dir"' <<<"$out" ||
    fail "'$sql' failed otherwise than expected: $out"
done

# The block of docs/monitoring.md, with its directory replaced by one of this cluster's.
block=$(awk '/^ *```sql status-dir$/ {on = 1; next} on && /^ *```/ {exit} on {print}' "$top/docs/monitoring.md")
[ -n "$block" ] || fail "docs/monitoring.md has no \`\`\`sql status-dir block"
grep -q "ALTER SYSTEM SET docsync.status_dir" <<<"$block" || fail "the block of docs/monitoring.md sets nothing: $block"
mkdir -p "$cluster/status2"
chmod 1777 "$cluster/status2"
block=${block//\/run\/docsync/$cluster/status2}
out=$(fresh <<<"$block" 2>&1) || fail "the status-dir block of docs/monitoring.md failed in a fresh session: $out"

# After the reload, every new session knows the value, and docsync.status reads there.
deadline=$((SECONDS + 10))
until [ "$(fresh -c "SHOW docsync.status_dir" 2>&1)" = "$cluster/status2" ]; do
  [ $SECONDS -lt $deadline ] || fail "a new session shows docsync.status_dir as $(fresh -c "SHOW docsync.status_dir" 2>&1)"
  sleep 0.2
done
[ "$(fresh -c "SELECT docsync.status_directory()")" = "$cluster/status2" ] ||
  fail "docsync.status reads $(fresh -c "SELECT docsync.status_directory()"), not the directory set"

# Undoing it the same way.
fresh -c "LOAD 'docsync'" -c "ALTER SYSTEM RESET docsync.status_dir" -c "SELECT pg_reload_conf()" >/dev/null
deadline=$((SECONDS + 10))
until [ "$(fresh -c "SELECT docsync.status_directory()")" = /run/docsync ]; do
  [ $SECONDS -lt $deadline ] || fail "after RESET docsync.status reads $(fresh -c "SELECT docsync.status_directory()")"
  sleep 0.2
done
echo "ok: docsync.status_dir set and reset with ALTER SYSTEM from fresh sessions"
