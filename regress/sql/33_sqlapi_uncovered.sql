-- A doc query that reads a table no watch covers: its docs go stale silently. The NOTICE saying so
-- comes once, at the commit of the transaction that completes a definition, never at the steps of a
-- correct one; docsync.uncovered_queries() (the worker's log and docsync.status) names it.
\set VERBOSITY default
\set SHOW_CONTEXT never
SET synchronous_commit = on;

CREATE SCHEMA unc;
SET search_path = unc;
CREATE TABLE orders (id int PRIMARY KEY, status text);
CREATE TABLE order_items (id int PRIMARY KEY, order_id int NOT NULL, qty int);
ALTER TABLE order_items REPLICA IDENTITY FULL;
CREATE TABLE products (id int PRIMARY KEY, name text);

-- a complete definition in one transaction: no NOTICE at all
BEGIN;
SELECT docsync.define_query('whole', $$SELECT jsonb_build_object('id', o.id, 'n',
  (SELECT count(*) FROM order_items i WHERE i.order_id = o.id)) FROM orders o WHERE o.id = $1$$,
  params => ARRAY['order_id'], watches => 'manual');
SELECT docsync.watch('whole', 'orders', params => ARRAY['id']) > 0 AS watched;
SELECT docsync.watch('whole', 'order_items', params => ARRAY['order_id']) > 0 AS watched;
COMMIT;

-- the forgotten watch, in one transaction: one NOTICE, at COMMIT, naming the table
BEGIN;
SELECT docsync.define_query('forgot', $$SELECT jsonb_build_object('id', o.id, 'n',
  (SELECT count(*) FROM order_items i WHERE i.order_id = o.id)) FROM orders o WHERE o.id = $1$$,
  params => ARRAY['order_id'], watches => 'manual');
SELECT docsync.watch('forgot', 'orders', params => ARRAY['id']) > 0 AS watched;
SELECT 'no notice before commit' AS checkpoint;
COMMIT;

-- step by step, outside a transaction: define_query alone is a definition in progress (silent);
-- the first watch leaves order_items uncovered (named), the second completes it (silent)
SELECT docsync.define_query('steps', $$SELECT jsonb_build_object('id', o.id, 'n',
  (SELECT count(*) FROM order_items i WHERE i.order_id = o.id)) FROM orders o WHERE o.id = $1$$,
  params => ARRAY['order_id'], watches => 'manual');
SELECT docsync.watch('steps', 'orders', params => ARRAY['id']) > 0 AS watched;
SELECT docsync.watch('steps', 'order_items', params => ARRAY['order_id']) > 0 AS watched;

-- a redefinition that reads one more table: named at its commit
SELECT docsync.define_query('steps', $$SELECT jsonb_build_object('id', o.id, 'n',
  (SELECT count(*) FROM order_items i WHERE i.order_id = o.id), 'p', (SELECT count(*) FROM products))
  FROM orders o WHERE o.id = $1$$,
  params => ARRAY['order_id'], or_replace => true, watches => 'manual');

-- several changes to one query in a transaction: named once
BEGIN;
SELECT docsync.unwatch('forgot', 'orders');
SELECT docsync.watch('forgot', 'orders', params => ARRAY['id']) > 0 AS watched;
SELECT docsync.define_query('forgot', $$SELECT jsonb_build_object('id', o.id, 'n',
  (SELECT count(*) FROM order_items i WHERE i.order_id = o.id)) FROM orders o WHERE o.id = $1$$,
  params => ARRAY['order_id'], or_replace => true, watches => 'manual');
COMMIT;

-- what the worker logs and docsync.status shows
SELECT query, tables, message FROM docsync.uncovered_queries() ORDER BY query;
SELECT jsonb_pretty(docsync.worker_definitions() -> 'uncovered');

-- a customer's rename and drop of a watched table fire no NOTICE and never fail
ALTER TABLE order_items RENAME TO items;
DROP TABLE products;
SELECT query, tables FROM docsync.uncovered_queries() ORDER BY query;

SELECT docsync.drop_query(q) FROM unnest(ARRAY['whole', 'forgot', 'steps']) q;
DROP SCHEMA unc CASCADE;
