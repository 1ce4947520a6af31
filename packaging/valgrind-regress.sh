#!/usr/bin/env bash
# The extension's pg_regress suite (regress/) once, with the server under valgrind memcheck:
#   packaging/valgrind-regress.sh
# Starts a throwaway cluster (packaging/dev-cluster.sh), restarts its server under valgrind (every
# backend and walsender is a fork of the postmaster, so all of them run under memcheck), runs `make
# installcheck`, stops the server and reads one valgrind log per process. It fails when a regress
# test fails or when any memcheck error has a frame in the docsync library (plugin/*.c); errors
# only in the server's own code are counted and listed by kind, not failed (Debian ships no
# valgrind suppressions for PostgreSQL and its server is not built with USE_VALGRIND, so memory
# inside palloc chunks is not tracked and the server has known benign reports). Slow: 10 to 30
# minutes. DOCSYNC_VALGRIND_KEEP=1 keeps the cluster directory with the logs.
set -uo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$top" || exit 1
export PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
command -v valgrind >/dev/null || { echo "valgrind-regress: valgrind is not installed (apt-get install valgrind)" >&2; exit 1; }
start=$(date +%s)

dir=$(packaging/dev-cluster.sh start) || exit 1
stop_cluster() {
  if [ "${DOCSYNC_VALGRIND_KEEP:-0}" = 1 ]; then
    as_server "$DOCSYNC_PG_BINDIR/pg_ctl" -D "$dir/data" -m fast -w -t 300 stop >/dev/null 2>&1
    echo "valgrind-regress: kept $dir (logs in $dir/valgrind)"
  else
    packaging/dev-cluster.sh stop "$dir"
  fi
}
trap stop_cluster EXIT
trap 'exit 130' INT TERM
# shellcheck disable=SC1091
. "$dir/cluster.env"
as_server() { if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
pg_ctl() { as_server "$DOCSYNC_PG_BINDIR/pg_ctl" -D "$dir/data" "$@"; }

# The library the server loads, and this checkout's sources, name our frames in the reports.
lib="$dir/root$("$PG_CONFIG" --pkglibdir)/docsync.so"
[ -f "$lib" ] || { echo "valgrind-regress: $lib is missing" >&2; exit 1; }
mkdir -p "$dir/valgrind"
[ "$(id -u)" -eq 0 ] && chown postgres "$dir/valgrind"

# pg_ctl starts the server through this wrapper: the postmaster is the valgrind process itself.
cat >"$dir/postgres-valgrind" <<WRAP
#!/bin/sh
exec valgrind --tool=memcheck --error-limit=no --num-callers=40 --leak-check=no \\
  --track-origins=yes --read-var-info=no --fullpath-after= \\
  --log-file="$dir/valgrind/%p.log" "$DOCSYNC_PG_BINDIR/postgres" "\$@"
WRAP
chmod 755 "$dir/postgres-valgrind"

pg_ctl -m fast -w -t 60 stop >/dev/null || exit 1
# Under valgrind everything is ~30x slower: no autovacuum noise, generous checkpoints.
cat >>"$dir/data/postgresql.conf" <<CONF
autovacuum = off
checkpoint_timeout = 1h
wal_sender_timeout = 0
huge_pages = off
CONF
echo "valgrind-regress: starting the server under valgrind in $dir"
pg_ctl -p "$dir/postgres-valgrind" -l "$dir/server.log" -w -t 600 start >/dev/null ||
  { tail -n 20 "$dir/server.log" >&2; echo "valgrind-regress: the server did not start under valgrind" >&2; exit 1; }

rc=0
echo "valgrind-regress: make installcheck"
if ! make -s installcheck PG_CONFIG="$PG_CONFIG"; then
  rc=1
  [ -f regress/regression.diffs ] && head -n 100 regress/regression.diffs
fi
pg_ctl -m fast -w -t 600 stop >/dev/null || echo "valgrind-regress: the server did not stop cleanly" >&2

# One report per error block ("==PID== <kind>" then "   at/by" frames up to a bare "==PID==").
report=$dir/valgrind/summary.txt
awk -v ours="$top/plugin/" -v lib="$lib" '
  function flush() {
    if (block != "") {
      total++; kinds[kind]++
      if (mine) { ourcount++; print block "\n" > "/dev/stderr" }
    }
    block = ""; mine = 0; kind = ""
  }
  /^==[0-9]+== [A-Z]/ && block == "" {
    line = $0; sub(/^==[0-9]+== /, "", line)
    # Only error headers start a block: the lines valgrind prints at start and exit do not.
    if (line ~ /^(Invalid |Conditional jump|Use of uninitialised|Syscall param|Mismatched free|Source and destination overlap|Argument .* of function|Jump to |Process terminating)/) {
      block = FILENAME ": " line; kind = line; sub(/ of size [0-9]+/, "", kind); sub(/\(.*$/, "", kind)
      next
    }
  }
  block != "" && /^==[0-9]+==    / {
    block = block "\n" $0
    if (index($0, ours) || index($0, lib)) mine = 1
    next
  }
  block != "" && /^==[0-9]+== *$/ { flush(); next }
  block != "" { block = block "\n" $0 }
  END {
    flush()
    printf "memcheck errors: %d in total, %d with a frame in the docsync library\n", total, ourcount
    for (k in kinds) printf "  %5d  %s\n", kinds[k], k
    exit ourcount > 0
  }' "$dir"/valgrind/[0-9]*.log 2>"$dir/valgrind/ours.txt" >"$report"
ours_rc=$?
processes=$(ls "$dir"/valgrind/[0-9]*.log | wc -l)
cat "$report"
if [ $ours_rc -ne 0 ]; then
  echo "valgrind-regress: memcheck errors in the docsync library:"
  cat "$dir/valgrind/ours.txt"
  rc=1
fi
echo "valgrind-regress: $processes server processes under memcheck, $(( $(date +%s) - start ))s"
[ $rc -eq 0 ] && echo "valgrind-regress: passed" || echo "valgrind-regress: FAILED"
exit $rc
