#!/usr/bin/env bash
# The worker's cost of --patches (docs/benchmarks.md#patches), --patches on against --patches off in
# one run: PostgreSQL (a throwaway cluster), a private redis-server, the Release worker (--sink
# redis://, --live all) started once per mode and repetition on the same slot, alternately (on, off,
# then off, on, ...), and bench-patch_worker_bench against each worker:
#   board: $boards leaderboards of 300 scores (about 50 kB of JSON each, table entry), updates each
#          adding to one score, 40 per second going round the boards;
#   item:  1 000 docs {"id","v"} (about 20 bytes: below --patch-min-bytes, so always sent whole),
#          200 updates per second.
# Per worker and kind: the worker's CPU per publish, its VmRSS and VmHWM, the bytes PUBLISHed per
# publish (a pattern subscriber counts them, and checks each channel's doc built from the patches
# against the key), then ranges over the repetitions and on/off ratios.
#
#   tests/bench/patch_worker.sh [repetitions (default 3)] [boards (default 40)] [updates per board run (default 600)]
# Builds docsync-worker and bench-patch_worker_bench in build/bench (Release) and starts a throwaway
# cluster (packaging/dev-cluster.sh). Not a timed test: figures depend on the machine.
set -euo pipefail
reps=${1:-3}
boards=${2:-40}
board_updates=${3:-600}
entries=${DOCSYNC_BENCH_ENTRIES:-300}
items=1000
item_updates=2000
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$top"
build=${DOCSYNC_BENCH_BUILD:-$top/build/bench}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >"$build.cmake.log" 2>&1 || { cat "$build.cmake.log"; exit 1; }
cmake --build "$build" -j2 --target docsync-worker bench-patch_worker_bench >"$build.build.log" 2>&1 || { tail -n 40 "$build.build.log"; exit 1; }
cluster=$(packaging/dev-cluster.sh start)
# shellcheck disable=SC1091
. "$cluster/cluster.env"
export DOCSYNC_WORKER=${DOCSYNC_WORKER:-$build/docsync-worker}
# shellcheck source=tests/bench/common.sh
. "$top/tests/bench/common.sh"
trap 'bench_cleanup; packaging/dev-cluster.sh stop "$cluster" >/dev/null' EXIT
bench_worker_has_flag --patches || { echo "this worker has no --patches flag" >&2; exit 1; }
bench_setup_db
bench_item_table "$items"
psql -d "$db" <<SQL >/dev/null
SET client_min_messages = error;
CREATE TABLE board (id int PRIMARY KEY, title text NOT NULL);
CREATE TABLE entry (board int NOT NULL REFERENCES board, rank int NOT NULL, player text NOT NULL, name text NOT NULL,
                    country text NOT NULL, score bigint NOT NULL, games int NOT NULL, ratio numeric NOT NULL,
                    updated timestamptz NOT NULL, PRIMARY KEY (board, rank));
INSERT INTO board SELECT g, 'Weekly ladder ☆' FROM generate_series(1, $boards) g;
INSERT INTO entry
SELECT b, r, 'p-' || lpad((r * 7919 % 100000)::text, 5, '0'),
       (ARRAY['Zoë Ångström', 'Łukasz Wróbel', 'Søren Kierkegård', 'Inés Peña', 'Ṁaya Ōkubo', 'Chloé Dubois',
              'Jürgen Groß', 'Ana Łopez'])[1 + r % 8] || ' ' || r,
       (ARRAY['SE', 'PL', 'DK', 'ES', 'JP', 'FR', 'DE', 'MX'])[1 + r % 8], (b * 104729 + r * 7919) % 1000000,
       20 + r % 300, 1 + r % 3 + (r % 100) / 100.0, timestamptz '2026-12-01 00:00Z' + r * interval '1 minute'
  FROM generate_series(1, $boards) b, generate_series(1, $entries) r;
GRANT SELECT ON board, entry TO $reader;
SELECT docsync.define_query('board', \$\$SELECT jsonb_build_object('game', b.id, 'title', b.title, 'entries',
  (SELECT jsonb_agg(jsonb_build_object('rank', e.rank, 'player', e.player, 'name', e.name, 'country', e.country,
                                       'score', e.score, 'games', e.games, 'ratio', e.ratio, 'updated', e.updated)
                    ORDER BY e.rank) FROM entry e WHERE e.board = b.id)) FROM board b WHERE b.id = \$1\$\$,
  params => ARRAY['id']);
SELECT docsync.watch('board', 'board', params => ARRAY['id']);
SELECT docsync.watch('board', 'entry', params => ARRAY['board']);
-- Again, now that the definitions exist: it makes the definer's reader role and grants it what they read.
SELECT docsync.grant_reader('$reader');
SQL
bench_start_redis
echo "PostgreSQL $(psql -At -d "$db" -c 'SHOW server_version'), Release worker, $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg) at start"
echo "$boards boards of $entries scores, $items items"

slot=bench_patches_$$
create=(--create-slot)
results=$bench_tmp/results
: >"$results"
run_worker() {
  local mode=$1 label=$2 wpid metrics_port
  metrics_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  "$worker" --dsn "$dsn_repl" --pool-dsn "$dsn_reader" --slot "$slot" "${create[@]}" \
    --sink "redis://127.0.0.1:$redis_port" --live all --patches "$mode" --status-dir "$bench_tmp" \
    --metrics-listen "127.0.0.1:$metrics_port" \
    --log-level warning >"$bench_tmp/worker.log" 2>&1 &
  wpid=$!
  bench_pids+=("$wpid")
  create=()
  for _ in $(seq 1 200); do
    [ "$(command psql -X -At -d "$db" -c "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '$slot' AND active")" = 1 ] && break
    sleep 0.05
  done
  local status=0
  "$build/bench-patch_worker_bench" --redis-port "$redis_port" --dsn "host=$PGHOST port=$PGPORT dbname=$db user=${PGUSER:-postgres}" \
    --slot "$slot" --worker-pid "$wpid" --kind board --docs "$boards" --updates "$board_updates" --rate 40 --label "$label" \
    | tee -a "$results" || status=1
  "$build/bench-patch_worker_bench" --redis-port "$redis_port" --dsn "host=$PGHOST port=$PGPORT dbname=$db user=${PGUSER:-postgres}" \
    --slot "$slot" --worker-pid "$wpid" --kind item --docs "$items" --updates "$item_updates" --rate 200 --label "$label" \
    | tee -a "$results" || status=1
  # The cache of last-published docs, as the worker counts it (docsync_patch_cache_bytes: each
  # entry's channel, text and the nodes that hold them).
  curl -fs "http://127.0.0.1:$metrics_port/metrics" | awk -v label="$label" '
    $1 == "docsync_patch_cache_bytes" {b = $2} $1 == "docsync_patch_cache_entries" {e = $2}
    END {printf "CACHE %s %d %d\n", label, b, e; printf "%s: the patch cache holds %d docs in %d bytes\n", label, e, b > "/dev/stderr"}' \
    >>"$results" || true
  kill -TERM "$wpid"
  wait "$wpid" 2>/dev/null || true
  if [ "$status" != 0 ]; then echo "the worker's log:" >&2; tail -n 20 "$bench_tmp/worker.log" >&2; exit 1; fi
}
for rep in $(seq 1 "$reps"); do
  if [ $((rep % 2)) = 1 ]; then order=(on off); else order=(off on); fi
  for mode in "${order[@]}"; do run_worker "$mode" "$mode"; done
done
echo "load average $(cut -d' ' -f1-3 /proc/loadavg) at the end"
python3 - "$results" <<'PY'
import sys
rows = [l.split()[1:] for l in open(sys.argv[1]) if l.startswith("RESULT ")]
def rng(v, f):
    lo, hi = min(v), max(v)
    return f % lo if f % lo == f % hi else (f % lo) + "–" + (f % hi)
print("\n| doc | figure | --patches on | --patches off | on/off |\n| --- | --- | --- | --- | --- |")
for kind, what in (("board", "leaderboard"), ("item", "item")):
    on = [r for r in rows if r[0] == "on" and r[1] == kind]
    off = [r for r in rows if r[0] == "off" and r[1] == kind]
    if not on or not off:
        continue
    name = f"{what}, {float(on[0][9]):.0f} B"
    for col, what, f in ((4, "worker CPU per publish (µs)", "%.0f"), (5, "bytes PUBLISHed per publish", "%.0f"),
                         (6, "worker VmRSS after the run (kB)", "%.0f"), (7, "worker VmHWM (kB)", "%.0f")):
        a = [float(r[col]) for r in on]; b = [float(r[col]) for r in off]
        ratios = [x / y for x, y in zip(a, b) if y]
        print(f"| {name} | {what} | {rng(a, f)} | {rng(b, f)} | {rng(ratios, '%.3f')}× |")
    share = [int(r[3]) / int(r[2]) for r in on if int(r[2])]
    print(f"| {name} | publishes sent as patches | {rng(share, '%.2f')} | 0 | — |")
cache = [l.split()[1:] for l in open(sys.argv[1]) if l.startswith("CACHE ")]
on = [(int(c[1]), int(c[2])) for c in cache if c[0] == "on"]
if on:
    print(f"| both | the patch cache after both phases (docsync_patch_cache_bytes, entries) | "
          f"{rng([b for b, _ in on], '%d')} bytes, {rng([e for _, e in on], '%d')} docs | — | — |")
PY
