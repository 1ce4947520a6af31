-- Privilege boundaries: no text a definer writes is parsed, analysed, rewritten or run with more
-- than the definer's own rights (docs/design.md, "Privilege boundaries"). Each attack below made a
-- docsync_admin member (or a role with no more than TEMP) superuser, or checked one thing and ran
-- another; each ends by asking whether the attacker became superuser.
\set VERBOSITY terse
\set SHOW_CONTEXT never
SET synchronous_commit = on;
SET client_min_messages = warning;

CREATE SCHEMA hr;
CREATE TABLE hr.payroll (id int PRIMARY KEY, salary int);
CREATE ROLE regress_mallory;
GRANT docsync_admin TO regress_mallory;
CREATE SCHEMA m AUTHORIZATION regress_mallory;
CREATE TABLE m.items (id int PRIMARY KEY, v int);
ALTER TABLE m.items OWNER TO regress_mallory;
-- the escalation every attack tries: harmless as mallory, fatal as a superuser
CREATE FUNCTION public.regress_escalate() RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  BEGIN
    ALTER ROLE regress_mallory SUPERUSER;
  EXCEPTION WHEN insufficient_privilege THEN
    NULL;
  END;
  RETURN true;
END
$$;
CREATE VIEW public.regress_mallory_super AS
  SELECT rolsuper AS mallory_is_superuser FROM pg_roles WHERE rolname = 'regress_mallory';
GRANT SELECT ON public.regress_mallory_super TO PUBLIC;

-- 1. watch's search_path: resolving the table name called an unqualified to_regclass as the
--    extension's owner under the caller's path, where mallory's m.to_regclass came first
SET ROLE regress_mallory;
CREATE FUNCTION m.to_regclass(text) RETURNS regclass LANGUAGE sql
  AS 'SELECT public.regress_escalate(); SELECT pg_catalog.to_regclass($1)';
SELECT docsync.define_query('mi', 'SELECT to_jsonb(i) FROM m.items i WHERE i.id = $1', params => ARRAY['id']);
SELECT docsync.watch('mi', 'items', params => ARRAY['id'], search_path => 'm, pg_catalog') > 0 AS watched;
SELECT docsync.watch('mi', 'nosuch', params => ARRAY['id'], search_path => 'm, pg_catalog');
SELECT docsync.unwatch('mi', 'items', search_path => 'm, pg_catalog');
SELECT * FROM regress_mallory_super;
ALTER ROLE regress_mallory NOSUPERUSER;
-- a temporary table is never watched (its changes are not decoded; no other session sees it)
CREATE TEMP TABLE tmp_items (id int PRIMARY KEY);
SELECT docsync.watch('mi', 'tmp_items', params => ARRAY['id']);
DROP TABLE tmp_items;
DROP FUNCTION m.to_regclass(text);
RESET ROLE;

-- 2. parse analysis: a literal of a domain type runs the domain's CHECK while the query is analysed;
--    pg_temp needs no CREATE privilege anywhere
CREATE ROLE regress_temp_only;
GRANT docsync_admin TO regress_temp_only;
SET ROLE regress_temp_only;
CREATE FUNCTION pg_temp.regress_check(int) RETURNS boolean LANGUAGE sql AS 'SELECT public.regress_escalate()';
CREATE DOMAIN pg_temp.d AS int CHECK (pg_temp.regress_check(VALUE));
--    define_query analysed as the extension's owner
SELECT docsync.define_query('dom', $$SELECT to_jsonb(cardinality('{1}'::pg_temp.d[]))$$);
--    and a pg_temp search_path before other schemas is refused
SELECT docsync.define_query('tmp', 'SELECT to_jsonb(1)', search_path => 'pg_temp, public');
RESET ROLE;
SELECT * FROM regress_mallory_super;
ALTER ROLE regress_mallory NOSUPERUSER;
--    the same text stored around the API (a restore, say) reaches the SECURITY DEFINER functions
--    and the DBA's: worker_definitions (fingerprint, batch_sql), docsync.queries, grant_reader
INSERT INTO docsync.query_defs (name, sql, params, search_path, defined_by)
VALUES ('dom', $$SELECT to_jsonb(cardinality('{1}'::pg_temp.d[]) + $1::int)$$, '{p}', 'public, pg_temp',
        'regress_temp_only');
SELECT q ->> 'refused' IS NOT NULL AS refused, q ->> 'batch_sql' AS batch_sql
  FROM jsonb_array_elements(docsync.worker_definitions() -> 'queries') q WHERE q ->> 'name' = 'dom';
SELECT * FROM regress_mallory_super;
ALTER ROLE regress_mallory NOSUPERUSER;
SELECT docsync.fingerprint('dom') IS NOT NULL AS fingerprinted, docsync.stored_batch_sql('dom') AS batch_sql;
SELECT * FROM regress_mallory_super;
ALTER ROLE regress_mallory NOSUPERUSER;
SELECT name, refused IS NOT NULL AS refused FROM docsync.queries WHERE name = 'dom';
SELECT * FROM regress_mallory_super;
ALTER ROLE regress_mallory NOSUPERUSER;
CREATE ROLE regress_priv_reader;
SELECT docsync.grant_reader('regress_priv_reader');
SELECT * FROM regress_mallory_super;
ALTER ROLE regress_mallory NOSUPERUSER;
--    the analysis functions analyse as their caller, or as a role the caller is a member of
SET ROLE regress_temp_only;
SELECT docsync.analyze_query('SELECT 1', NULL, 'postgres');
SELECT docsync.batch_sql('SELECT $1::int', NULL, 'postgres');
RESET ROLE;
DELETE FROM docsync.query_defs WHERE name = 'dom';
DROP DOMAIN pg_temp.d;
DROP FUNCTION pg_temp.regress_check(int);

-- clean up
SELECT docsync.drop_query('mi');
DROP VIEW public.regress_mallory_super;
DROP FUNCTION public.regress_escalate();
DROP SCHEMA hr CASCADE;
DROP SCHEMA m CASCADE;
DROP ROLE regress_priv_reader;
DROP ROLE regress_temp_only;
DROP ROLE regress_mallory;
