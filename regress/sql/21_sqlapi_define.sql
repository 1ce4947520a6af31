-- define_query / watch / unwatch / drop_query: each success and each refusal
\set VERBOSITY default
\set SHOW_CONTEXT never
SET synchronous_commit = on;

CREATE SCHEMA shop;
SET search_path = shop, public;
CREATE TABLE orders (id int PRIMARY KEY, status text, customer_id int);
CREATE TABLE order_items (id int PRIMARY KEY, order_id int, product_id int, qty int);
ALTER TABLE order_items REPLICA IDENTITY FULL;
CREATE TABLE products (id int PRIMARY KEY, name text);
CREATE VIEW order_view AS SELECT * FROM orders;

-- define_query: success, stored with the search_path in force
SELECT docsync.define_query('order',
  $$SELECT jsonb_build_object('id', o.id, 'status', o.status, 'items',
      (SELECT coalesce(jsonb_agg(i ORDER BY i.id), '[]') FROM order_items i WHERE i.order_id = o.id))
    FROM orders o WHERE o.id = $1$$,
  params => ARRAY['order_id'], watches => 'manual');
SELECT name, params, search_path FROM docsync.query_defs;
-- a query without params, a domain over json, a search_path given explicitly
CREATE DOMAIN shop.doc AS jsonb;
SELECT docsync.define_query('orders.count', 'SELECT jsonb_build_object(''n'', count(*))::shop.doc FROM orders', watches => 'manual');
SELECT docsync.define_query('q-json', 'SELECT json_build_object(''id'', $1::int)', params => ARRAY['id'],
                            search_path => 'pg_catalog', watches => 'manual');
SELECT name, params, search_path FROM docsync.query_defs ORDER BY name;

-- define_query refusals
SELECT docsync.define_query('order', 'SELECT to_jsonb($1::int)', params => ARRAY['order_id'], watches => 'manual');
SELECT docsync.define_query('bad name', 'SELECT to_jsonb(1)', watches => 'manual');
SELECT docsync.define_query('-x', 'SELECT to_jsonb(1)', watches => 'manual');
SELECT docsync.define_query(repeat('x', 64), 'SELECT to_jsonb(1)', watches => 'manual');
SELECT docsync.define_query('p', 'SELECT to_jsonb($1::int)', params => ARRAY['a:b'], watches => 'manual');
SELECT docsync.define_query('p', 'SELECT to_jsonb($1::int + $2::int)', params => ARRAY['a', 'a'], watches => 'manual');
SELECT docsync.define_query('p', 'SELECT to_jsonb($1::int)', params => ARRAY[['a'], ['b']], watches => 'manual');
SELECT docsync.define_query('p', 'SELECT to_jsonb($1::int)', watches => 'manual');
SELECT docsync.define_query('p', 'SELECT to_jsonb($1::int)', params => ARRAY['a', 'b'], watches => 'manual');
SELECT docsync.define_query('p', 'SELECT to_jsonb($2::int)', params => ARRAY['a', 'b'], watches => 'manual');
SELECT docsync.define_query('p', 'SELECT to_jsonb(1), 2', watches => 'manual');
SELECT docsync.define_query('p', 'SELECT ''x''::text', watches => 'manual');
SELECT docsync.define_query('p', 'SELECT $1', params => ARRAY['a'], watches => 'manual');
SELECT docsync.define_query('p', 'SELECT to_jsonb(o) FROM no_such_table o', watches => 'manual');
SELECT docsync.define_query('p', 'SELEC 1', watches => 'manual');
SELECT docsync.define_query('p', 'SELECT to_jsonb(1); SELECT to_jsonb(2)', watches => 'manual');
SELECT docsync.define_query('p', 'DELETE FROM orders', watches => 'manual');
SELECT docsync.define_query('p', 'WITH d AS (DELETE FROM orders RETURNING id) SELECT to_jsonb(count(*)) FROM d', watches => 'manual');
SELECT docsync.define_query('p', 'SELECT to_jsonb(o) FROM orders o FOR UPDATE', watches => 'manual');
SELECT docsync.define_query('p', 'SELECT to_jsonb(1) INTO t', watches => 'manual');
SELECT docsync.define_query('p', NULL, watches => 'manual');
SELECT count(*) AS still_three FROM docsync.query_defs;

-- redefinition is explicit
SELECT docsync.define_query('orders.count', 'SELECT jsonb_build_object(''count'', count(*)) FROM orders',
                            or_replace => true, watches => 'manual');
SELECT sql FROM docsync.query_defs WHERE name = 'orders.count';

-- watch: direct mappings
SELECT docsync.watch('order', 'orders', params => ARRAY['id']) > 0 AS watched;
SELECT docsync.watch('order', 'order_items', params => ARRAY['order_id']) > 0 AS watched;
SELECT docsync.watch('orders.count', 'orders', params => ARRAY[]::text[]) > 0 AS watched;
-- watch: a reverse index
SELECT docsync.watch('order', 'products',
  keys_sql => $$SELECT DISTINCT order_id FROM order_items WHERE product_id = $1$$,
  keys_args => ARRAY['id']) > 0 AS watched;
-- outside the replica identity: refused, unless broadcasting is allowed
SELECT docsync.watch('order', 'orders', params => ARRAY['customer_id']);
SELECT docsync.watch('order', 'orders', params => ARRAY['customer_id'], allow_broadcast => true) > 0 AS watched;
SELECT query, "table", kind, columns, keys_sql, allow_broadcast FROM docsync.watches ORDER BY id;

-- watch refusals
SELECT docsync.watch('no_such_query', 'orders', params => ARRAY['id']);
SELECT docsync.watch('order', 'no_such_table', params => ARRAY['id']);
SELECT docsync.watch('order', NULL, params => ARRAY['id']);
SELECT docsync.watch('order', 'order_view', params => ARRAY['id']);
SELECT docsync.watch('order', 'docsync.query_defs', params => ARRAY['name']);
CREATE TEMP TABLE temp_orders (id int PRIMARY KEY);
SELECT docsync.watch('order', 'temp_orders', params => ARRAY['id']);
SELECT docsync.watch('order', 'orders', params => ARRAY['nope']);
SELECT docsync.watch('order', 'orders', params => ARRAY['id', 'status']);
SELECT docsync.watch('order', 'orders', params => ARRAY['id']);
SELECT docsync.watch('order', 'orders');
SELECT docsync.watch('order', 'orders', params => ARRAY['id'], keys_sql => 'SELECT 1');
-- a text over the 1 MiB docsync-worker computes is refused where it is defined (comments count)
SELECT docsync.watch('order', 'products', keys_sql => 'SELECT order_id FROM order_items WHERE product_id = $1 /* '
                                                      || repeat('x', 1048576) || ' */', keys_args => ARRAY['id']);
SELECT docsync.define_query('huge', 'SELECT to_jsonb(1) /* ' || repeat('x', 1048576) || ' */');
SELECT docsync.watch('order', 'products', keys_sql => 'SELECT 1');
SELECT docsync.watch('order', 'products', keys_sql => 'SELECT order_id FROM order_items', keys_args => ARRAY[]::text[]);
SELECT docsync.watch('order', 'products', params => ARRAY['id'], keys_args => ARRAY['id']);
SELECT docsync.watch('order', 'products', keys_sql => 'SELECT order_id, qty FROM order_items WHERE product_id = $1',
                     keys_args => ARRAY['id']);
SELECT docsync.watch('order', 'products', keys_sql => 'SELECT order_id FROM order_items', keys_args => ARRAY['id']);
SELECT docsync.watch('order', 'products', keys_sql => 'SELECT order_id FROM nowhere WHERE x = $1', keys_args => ARRAY['id']);
SELECT docsync.watch('orders.count', 'products', keys_sql => 'SELECT 1 WHERE $1::int > 0', keys_args => ARRAY['id']);
-- keys of another type than the doc param would name other channels ('042' is not 42): refused;
-- types that print alike (integer and bigint) are fine
SELECT docsync.watch('order', 'orders', params => ARRAY['status']);
SELECT docsync.watch('order', 'products', keys_sql => 'SELECT order_id::text FROM order_items WHERE product_id = $1',
                     keys_args => ARRAY['id']);
SELECT docsync.watch('order', 'products', keys_sql => 'SELECT order_id::bigint FROM order_items WHERE product_id = $1',
                     keys_args => ARRAY['id']) > 0 AS bigint_keys_ok;
SELECT docsync.unwatch('order', 'products', keys_sql => 'SELECT order_id::bigint FROM order_items WHERE product_id = $1');
-- keys_args outside the replica identity: refused like a direct watch's columns, the cost of
-- allow_broadcast stated
SELECT docsync.watch('order', 'products', keys_sql => 'SELECT order_id FROM order_items WHERE product_id::text = $1',
                     keys_args => ARRAY['name']);
SELECT docsync.watch('order', 'products', keys_sql => 'SELECT order_id FROM order_items WHERE product_id::text = $1',
                     keys_args => ARRAY['name'], allow_broadcast => true) > 0 AS broadcast_accepted;
SELECT docsync.unwatch('order', 'products', keys_sql => 'SELECT order_id FROM order_items WHERE product_id::text = $1');
-- a doc query with params cannot be redefined to another count while watched
SELECT docsync.define_query('order', 'SELECT to_jsonb($1::int + $2::int)', params => ARRAY['a', 'b'], or_replace => true, watches => 'manual');
-- nor to a param type its watches' keys do not print alike
SELECT docsync.define_query('order', 'SELECT to_jsonb($1::text)', params => ARRAY['order_id'], or_replace => true, watches => 'manual');
SELECT docsync.define_query('q-json', 'SELECT json_build_object(''a'', $1::int, ''b'', $2::int)', params => ARRAY['a', 'b'],
                            or_replace => true, search_path => 'pg_catalog', watches => 'manual');

-- keys_sql is analysed with the doc query's search_path, not the caller's
SET search_path = public;
SELECT docsync.watch('order', 'shop.customers_missing', params => ARRAY['id']);
SELECT docsync.unwatch('order', 'shop.products') AS removed;
SELECT docsync.watch('order', 'shop.products',
  keys_sql => $$SELECT DISTINCT order_id FROM order_items WHERE product_id = $1$$,
  keys_args => ARRAY['id']) > 0 AS watched_under_stored_path;
SET search_path = shop, public;

-- unwatch: one mapping, all mappings of a table, and refusals
SELECT docsync.unwatch('order', 'orders', params => ARRAY['customer_id']) AS removed;
SELECT docsync.unwatch('order', 'orders', params => ARRAY['customer_id']);
SELECT docsync.unwatch('order', 'orders', keys_sql => 'SELECT 1');
SELECT docsync.unwatch('order', 'no_such_table');
SELECT docsync.unwatch('orders.count', 'orders') AS removed;
SELECT query, "table", kind, columns FROM docsync.watches ORDER BY id;

-- drop_query: removes the query and its watches
SELECT docsync.drop_query('q-json');
SELECT docsync.drop_query('q-json');
SELECT name FROM docsync.query_defs ORDER BY name;

-- privileges: defining needs docsync_admin (or superuser)
CREATE ROLE regress_docsync_user;
GRANT USAGE ON SCHEMA shop TO regress_docsync_user;
SET ROLE regress_docsync_user;
SELECT docsync.define_query('mine', 'SELECT to_jsonb(1)', watches => 'manual');
SELECT docsync.watch('order', 'orders', params => ARRAY['id'], allow_broadcast => true);
SELECT docsync.unwatch('order', 'orders');
SELECT docsync.drop_query('order');
SELECT * FROM docsync.query_defs;
SELECT docsync.channel('order', '1');
RESET ROLE;
-- with USAGE on the schema: clients compute channel names; defining still says what is missing
GRANT USAGE ON SCHEMA docsync TO regress_docsync_user;
SET ROLE regress_docsync_user;
SELECT docsync.channel('order', '1');
SELECT docsync.define_query('mine', 'SELECT to_jsonb(1)', watches => 'manual');
SELECT docsync.watch('order', 'orders', params => ARRAY['id'], allow_broadcast => true);
SELECT docsync.unwatch('order', 'orders');
SELECT docsync.drop_query('order');
SELECT * FROM docsync.query_defs;
RESET ROLE;
REVOKE USAGE ON SCHEMA docsync FROM regress_docsync_user;
GRANT docsync_admin TO regress_docsync_user;
SET ROLE regress_docsync_user;
-- a definer reads through its definitions only what it may read itself
SELECT docsync.define_query('mine', 'SELECT to_jsonb(count(*)) FROM shop.orders', watches => 'manual');
RESET ROLE;
GRANT SELECT ON shop.orders TO regress_docsync_user;
SET ROLE regress_docsync_user;
SELECT docsync.define_query('mine', 'SELECT to_jsonb(count(*)) FROM shop.orders', watches => 'manual');
SELECT docsync.watch('mine', 'orders', params => ARRAY[]::text[]) > 0 AS watched;
SELECT name, defined_by FROM docsync.queries ORDER BY name;
SELECT docsync.drop_query('mine');
RESET ROLE;
REVOKE docsync_admin FROM regress_docsync_user;
REVOKE SELECT ON shop.orders FROM regress_docsync_user;
REVOKE USAGE ON SCHEMA shop FROM regress_docsync_user;
DROP ROLE regress_docsync_user;

-- docsync_admin exists once, cluster-wide, and survives the extension
SELECT count(*) FROM pg_roles WHERE rolname = 'docsync_admin';

-- clean up
SELECT docsync.drop_query(name) FROM docsync.query_defs ORDER BY name;
SELECT count(*) AS watches_left FROM docsync.watch_defs;
DROP SCHEMA shop CASCADE;
RESET search_path;
