-- Derived watches through the API: define_query stores what docsync.derive_watches finds (each
-- through the checks of a hand-written watch), refuses uncovered functions unless allow_uncovered,
-- watch(…, broadcast => true), a hand-written watch replacing the derived ones of its table and
-- unwatch deriving them again, or_replace and DDL deriving them again (and what is kept when that
-- fails), docsync.explain, and the columns of docsync.queries and docsync.watches.
\set VERBOSITY default
\set SHOW_CONTEXT never
SET synchronous_commit = on;

CREATE SCHEMA dw;
SET search_path = dw, public;
CREATE TABLE customers (id int PRIMARY KEY, name text);
CREATE TABLE orders (id int PRIMARY KEY, customer_id int, placed date);
CREATE TABLE products (id int PRIMARY KEY, name text);
CREATE TABLE order_items (order_id int, product_id int, qty int, PRIMARY KEY (order_id, product_id));
CREATE TABLE notes (id int PRIMARY KEY, order_id int, body text);
CREATE TABLE audit_log (id int PRIMARY KEY, at timestamptz);
INSERT INTO customers VALUES (1, 'ann'), (2, 'bob');
INSERT INTO orders VALUES (10, 1, '2026-01-01'), (11, 1, '2026-01-02'), (12, 2, '2026-01-03'), (13, 2, '2026-01-04');
INSERT INTO products VALUES (100, 'pen'), (101, 'ink');
INSERT INTO order_items VALUES (10, 100, 1), (11, 100, 2), (12, 101, 1), (13, 101, 5);
ANALYZE customers, orders, products, order_items;

-- The watches of a query, one line each (read_columns sorted: the set matters; null: all columns).
CREATE FUNCTION dw.shown(q text, OUT tab text, OUT kind text, OUT origin text, OUT columns name[],
                         OUT has_keys_sql boolean, OUT allow_broadcast boolean, OUT read_columns name[])
RETURNS SETOF record LANGUAGE sql AS $$
  SELECT w.table_name::text, w.kind, w.origin, w.columns, w.keys_sql IS NOT NULL, w.allow_broadcast,
         CASE WHEN w.read_columns IS NOT NULL THEN ARRAY(SELECT c FROM unnest(w.read_columns) c ORDER BY c) END
    FROM docsync.watches w WHERE w.query = q ORDER BY w.table_name, w.kind, w.origin, w.columns
$$;

-- derived by default: no watch call, one watch per table read, with the cheapest sound kind
SELECT docsync.define_query('order', $$
  SELECT jsonb_build_object('id', o.id, 'customer', c.name,
           'items', (SELECT jsonb_agg(jsonb_build_object('product', p.name, 'qty', i.qty))
                       FROM order_items i JOIN products p ON p.id = i.product_id
                      WHERE i.order_id = o.id))
    FROM orders o JOIN customers c ON c.id = o.customer_id
   WHERE o.id = $1$$, params => ARRAY['order_id']);
SELECT * FROM dw.shown('order');
SELECT name, watches, broadcast_tables, unwatched_tables, warning FROM docsync.queries WHERE name = 'order';
-- stored like a hand-written watch: the query's definer, its pinned search_path
SELECT DISTINCT defined_by, search_path FROM docsync.watch_defs WHERE query = 'order';

-- each derived keys query runs as a hand-written one does and names exactly the docs of the row
CREATE FUNCTION dw.keys_of(q text, tab name, arg int) RETURNS int[] LANGUAGE plpgsql AS $$
DECLARE
  src text;
  got int[];
BEGIN
  SELECT w.keys_sql INTO src FROM docsync.watch_defs w WHERE w.query = q AND w.table_name = tab AND w.keys_sql IS NOT NULL;
  EXECUTE format('SELECT array_agg(k ORDER BY k) FROM (%s) AS r(k)', replace(src, '$1', arg::text)) INTO got;
  RETURN got;
END
$$;
SELECT dw.keys_of('order', 'customers', 1) AS customer_1, dw.keys_of('order', 'customers', 2) AS customer_2,
       dw.keys_of('order', 'products', 100) AS product_100, dw.keys_of('order', 'products', 101) AS product_101;

-- explain: each watch, its mapping, its cost per change and the indexes its lookups lack
SELECT "table", kind, origin, mapping, doc_queries_per_change, missing_index
  FROM docsync.explain('order') ORDER BY "table"::text;
SELECT count(*) AS explained_with_why FROM docsync.explain('order') WHERE why IS NOT NULL;
SELECT * FROM docsync.explain('nonesuch');

-- a mapped column outside the replica identity: the watch is stored with allow_broadcast, and a
-- NOTICE names the fix
SELECT docsync.define_query('noted', $$
  SELECT jsonb_build_object('notes', (SELECT jsonb_agg(n.body ORDER BY n.id) FROM notes n WHERE n.order_id = $1))$$,
  params => ARRAY['order_id']);
SELECT * FROM dw.shown('noted');
-- DDL derives them again: with the identity fixed, the watch no longer needs allow_broadcast
ALTER TABLE notes REPLICA IDENTITY FULL;
SELECT * FROM dw.shown('noted');

-- no key path: broadcast (a query without params, a range predicate)
SELECT docsync.define_query('orders.count', 'SELECT jsonb_build_object(''n'', count(*)) FROM orders');
SELECT docsync.define_query('since', 'SELECT jsonb_agg(o.id ORDER BY o.id) FROM orders o WHERE o.placed >= $1', params => ARRAY['day']);
SELECT * FROM dw.shown('orders.count');
SELECT * FROM dw.shown('since');
SELECT name, broadcast_tables FROM docsync.queries WHERE name IN ('orders.count', 'since') ORDER BY name;
SELECT "table", kind, mapping, doc_queries_per_change FROM docsync.explain('orders.count');

-- uncovered functions are refused, naming each, unless allow_uncovered
CREATE FUNCTION dw.last_audit() RETURNS timestamptz LANGUAGE plpgsql STABLE AS
  $$BEGIN RETURN (SELECT max(at) FROM dw.audit_log); END$$;
SELECT docsync.define_query('audited', $$SELECT jsonb_build_object('id', o.id, 'audit', dw.last_audit())
  FROM orders o WHERE o.id = $1$$, params => ARRAY['id']);
SELECT count(*) AS stored FROM docsync.query_defs WHERE name = 'audited';
SELECT docsync.define_query('audited', $$SELECT jsonb_build_object('id', o.id, 'audit', dw.last_audit())
  FROM orders o WHERE o.id = $1$$, params => ARRAY['id'], allow_uncovered => true);
-- the tables the function reads are watched by hand, as a broadcast
SELECT docsync.watch('audited', 'audit_log', broadcast => true) > 0 AS watched;
SELECT docsync.watch('audited', 'audit_log', broadcast => true);
SELECT docsync.watch('audited', 'audit_log', params => ARRAY['id'], broadcast => true);
SELECT * FROM dw.shown('audited');
SELECT name, watches, broadcast_tables FROM docsync.queries WHERE name = 'audited';
-- explain shows the hand-written watch too; a broadcast costs the live docs (the distinct orders)
SELECT "table", kind, origin, mapping, doc_queries_per_change, why FROM docsync.explain('audited') ORDER BY "table"::text;

-- a watch by hand replaces the derived ones of its table; unwatch derives them again
SELECT docsync.watch('order', 'products', keys_sql => 'SELECT i.order_id FROM dw.order_items i WHERE i.product_id = $1',
                     keys_args => ARRAY['id']) > 0 AS watched;
SELECT * FROM dw.shown('order') WHERE tab = 'products';
SELECT docsync.unwatch('order', 'products');
SELECT * FROM dw.shown('order') WHERE tab = 'products';
-- derived watches are not unwatched: they follow the query
SELECT docsync.unwatch('order', 'customers');
SELECT count(*) AS customers_watches FROM docsync.watch_defs WHERE query = 'order' AND table_name = 'customers';

-- or_replace derives them again from the new text
SELECT docsync.define_query('order', $$SELECT jsonb_build_object('id', o.id) FROM orders o WHERE o.id = $1$$,
                            params => ARRAY['order_id'], or_replace => true);
SELECT * FROM dw.shown('order');
-- watches => 'manual': nothing derived, what was derived is gone, hand-written watches stay
SELECT docsync.watch('order', 'customers', keys_sql => 'SELECT o.id FROM dw.orders o WHERE o.customer_id = $1',
                     keys_args => ARRAY['id']) > 0 AS watched;
SELECT docsync.define_query('order', $$SELECT jsonb_build_object('id', o.id) FROM orders o WHERE o.id = $1$$,
                            params => ARRAY['order_id'], or_replace => true, watches => 'manual');
SELECT * FROM dw.shown('order');
SELECT name, watches FROM docsync.queries WHERE name = 'order';
SELECT docsync.define_query('x', 'SELECT to_jsonb(1)', watches => 'sometimes');

-- DDL that changes what a query reads derives its watches again (a view redefined)
CREATE VIEW order_view AS SELECT o.id, o.customer_id FROM orders o;
SELECT docsync.define_query('viewed', 'SELECT to_jsonb(v) FROM order_view v WHERE v.id = $1', params => ARRAY['id']);
SELECT * FROM dw.shown('viewed');
CREATE OR REPLACE VIEW order_view AS
  SELECT o.id, o.customer_id, c.name FROM orders o JOIN customers c ON c.id = o.customer_id;
SELECT * FROM dw.shown('viewed');
-- DDL that touches nothing a query was derived from derives nothing: no SQL of docsync's runs for it
SELECT array_agg(id ORDER BY id) AS ids INTO TEMP before FROM docsync.watch_defs WHERE query = 'viewed';
BEGIN;
SET LOCAL track_functions = 'all';
CREATE TABLE unrelated (id int PRIMARY KEY);
ALTER TABLE unrelated ADD COLUMN v int;
SELECT count(*) AS rederived FROM pg_stat_xact_user_functions WHERE schemaname = 'docsync' AND funcname = '_rederive';
-- DDL on a table it was derived from derives the queries that read it, once per statement; the same
-- watches are derived, so none is written again (same ids)
ALTER TABLE customers ADD COLUMN since date;
SELECT calls AS rederived FROM pg_stat_xact_user_functions WHERE schemaname = 'docsync' AND funcname = '_rederive';
COMMIT;
SELECT (SELECT array_agg(id ORDER BY id) FROM docsync.watch_defs WHERE query = 'viewed') = ids AS unchanged FROM before;

-- when unsure, recompute: a query whose watches cannot be derived after DDL keeps them, and every
-- table they covered gets a broadcast watch, reported in docsync.queries (here the query no longer
-- analyses: the worker refuses it, saying so)
ALTER TABLE notes DROP COLUMN body;
SELECT * FROM dw.shown('noted');
SELECT name, broadcast_tables, warning FROM docsync.queries WHERE name = 'noted';
SELECT "table", kind, origin, why FROM docsync.explain('noted') WHERE kind = 'broadcast';
-- once it analyses again, DDL derives them again and the warning is gone
ALTER TABLE notes ADD COLUMN body text;
SELECT * FROM dw.shown('noted');
SELECT name, broadcast_tables, warning FROM docsync.queries WHERE name = 'noted';

-- a query that still prepares but whose watches cannot be derived (a function it calls became one
-- whose reads cannot be analysed): the warning says why, and what recomputes every live doc now
CREATE FUNCTION dw.label(int) RETURNS text LANGUAGE sql IMMUTABLE AS $$SELECT 'order ' || $1$$;
SELECT docsync.define_query('labelled', 'SELECT jsonb_build_object(''label'', dw.label(o.id)) FROM orders o WHERE o.id = $1',
                            params => ARRAY['id']);
SELECT * FROM dw.shown('labelled');
CREATE OR REPLACE FUNCTION dw.label(int) RETURNS text LANGUAGE plpgsql IMMUTABLE AS $$BEGIN RETURN 'order ' || $1; END$$;
SELECT * FROM dw.shown('labelled');
SELECT name, broadcast_tables, warning FROM docsync.queries WHERE name = 'labelled';

SELECT docsync.drop_query(name) FROM docsync.query_defs ORDER BY name;
SET client_min_messages = warning;
DROP SCHEMA dw CASCADE;
RESET client_min_messages;
RESET search_path;
