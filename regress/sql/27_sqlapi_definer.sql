-- A definition never lets anyone read or run more than its definer may: the definer's rights are
-- checked when a query or watch is defined, again whenever the worker reads the definitions (a
-- revoked grant, a restore, a row written around the API), and by grant_reader.
\set VERBOSITY default
\set SHOW_CONTEXT never
SET synchronous_commit = on;

CREATE SCHEMA def;
CREATE TABLE def.secrets (id int PRIMARY KEY, owner_id int, ssn text);
CREATE TABLE def.orders (id int PRIMARY KEY, note text);
CREATE TABLE def.tenants (id int PRIMARY KEY, tenant text, v int);
ALTER TABLE def.tenants ENABLE ROW LEVEL SECURITY;
CREATE POLICY own ON def.tenants USING (tenant = current_user);
CREATE VIEW def.secret_view AS SELECT id, owner_id FROM def.secrets;
CREATE VIEW def.tenant_totals WITH (security_barrier) AS SELECT tenant, sum(v) AS total FROM def.tenants GROUP BY tenant;
CREATE FUNCTION def.hidden(int) RETURNS int LANGUAGE sql IMMUTABLE AS 'SELECT $1';
REVOKE EXECUTE ON FUNCTION def.hidden(int) FROM PUBLIC;
CREATE ROLE regress_alice;
GRANT docsync_admin TO regress_alice;
GRANT USAGE ON SCHEMA def TO regress_alice;
GRANT SELECT ON def.orders, def.tenants, def.secret_view, def.tenant_totals TO regress_alice;
GRANT SELECT (id) ON def.secrets TO regress_alice;

SET ROLE regress_alice;
-- a query that reads no table is fine, but a watch may not send columns its definer cannot read:
-- their values would travel through channel names and doc params
SELECT docsync.define_query('echo', 'SELECT to_jsonb($1::text)', params => ARRAY['v'], search_path => 'def', watches => 'manual');
SELECT docsync.watch('echo', 'def.secrets', params => ARRAY['ssn'], allow_broadcast => true);
-- a column-level grant allows exactly its columns
SELECT docsync.define_query('order', 'SELECT to_jsonb(o) FROM orders o WHERE o.id = $1', params => ARRAY['id'],
                            search_path => 'def', watches => 'manual');
SELECT docsync.watch('order', 'def.secrets', params => ARRAY['id']) > 0 AS watched_granted_column;
-- a keys query is checked as its definer too
SELECT docsync.watch('order', 'def.secrets', keys_sql => 'SELECT s.owner_id FROM def.secrets s WHERE s.id = $1',
                     keys_args => ARRAY['id']);
SELECT docsync.watch('order', 'def.orders',
  keys_sql => 'SELECT o.id FROM def.orders o JOIN pg_catalog.pg_authid a ON a.rolname = o.note WHERE o.id = $1',
  keys_args => ARRAY['id']);
-- doc queries: a table, a column, the password catalog, a function without EXECUTE
SELECT docsync.define_query('s1', 'SELECT to_jsonb(s) FROM def.secrets s WHERE s.id = $1', params => ARRAY['id'], watches => 'manual');
SELECT docsync.define_query('s2', 'SELECT to_jsonb(s.ssn) FROM def.secrets s WHERE s.id = $1', params => ARRAY['id'], watches => 'manual');
SELECT docsync.define_query('pw', 'SELECT jsonb_agg(jsonb_build_object(''r'', rolname, ''p'', rolpassword)) FROM pg_catalog.pg_authid', watches => 'manual');
SELECT docsync.define_query('fn', 'SELECT to_jsonb(def.hidden($1::int))', params => ARRAY['id'], watches => 'manual');
-- a view the definer may read is fine (its tables are read as the view's owner); the columns of the
-- secret table behind it that the definer may read directly are fine too
SELECT docsync.define_query('sv', 'SELECT to_jsonb(v) FROM def.secret_view v WHERE v.id = $1', params => ARRAY['id'], watches => 'manual');
SELECT docsync.define_query('s3', 'SELECT to_jsonb(s.id) FROM def.secrets s WHERE s.id = $1', params => ARRAY['id'], watches => 'manual');
-- row-level security that applies to the definer is refused, in a doc query and in a watch; a
-- security_barrier view owned by a role it does not apply to is the way
SELECT docsync.define_query('t1', 'SELECT to_jsonb(t) FROM def.tenants t WHERE t.id = $1', params => ARRAY['id'], watches => 'manual');
SELECT docsync.watch('echo', 'def.tenants', params => ARRAY['tenant'], allow_broadcast => true);
SELECT docsync.define_query('t2', 'SELECT to_jsonb(t) FROM def.tenant_totals t WHERE t.tenant = $1', params => ARRAY['tenant'], watches => 'manual');
SELECT name, defined_by, refused FROM docsync.queries ORDER BY name;

-- the definition tables are written only through the API
UPDATE docsync.query_defs SET sql = 'COPY (SELECT 1) TO STDOUT';
INSERT INTO docsync.watch_defs (query, table_schema, table_name, columns) VALUES ('echo', 'def', 'secrets', '{ssn}');
DELETE FROM docsync.watch_defs;
SELECT docsync._define_query('x', 'SELECT to_jsonb(1)', '{}', false, 'def', 'manual', false);
SELECT docsync.check_definer('SELECT 1', NULL, 'postgres');
SELECT docsync.api_caller();
RESET ROLE;
SELECT docsync.api_caller();

-- a definition written around the API (say, restored with triggers disabled) is refused to the worker
INSERT INTO docsync.query_defs (name, sql, search_path, defined_by)
VALUES ('copy', 'COPY (SELECT 1) TO STDOUT', 'def', 'regress_alice'),
       ('peek', 'SELECT to_jsonb(s.ssn) FROM def.secrets s', 'def', 'regress_alice'),
       ('ghost', 'SELECT to_jsonb(1)', 'def', 'regress_no_such_role');
SELECT q ->> 'name' AS name, q ->> 'refused' AS refused
  FROM jsonb_array_elements(docsync.worker_definitions() -> 'queries') q ORDER BY 1;
-- grant_reader names the first refused definition, and grants nothing
CREATE ROLE regress_def_reader;
SELECT docsync.grant_reader('regress_def_reader');
DELETE FROM docsync.query_defs WHERE name IN ('copy', 'peek', 'ghost');
-- a grant revoked after the definition: refused from then on
REVOKE SELECT ON def.tenant_totals FROM regress_alice;
SELECT name, refused FROM docsync.queries WHERE refused IS NOT NULL;
SELECT docsync.grant_reader('regress_def_reader');
GRANT SELECT ON def.tenant_totals TO regress_alice;
-- grant_reader grants no more than the definers may read: the column alice may read, not the table
SELECT docsync.grant_reader('regress_def_reader');
SELECT has_table_privilege('docsync_reader_regress_alice', 'def.secrets', 'SELECT') AS secrets_table,
       has_column_privilege('docsync_reader_regress_alice', 'def.secrets', 'id', 'SELECT') AS secrets_id,
       has_column_privilege('docsync_reader_regress_alice', 'def.secrets', 'ssn', 'SELECT') AS secrets_ssn;
-- a superuser may define a query over pg_authid, but grant_reader never grants a system catalog
SELECT docsync.define_query('pw', 'SELECT jsonb_agg(rolname) FROM pg_catalog.pg_authid', watches => 'manual');
SELECT docsync.grant_reader('regress_def_reader');
SELECT has_table_privilege('docsync_reader_postgres', 'pg_catalog.pg_authid', 'SELECT') AS pg_authid;
SELECT docsync.drop_query('pw');
-- a reader that reaches a superuser two memberships deep is refused
CREATE ROLE regress_def_mid;
GRANT postgres TO regress_def_mid;
GRANT regress_def_mid TO regress_def_reader;
SELECT docsync.grant_reader('regress_def_reader');
REVOKE regress_def_mid FROM regress_def_reader;
DROP ROLE regress_def_mid;

-- clean up
SELECT docsync.drop_query(name) FROM docsync.query_defs WHERE name IN ('echo', 'order', 'sv', 's3', 't2');
DROP SCHEMA def CASCADE;
SELECT count(*) > 0 AS revoked FROM docsync.revoke_reader('regress_def_reader');
DELETE FROM docsync.reader_roles WHERE definer = 'regress_alice';
DROP OWNED BY regress_alice, regress_def_reader, docsync_reader_regress_alice;
DROP ROLE regress_alice;
DROP ROLE regress_def_reader;
DROP ROLE docsync_reader_regress_alice;
