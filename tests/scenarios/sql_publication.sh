#!/usr/bin/env bash
# docsync's tables stay out of logical replication: a FOR ALL TABLES publication on one cluster and
# a subscription on a second cluster whose database was made with `pg_dump -s | psql` (so it has the
# extension, and tables without the publisher's dropped column). The subscriber:
#   - finishes the initial sync of every table (no duplicate-key loop on docsync's tables, no
#     table-sync slot left holding WAL on the publisher);
#   - keeps its own definitions: none of the publisher's queries, watches, generations or grants
#     arrive, neither in the initial copy nor in the stream;
#   - resolves its watches in its own catalog (the plugin option names its attnums);
#   - receives the customer's rows as usual.
# Needs a running server: PGHOST/PGPORT (packaging/dev-cluster.sh) and DOCSYNC_PG_BINDIR.
set -euo pipefail

: "${PGHOST:?PGHOST not set: run against packaging/dev-cluster.sh}" "${PGPORT:?}"
bindir=${DOCSYNC_PG_BINDIR:-$(dirname "$(command -v psql)")}
export PGUSER=${PGUSER:-postgres}
top=${DOCSYNC_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
pub=docsync_pub_$$
sub_cluster=""
pub_host=$PGHOST
pub_port=$PGPORT

on_pub() { timeout 60 "$bindir/psql" -X -q -v ON_ERROR_STOP=1 -h "$pub_host" -p "$pub_port" -d "$pub" "$@"; }
on_sub() { timeout 60 "$bindir/psql" -X -q -v ON_ERROR_STOP=1 -h "$sub_host" -p "$sub_port" -d sub "$@"; }
cleanup() {
  if [ -n "$sub_cluster" ]; then
    on_sub -c "DROP SUBSCRIPTION IF EXISTS docsync_sub" >/dev/null 2>&1 || true
    "$top/packaging/dev-cluster.sh" stop "$sub_cluster" >/dev/null 2>&1 || true
  fi
  timeout 60 "$bindir/psql" -X -q -h "$pub_host" -p "$pub_port" -d postgres \
    -c "DROP DATABASE IF EXISTS $pub WITH (FORCE)" -c "DROP ROLE IF EXISTS docsync_pub_reader_test" >/dev/null 2>&1 || true
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
wait_for() { # SECONDS DESCRIPTION COMMAND…: until COMMAND prints t
  local deadline=$((SECONDS + $1)) what=$2
  shift 2
  until [ "$("$@")" = t ]; do
    [ $SECONDS -lt $deadline ] || fail "timed out waiting for $what"
    sleep 0.2
  done
}

timeout 60 "$bindir/psql" -X -q -v ON_ERROR_STOP=1 -d postgres -c "CREATE DATABASE $pub"
on_pub <<'SQL'
SET client_min_messages = warning;
CREATE EXTENSION docsync;
CREATE TABLE posts (legacy int, id int PRIMARY KEY, author_id int, title text);
ALTER TABLE posts DROP COLUMN legacy;               -- here: id is attnum 2, author_id 3
CREATE TABLE comments (id int PRIMARY KEY, post_id int, body text);
ALTER TABLE comments REPLICA IDENTITY FULL;
INSERT INTO posts VALUES (1, 10, 'one');
SELECT docsync.define_query('post', 'SELECT to_jsonb(p) FROM posts p WHERE p.id = $1', params => ARRAY['id'], watches => 'manual');
SELECT docsync.watch('post', 'posts', params => ARRAY['id']);
SELECT docsync.define_query('by_author', 'SELECT jsonb_agg(p) FROM posts p WHERE p.author_id = $1',
                            params => ARRAY['author'], watches => 'manual');
SELECT docsync.watch('by_author', 'posts', params => ARRAY['author_id'], allow_broadcast => true);
SELECT docsync.advance_generation('pub_slot', '1', 1, 0, false);
CREATE ROLE docsync_pub_reader_test;
SELECT docsync.grant_reader('docsync_pub_reader_test');
CREATE PUBLICATION docsync_all FOR ALL TABLES;
SQL

sub_cluster=$("$top/packaging/dev-cluster.sh" start 2>/dev/null) || fail "could not start the subscriber cluster"
sub_host=$(. "$sub_cluster/cluster.env"; echo "$PGHOST")
sub_port=$(. "$sub_cluster/cluster.env"; echo "$PGPORT")
timeout 60 "$bindir/psql" -X -q -v ON_ERROR_STOP=1 -h "$sub_host" -p "$sub_port" -d postgres -c "CREATE DATABASE sub"
# the subscriber's schema: the publisher's, extension included, without its dropped column
# (roles are not in a database's dump: the GRANTs to the publisher's reader role fail there)
timeout 60 "$bindir/pg_dump" -s -h "$pub_host" -p "$pub_port" -d "$pub" |
  timeout 60 "$bindir/psql" -X -q -h "$sub_host" -p "$sub_port" -d sub >/dev/null 2>&1
on_sub <<'SQL'
SET client_min_messages = warning;
SELECT docsync.define_query('post', 'SELECT to_jsonb(p) FROM posts p WHERE p.id = $1', params => ARRAY['id'], watches => 'manual');
SELECT docsync.watch('post', 'posts', params => ARRAY['id']);
SQL
own_before=$(on_sub -At -c "SELECT string_agg(format('%s %s.%s %s', w.query, w.table_schema, w.table_name, w.columns), ';')
                              FROM docsync.watch_defs w")
on_sub -c "CREATE SUBSCRIPTION docsync_sub CONNECTION 'host=$pub_host port=$pub_port dbname=$pub user=$PGUSER'
             PUBLICATION docsync_all" 2>/dev/null

# every table, docsync's included, reaches "ready"; no table-sync slot is left on the publisher
wait_for 30 "the initial sync" on_sub -At -c "SELECT count(*) > 0 AND bool_and(srsubstate = 'r') FROM pg_subscription_rel"
wait_for 30 "the publisher's table-sync slots to go" \
  on_pub -At -c "SELECT count(*) = 0 FROM pg_replication_slots WHERE slot_name LIKE 'pg\_%\_sync\_%'"
[ "$(on_sub -At -c "SELECT count(*) FROM posts")" = 1 ] || fail "the customer's rows were not copied"

# the publisher changes its definitions and its rows; only the rows arrive
on_pub <<'SQL'
SET client_min_messages = warning;
INSERT INTO posts VALUES (2, 10, 'two');
SELECT docsync.drop_query('by_author');
SELECT docsync.define_query('comment', 'SELECT to_jsonb(c) FROM comments c WHERE c.id = $1', params => ARRAY['id'], watches => 'manual');
SELECT docsync.watch('comment', 'comments', params => ARRAY['id']);
SQL
wait_for 30 "the publisher's insert" on_sub -At -c "SELECT count(*) = 2 FROM posts"
sleep 1   # the definition changes were committed before the insert and would have been applied first
[ "$(on_sub -At -c "SELECT string_agg(name, ',' ORDER BY name) FROM docsync.query_defs")" = post ] ||
  fail "the publisher's queries reached the subscriber: $(on_sub -At -c "SELECT string_agg(name, ',') FROM docsync.query_defs")"
[ "$(on_sub -At -c "SELECT string_agg(format('%s %s.%s %s', w.query, w.table_schema, w.table_name, w.columns), ';')
                     FROM docsync.watch_defs w")" = "$own_before" ] || fail "the subscriber's watches changed"
[ "$(on_sub -At -c "SELECT count(*) FROM docsync.worker_state") $(on_sub -At -c "SELECT count(*) FROM docsync.reader_grants")" = "0 0" ] ||
  fail "the publisher's generations or grants reached the subscriber"
# the subscriber's table has no dropped column: id is attnum 1 there, and the plugin option says so
[ "$(on_sub -At -c "SELECT docsync.plugin_tables() = 'posts'::regclass::oid || '(1)'")" = t ] ||
  fail "plugin_tables() on the subscriber: $(on_sub -At -c "SELECT docsync.plugin_tables()")"
on_sub -At -c "SELECT subname FROM pg_stat_subscription WHERE pid IS NOT NULL" | grep -q docsync_sub ||
  fail "the subscription's apply worker is not running"
echo "sql_publication: ok"
