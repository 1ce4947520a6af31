-- docsync.queries, docsync.watched_tables, plugin_tables(), worker_definitions() on a fixture schema
\set VERBOSITY default
\set SHOW_CONTEXT never
SET synchronous_commit = on;

CREATE SCHEMA fx;
SET search_path = fx;
CREATE TABLE customers (id int PRIMARY KEY, name text, region text);
CREATE TABLE orders (id int PRIMARY KEY, customer_id int, status text, note text);
CREATE TABLE "Odd Items" ("Order Id" int, sku text, qty int);          -- no primary key
ALTER TABLE "Odd Items" REPLICA IDENTITY FULL;
CREATE UNLOGGED TABLE scratch (id int PRIMARY KEY, v text);
CREATE TABLE events (id int, kind int, customer_id int, PRIMARY KEY (id, kind)) PARTITION BY LIST (kind);
CREATE TABLE events_1 PARTITION OF events FOR VALUES IN (1);
CREATE TABLE events_2 PARTITION OF events FOR VALUES IN (2);
ALTER TABLE events_1 REPLICA IDENTITY FULL;
CREATE VIEW customer_regions AS SELECT id, region FROM customers;

SELECT docsync.define_query('customer',
  $$SELECT jsonb_build_object('id', c.id, 'name', c.name,
      'orders', (SELECT count(*) FROM orders o WHERE o.customer_id = c.id),
      'events', (SELECT count(*) FROM events e WHERE e.customer_id = c.id),
      'region', (SELECT r.region FROM customer_regions r WHERE r.id = c.id))
    FROM customers c WHERE c.id = $1$$,
  params => ARRAY['customer_id'], watches => 'manual');
SELECT docsync.define_query('order',
  $$SELECT to_jsonb(o) || jsonb_build_object('items', (SELECT jsonb_agg(i) FROM "Odd Items" i WHERE i."Order Id" = o.id))
    FROM orders o WHERE o.id = $1$$,
  params => ARRAY['order_id'], watches => 'manual');
SELECT docsync.define_query('scratch', 'SELECT to_jsonb(s) FROM scratch s WHERE id = $1', params => ARRAY['id'], watches => 'manual');

-- nothing watched yet: every table a query reads is listed as a warning, views seen through
SELECT name, params, watched_tables, unwatched_tables, warning FROM docsync.queries ORDER BY name;

SELECT docsync.watch('customer', 'customers', params => ARRAY['id']) > 0;
-- customer_id is outside orders' replica identity: only with allow_broadcast
SELECT docsync.watch('customer', 'orders', params => ARRAY['customer_id'], allow_broadcast => true) > 0;
-- events_2 (default identity, the primary key (id, kind)) does not log customer_id; events_1 is FULL
SELECT docsync.watch('customer', 'events', params => ARRAY['customer_id']);
SELECT docsync.watch('customer', 'events', params => ARRAY['customer_id'], allow_broadcast => true) > 0;
-- a partition is watched through its root
SELECT docsync.watch('customer', 'events_1', params => ARRAY['customer_id']);
SELECT docsync.watch('order', 'orders', params => ARRAY['id']) > 0;
SELECT docsync.watch('order', '"Odd Items"', params => ARRAY['Order Id']) > 0;
SELECT docsync.watch('order', 'customers',
  keys_sql => 'SELECT id FROM orders WHERE customer_id = $1 AND status = $2', keys_args => ARRAY['id', 'name'],
  allow_broadcast => true) > 0;
SELECT docsync.watch('scratch', 'scratch', params => ARRAY['id']) > 0;

SELECT name, params, watched_tables, unwatched_tables, warning FROM docsync.queries ORDER BY name;

-- one row per watched table: union of mapping columns, identity, warnings
SELECT "table", schema, name, columns, replica_identity, queries, warning
  FROM docsync.watched_tables ORDER BY name;

-- the warning names output_plugin_libraries when docsync is missing from it
SET output_plugin_libraries = pgoutput, test_decoding;
SELECT name, warning LIKE '%docsync is not in output_plugin_libraries%' AS warns
  FROM docsync.watched_tables ORDER BY name;
-- the list is split as the server splits it: one quoted string is one name, and the warning says so
-- with the ALTER SYSTEM that fixes it, keeping the other names; a quoted name and a list of quoted names
-- are fine; a name that only resembles docsync is named
SET output_plugin_libraries = 'pgoutput, test_decoding, docsync';
SELECT current_setting('output_plugin_libraries') AS setting, docsync.output_plugin_problem() AS problem;
SELECT name, position(docsync.output_plugin_problem() IN warning) > 0 AS warns
  FROM docsync.watched_tables ORDER BY name;
SET output_plugin_libraries = pgoutput, 'test_decoding, wal2json, docsync';
SELECT current_setting('output_plugin_libraries') AS setting, docsync.output_plugin_problem() AS problem;
SET output_plugin_libraries = 'pgoutput', 'test_decoding', 'docsync';
SELECT current_setting('output_plugin_libraries') AS setting, docsync.output_plugin_problem() AS problem;
SET output_plugin_libraries = pgoutput, "docsync";
SELECT current_setting('output_plugin_libraries') AS setting, docsync.output_plugin_problem() AS problem;
SET output_plugin_libraries = pgoutput, "Docsync", '$libdir/wal2json';
SELECT current_setting('output_plugin_libraries') AS setting, docsync.output_plugin_problem() AS problem;
RESET output_plugin_libraries;
SELECT docsync.output_plugin_problem() IS NULL AS allowed_after_reset;

-- plugin_tables(): OID(attnum,…) entries, union of columns per table, ordered by OID
SELECT docsync.plugin_tables() =
       string_agg(e, ',' ORDER BY oid) AS plugin_tables_as_expected
  FROM (VALUES ('fx.customers'::regclass::oid, 'fx.customers'::regclass::oid || '(1,2)'),
               ('fx.orders'::regclass::oid, 'fx.orders'::regclass::oid || '(1,2)'),
               ('fx."Odd Items"'::regclass::oid, 'fx."Odd Items"'::regclass::oid || '(1)'),
               ('fx.scratch'::regclass::oid, 'fx.scratch'::regclass::oid || '(1)'),
               ('fx.events'::regclass::oid, 'fx.events'::regclass::oid || '(3)')) v(oid, e);
SELECT regexp_replace(docsync.plugin_tables(), '[0-9]{4,}', 'OID', 'g') AS plugin_tables_shape;

-- worker_definitions(): contract B (docs/design.md)
SELECT jsonb_typeof(d -> 'generation') AS generation, (d -> 'generation')::bigint = (SELECT generation FROM docsync.def_generation) AS current
  FROM docsync.worker_definitions() d;
SELECT q - 'fingerprint' AS q, length(q ->> 'fingerprint') AS fingerprint_length
  FROM jsonb_array_elements(docsync.worker_definitions() -> 'queries') q WHERE q ->> 'name' = 'scratch';
SELECT w - 'relid' AS watch, (w ->> 'relid')::oid::regclass AS relid, jsonb_typeof(w -> 'relid') AS relid_type
  FROM jsonb_array_elements(docsync.worker_definitions() -> 'watches') w
 ORDER BY w ->> 'query', w ->> 'table', w::text;

-- read_columns and broadcast (as define_query stores derived watches): the worker gets the columns
-- read with their attnums, the plugin's option adds them to the mapping columns; a column that no
-- longer resolves makes the whole list null (every column read), and adds nothing to the option
UPDATE docsync.watch_defs SET read_columns = '{status,id,status}' WHERE query = 'order' AND table_name = 'orders';
UPDATE docsync.watch_defs SET read_columns = '{v,gone}' WHERE query = 'scratch';
UPDATE docsync.watch_defs SET broadcast = true, columns = '{}', read_columns = '{}'
 WHERE query = 'customer' AND table_name = 'events';
SELECT w ->> 'query' AS query, w ->> 'table' AS "table", w -> 'columns' AS columns, w -> 'broadcast' AS broadcast,
       w -> 'read_columns' AS read_columns
  FROM jsonb_array_elements(docsync.worker_definitions() -> 'watches') w
 ORDER BY w ->> 'query', w ->> 'table', w::text;
SELECT regexp_replace(docsync.plugin_tables(), '[0-9]{4,}', 'OID', 'g') AS plugin_tables_shape;
SELECT docsync.plugin_tables() LIKE '%' || 'fx.orders'::regclass::oid || '(1,2,3)%' AS orders_adds_status,
       docsync.plugin_tables() LIKE '%' || 'fx.scratch'::regclass::oid || '(1)%' AS scratch_adds_nothing;

-- clean up
SELECT docsync.drop_query(name) FROM docsync.query_defs ORDER BY name;
SELECT docsync.plugin_tables() = '' AS nothing_watched,
       docsync.worker_definitions() - 'generation' AS empty_definitions;
DROP SCHEMA fx CASCADE;
RESET search_path;
