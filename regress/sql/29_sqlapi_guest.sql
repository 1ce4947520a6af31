-- docsync as a guest in the customer's database: watches are kept by name and resolved in this
-- database, renames are followed from the statement, names that no longer resolve are reported and
-- never remapped, docsync's tables stay out of logical replication's apply, and nothing runs for
-- PUBLIC but what is meant for everyone.
\set SHOW_CONTEXT never
SET client_min_messages = warning;
CREATE SCHEMA guest;
SET search_path = guest, public;
CREATE FUNCTION pg_temp.generation() RETURNS bigint LANGUAGE sql AS 'SELECT generation FROM docsync.def_generation';

-- a table with a dropped column: id is attnum 2 here, but the watch names it
CREATE TABLE owners (legacy int, id int PRIMARY KEY, owner_id int, name text);
ALTER TABLE owners DROP COLUMN legacy;
ALTER TABLE owners REPLICA IDENTITY FULL;
SELECT docsync.define_query('own', 'SELECT to_jsonb(o) FROM guest.owners o WHERE o.id = $1 AND o.owner_id = $2',
                            params => ARRAY['id', 'owner']);
SELECT docsync.watch('own', 'owners', params => ARRAY['id', 'owner_id']) > 0 AS watched;
SELECT table_schema, table_name, columns, attnums, problem FROM docsync.watches WHERE query = 'own';
SELECT docsync.plugin_tables() LIKE '%' || 'guest.owners'::regclass::oid || '(2,3)%' AS option_names_id_and_owner_id;

-- renames are followed by name: a column, the table, SET SCHEMA (qualified or not), the schema
ALTER TABLE owners RENAME COLUMN owner_id TO holder_id;
ALTER TABLE owners RENAME TO holders;
CREATE SCHEMA guest2;
ALTER TABLE holders SET SCHEMA guest2;
SELECT table_schema, table_name, columns, attnums, problem FROM docsync.watches WHERE query = 'own';
ALTER TABLE guest2.holders SET SCHEMA guest;
ALTER SCHEMA guest RENAME TO guest_renamed;
SELECT table_schema, table_name, columns, attnums, problem FROM docsync.watches WHERE query = 'own';
ALTER SCHEMA guest_renamed RENAME TO guest;
-- renaming a column of another table with the same column name touches no watch
CREATE TABLE bystander (id int PRIMARY KEY, holder_id int);
ALTER TABLE bystander RENAME COLUMN holder_id TO other;
SELECT columns FROM docsync.watches WHERE query = 'own';

-- unseen by the event triggers (session_replication_role = replica): a dropped table and a renamed
-- column leave watches that do not resolve; they are reported everywhere, and never used
CREATE TABLE r1 (id int PRIMARY KEY);
CREATE TABLE r2 (id int PRIMARY KEY, c int, d int);
ALTER TABLE r2 REPLICA IDENTITY FULL;
SELECT docsync.define_query('r', 'SELECT to_jsonb($1::int)', params => ARRAY['id']);
SELECT docsync.watch('r', 'r1', params => ARRAY['id']) > 0 AS watched;
SELECT docsync.watch('r', 'r2', params => ARRAY['c']) > 0 AS watched;
SET session_replication_role = replica;
DROP TABLE r1;
ALTER TABLE r2 RENAME COLUMN c TO c_old;
SELECT docsync.watch('r', 'r2', params => ARRAY['id']) > 0 AS api_works_under_replica_role;
RESET session_replication_role;
SELECT table_name, columns, attnums, problem FROM docsync.watches WHERE query = 'r' ORDER BY id;
SELECT name, warning FROM docsync.watched_tables WHERE name IN ('r1', 'r2') ORDER BY name;
SELECT warning FROM docsync.queries WHERE name = 'r';
SELECT jsonb_path_query_array(d, '$.unresolved[*].problem') IS NOT NULL AS listed,
       jsonb_array_length(d -> 'unresolved') AS unresolved,
       (SELECT count(*) FROM jsonb_array_elements(d -> 'watches') w WHERE w ->> 'query' = 'r') AS used
  FROM docsync.worker_definitions() d;
SELECT docsync.plugin_tables() LIKE '%' || 'guest.r2'::regclass::oid || '(1)%' AS option_has_only_resolved_r2;
-- a dangling watch is removed by the name it had
SELECT docsync.unwatch('r', 'guest.r1') AS removed;
SELECT docsync.unwatch('r', 'r2', params => ARRAY['c']) AS removed;
SELECT count(*) AS dangling_left FROM docsync.watches WHERE problem IS NOT NULL;

-- dropping a watched column or table removes its watches, matched by name
SELECT docsync.watch('r', 'r2', params => ARRAY['d']) > 0 AS watched;
ALTER TABLE r2 DROP COLUMN d;
SELECT count(*) AS r_watches_left FROM docsync.watches WHERE query = 'r';
DROP TABLE r2;
SELECT count(*) AS r_watches_left FROM docsync.watches WHERE query = 'r';

-- DDL on temporary objects, GRANT, COMMENT and CREATE INDEX never raise the generation
SELECT pg_temp.generation() AS g0 \gset
CREATE TEMP TABLE scratch (id int PRIMARY KEY, v text);
ALTER TABLE scratch ADD COLUMN w int;
DROP TABLE scratch;
GRANT SELECT ON holders TO PUBLIC;
COMMENT ON TABLE holders IS 'x';
CREATE INDEX ON holders (name);
SELECT pg_temp.generation() = :g0 AS unchanged;
-- and DDL on temporary objects runs no SQL of docsync's: only the C event trigger functions are called
BEGIN;
SET LOCAL track_functions = 'all';
CREATE TEMP TABLE scratch2 (id int PRIMARY KEY, v text);
ALTER TABLE scratch2 RENAME COLUMN v TO w;
ALTER TABLE scratch2 RENAME TO scratch3;
DROP TABLE scratch3;
SELECT funcname, calls FROM pg_stat_xact_user_functions WHERE schemaname = 'docsync' ORDER BY funcname;
-- while a rename of a persistent table runs the rename follower, once
ALTER TABLE holders RENAME COLUMN name TO title;
SELECT funcname, calls FROM pg_stat_xact_user_functions WHERE schemaname = 'docsync' ORDER BY funcname;
COMMIT;
-- DDL in a serializable transaction raises the generation without error (the two-session cases are
-- in tests/scenarios/sql_good_guest.sh)
BEGIN ISOLATION LEVEL SERIALIZABLE;
ALTER TABLE holders ADD COLUMN y1 int;
COMMIT;
SELECT pg_temp.generation() > :g0 AS bumped;

-- docsync's own tables skip rows only inside logical replication workers; their REPLICA triggers
SELECT c.relname, t.tgname, t.tgenabled
  FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
 WHERE c.relnamespace = 'docsync'::regnamespace AND t.tgname = 'skip_replicated' ORDER BY 1;

-- what PUBLIC may execute: docsync.channel(), the API (which refuses non-admins, saying why),
-- docsync.wait_published (which reveals only positions) and docsync.install_kind()
SELECT p.oid::regprocedure AS public_functions
  FROM pg_proc p
 WHERE p.pronamespace = 'docsync'::regnamespace AND has_function_privilege('public', p.oid, 'EXECUTE')
 ORDER BY p.oid::regprocedure::text;

-- the extension tells itself from the portable install (docs/portable.md)
SELECT docsync.install_kind();
CREATE ROLE regress_guest_monitor IN ROLE pg_monitor;
SET ROLE regress_guest_monitor;
SELECT docsync.analyze_query('SELECT 1');
SELECT count(*) >= 0 AS reads_status FROM docsync.status;
RESET ROLE;
DROP ROLE regress_guest_monitor;

SELECT docsync.drop_query('own');
SELECT docsync.drop_query('r');
RESET search_path;
DROP SCHEMA guest, guest2 CASCADE;
