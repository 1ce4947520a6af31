-- A compute runs with its definer's read rights only: the worker's pool role is a member of every
-- definer's reader role, and each compute starts with docsync.compute_as(reader, search_path),
-- which sets the role for the transaction and refuses any other role change in it. Run here as
-- the worker runs a compute: BEGIN READ ONLY; compute_as; the query; ROLLBACK.
\set VERBOSITY terse
\set SHOW_CONTEXT never
SET synchronous_commit = on;
SET client_min_messages = warning;

-- the secret: 99999 in hr.payroll and public.payroll, which regress_alice3 may read and defines
-- docs from, so that the pool holds grants on them; regress_mal may read neither
CREATE SCHEMA hr;
CREATE TABLE hr.payroll (id int PRIMARY KEY, salary int);
INSERT INTO hr.payroll VALUES (1, 99999);
CREATE TABLE public.payroll (id int PRIMARY KEY, salary int);
INSERT INTO public.payroll VALUES (1, 99999);
CREATE ROLE regress_alice3;
CREATE ROLE regress_mal;
GRANT docsync_admin TO regress_alice3, regress_mal;
GRANT USAGE ON SCHEMA hr TO regress_alice3;
GRANT SELECT ON hr.payroll, public.payroll TO regress_alice3;
CREATE SCHEMA mm AUTHORIZATION regress_mal;
CREATE SCHEMA regress_mal AUTHORIZATION regress_mal;
CREATE ROLE regress_cpool LOGIN;

SET ROLE regress_alice3;
SELECT docsync.define_query('pay', 'SELECT jsonb_agg(salary) FROM hr.payroll WHERE id = $1', params => ARRAY['id'], watches => 'manual');
SELECT docsync.define_query('pay2', 'SELECT jsonb_agg(salary) FROM public.payroll', watches => 'manual');
RESET ROLE;

-- mal's decoys, named like the secret, and a function of its own that reads the secret
SET ROLE regress_mal;
CREATE TABLE mm.payroll (id int PRIMARY KEY, salary int);
INSERT INTO mm.payroll VALUES (1, 1);
CREATE TABLE regress_mal.payroll (id int PRIMARY KEY, salary int);
INSERT INTO regress_mal.payroll VALUES (1, 2);
CREATE FUNCTION mm.peek() RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  RETURN (SELECT string_agg(salary::text, ',') FROM hr.payroll);
END
$$;
-- every search_path form: default, "$user", schemas without USAGE first, pg_temp (refused)
SELECT p AS search_path, docsync.define_query('mal' || n, 'SELECT jsonb_agg(salary) FROM payroll', search_path => p, watches => 'manual')
  FROM unnest(ARRAY['"$user", public', '"$user"', 'hr, mm', 'hr, "$user", public', 'mm']) WITH ORDINALITY AS u(p, n);
-- public.payroll, checked as mal, is refused
SELECT docsync.define_query('mal_public', 'SELECT jsonb_agg(salary) FROM payroll', search_path => 'public, mm', watches => 'manual');
CREATE TEMP TABLE payroll (id int, salary int);
SELECT docsync.define_query('mal_temp', 'SELECT jsonb_agg(salary) FROM payroll', search_path => 'hr', watches => 'manual');
SELECT docsync.define_query('mal_temp', 'SELECT jsonb_agg(salary) FROM payroll', search_path => 'pg_temp, mm', watches => 'manual');
DROP TABLE payroll;
RESET ROLE;

-- before grant_reader, no definer has a reader role: every query is refused, saying so
SELECT count(*) AS refused_for_no_reader FROM docsync.queries WHERE refused LIKE '%has no reader role yet%'
   AND name IN ('pay', 'mal1');
SELECT stmt FROM docsync.grant_reader('regress_cpool') AS g(stmt) ORDER BY 1;
SET ROLE regress_mal;
CREATE FUNCTION mm.become(r text) RETURNS text LANGUAGE sql SET role = 'docsync_reader_regress_alice3'
  AS 'SELECT string_agg(salary::text, '','') FROM hr.payroll';
RESET ROLE;
SELECT name, defined_by, search_path, reader_role, refused FROM docsync.queries
 WHERE name IN ('pay', 'pay2') OR name LIKE 'mal%' ORDER BY name;
SELECT q ->> 'name' AS name, q ->> 'reader_role' AS reader_role
  FROM jsonb_array_elements(docsync.worker_definitions() -> 'queries') q
 WHERE q ->> 'name' IN ('pay', 'mal1') ORDER BY 1;
-- the pool role holds no table itself, and a reader role no privilege of the pool's
SELECT has_table_privilege('regress_cpool', 'hr.payroll', 'SELECT') AS pool_reads_payroll,
       has_table_privilege('docsync_reader_regress_mal', 'hr.payroll', 'SELECT') AS mal_reads_payroll,
       has_table_privilege('docsync_reader_regress_alice3', 'hr.payroll', 'SELECT') AS alice_reads_payroll,
       pg_has_role('docsync_reader_regress_mal', 'regress_cpool', 'USAGE') AS mal_has_pool_rights;

-- every stored query of mal, computed as the worker computes it: nothing of the secret
CREATE TEMP TABLE defs AS
  SELECT x.name, x.sql, x.search_path, rr.reader FROM docsync.query_defs x
    JOIN docsync.reader_roles rr ON rr.definer = x.defined_by;
GRANT SELECT ON defs TO PUBLIC;
CREATE FUNCTION pg_temp.compute(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  d record;
  r text;
BEGIN
  SELECT x.sql, x.search_path, x.reader INTO d FROM pg_temp.defs x WHERE x.name = q;
  PERFORM docsync.compute_as(d.reader, d.search_path);
  EXECUTE d.sql INTO r;
  RETURN r;
END
$$;
-- one transaction per compute, as the worker runs them
BEGIN READ ONLY; SET LOCAL ROLE regress_cpool; SELECT 'mal1' AS query, (SELECT search_path FROM pg_temp.defs WHERE name = 'mal1'), pg_temp.compute('mal1') AS result; ROLLBACK;
BEGIN READ ONLY; SET LOCAL ROLE regress_cpool; SELECT 'mal2' AS query, (SELECT search_path FROM pg_temp.defs WHERE name = 'mal2'), pg_temp.compute('mal2') AS result; ROLLBACK;
BEGIN READ ONLY; SET LOCAL ROLE regress_cpool; SELECT 'mal3' AS query, (SELECT search_path FROM pg_temp.defs WHERE name = 'mal3'), pg_temp.compute('mal3') AS result; ROLLBACK;
BEGIN READ ONLY; SET LOCAL ROLE regress_cpool; SELECT 'mal4' AS query, (SELECT search_path FROM pg_temp.defs WHERE name = 'mal4'), pg_temp.compute('mal4') AS result; ROLLBACK;
BEGIN READ ONLY; SET LOCAL ROLE regress_cpool; SELECT 'mal5' AS query, (SELECT search_path FROM pg_temp.defs WHERE name = 'mal5'), pg_temp.compute('mal5') AS result; ROLLBACK;
-- alice's own query still reads her table ($1 unbound: its plan shows it reads it, as alice's reader)
BEGIN READ ONLY;
SET LOCAL ROLE regress_cpool;
SELECT docsync.compute_as('docsync_reader_regress_alice3', 'public, pg_temp');
SELECT jsonb_agg(salary) AS alice_reads FROM hr.payroll WHERE id = 1;
ROLLBACK;

-- SQL run at runtime: dynamic SQL, a regclass, a function of mal's own, all as mal's reader
\set mal 'BEGIN READ ONLY; SET LOCAL ROLE regress_cpool; SELECT docsync.compute_as(''docsync_reader_regress_mal'', ''mm, pg_temp'');'
:mal SELECT query_to_xml('SELECT * FROM hr.payroll', true, false, ''); ROLLBACK;
:mal SELECT table_to_xml('hr.payroll'::regclass, true, false, ''); ROLLBACK;
:mal SELECT ts_stat('SELECT to_tsvector(salary::text) FROM public.payroll'); ROLLBACK;
:mal SELECT mm.peek(); ROLLBACK;
-- a compute cannot change its role: SET ROLE, RESET ROLE, set_config, a function's SET clause,
-- compute_as again
:mal SET ROLE docsync_reader_regress_alice3; ROLLBACK;
:mal RESET ROLE; ROLLBACK;
:mal SELECT set_config('role', 'docsync_reader_regress_alice3', true); ROLLBACK;
:mal DO $$BEGIN EXECUTE 'SET LOCAL ROLE regress_cpool'; END$$; ROLLBACK;
:mal SELECT mm.become('x'); ROLLBACK;
:mal SELECT docsync.compute_as('docsync_reader_regress_alice3', NULL); ROLLBACK;
-- nor signal the pool's other sessions: it holds none of the pool role's rights
:mal SELECT pg_cancel_backend(pg_backend_pid()); ROLLBACK;
-- compute_as only in a transaction block, only to a docsync reader role
SELECT docsync.compute_as('docsync_reader_regress_mal', NULL);
BEGIN; SELECT docsync.compute_as('regress_alice3', NULL); ROLLBACK;

-- generated: every function PUBLIC may run that takes a SQL string (an argument named query or
-- sql) or a relation (regclass, or a cursor over one), called on the secret as mal's reader
CREATE TEMP TABLE probes AS
  SELECT p.oid::regprocedure AS fn,
         format('SELECT %s(%s)::text', p.oid::regproc::text,
                (SELECT string_agg(CASE t.typ
                                     WHEN 'regclass'::regtype THEN '''hr.payroll''::regclass'
                                     WHEN 'refcursor'::regtype THEN '''regress_c''::refcursor'
                                     WHEN 'boolean'::regtype THEN 'true'
                                     WHEN 'name'::regtype THEN '''hr''::name'
                                     WHEN 'integer'::regtype THEN '1'
                                     ELSE '''SELECT * FROM hr.payroll''::text' END, ', ' ORDER BY t.ord)
                   FROM unnest(p.proargtypes::regtype[]) WITH ORDINALITY AS t(typ, ord))) AS call
    FROM pg_proc p
   WHERE has_function_privilege('public', p.oid, 'EXECUTE') AND p.prokind = 'f' AND NOT p.proretset
     AND p.pronargs > 0
     AND p.proargtypes::regtype[] <@ ARRAY['regclass', 'refcursor', 'boolean', 'name', 'integer', 'text']::regtype[]
     AND (p.proargtypes::regtype[] && ARRAY['regclass', 'refcursor']::regtype[]
          OR EXISTS (SELECT FROM unnest(p.proargnames) a WHERE a IN ('query', 'sql')));
INSERT INTO probes VALUES ('ts_stat(text)'::regprocedure, 'SELECT array_agg(t)::text FROM ts_stat(''SELECT to_tsvector(salary::text) FROM hr.payroll'') t');
GRANT SELECT ON probes TO PUBLIC;
SELECT count(*) > 10 AS many_probes,
       bool_or(fn::text LIKE 'query_to_xml(%') AND bool_or(fn::text LIKE 'table_to_xml(%')
         AND bool_or(fn::text LIKE 'cursor_to_xml(%') AS the_known_ones
  FROM probes;
CREATE FUNCTION pg_temp.leaks() RETURNS text[] LANGUAGE plpgsql AS $$
DECLARE
  p record;
  r text;
  found text[] := '{}';
BEGIN
  FOR p IN SELECT * FROM pg_temp.probes ORDER BY fn::text LOOP
    BEGIN
      BEGIN
        EXECUTE 'DECLARE regress_c CURSOR FOR SELECT * FROM hr.payroll';
      EXCEPTION WHEN OTHERS THEN
        NULL;
      END;
      EXECUTE p.call INTO r;
      IF r LIKE '%99999%' THEN
        found := found || p.fn::text;
      END IF;
    EXCEPTION WHEN OTHERS THEN
      NULL;
    END;
  END LOOP;
  RETURN found;
END
$$;
BEGIN READ ONLY;
SET LOCAL ROLE regress_cpool;
SELECT docsync.compute_as('docsync_reader_regress_mal', 'mm, pg_temp');
SELECT pg_temp.leaks() AS leaked;
ROLLBACK;
-- the same probes with the grants the one pool role held before reader roles (here alice's
-- reader's, which is what it held for alice's queries) do find the secret: the probes can fail
BEGIN READ ONLY;
SET LOCAL ROLE docsync_reader_regress_alice3;
SELECT cardinality(pg_temp.leaks()) > 5 AS probes_find_the_secret_with_the_union;
ROLLBACK;

-- revoke_reader takes back the pool's memberships; DROP EXTENSION (29_sqlapi_guest) the roles
SELECT stmt FROM docsync.revoke_reader('regress_cpool') AS r(stmt) ORDER BY 1;
SELECT pg_has_role('regress_cpool', 'docsync_reader_regress_mal', 'MEMBER') AS pool_still_member;

-- clean up
SELECT docsync.drop_query(name) FROM docsync.query_defs WHERE name IN ('pay', 'pay2') OR name LIKE 'mal%';
DELETE FROM docsync.reader_roles WHERE definer IN ('regress_alice3', 'regress_mal');
DROP TABLE public.payroll;
DROP SCHEMA hr CASCADE;
DROP SCHEMA mm CASCADE;
DROP SCHEMA regress_mal CASCADE;
DROP OWNED BY docsync_reader_regress_alice3, docsync_reader_regress_mal;
DROP ROLE docsync_reader_regress_alice3, docsync_reader_regress_mal;
DROP ROLE regress_cpool, regress_alice3, regress_mal;
