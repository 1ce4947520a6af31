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
SELECT docsync.define_query('mi', 'SELECT to_jsonb(i) FROM m.items i WHERE i.id = $1', params => ARRAY['id'], watches => 'manual');
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
SELECT docsync.define_query('dom', $$SELECT to_jsonb(cardinality('{1}'::pg_temp.d[]))$$, watches => 'manual');
--    and a pg_temp search_path before other schemas is refused
SELECT docsync.define_query('tmp', 'SELECT to_jsonb(1)', search_path => 'pg_temp, public', watches => 'manual');
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

--    a definer's text is analysed as that definer even when another role adds a watch to its query
--    (the key types are checked then): a domain's CHECK records who runs it
CREATE TABLE public.regress_seen (who name);
GRANT INSERT ON public.regress_seen TO PUBLIC;
SET ROLE regress_mallory;
CREATE FUNCTION m.note(int) RETURNS boolean LANGUAGE sql
  AS 'INSERT INTO public.regress_seen VALUES (current_user); SELECT true';
CREATE DOMAIN m.d AS int CHECK (m.note(VALUE));
SELECT docsync.define_query('noted', $$SELECT to_jsonb(cardinality('{1}'::m.d[]) + $1::int)$$, params => ARRAY['id'], watches => 'manual');
RESET ROLE;
SELECT docsync.watch('noted', 'm.items', params => ARRAY['id']) > 0 AS watched_by_a_superuser;
SELECT DISTINCT who FROM public.regress_seen ORDER BY who;
SELECT docsync.drop_query('noted');
DROP TABLE public.regress_seen;
DROP DOMAIN m.d;
DROP FUNCTION m.note(int);

-- 3. what is checked is what runs. The pool role (here regress_pool, holding what another definer
--    needs: hr.payroll) runs the stored text under the stored search_path; mallory may not read
--    hr.payroll, so nothing it runs may read it.
INSERT INTO hr.payroll VALUES (1, 99999);
CREATE ROLE regress_pool;
GRANT USAGE ON SCHEMA hr, m TO regress_pool;
GRANT SELECT ON hr.payroll TO regress_pool;
CREATE SCHEMA regress_mallory AUTHORIZATION regress_mallory;
CREATE TABLE public.bonus (id int, salary int);
INSERT INTO public.bonus VALUES (1, 88888);
GRANT SELECT ON public.bonus TO regress_pool;
-- runs a stored doc query as the pool would: its search_path, its SQL
CREATE FUNCTION pg_temp.run_as_pool(q text) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  d docsync.query_defs;
  r jsonb;
BEGIN
  SELECT * INTO d FROM docsync.query_defs x WHERE x.name = q;
  PERFORM set_config('search_path', d.search_path, true);
  SET LOCAL ROLE regress_pool;
  EXECUTE d.sql INTO r;
  RESET ROLE;
  PERFORM set_config('search_path', 'public', true);
  RETURN r;
EXCEPTION WHEN OTHERS THEN
  RETURN to_jsonb(SQLERRM);
END
$$;
SET ROLE regress_mallory;
CREATE TABLE m.payroll (id int, salary int);
INSERT INTO m.payroll VALUES (1, 1);
CREATE TABLE regress_mallory.bonus (id int, salary int);
INSERT INTO regress_mallory.bonus VALUES (1, 2);
GRANT USAGE ON SCHEMA regress_mallory TO regress_pool;
GRANT SELECT ON m.payroll, regress_mallory.bonus TO regress_pool;
--    a. a schema the definer may not use, first on its path: checked m.payroll, ran hr.payroll
SELECT docsync.define_query('v_path', 'SELECT jsonb_agg(salary) FROM payroll', search_path => 'hr, m', watches => 'manual');
--    b. a temporary table named like the secret one: checked pg_temp.payroll, ran m.payroll or hr's
CREATE TEMP TABLE payroll (id int, salary int);
SELECT docsync.define_query('v_temp', 'SELECT jsonb_agg(salary) FROM payroll', search_path => 'hr', watches => 'manual');
DROP TABLE payroll;
--    c. the default "$user", public: checked regress_mallory.bonus, ran public.bonus
SELECT docsync.define_query('v_user', 'SELECT jsonb_agg(salary) FROM bonus', search_path => '"$user", public', watches => 'manual');
RESET ROLE;
SELECT name, search_path, refused FROM docsync.queries WHERE name LIKE 'v\_%' ORDER BY name;
SELECT pg_temp.run_as_pool('v_path') AS v_path, pg_temp.run_as_pool('v_user') AS v_user;
--    d. a definer that loses USAGE on its schema after defining: refused, for doc and keys queries
GRANT USAGE ON SCHEMA hr TO regress_mallory;
GRANT SELECT ON hr.payroll TO regress_mallory;
SET ROLE regress_mallory;
SELECT docsync.define_query('v_revoked', 'SELECT jsonb_agg(salary) FROM payroll WHERE id = $1',
                            params => ARRAY['id'], search_path => 'hr', watches => 'manual');
SELECT docsync.define_query('v_keys', 'SELECT to_jsonb($1::int)', params => ARRAY['id'], search_path => 'hr', watches => 'manual');
SELECT docsync.watch('v_keys', 'm.items',
                     keys_sql => 'SELECT id FROM payroll WHERE id = $1', keys_args => ARRAY['id']) > 0 AS keys_watched;
RESET ROLE;
SELECT name, refused FROM docsync.queries WHERE name IN ('v_revoked', 'v_keys') ORDER BY name;
REVOKE USAGE ON SCHEMA hr FROM regress_mallory;
SELECT name, refused IS NOT NULL AS refused, refused FROM docsync.queries WHERE name IN ('v_revoked', 'v_keys') ORDER BY name;
SELECT q ->> 'name' AS name, q ->> 'refused' IS NOT NULL AS refused
  FROM jsonb_array_elements(docsync.worker_definitions() -> 'queries') q WHERE q ->> 'name' IN ('v_revoked', 'v_keys')
 ORDER BY 1;
--    a refusal fails closed: a query that no longer analyses as its definer is refused, with why
ALTER TABLE m.payroll RENAME TO payroll_old;
SELECT name, refused FROM docsync.queries WHERE name = 'v_path';
ALTER TABLE m.payroll_old RENAME TO payroll;
SELECT docsync.drop_query(name) FROM docsync.query_defs WHERE name LIKE 'v\_%';
REVOKE SELECT ON hr.payroll FROM regress_mallory;
DROP FUNCTION pg_temp.run_as_pool(text);
DROP TABLE public.bonus;
DROP SCHEMA regress_mallory CASCADE;
DROP OWNED BY regress_pool;
DROP ROLE regress_pool;

-- clean up
SELECT docsync.drop_query('mi');
DROP VIEW public.regress_mallory_super;
DROP FUNCTION public.regress_escalate();
DROP SCHEMA hr CASCADE;
DROP SCHEMA m CASCADE;
SELECT count(*) > 0 AS revoked FROM docsync.revoke_reader('regress_priv_reader');
DROP ROLE regress_priv_reader;
DROP ROLE regress_temp_only;
DROP ROLE regress_mallory;
