#!/usr/bin/env bash
# The worker's Prometheus endpoint (--metrics-listen): GET /metrics serves the text format 0.0.4
# that promtool accepts; once the worker is idle its counters equal docsync.status's and
# docsync.query_stats's (both come from the same status tick), the per-query publishes add up to
# the total and match the docs in the sink, each query's compute histogram counts its recomputes and
# the commit → publish histogram the transactions; other paths are 404; a port in use fails the start with exit 1 and a bad address the settings
# with exit 2. The shipped alert rules pass `promtool check rules` and the dashboard is JSON.
# Needs the libpq environment of a cluster from packaging/dev-cluster.sh, DOCSYNC_WORKER, python3
# and promtool (Debian package prometheus, in packaging/deps.sh).
set -euo pipefail
test_name=metrics
# shellcheck source=lib/worker_env.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib/worker_env.bash"
source_dir=${DOCSYNC_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
command -v promtool >/dev/null || fail "promtool is missing: install the Debian package prometheus (packaging/deps.sh)"
row() { sql "SELECT row_to_json(s) FROM docsync.status s WHERE slot_name = '$slot'"; }

# http METHOD URL: "<status code>\n<body>" (python3's urllib, no proxy).
http() {
  python3 - "$1" "$2" <<'PY'
import sys, urllib.request, urllib.error
req = urllib.request.Request(sys.argv[2], method=sys.argv[1], data=b"" if sys.argv[1] == "POST" else None)
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
try:
    with opener.open(req, timeout=10) as r:
        print(r.status); print(r.headers.get("Content-Type")); sys.stdout.write(r.read().decode())
except urllib.error.HTTPError as e:
    print(e.code); print(e.headers.get("Content-Type")); sys.stdout.write(e.read().decode())
PY
}
# metric FILE SERIES: the value of SERIES (name{labels} exactly as exposed) in a scrape, or empty.
metric() { awk -v s="$2" '$1 == s { print $2 }' "$1"; }

echo "the checks of the shipped files: alert rules and dashboard"
promtool check rules "$source_dir/packaging/prometheus/docsync-alerts.yml" >"$tmp/rules.out" 2>&1 ||
  fail "promtool check rules: $(cat "$tmp/rules.out")"
python3 -m json.tool "$source_dir/packaging/grafana/docsync-dashboard.json" >/dev/null ||
  fail "packaging/grafana/docsync-dashboard.json is not JSON"

setup_db
sql "CREATE TABLE items (id int PRIMARY KEY, v int NOT NULL)"
sql "CREATE TABLE tags (id int PRIMARY KEY, name text NOT NULL)"
sql "INSERT INTO items SELECT g, 0 FROM generate_series(1, 60) g"
sql "INSERT INTO tags SELECT g, 't' || g FROM generate_series(1, 10) g"
# Item 13 divides by zero: a permanent failure of query "item" for that doc only.
sql "SELECT docsync.define_query('item', \$q\$SELECT jsonb_build_object('id', i.id, 'share', 100 / (i.id - 13) * i.v) FROM items i WHERE i.id = \$1\$q\$, params => ARRAY['id'])" >/dev/null
sql "SELECT docsync.watch('item', 'items', params => ARRAY['id'])" >/dev/null
sql "SELECT docsync.define_query('tag', \$q\$SELECT jsonb_build_object('id', t.id, 'name', t.name) FROM tags t WHERE t.id = \$1\$q\$, params => ARRAY['id'])" >/dev/null
sql "SELECT docsync.watch('tag', 'tags', params => ARRAY['id'])" >/dev/null
grant_reader

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
url=http://127.0.0.1:$port
start_worker --metrics-listen "127.0.0.1:$port" --batch 16
wait_for 20 "SELECT worker_state = 'streaming' FROM docsync.status WHERE slot_name = '$slot'" || fail "never streaming: $(row)"
grep -q "serving Prometheus metrics at $url/metrics" "$tmp/worker.log" || fail "no log line naming the metrics URL"

echo "a small workload: every item and tag changes, some twice"
sql "UPDATE items SET v = v + 1"
sql "UPDATE tags SET name = name || '!'"
sql "UPDATE items SET v = v + 1 WHERE id % 3 = 0"
settle 60
# Idle but for db:item:13, which is retried for good after a growing backoff (1 s, 2 s, 4 s, …).
wait_for 20 "SELECT dirty_depth <= 1 AND in_flight = 0 AND recomputes >= 70 FROM docsync.status WHERE slot_name = '$slot'" ||
  fail "the worker did not go idle: $(row)"

echo "once idle, the counters equal docsync.status and docsync.query_stats"
status_sql="SELECT concat_ws(' ', changes, recomputes, publishes, permanent_failures, transient_retries, valve_resets,
                    not_visible_retries, live_docs, dirty_depth, in_flight, open_txns)
              FROM docsync.status WHERE slot_name = '$slot'"
queries_sql="SELECT string_agg(query || '=' || recomputes || '/' || permanent_failures, ' ' ORDER BY query)
               FROM docsync.query_stats WHERE slot_name = '$slot'"
agreed=
for _ in $(seq 1 20); do
  before=$(sql "$status_sql"); qbefore=$(sql "$queries_sql")
  http GET "$url/metrics" >"$tmp/scrape.raw"
  after=$(sql "$status_sql"); qafter=$(sql "$queries_sql")
  # The file and the endpoint change at the same tick: a read that straddles one is taken again.
  if [ "$before" = "$after" ] && [ "$qbefore" = "$qafter" ]; then agreed=1; break; fi
  sleep 0.3
done
[ -n "$agreed" ] || fail "docsync.status kept changing while the worker was idle: $(row)"
[ "$(sed -n 1p "$tmp/scrape.raw")" = 200 ] || fail "GET /metrics: $(head -c 300 "$tmp/scrape.raw")"
[ "$(sed -n 2p "$tmp/scrape.raw")" = "text/plain; version=0.0.4; charset=utf-8" ] ||
  fail "GET /metrics Content-Type: $(sed -n 2p "$tmp/scrape.raw")"
sed 1,2d "$tmp/scrape.raw" >"$tmp/scrape.txt"
read -r changes recomputes publishes permanent transient valve not_visible live dirty in_flight open_txns <<<"$before"
for pair in "docsync_changes_total $changes" "docsync_recomputes_total $recomputes" "docsync_publishes_total $publishes" \
            "docsync_permanent_failures_total $permanent" "docsync_transient_retries_total $transient" \
            "docsync_valve_resets_total $valve" "docsync_not_visible_retries_total $not_visible" \
            "docsync_live_docs $live" "docsync_dirty_docs $dirty" "docsync_computes_in_flight $in_flight" \
            "docsync_open_transactions $open_txns" "docsync_streaming 1" 'docsync_state{state="streaming"} 1' \
            'docsync_state{state="stopped"} 0'; do
  read -r series want <<<"$pair"
  got=$(metric "$tmp/scrape.txt" "$series")
  [ "$got" = "$want" ] || fail "$series is '$got', docsync.status says $want"
done
[ "$permanent" -ge 1 ] && [ "$publishes" -ge 69 ] || fail "the workload did not run as planned: $before"
sum=0
for q in item tag; do
  # The query's figures read with the totals, before and after the scrape: "item=82/3 tag=10/0".
  IFS=/ read -r q_recomputes q_failures <<<"$(tr ' ' '\n' <<<"$qbefore" | sed -n "s/^$q=//p")"
  [ "$(metric "$tmp/scrape.txt" "docsync_query_recomputes_total{query=\"$q\"}")" = "$q_recomputes" ] ||
    fail "query $q: recomputes differ from docsync.query_stats ($q_recomputes)"
  [ "$(metric "$tmp/scrape.txt" "docsync_query_permanent_failures_total{query=\"$q\"}")" = "$q_failures" ] ||
    fail "query $q: permanent failures differ from docsync.query_stats ($q_failures)"
  [ "$(metric "$tmp/scrape.txt" "docsync_compute_duration_seconds_count{query=\"$q\"}")" = "$q_recomputes" ] ||
    fail "query $q: the compute histogram does not count its $q_recomputes recomputes"
  q_publishes=$(metric "$tmp/scrape.txt" "docsync_query_publishes_total{query=\"$q\"}")
  in_sink=$(jq -r .channel "$docs" | grep -c "^db:$q:")
  [ "$q_publishes" = "$in_sink" ] || fail "query $q: $q_publishes publishes counted, $in_sink lines in the sink"
  sum=$((sum + q_publishes))
done
[ "$sum" = "$publishes" ] || fail "the per-query publishes add up to $sum, docsync.status says $publishes"
batches=$(metric "$tmp/scrape.txt" docsync_batch_size_count)
[ -n "$batches" ] && [ "$batches" -ge 1 ] && [ "$(metric "$tmp/scrape.txt" 'docsync_batch_size_bucket{le="+Inf"}')" = "$batches" ] ||
  fail "docsync_batch_size: $(grep '^docsync_batch_size' "$tmp/scrape.txt" | paste -sd ' ')"
# Commit → publish: every transaction above is done, each counted once, none slower than the settle.
txns=$(metric "$tmp/scrape.txt" docsync_commit_publish_seconds_count)
latency_sum=$(metric "$tmp/scrape.txt" docsync_commit_publish_seconds_sum)
[ -n "$txns" ] && [ "$txns" -ge 3 ] && [ "$(metric "$tmp/scrape.txt" 'docsync_commit_publish_seconds_bucket{le="+Inf"}')" = "$txns" ] &&
  awk -v s="$latency_sum" -v n="$txns" 'BEGIN { exit !(s > 0 && s / n < 30) }' ||
  fail "docsync_commit_publish_seconds: $(grep '^docsync_commit_publish' "$tmp/scrape.txt" | paste -sd ' ')"
echo "seen: changes $changes, recomputes $recomputes, publishes $publishes in $batches statements; $txns transactions, mean commit → publish $(awk -v s="$latency_sum" -v n="$txns" 'BEGIN { printf "%.1f ms", 1000 * s / n }')"

echo "promtool accepts the whole exposition"
# A format error or a lint finding (a counter not named _total, a family without HELP) exits non-zero.
promtool check metrics <"$tmp/scrape.txt" >"$tmp/promtool.out" 2>&1 || fail "promtool check metrics: $(cat "$tmp/promtool.out")"

echo "other paths are 404, other methods on /metrics 405"
[ "$(http GET "$url/" | sed -n 1p)" = 404 ] || fail "GET / is not 404"
[ "$(http GET "$url/metricsx" | sed -n 1p)" = 404 ] || fail "GET /metricsx is not 404"
[ "$(http POST "$url/metrics" | sed -n 1p)" = 405 ] || fail "POST /metrics is not 405"

echo "a port in use fails the start with exit 1, naming the setting; a bad address is a setting error (exit 2)"
code=0
"$worker_bin" --dsn "$(dsn "$repl_role")" --pool-dsn "$(dsn "$reader_role")" --slot "${slot}_b" \
  --status-dir "$status_dir" --metrics-listen "127.0.0.1:$port" >/dev/null 2>"$tmp/busy.log" || code=$?
[ $code -eq 1 ] || fail "a busy metrics port: exit $code, not 1: $(cat "$tmp/busy.log")"
grep -q -- "--metrics-listen 127.0.0.1:$port: cannot listen there (Address already in use)" "$tmp/busy.log" ||
  fail "a busy metrics port: $(cat "$tmp/busy.log")"
code=0
"$worker_bin" --dsn "$(dsn "$repl_role")" --pool-dsn "$(dsn "$reader_role")" --metrics-listen "localhost:$port" \
  >/dev/null 2>"$tmp/bad.log" || code=$?
[ $code -eq 2 ] && grep -q -- '--metrics-listen "localhost:' "$tmp/bad.log" || fail "a host name: exit $code: $(cat "$tmp/bad.log")"

stop_worker
echo "ok"
