#!/usr/bin/env bash
# Derived watches, which name the columns their doc query reads, and a broadcast watch, through the
# real plugin and worker (docs/design.md, contract B). An UPDATE of columns no doc reads reaches no
# doc: the doc query does not run (pg_stat_statements, the reader role's calls), since the plugin
# sends the columns read and the worker sees them SAME. An UPDATE of a column a doc reads, a moved
# row, and every INSERT or DELETE of the broadcast watch's table recompute the docs, which end equal
# to a fresh run of the query. Counts the doc queries the worker runs: runs alone.
set -euo pipefail
test_name=read_columns
# shellcheck source=lib/worker_env.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib/worker_env.bash"

setup_db
sql "CREATE TABLE orders (id int PRIMARY KEY, status text NOT NULL, note text)"
sql "CREATE TABLE items (id int PRIMARY KEY, order_id int NOT NULL, qty int NOT NULL, note text)"
# the old values are logged, so an UPDATE shows which columns kept theirs (SAME); under the default
# identity a column outside the key is UNKNOWN in the old tuple, and may have changed
sql "ALTER TABLE orders REPLICA IDENTITY FULL"
sql "ALTER TABLE items REPLICA IDENTITY FULL"
sql "CREATE TABLE audit (id serial PRIMARY KEY, what text)"
sql "INSERT INTO orders VALUES (1, 'new', ''), (2, 'new', '')"
sql "INSERT INTO items SELECT g, 1 + g % 2, g, '' FROM generate_series(1, 40) g"
sql "INSERT INTO audit (what) VALUES ('a'), ('b')"
doc_sql="SELECT jsonb_build_object('id', o.id, 'status', o.status,
           'qty', (SELECT sum(i.qty) FROM items i WHERE i.order_id = o.id),
           'audits', (SELECT count(*) FROM audit a))
         FROM orders o WHERE o.id = \$1"
sql "SELECT docsync.define_query('order', \$q\$$doc_sql\$q\$, params => ARRAY['order_id'])" >/dev/null
# derived: orders (id, status) and items (order_id, qty) direct, audit broadcast reading no column
got=$(sql "SELECT string_agg(format('%s %s %s %s', table_name, columns, broadcast, read_columns), '; ' ORDER BY table_name)
             FROM docsync.watch_defs WHERE query = 'order' AND origin = 'derived'")
[ "$got" = "audit {} t {}; items {order_id} f {order_id,qty}; orders {id} f {id,status}" ] ||
  fail "the derived watches are $got"
tables=$(sql "SELECT docsync.plugin_tables()")
want="$(sql "SELECT 'orders'::regclass::oid")(1,2)"
case ",$tables," in *",$want,"*) ;; *) fail "plugin_tables() is $tables: orders should send id and status only ($want)" ;; esac
grant_reader

doc_fresh() { echo "$doc_sql" | sed "s/\\\$1/$1/"; }
docs_current() {
  for id in 1 2; do
    [ "$(doc_equals_query "db:order:$id" "$(doc_fresh $id)")" = t ] ||
      fail "$1: db:order:$id is $(last_doc "db:order:$id"), not $(sql "$(doc_fresh $id)")"
  done
}
calls() { doc_query_calls '%FROM orders o WHERE o.id%'; }

start_worker --live all --audit-rate 0   # the audit runs the doc query too
sql "UPDATE orders SET status = 'open'"   # both docs published: live from here on
settle
docs_current "first publish"

published=$(wc -l <"$docs")
sql "SELECT pg_stat_statements_reset()" >/dev/null
sql "UPDATE items SET note = 'packed'"            # 40 rows, a column no doc reads
sql "UPDATE orders SET note = 'called' WHERE id = 1"
for _ in 1 2 3 4 5; do sql "UPDATE items SET note = note || '.' WHERE id = 3"; done
sql "UPDATE audit SET what = 'seen'"               # the doc counts audit rows, reads no column
settle
[ "$(calls)" = 0 ] || fail "changes of columns no doc reads ran the doc query $(calls) times"
[ "$(wc -l <"$docs")" = "$published" ] || fail "changes of columns no doc reads published docs"
echo "49 rows changed in columns no doc reads: 0 doc queries"

sql "UPDATE items SET qty = qty + 1 WHERE id = 3"  # order 2 reads it
settle
[ "$(calls)" -ge 1 ] || fail "an UPDATE of a column the doc reads ran no doc query"
docs_current "after qty changed"
sql "UPDATE items SET order_id = 1 WHERE id = 5"  # moves from order 2 to 1: both
settle
docs_current "after an item moved"

sql "SELECT pg_stat_statements_reset()" >/dev/null
before=$(wc -l <"$docs")
sql "INSERT INTO audit (what) VALUES ('x')"       # broadcast: every live doc
settle
docs_current "after an audit row (broadcast)"
[ "$(jq -c 'select(.channel == "db:order:1" or .channel == "db:order:2") | .channel' "$docs" | tail -n +$((before + 1)) | sort -u | wc -l)" = 2 ] ||
  fail "an audit row did not republish both live docs"
sql "DELETE FROM audit"
settle
docs_current "after audit rows deleted (broadcast)"
[ "$(calls)" -ge 1 ] || fail "broadcast changes ran no doc query"
echo "ok"
