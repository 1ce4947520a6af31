-- advance_generation (doc-version generations per slot) and the role recipes
\set VERBOSITY default
\set SHOW_CONTEXT never
SET synchronous_commit = on;

-- a new slot starts above the floor; a matching identity and timeline keeps the stored value
SELECT docsync.advance_generation('regress_slot', '7000000000000000001', 1, 0, false) AS first_start;
SELECT docsync.advance_generation('regress_slot', '7000000000000000001', 1, 0, false) AS same_server;
SELECT docsync.advance_generation('regress_slot', '7000000000000000001', 1, 9, false) AS floor_raises;
-- a recreated slot, a new timeline, a new system identifier: one more than everything before
SELECT docsync.advance_generation('regress_slot', '7000000000000000001', 1, 0, true) AS forced;
SELECT docsync.advance_generation('regress_slot', '7000000000000000001', 2, 0, false) AS new_timeline;
SELECT docsync.advance_generation('regress_slot', '7000000000000000002', 2, 3, false) AS new_server;
SELECT docsync.advance_generation('regress_slot', '7000000000000000002', 2, 20, true) AS forced_with_floor;
SELECT docsync.advance_generation('regress_other', '7000000000000000002', 2, 5, false) AS other_slot;
SELECT slot, system_identifier, timeline, generation FROM docsync.worker_state ORDER BY slot;
SELECT docsync.advance_generation(NULL, '1', 1, 0, false);
-- changes to worker_state leave the definitions generation alone
SELECT generation INTO TEMP before FROM docsync.def_generation;
DELETE FROM docsync.worker_state;
SELECT (SELECT generation FROM docsync.def_generation) = (SELECT generation FROM before) AS unchanged;

-- fixture
CREATE SCHEMA app;
CREATE TABLE app.orders (id int PRIMARY KEY, customer_id int);
CREATE TABLE app.customers (id int PRIMARY KEY, name text);
CREATE TABLE app.secrets (id int PRIMARY KEY, s text);
SELECT docsync.define_query('order', 'SELECT to_jsonb(o) FROM orders o WHERE id = $1', params => ARRAY['id'],
                            search_path => 'app', watches => 'manual');
SELECT docsync.watch('order', 'app.orders', params => ARRAY['id']) > 0;
SELECT docsync.watch('order', 'app.customers',
  keys_sql => 'SELECT o.id FROM orders o JOIN customers c ON c.id = o.customer_id WHERE c.id = $1',
  keys_args => ARRAY['id']) > 0;

-- the pool role: a member of each definer's reader role, which holds SELECT on what that
-- definer's doc and keys queries read, nothing else; the pool role itself holds none of it
CREATE ROLE regress_reader LOGIN;
SELECT docsync.grant_reader('regress_reader');
SELECT has_table_privilege('docsync_reader_postgres', 'app.orders', 'SELECT') AS orders,
       has_table_privilege('docsync_reader_postgres', 'app.customers', 'SELECT') AS customers,
       has_table_privilege('docsync_reader_postgres', 'app.secrets', 'SELECT') AS secrets,
       has_table_privilege('docsync_reader_postgres', 'app.orders', 'UPDATE') AS orders_update,
       has_table_privilege('docsync_reader_postgres', 'docsync.query_defs', 'SELECT') AS definitions,
       has_table_privilege('regress_reader', 'app.orders', 'SELECT') AS pool_itself;
SET ROLE regress_reader;
BEGIN READ ONLY;
SELECT docsync.compute_as('docsync_reader_postgres', 'app');
SELECT to_jsonb(o) FROM orders o WHERE id = 1;
SELECT * FROM app.secrets;
ROLLBACK;
SELECT docsync.worker_definitions();
RESET ROLE;

-- a doc query over views: SELECT on the view, not on the table behind it (checked as the view's
-- owner), except behind a security_invoker view, whose tables are checked as the reader
CREATE TABLE app.products (id int PRIMARY KEY, price int, cost int);
CREATE VIEW app.prices AS SELECT id, price FROM app.products;
CREATE TABLE app.stock (id int PRIMARY KEY, n int);
CREATE VIEW app.stock_levels WITH (security_invoker = true) AS SELECT id, n FROM app.stock;
SELECT docsync.define_query('product', 'SELECT jsonb_build_object(''price'', p.price, ''n'', s.n)
  FROM prices p LEFT JOIN stock_levels s USING (id) WHERE p.id = $1', params => ARRAY['id'], search_path => 'app', watches => 'manual');
SELECT docsync.watch('product', 'app.products', params => ARRAY['id']) > 0;
SELECT docsync.grant_reader('regress_reader');
SELECT has_table_privilege('docsync_reader_postgres', 'app.prices', 'SELECT') AS view,
       has_table_privilege('docsync_reader_postgres', 'app.products', 'SELECT') AS table_behind_view,
       has_table_privilege('docsync_reader_postgres', 'app.stock_levels', 'SELECT') AS invoker_view,
       has_table_privilege('docsync_reader_postgres', 'app.stock', 'SELECT') AS table_behind_invoker_view;
INSERT INTO app.products VALUES (1, 10, 7);
SET ROLE regress_reader;
BEGIN READ ONLY;
SELECT docsync.compute_as('docsync_reader_postgres', NULL);
SELECT jsonb_build_object('price', p.price, 'n', s.n) FROM app.prices p LEFT JOIN app.stock_levels s USING (id) WHERE p.id = 1;
ROLLBACK;
BEGIN READ ONLY;
SELECT docsync.compute_as('docsync_reader_postgres', NULL);
SELECT cost FROM app.products;
ROLLBACK;
RESET ROLE;
SELECT docsync.drop_query('product');
SELECT docsync.grant_reader('regress_no_such_role');

-- revoke_reader takes back what grant_reader granted, and only that: a grant the DBA made before
-- (SELECT on app.orders, given directly) stays, and grant_reader neither repeated nor recorded it
CREATE ROLE regress_reader2 LOGIN;
GRANT USAGE ON SCHEMA app TO regress_reader2;
GRANT SELECT ON app.orders TO regress_reader2;
SELECT docsync.grant_reader('regress_reader2');
SELECT role, kind, schema_name, table_name, columns FROM docsync.reader_grants ORDER BY role, kind, table_name;
SELECT docsync.revoke_reader('regress_reader2');
SELECT has_table_privilege('regress_reader2', 'app.orders', 'SELECT') AS kept_orders,
       has_table_privilege('regress_reader2', 'app.customers', 'SELECT') AS customers,
       has_schema_privilege('regress_reader2', 'app', 'USAGE') AS kept_usage;
SELECT count(*) AS left_recorded FROM docsync.reader_grants WHERE role = 'regress_reader2';
SELECT docsync.revoke_reader('regress_reader2') AS nothing_more;
SELECT docsync.revoke_reader('regress_no_such_role');
DROP OWNED BY regress_reader2;
DROP ROLE regress_reader2;
CREATE ROLE regress_bad_reader BYPASSRLS;
SELECT docsync.grant_reader('regress_bad_reader');
DROP ROLE regress_bad_reader;

-- the replication role: definitions and generations, nothing of the customer's tables
CREATE ROLE regress_repl LOGIN;
SELECT docsync.grant_replication('regress_repl');
ALTER ROLE regress_repl REPLICATION;
SELECT docsync.grant_replication('regress_repl') IS NOT NULL AS granted_again;
SET ROLE regress_repl;
SELECT jsonb_array_length(docsync.worker_definitions() -> 'watches') AS watches;
SELECT docsync.plugin_tables() <> '' AS has_tables;
SELECT docsync.advance_generation('regress_slot', '1', 1, 0, false) AS generation;
SELECT generation > 0 AS readable FROM docsync.def_generation;
SELECT * FROM app.orders;
SELECT docsync.define_query('x', 'SELECT to_jsonb(1)', watches => 'manual');
DELETE FROM docsync.worker_state;
RESET ROLE;
SELECT docsync.grant_replication('regress_no_such_role');

-- without grants, nobody else reads definitions or advances generations, schema USAGE or not
CREATE ROLE regress_nobody;
SET ROLE regress_nobody;
SELECT docsync.worker_definitions();
RESET ROLE;
GRANT USAGE ON SCHEMA docsync TO regress_nobody;
SET ROLE regress_nobody;
SELECT docsync.worker_definitions();
SELECT docsync.advance_generation('regress_slot', '1', 1, 0, false);
SELECT * FROM docsync.queries;
RESET ROLE;

-- clean up
DELETE FROM docsync.worker_state;
SELECT docsync.drop_query('order');
DROP SCHEMA app CASCADE;
DROP OWNED BY regress_reader, regress_repl, regress_nobody;
DROP ROLE regress_reader, regress_repl, regress_nobody;
