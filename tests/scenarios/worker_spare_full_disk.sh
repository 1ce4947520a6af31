#!/usr/bin/env bash
# A spare takes over while the JSONL sink's filesystem is full: the active worker A (--standby)
# rides out ENOSPC, then is killed; the spare B takes the lease, cannot start its sink (the
# filesystem is full), and must give the lease back and stand by again, retrying, not exit; once
# space is freed it publishes the change A could not write.
# Mounts a 2 MiB tmpfs, so it needs root: without root it is skipped, unless CI is set (then it fails).
# Starts a cluster of its own (lib/own_cluster.bash); needs DOCSYNC_WORKER and jq.
set -euo pipefail
if [ "$(id -u)" -ne 0 ]; then
  [ -z "${CI:-}" ] || { echo "FAIL: needs root to mount a tmpfs" >&2; exit 1; }
  echo "SKIP: needs root to mount a tmpfs; with CI set this fails"
  exit 0
fi
test_name=spare_disk
# shellcheck source=lib/own_cluster.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib/own_cluster.bash"
mnt=$tmp/mnt
mkdir "$mnt"
mount -t tmpfs -o size=2m tmpfs "$mnt"
unmount() { umount "$mnt" 2>/dev/null || umount -l "$mnt" 2>/dev/null || true; }
early_cleanup_hooks+=(unmount)
docs=$mnt/docs.jsonl

setup_db
sql "CREATE TABLE acct (id int PRIMARY KEY, bal int NOT NULL, pad text NOT NULL DEFAULT '')"
sql "INSERT INTO acct SELECT g, 0 FROM generate_series(1, 5) g"
sql "SELECT docsync.define_query('acct', \$q\$SELECT jsonb_build_object('id', a.id, 'bal', a.bal, 'pad', a.pad) FROM acct a WHERE a.id = \$1\$q\$, params => ARRAY['id'])" >/dev/null
sql "SELECT docsync.watch('acct', 'acct', params => ARRAY['id'])" >/dev/null
grant_reader
start_worker --standby --live all
a=$worker_pid
"$worker_bin" --dsn "$(dsn "$repl_role")" --pool-dsn "$(dsn "$reader_role")" --slot "$slot" \
  --status-dir "$status_dir" --status-interval 1s --sink "file:$docs" --standby --live all >>"$tmp/b.out" 2>>"$tmp/b.log" &
b=$!
extra_pids+=("$b")
wait_for 30 "SELECT count(*) = 1 FROM docsync.workers WHERE slot_name = '$slot' AND role = 'standby'" || fail "B never stood by"
sql "UPDATE acct SET bal = 1 WHERE id = 1"
settle 60
doc_sql="SELECT jsonb_build_object('id', id, 'bal', bal, 'pad', pad) FROM acct WHERE id = 1"
[ "$(doc_equals_query db:acct:1 "$doc_sql")" = t ] || fail "db:acct:1 not current before the disk filled"

echo "the disk full, A killed: B takes the lease, cannot open the sink, stands by again and retries"
dd if=/dev/zero of="$mnt/filler" bs=64k 2>/dev/null || true
sql "UPDATE acct SET bal = 2, pad = repeat('x', 20000) WHERE id = 1"
sleep 2
[ "$(doc_equals_query db:acct:1 "$doc_sql")" != t ] || fail "setup: A published despite the full disk"
kill -9 "$a"
wait "$a" 2>/dev/null || true
worker_pid=
deadline=$((SECONDS + 30))
until [ "$(grep -c "is full" "$tmp/b.log")" -ge 2 ]; do
  kill -0 "$b" 2>/dev/null || { code=0; wait "$b" || code=$?; fail "B exited $code on the full disk: $(tail -n 3 "$tmp/b.log")"; }
  [ $SECONDS -lt $deadline ] || fail "B did not retry the full disk twice in 30 s: $(tail -n 3 "$tmp/b.log")"
  sleep 0.5
done
grep -q "giving the lease back and standing by again" "$tmp/b.log" || fail "B did not give the lease back: $(tail -n 3 "$tmp/b.log")"

echo "space freed: B takes over and publishes"
rm -f "$mnt/filler"
worker_pid=$b
deadline=$((SECONDS + 30))
until [ "$(doc_equals_query db:acct:1 "$doc_sql")" = t ]; do
  kill -0 "$b" 2>/dev/null || fail "B exited after space was freed: $(tail -n 3 "$tmp/b.log")"
  [ $SECONDS -lt $deadline ] || fail "db:acct:1 lacks the update 30 s after space was freed: $(last_doc db:acct:1 | jq -c .bal)"
  sleep 0.5
done
stop_worker
echo PASS
