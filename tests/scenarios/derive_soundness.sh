#!/usr/bin/env bash
# Derived watches never leave a doc stale (invariant 2), on generated queries and DML:
#   tests/tools/derive_gen.py writes a schema (6-8 tables, some REPLICA IDENTITY FULL, three views),
#   DERIVE_QUERIES random doc queries (joins, LEFT joins, sublinks, aggregates, GROUP BY, LIMIT,
#   CTEs, views, UNION, ranges, LATERAL; one or two params) and DERIVE_TXNS random transactions of
#   1-5 inserts, deletes and updates that move rows between docs and change join keys. Each query
#   is defined twice: d<i> with the watches define_query derives, m<i> with a hand-written set the
#   generator knows is sound (defined by another role, so pg_stat_statements tells the two apart).
#   Every doc of every query is warmed (live), the worker follows the workload through a JSONL file,
#   and after docsync.wait_published every live doc must equal a fresh run of its query. A stale
#   doc fails with its query, its watches (docsync.explain), the doc, and the transactions that
#   changed it since.
#   Then the test must be able to fail: one derived watch of a query is deleted, a transaction
#   changes its docs through that table, and the comparison must find the stale doc; the watch is
#   restored and the doc converges again.
# Prints the seed (replay with DERIVE_SEED=…), the mix of direct, keys and broadcast watches
# derived, and per transaction and per row change the docs recomputed (the worker's metrics,
# docsync_query_recomputes_total) and the doc and keys statements run (pg_stat_statements, by the
# definers' reader roles) for the derived set and the hand-written set.
# DERIVE_QUERIES (40) × DERIVE_TXNS (300) takes 15-40 s on 2 cores; the full size,
# DERIVE_QUERIES=200 DERIVE_TXNS=1000, 2-6 minutes. A cluster of its own
# (lib/own_cluster.bash); needs DOCSYNC_WORKER.
set -euo pipefail
test_name=derive
# shellcheck source=lib/own_cluster.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib/own_cluster.bash"
seed=${DERIVE_SEED:-$(( $(date +%s%N) % 1000000 ))}
nq=${DERIVE_QUERIES:-40}
nt=${DERIVE_TXNS:-300}
echo "seed $seed, $nq queries, $nt transactions (replay with DERIVE_SEED=$seed DERIVE_QUERIES=$nq DERIVE_TXNS=$nt)"
manual_role=docsync_manual_$$
drop_manual() { psql -X -q -d postgres -c "DROP ROLE IF EXISTS $manual_role" >/dev/null 2>&1; }
cleanup_hooks+=(drop_manual)
gen=$tmp/gen
started=$SECONDS

setup_db
psql -X -q -v ON_ERROR_STOP=1 -d postgres -c "CREATE ROLE $manual_role" -c "GRANT docsync_admin TO $manual_role" >/dev/null
# DERIVE_API=manual: only the hand-written sets (m<i>), for a server without derived watches: checks
# the harness and the generator's hand-written sets alone.
api=${DERIVE_API:-derived}
if [ "$api" = derived ]; then
  [ "$(sql "SELECT count(*) FROM pg_proc WHERE proname = 'derive_watches' AND pronamespace = 'docsync'::regnamespace")" = 1 ] ||
    fail "docsync.derive_watches does not exist: this server has no derived watches"
  gen_flags=(--api derived --broadcast watch)
  checked=d origin=derived
else
  gen_flags=(--api manual --broadcast keys)
  checked=m origin=manual
fi
python3 "$top/tests/tools/derive_gen.py" --seed "$seed" --queries "$nq" --txns "$nt" --out "$gen" "${gen_flags[@]}" ||
  fail "the generator failed"
psql -X -q -v ON_ERROR_STOP=1 -d "$db" -f "$gen/schema.sql" -f "$gen/check.sql" >/dev/null || fail "the schema did not load"
# every query runs (define_query only prepares them): once each, for the params (1, 1)
sql "SELECT count(chk.fresh(i, 1, 1)) FROM generate_series(1, $nq) i" >/dev/null || fail "a generated query does not run"
sql "GRANT SELECT ON ALL TABLES IN SCHEMA public TO $manual_role"
psql -X -q -v ON_ERROR_STOP=1 -d "$db" -f "$gen/define_derived.sql" >/dev/null 2>"$tmp/derived.notices" ||
  fail "a derived definition failed: $(grep -m1 ERROR "$tmp/derived.notices")"   # empty with DERIVE_API=manual
psql -X -q -v ON_ERROR_STOP=1 -d "$db" -c "SET ROLE $manual_role" -f "$gen/define_manual.sql" >/dev/null 2>"$tmp/manual.notices" ||
  fail "a hand-written definition failed: $(grep -m1 ERROR "$tmp/manual.notices")"
grant_reader
derived_reader=$(sql "SELECT reader FROM docsync.reader_roles WHERE definer = current_user")
manual_reader=$(sql "SELECT reader FROM docsync.reader_roles WHERE definer = '$manual_role'")
if [ -z "$manual_reader" ] || { [ "$api" = derived ] && [ -z "$derived_reader" ]; }; then
  fail "grant_reader made no reader role for a definer"
fi

# The mix of watches derived, and the hand-written one beside it.
mix() {
  sql "SELECT string_agg(format('%s %s', n, kind), ', ' ORDER BY kind) FROM (
         SELECT CASE WHEN (to_jsonb(w)->>'broadcast')::boolean THEN 'broadcast' WHEN keys_sql IS NOT NULL THEN 'keys' ELSE 'direct' END AS kind,
                count(*) AS n
           FROM docsync.watch_defs w WHERE query LIKE '$1%' GROUP BY 1) x"
}
echo "derived watches: $(mix d) ($(sql "SELECT count(*) FROM docsync.watch_defs WHERE query LIKE 'd%' AND allow_broadcast") with allow_broadcast: mapping outside the replica identity)"
echo "hand-written watches: $(mix m) ($(sql "SELECT count(*) FROM docsync.watch_defs WHERE query LIKE 'm%' AND allow_broadcast") with allow_broadcast)"
if [ "$api" = derived ]; then
  [ "$(sql "SELECT count(*) FROM docsync.watch_defs WHERE query LIKE 'd%' AND origin <> 'derived'")" = 0 ] ||
    fail "a d<i> query has a watch that was not derived"
  [ "$(sql "SELECT count(DISTINCT query) FROM docsync.watch_defs WHERE query LIKE 'd%'")" = "$nq" ] ||
    fail "some d<i> queries have no derived watch"
fi

# Every doc of every query is live: warmed at start (one channel per line).
awk -F'\t' '{ n = split($2, d, " "); for (a = 1; a <= d[1]; a++) { if (n == 1) print "db:" $1 ":" a; else for (b = 1; b <= d[2]; b++) print "db:" $1 ":" a ":" b } }' \
  "$gen/domain.tsv" >"$tmp/warm"
warm=$(wc -l <"$tmp/warm")
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
url=http://127.0.0.1:$port
DOCSYNC_WARM=$(cat "$tmp/warm") start_worker --audit-rate 0 --live all --metrics-listen "127.0.0.1:$port"
deadline=$((SECONDS + 120))
until [ "$(jq -r .channel "$docs" 2>/dev/null | sort -u | wc -l)" -ge "$warm" ]; do
  [ $SECONDS -lt $deadline ] || fail "the worker did not publish the $warm warmed docs in 120 s ($(jq -r .channel "$docs" | sort -u | wc -l) so far)"
  kill -0 "$worker_pid" 2>/dev/null || fail "the worker exited"
  sleep 0.5
done
echo "$warm docs live after $((SECONDS - started)) s"

# counters: docs recomputed per set (the worker's metrics) and statements per reader role
# (pg_stat_statements; a doc statement returns jsonb, a keys statement does not)
scrape() { curl -sf "$url/metrics" >"$1" || fail "GET $url/metrics failed"; }
counters() {
  scrape "$tmp/metrics.$1"
  awk '/^docsync_query_recomputes_total\{query="d[0-9]+"\}/ { d += $2 } /^docsync_query_recomputes_total\{query="m[0-9]+"\}/ { m += $2 }
       /^docsync_changes_total / { c = $2 } END { printf "%d %d %d", d, m, c }' "$tmp/metrics.$1"
  sql "SELECT $(for r in "$derived_reader" "$manual_reader"; do
                  for k in "LIKE" "NOT LIKE"; do
                    printf "(SELECT coalesce(sum(calls), 0) FROM pg_stat_statements s JOIN pg_roles r ON r.oid = s.userid WHERE r.rolname = '%s' AND s.dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND s.query %s '%%jsonb%%')," "$r" "$k"
                  done
                done) 0" | tr '|' ' ' | sed 's/^/ /'
}
# drain: every transaction committed so far is published.
drain() {
  [ "$(sql "CALL docsync.wait_published(pg_current_wal_insert_lsn(), '${1:-120}s')")" = t ] ||
    fail "the worker did not publish everything in ${1:-120} s"
}
drain 60
before=$(counters before)

# compare [NAME_PATTERN]: every live doc of the sink (the last line of its channel) against a fresh run;
# writes the stale ones to $tmp/stale.tsv (channel, query, params, published, fresh).
compare() {
  cp "$docs" "$tmp/held.jsonl"
  psql -X -q -At -F$'\t' -v ON_ERROR_STOP=1 -d "$db" >"$tmp/stale.tsv" <<SQL || fail "the comparison could not run"
CREATE TEMP TABLE published (n bigserial, line text);
\copy published (line) FROM '$tmp/held.jsonl' WITH (FORMAT csv, QUOTE e'\x01', DELIMITER e'\x02')
CREATE TEMP TABLE last_doc AS
  SELECT DISTINCT ON (line::jsonb->>'channel') line::jsonb->>'channel' AS channel, line::jsonb->'doc' AS doc
    FROM published ORDER BY line::jsonb->>'channel', n DESC;
SELECT channel, q, coalesce(a::text, 'NULL'), coalesce(b::text, 'NULL'), coalesce(doc::text, 'null'), coalesce(fresh::text, 'null') FROM (
  SELECT channel, split_part(channel, ':', 2) AS q, nullif(split_part(channel, ':', 3), '%00')::int AS a,
         nullif(nullif(split_part(channel, ':', 4), ''), '%00')::int AS b, nullif(doc, 'null'::jsonb) AS doc
    FROM last_doc WHERE channel LIKE 'db:${1:-}%') l,
  LATERAL (SELECT chk.fresh(substr(q, 2)::int, a, b) AS fresh) f
 WHERE doc IS DISTINCT FROM fresh ORDER BY q, a, b;
SQL
  [ ! -s "$tmp/stale.tsv" ]
}

# The transactions after which each stale doc's fresh value changed, from a replay of the workload
# on the seed rows in a scratch database (TXNS: the workload file).
replay_db=${db}_replay
drop_replay() { psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $replay_db" >/dev/null 2>&1; }
early_cleanup_hooks+=(drop_replay)
history() {
  local txns=$1 pick
  drop_replay
  psql -X -q -v ON_ERROR_STOP=1 -d postgres -c "CREATE DATABASE $replay_db" >/dev/null
  psql -X -q -v ON_ERROR_STOP=1 -d "$replay_db" -f "$gen/schema.sql" -f "$gen/check.sql" >/dev/null
  pick=$(awk -F'\t' '{ printf "%s(%s, %s, %s, %s)", (NR > 1 ? ", " : ""), "\x27" $1 "\x27", substr($2, 2), $3 "::int", $4 "::int" }' "$tmp/stale.tsv")
  awk -v pick="$pick" '/^-- txn /{ n = $3; print; next } { print; print "SELECT " n ", c, coalesce(chk.fresh(i, a, b)::text, \x27null\x27) FROM (VALUES " pick ") v(c, i, a, b);" }' \
    "$txns" | psql -X -q -At -F$'\t' -d "$replay_db" >"$tmp/replay.tsv" 2>&1
}
report_stale() {
  local txns=$1 channel q doc fresh
  history "$txns" || true
  while IFS=$'\t' read -r channel q _ _ doc fresh; do
    echo "STALE $channel"
    echo "  query $q: $(awk -F'\t' -v q="$q" '$1 == q { print $3 }' "$gen/queries.tsv")"
    echo "  published: $doc"
    echo "  fresh:     $fresh"
    echo "  watches (docsync.explain):"
    { sql "SELECT format('%s %s %s [%s] %s%s', e.table, e.kind, e.origin, coalesce(e.mapping, ''), coalesce(e.keys_sql, ''),
                         coalesce(' -- ' || e.why, '')) FROM docsync.explain('$q') e" 2>&1 || true; } | sed 's/^/    /'
    echo "  transactions that changed it (replayed on the seed rows; * : the published doc is not this value):"
    awk -F'\t' -v c="$channel" -v doc="$doc" '$2 == c { if ($3 != last) { printf "%s\t%s\n", ($3 == doc ? " " : "*"), $1; last = $3 } }' "$tmp/replay.tsv" |
      tail -n 4 | while IFS=$'\t' read -r mark n; do
        printf '    %s txn %s: %s\n' "$mark" "$n" "$(awk -F'\t' -v n="$n" '$1 == n { print $3 }' "$gen/txns.tsv" "$tmp/extra_txns.tsv" 2>/dev/null | head -n 1)"
      done
  done <"$tmp/stale.tsv"
}
: >"$tmp/extra_txns.tsv"

echo "the workload: $nt transactions ($((SECONDS - started)) s)"
psql -X -q -v ON_ERROR_STOP=1 -d "$db" -f "$gen/txns.sql" >/dev/null || fail "the workload failed"
echo "applied ($((SECONDS - started)) s)"
# broadcast watches recompute every live doc of their query: the drain grows with queries × transactions
drain $((nq * nt / 150 > 120 ? nq * nt / 150 : 120))
echo "drained ($((SECONDS - started)) s)"
after=$(counters after)
if ! compare; then
  report_stale "$gen/txns.sql" >&2
  fail "$(wc -l <"$tmp/stale.tsv") live docs differ from a fresh run of their query (seed $seed)"
fi
failures=$(awk '/^docsync_query_permanent_failures_total\{/ && $2 > 0 { print }' "$tmp/metrics.after")
[ -z "$failures" ] || fail "computes failed: $failures (see docsync.query_stats.last_error)"
live=$(jq -r .channel "$docs" | sort -u | wc -l)
echo "no stale doc: $live live docs equal a fresh run of their query after $nt transactions ($((SECONDS - started)) s)"

# Costs per transaction and per row change, derived against hand-written.
read -r -a b0 <<<"$before"
read -r -a b1 <<<"$after"
nchanges=$((b1[2] - b0[2]))
cost() { awk -v d="$1" -v n="$nt" -v c="$nchanges" 'BEGIN { printf "%.2f per transaction, %.3f per row change", d / n, (c > 0 ? d / c : 0) }'; }
echo "row changes decoded: $nchanges (docsync_changes_total)"
echo "docs recomputed (docsync_query_recomputes_total): derived $(cost $((b1[0] - b0[0]))), hand-written $(cost $((b1[1] - b0[1])))"
echo "doc statements (pg_stat_statements): derived $(cost $((b1[3] - b0[3]))), hand-written $(cost $((b1[5] - b0[5])))"
echo "keys statements (pg_stat_statements): derived $(cost $((b1[4] - b0[4]))), hand-written $(cost $((b1[6] - b0[6])))"
# per query: the ones whose derived watches recomputed more docs than the hand-written ones
awk '/^docsync_query_recomputes_total\{query="[dm][0-9]+"\}/ { match($0, /query="[dm][0-9]+"/); q = substr($0, RSTART + 7, RLENGTH - 8); n[q] = $2 }
     FILENAME ~ /before$/ { b[q] = n[q]; next }
     END { for (q in n) if (q ~ /^d/) { m = "m" substr(q, 2); dd = n[q] - b[q]; mm = n[m] - b[m]; t++; if (dd > mm) { more++; extra += dd - mm } }
           printf "queries whose derived watches recomputed more docs than the hand-written ones: %d of %d (%d docs more in all)\n", more, t, extra }' \
  "$tmp/metrics.before" "$tmp/metrics.after"
echo "the check must be able to fail: one $origin watch deleted"
# A derived watch, the only one of its query on its table, and a change through that table that makes
# a fresh run of one of the query's live docs differ from what the sink holds.
found=
for w in $(sql "SELECT min(id) FROM docsync.watch_defs w WHERE coalesce(to_jsonb(w)->>'origin', 'manual') = '$origin' AND query LIKE '$checked%' GROUP BY query, table_name HAVING count(*) = 1
                 ORDER BY (min(id) * 7919 + $seed) % 1000003 LIMIT 30"); do
  IFS='|' read -r q t <<<"$(sql "SELECT query, table_name FROM docsync.watch_defs WHERE id = $w")"
  cols=$(sql "SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) FROM pg_attribute
               WHERE attrelid = 'public.$t'::regclass AND attnum > 1 AND NOT attisdropped")
  for change in "UPDATE $t SET v = coalesce(v, 0) + 1000" "DELETE FROM $t WHERE id IN (SELECT id FROM $t ORDER BY id LIMIT 5)" \
                "UPDATE $t SET k = k % 6 + 1" "INSERT INTO $t SELECT id + 100000, $cols FROM $t"; do
    changed=$(psql -X -q -At -v ON_ERROR_STOP=1 -d "$db" 2>/dev/null <<SQL | tail -n 1
CREATE TEMP TABLE held AS SELECT a, b, chk.fresh(${q#?}, a, b) AS doc
  FROM (SELECT split_part(c, ':', 3)::int AS a, nullif(split_part(c, ':', 4), '')::int AS b
          FROM regexp_split_to_table('$(grep "^db:$q:" "$tmp/warm" | tr '\n' ' ')', ' ') c WHERE c <> '') x;
BEGIN;
$change;
SELECT count(*) FROM held WHERE doc IS DISTINCT FROM chk.fresh(${q#?}, a, b);
ROLLBACK;
SQL
)
    if [ "${changed:-0}" -gt 0 ]; then found="$w|$q|$t|$change"; break 2; fi
  done
done
[ -n "$found" ] || fail "no $origin watch and change found for the check that must fail"
IFS='|' read -r w q t change <<<"$found"
echo "deleting $origin watch $w of $q on $t ($(sql "SELECT CASE WHEN (to_jsonb(w)->>'broadcast')::boolean THEN 'broadcast' WHEN keys_sql IS NULL THEN 'direct on ' || array_to_string(columns, ',') ELSE 'keys: ' || keys_sql END FROM docsync.watch_defs w WHERE id = $w")), then: $change"
sql "CREATE TABLE saved_watch AS SELECT * FROM docsync.watch_defs WHERE id = $w"
sql "DELETE FROM docsync.watch_defs WHERE id = $w"
drain 60
printf '%s\t%s\tBEGIN; %s; COMMIT;\n' "$((nt + 1))" "$t" "$change" >"$tmp/extra_txns.tsv"
sql "BEGIN; $change; COMMIT"
drain 60
if compare "$q:"; then
  fail "the comparison found no stale doc of $q after its watch on $t was deleted and '$change' committed: it cannot fail"
fi
printf -- '-- txn %s\nBEGIN; %s; COMMIT;\n' "$((nt + 1))" "$change" | cat "$gen/txns.sql" - >"$tmp/all_txns.sql"
report_stale "$tmp/all_txns.sql" >"$tmp/report.txt"
head -n 24 "$tmp/report.txt"
grep -q "\* txn $((nt + 1)): " "$tmp/report.txt" || fail "the report did not name the transaction that left the doc stale"
echo "the comparison found $(wc -l <"$tmp/stale.tsv") stale docs of $q, as it must"

# restored: the watch again, and a change of every row of the table reaches the docs
sql "INSERT INTO docsync.watch_defs SELECT * FROM saved_watch"
drain 60
sql "UPDATE $t SET v = coalesce(v, 0) + 1"
drain 60
compare "$q:" || { report_stale "$tmp/all_txns.sql" >&2; fail "the docs of $q did not converge once its watch was restored"; }
echo "restored: the docs of $q converged"
stop_worker
echo "ok ($((SECONDS - started)) s)"
