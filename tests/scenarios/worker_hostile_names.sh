#!/usr/bin/env bash
# Names and values that look like SQL injection or channel collisions, through the whole worker:
# a table named '; DROP TABLE canary; -- with a key column named x" , "y, reached directly and
# through a keys query on a second hostile table. Key values hold the channel separator, the escape
# character, escapes spelled out, a whole channel name, quotes, backslashes, a newline and unicode.
# Every doc is published on exactly the channel docsync.channel() names for it (byte for byte),
# no two keys share a channel, every doc equals a fresh run of its query, and nothing else ran:
# the canary table survives and no statement but the worker's own was executed by the pool role.
set -euo pipefail
test_name=hostile_names
# shellcheck source=lib/worker_env.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib/worker_env.bash"

setup_db
sql "CREATE TABLE canary (id int PRIMARY KEY)"
sql "INSERT INTO canary VALUES (1)"
sql "CREATE TABLE \"'; DROP TABLE canary; --\" (\"x\"\" , \"\"y\" text PRIMARY KEY, \"v\"\"; --\" int NOT NULL)"
sql "CREATE TABLE \"k\"\" ; DROP TABLE canary; --\" (id int PRIMARY KEY, \"ref\"\"); DROP TABLE canary; --\" text NOT NULL)"
sql "ALTER TABLE \"k\"\" ; DROP TABLE canary; --\" REPLICA IDENTITY FULL"
doc_sql='SELECT jsonb_build_object($$k$$, h."x"" , ""y", $$v$$, h."v""; --") FROM "'"'"'; DROP TABLE canary; --" h WHERE h."x"" , ""y" = $1'
keys_sql='SELECT "ref""); DROP TABLE canary; --" FROM "k"" ; DROP TABLE canary; --" WHERE id = $1'
sql "SELECT docsync.define_query('h', \$q\$$doc_sql\$q\$, params => ARRAY['key'])" >/dev/null
sql "SELECT docsync.watch('h', '\"''; DROP TABLE canary; --\"', params => ARRAY['x\" , \"y'])" >/dev/null
sql "SELECT docsync.watch('h', '\"k\"\" ; DROP TABLE canary; --\"', keys_sql => \$q\$$keys_sql\$q\$, keys_args => ARRAY['id'])" >/dev/null
grant_reader

# The keys, one per line in a table (psql prints a newline in a value as is, so they stay in SQL).
sql "CREATE TABLE keys (n int PRIMARY KEY, key text NOT NULL)"
sql "INSERT INTO keys VALUES (1, ':'), (2, '%'), (3, '%3A'), (4, 'a:b'), (5, 'a%3Ab'), (6, 'db:h:1'), (7, '%00'),
       (8, ''), (9, E'back\\\\slash'), (10, E'\"quoted\" ''single'''), (11, E'line\\nbreak'), (12, 'ünïcødé ✓'),
       (13, '''; DROP TABLE canary; --'), (14, '%25'), (15, '1'), (16, '%3a')"
nkeys=$(sql "SELECT count(*) FROM keys")

start_worker --statement-timeout 2s
sql "INSERT INTO \"'; DROP TABLE canary; --\" SELECT key, n FROM keys"
settle 60
# A change reaching the docs through the keys query: the mapped row names the hostile keys.
sql "INSERT INTO \"k\"\" ; DROP TABLE canary; --\" SELECT n, key FROM keys"
sql "UPDATE \"'; DROP TABLE canary; --\" SET \"v\"\"; --\" = \"v\"\"; --\" + 100"
sql "UPDATE \"k\"\" ; DROP TABLE canary; --\" SET id = id"
settle 60

channels_sql="SELECT docsync.channel('h', key) FROM keys ORDER BY n"
expected=$(sql "$channels_sql")
[ "$(sort <<<"$expected" | uniq | wc -l)" = "$nkeys" ] || fail "docsync.channel() gives two keys one channel: $expected"
published=$(jq -r '.channel' "$docs" | sort -u)
[ "$published" = "$(sort <<<"$expected")" ] ||
  fail "the worker's channels differ from docsync.channel()'s: $(diff <(sort <<<"$expected") <(cat <<<"$published") | head -n 20)"
echo "$nkeys hostile keys, $nkeys channels, the same bytes from the worker and from docsync.channel()"

for n in $(sql "SELECT n FROM keys ORDER BY n"); do
  channel=$(sql "SELECT docsync.channel('h', key) FROM keys WHERE n = $n")
  fresh="SELECT jsonb_build_object('k', h.\"x\"\" , \"\"y\", 'v', h.\"v\"\"; --\") FROM \"'; DROP TABLE canary; --\" h
          WHERE h.\"x\"\" , \"\"y\" = (SELECT key FROM keys WHERE n = $n)"
  [ "$(doc_equals_query "$channel" "$fresh")" = t ] || fail "key $n: $channel is $(last_doc "$channel"), not current"
done
[ "$(sql "SELECT permanent_failures FROM docsync.query_stats WHERE slot_name = '$slot' AND query = 'h'")" = 0 ] ||
  fail "query h failed: $(sql "SELECT last_error FROM docsync.query_stats WHERE slot_name = '$slot' AND query = 'h'")"
echo "every doc equals a fresh run of its query"

[ "$(sql "SELECT count(*) FROM canary")" = 1 ] || fail "the canary table lost its row"
# What the pool role ran (itself, or as the definers' reader roles): the worker's session
# statements (the settings watch's two included), the doc query and the keys query only,
# each alone or in its batched form (docs/internals.md#batched-recomputes), bounded.
others_sql=$(cat <<'SQL'
WITH s AS (
  -- numbered constants as $n, and the bounds the worker puts around a doc or keys query
  -- (worker/executor/bounded_forms.hpp) taken off
  SELECT regexp_replace(regexp_replace(regexp_replace(regexp_replace(x.query, '\$[0-9]+', '$n', 'g'),
           '^SELECT docsync_k\.\* FROM \(\n(.*)\n\) AS docsync_k WHERE CASE WHEN [^\n]* LIMIT \$n$', '\1'),
           '^SELECT \(docsync_w\.docsync_r\)\.\* FROM \(SELECT ROW\(docsync_k\.\*\) AS docsync_r, [^\n]* FROM \(\n(.*)\n\) AS docsync_k\) AS docsync_w WHERE CASE WHEN [^\n]* LIMIT \$n$', '\1'),
           '^SELECT (docsync_r\.c1, docsync_r\.c2, )?CASE WHEN .* FROM \(\(\n(.*)\n\) UNION ALL SELECT [^\n]* AS docsync_t LIMIT \$n$',
           '\2') AS query
    FROM pg_stat_statements x JOIN pg_roles r ON r.oid = x.userid
   WHERE (r.rolname = 'READER' OR r.rolname LIKE 'docsync\_reader\_%')
     AND x.dbid = (SELECT oid FROM pg_database WHERE datname = current_database()))
SELECT string_agg(s.query, E'\n') FROM s
 WHERE s.query NOT LIKE 'SELECT jsonb_build_object($n, h."x"" , ""y", $n, h."v""; --") FROM %'
   AND s.query NOT LIKE 'SELECT "ref""); DROP TABLE canary; --" FROM "k"" ; DROP TABLE canary; --" WHERE id = $n'
   AND NOT (s.query LIKE 'SELECT docsync_batch.ord, d.* FROM ROWS FROM (pg_catalog.unnest($n::%[])) WITH ORDINALITY AS docsync_batch(p1, ord)%'
            AND (s.query LIKE E'%(\nSELECT jsonb_build_object($n, h."x"" , ""y", $n, h."v""; --") FROM "''; DROP TABLE canary; --" h WHERE h."x"" , ""y" = (docsync_batch.p1)\n) AS q)%'
                 OR s.query LIKE E'%(\nSELECT "ref""); DROP TABLE canary; --" FROM "k"" ; DROP TABLE canary; --" WHERE id = (docsync_batch.p1)\n) AS q)%'))
   AND s.query !~ '^(BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY|ROLLBACK|SELECT pg_catalog\.(pg_current_snapshot|pg_advisory_unlock_all)\(\)|SELECT s\.snapshot, s\.recovery, docsync\.compute_as\(\$n, \$n\), s\.lsn FROM \( SELECT pg_catalog\.pg_current_snapshot\(\)::text AS snapshot, |SELECT set_config\(|SELECT pg_is_in_recovery\(\)$|SELECT rolreplication FROM pg_catalog\.pg_roles WHERE rolname = current_user$|SELECT pg_catalog\.current_database\(\), \(SELECT system_identifier FROM pg_catalog\.pg_control_system\(\)\)::text, pg_catalog\.pg_is_in_recovery\(\)$|SET (client_encoding|TimeZone|DateStyle|IntervalStyle|extra_float_digits|bytea_output) =|WITH RECURSIVE reach\(oid, path\)|SELECT pg_catalog\.format\(\$n, n\.nspname, c\.relname\)|SELECT coalesce\(pg_catalog\.string_agg\(s\.setdatabase::text|SELECT pg_catalog\.current_setting\(n\) FROM pg_catalog\.unnest\()'
SQL
)
others=$(sql "${others_sql//READER/$reader_role}")
[ -z "$others" ] || fail "the pool role ran other statements: $others"
echo "the canary survived and the pool role ran only the doc and keys queries"
stop_worker
echo "ok"
