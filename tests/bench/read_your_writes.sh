#!/usr/bin/env bash
# Read-your-writes, in one run against a Release worker and a private Redis: how long a client waits
# after its commit until it may read the doc, three ways, one after the other on the same docs:
#   poll       GET the doc's key until it reflects the commit: the doc's own arrival, with nothing
#              to confirm it (what a client that knows the value it expects can do);
#   procedure  CALL docsync.wait_published(), then GET;
#   watermark  wait until docsync:watermark (subscribed) passes the commit's position, then GET.
# The two confirmed waits are reported beside poll, as ratios: what the confirmation costs over the
# doc's arrival. tests/ryw_client.py runs the loops: one commit at a time, each way going round as
# many docs as it commits, so that no doc is hot (the engine paces a hot doc's rounds 100 ms apart,
# which would measure the pacing instead).
#
#   dir=$(packaging/dev-cluster.sh start); . "$dir/cluster.env"
#   tests/bench/read_your_writes.sh [iterations per way (default 2000)]
#   (DOCSYNC_WORKER=path/to/docsync-worker, default build/rel/docsync-worker, a Release build)
# Not a timed test: figures depend on the machine.
set -euo pipefail
iterations=${1:-2000}
# shellcheck source=tests/bench/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
trap bench_cleanup EXIT
bench_setup_db
bench_item_table "$iterations"
bench_start_redis
"$worker" --dsn "$dsn_repl" --pool-dsn "$dsn_reader" --slot "bench_ryw_$$" --create-slot \
  --sink "redis://127.0.0.1:$redis_port" --status-dir "$bench_tmp/status" >"$bench_tmp/worker.log" 2>&1 &
bench_pids+=("$!")
for _ in $(seq 1 200); do
  [ "$(command psql -X -At -d "$db" -c "SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'bench_ryw_$$' AND active")" = 1 ] && break
  sleep 0.05
done
psql -d "$db" -c "UPDATE item SET v = v"  # every doc published once
for _ in $(seq 1 200); do
  [ "$(redis-cli -p "$redis_port" --scan --pattern 'db:item:*' | wc -l)" -ge "$iterations" ] && break
  sleep 0.05
done
libpq=$(ldconfig -p 2>/dev/null | awk '/libpq\.so\.5 /{p = $NF} END {print p}')
conninfo="host=$PGHOST port=$PGPORT dbname=$db user=${PGUSER:-postgres}"
echo "read-your-writes, $iterations commits per way (p50 / p99 / max, ms from the commit's return):"
declare -A p50 p99
for way in poll procedure watermark; do
  read -r a b c < <(python3 "$top/tests/ryw_client.py" "$libpq" "$conninfo" "$redis_port" "$way" "$iterations" "$iterations")
  p50[$way]=$a
  p99[$way]=$b
  printf '  %-10s %8s %8s %8s\n' "$way" "$a" "$b" "$c"
done
for way in procedure watermark; do
  python3 -c 'import sys; w, a, b, c, d = sys.argv[1:]; print(f"  {w} / poll: p50 {float(a) / float(c):.2f}x, p99 {float(b) / float(d):.2f}x")' \
    "$way" "${p50[$way]}" "${p99[$way]}" "${p50[poll]}" "${p99[poll]}"
done
