-- the dependency closure: DDL that changes a doc without changing a row changes the fingerprint of
-- every query that can see it (types at any depth, enum labels, composite attributes, collations,
-- functions called through other functions, inheritance children, table rewrites), and raises the
-- definitions generation, so the worker recomputes those queries' live docs
\set VERBOSITY terse
SET synchronous_commit = on;

CREATE SCHEMA closure;
SET search_path = closure;
CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
CREATE TYPE point2 AS (x int, y int);
CREATE DOMAIN small AS int CHECK (VALUE < 1000);
CREATE TABLE t (id int PRIMARY KEY, n int, m mood, p point2, s small, label text);
INSERT INTO t VALUES (1, 1, 'ok', '(1,2)', 5, 'b'), (2, 2, 'sad', '(3,4)', 6, 'a');
CREATE TABLE parent (id int, v int);
CREATE TABLE child (id int, v int);
CREATE TABLE bystander (id int);
CREATE FUNCTION inner_f(int) RETURNS int LANGUAGE sql AS 'SELECT $1 + 1';
CREATE FUNCTION outer_plpgsql(int) RETURNS int LANGUAGE plpgsql AS 'BEGIN RETURN inner_f($1); END';
CREATE FUNCTION inner_atomic(int) RETURNS int LANGUAGE sql BEGIN ATOMIC SELECT $1 * 2; END;
CREATE FUNCTION outer_atomic(int) RETURNS int LANGUAGE sql BEGIN ATOMIC SELECT inner_atomic($1); END;

SELECT docsync.define_query('plain', 'SELECT to_jsonb(t.n) FROM t WHERE id = $1', params => ARRAY['id'], watches => 'manual');
SELECT docsync.define_query('mood', 'SELECT to_jsonb(t.m) FROM t WHERE id = $1', params => ARRAY['id'], watches => 'manual');
SELECT docsync.define_query('comp', 'SELECT to_jsonb(t.p) FROM t WHERE id = $1', params => ARRAY['id'], watches => 'manual');
SELECT docsync.define_query('dom', 'SELECT to_jsonb(t.s) FROM t WHERE id = $1', params => ARRAY['id'], watches => 'manual');
SELECT docsync.define_query('sorted', 'SELECT jsonb_agg(label ORDER BY label) FROM t WHERE id <> $1', params => ARRAY['id'], watches => 'manual');
SELECT docsync.define_query('via_plpgsql', 'SELECT to_jsonb(outer_plpgsql(n)) FROM t WHERE id = $1', params => ARRAY['id'], watches => 'manual');
SELECT docsync.define_query('via_atomic', 'SELECT to_jsonb(outer_atomic(n)) FROM t WHERE id = $1', params => ARRAY['id'], watches => 'manual');
SELECT docsync.define_query('tree', 'SELECT to_jsonb(count(*)) FROM parent WHERE id <> $1', params => ARRAY['id'], watches => 'manual');

CREATE TEMP TABLE fp AS SELECT name, docsync.fingerprint(name) AS f FROM docsync.query_defs;
CREATE TEMP TABLE gen AS SELECT generation AS g FROM docsync.def_generation;
-- the queries whose fingerprint changed since the last call, and whether the generation rose
CREATE FUNCTION pg_temp.changed() RETURNS text LANGUAGE sql AS $$
  WITH now AS (SELECT name, docsync.fingerprint(name) AS f FROM docsync.query_defs),
       diff AS (SELECT coalesce(string_agg(n.name, ',' ORDER BY n.name), '') AS names
                  FROM now n JOIN fp o USING (name) WHERE n.f IS DISTINCT FROM o.f),
       upd AS (UPDATE fp SET f = n.f FROM now n WHERE n.name = fp.name),
       bumped AS (SELECT (SELECT generation FROM docsync.def_generation) > (SELECT g FROM gen) AS b),
       upd2 AS (UPDATE gen SET g = (SELECT generation FROM docsync.def_generation))
  SELECT (SELECT names FROM diff) || CASE WHEN (SELECT b FROM bumped) THEN ' (generation raised)' ELSE '' END
$$;

-- a table rewrite with the same type: values change, no change is decoded
ALTER TABLE t ALTER COLUMN n TYPE int USING n + 10;
SELECT pg_temp.changed() AS same_type_rewrite;
-- an enum label renamed
ALTER TYPE mood RENAME VALUE 'ok' TO 'fine';
SELECT pg_temp.changed() AS enum_rename_value;
-- a composite type's attribute renamed, then one added
ALTER TYPE point2 RENAME ATTRIBUTE y TO z;
SELECT pg_temp.changed() AS composite_rename_attribute;
ALTER TYPE point2 ADD ATTRIBUTE w int;
SELECT pg_temp.changed() AS composite_add_attribute;
-- a domain's constraint
ALTER DOMAIN small ADD CONSTRAINT positive CHECK (VALUE > 0);
SELECT pg_temp.changed() AS domain_constraint;
-- a column's collation: an ordered array may change order
ALTER TABLE t ALTER COLUMN label TYPE text COLLATE "POSIX";
SELECT pg_temp.changed() AS column_collation;
-- a function called through a plpgsql function, and through a BEGIN ATOMIC one
CREATE OR REPLACE FUNCTION inner_f(int) RETURNS int LANGUAGE sql AS 'SELECT $1 + 2';
SELECT pg_temp.changed() AS through_plpgsql;
CREATE OR REPLACE FUNCTION inner_atomic(int) RETURNS int LANGUAGE sql BEGIN ATOMIC SELECT $1 * 3; END;
SELECT pg_temp.changed() AS through_atomic;
-- a table joining an inheritance tree
ALTER TABLE child INHERIT parent;
SELECT pg_temp.changed() AS inherit;
ALTER TABLE child NO INHERIT parent;
SELECT pg_temp.changed() AS no_inherit;
-- DDL on what no query reads changes no fingerprint but the opaque one's (a plpgsql body may read
-- anything, so the state of every table counts for it)
ALTER TABLE bystander ADD COLUMN v int;
SELECT pg_temp.changed() AS unrelated_table;
CREATE FUNCTION unrelated(int) RETURNS int LANGUAGE sql AS 'SELECT 1';
SELECT pg_temp.changed() AS unrelated_function;

-- what a query reads through names that an earlier schema of its search_path may take over, through
-- aggregates, materialized views, row security and text search
CREATE SCHEMA early;
CREATE FUNCTION add1(int, int) RETURNS int LANGUAGE sql IMMUTABLE BEGIN ATOMIC SELECT $1 + $2; END;
CREATE FUNCTION add100(int, int) RETURNS int LANGUAGE sql IMMUTABLE BEGIN ATOMIC SELECT $1 + 100 * $2; END;
CREATE AGGREGATE mysum(int) (sfunc = add1, stype = int, initcond = '0');
CREATE TABLE side (id int PRIMARY KEY, v int);
CREATE FUNCTION side_v(int) RETURNS int LANGUAGE sql STABLE AS 'SELECT v FROM closure.side WHERE id = $1';
CREATE MATERIALIZED VIEW mv AS SELECT id, n FROM t;
CREATE UNIQUE INDEX ON mv (id);
CREATE TABLE notes (id int, body text);
ALTER TABLE notes ENABLE ROW LEVEL SECURITY;
CREATE POLICY everyone ON notes USING (true);
-- read through a view, which reads it as the view's owner (the docs are computed as the definer's reader role,
-- to which the policies would apply)
CREATE VIEW notes_v WITH (security_barrier) AS SELECT id, body FROM notes;
CREATE TEXT SEARCH CONFIGURATION mycfg (COPY = simple);
SELECT docsync.drop_query(name) FROM docsync.query_defs ORDER BY name;
SELECT docsync.define_query('shadow', 'SELECT to_jsonb(x.n::small) FROM t x WHERE x.id = $1', params => ARRAY['id'],
                            search_path => 'early, closure', watches => 'manual');
SELECT docsync.define_query('agg', 'SELECT to_jsonb(mysum(n)) FROM t WHERE id <> $1', params => ARRAY['id'], watches => 'manual');
SELECT docsync.define_query('opaque', 'SELECT to_jsonb(side_v($1))', params => ARRAY['id'], watches => 'manual');
SELECT docsync.define_query('mat', 'SELECT to_jsonb(m.n) FROM mv m WHERE m.id = $1', params => ARRAY['id'], watches => 'manual');
SELECT docsync.define_query('rls', 'SELECT jsonb_agg(body) FROM notes_v WHERE id <> $1', params => ARRAY['id'], watches => 'manual');
SELECT docsync.define_query('ts', 'SELECT to_jsonb(to_tsvector(''mycfg'', label)) FROM t WHERE id = $1', params => ARRAY['id'], watches => 'manual');
TRUNCATE fp;
INSERT INTO fp SELECT name, docsync.fingerprint(name) FROM docsync.query_defs;
UPDATE gen SET g = (SELECT generation FROM docsync.def_generation);
-- command tags that create an object an earlier schema of the search_path resolves first
CREATE TABLE early.t AS SELECT 1 AS id, 2 AS n;
SELECT pg_temp.changed() AS create_table_as;
DROP TABLE early.t;
SELECT pg_temp.changed() AS drop_table;
SELECT 1 AS id, 2 AS n INTO early.t;
SELECT pg_temp.changed() AS select_into;
DROP TABLE early.t;
SELECT pg_temp.changed() AS drop_table;
CREATE DOMAIN early.small AS int CHECK (VALUE > 100);
SELECT pg_temp.changed() AS create_domain;
-- an aggregate replaced: another state function, then another initial state
CREATE OR REPLACE AGGREGATE mysum(int) (sfunc = add100, stype = int, initcond = '0');
SELECT pg_temp.changed() AS aggregate_sfunc;
CREATE OR REPLACE AGGREGATE mysum(int) (sfunc = add100, stype = int, initcond = '1000');
SELECT pg_temp.changed() AS aggregate_initcond;
-- ALTER ROUTINE on a function called
ALTER ROUTINE side_v(int) SET search_path = early;
SELECT pg_temp.changed() AS alter_routine;
-- a table read only through a string-bodied function, rewritten
ALTER TABLE side ALTER COLUMN v TYPE int USING v + 10;
SELECT pg_temp.changed() AS opaque_rewrite;
-- a concurrent refresh keeps the matview's storage
REFRESH MATERIALIZED VIEW CONCURRENTLY mv;
SELECT pg_temp.changed() AS refresh_concurrently;
-- a policy of a table read
ALTER POLICY everyone ON notes USING (id > 0);
SELECT pg_temp.changed() AS alter_policy;
ALTER TABLE notes FORCE ROW LEVEL SECURITY;
SELECT pg_temp.changed() AS force_rls;
-- a text search configuration
ALTER TEXT SEARCH CONFIGURATION mycfg ALTER MAPPING FOR asciiword WITH english_stem;
SELECT pg_temp.changed() AS ts_mapping;

-- a keys query that no longer analyses (a table it reads dropped, its watched table still there)
-- hashes its error beside what the query itself depends on, never instead of it: DDL on what the
-- query reads still changes its fingerprint
CREATE TABLE kside (id int PRIMARY KEY);
CREATE TABLE kside_keys (sid int, pid int);
CREATE TABLE kread (id int PRIMARY KEY, v int);
SELECT docsync.define_query('beside', 'SELECT to_jsonb(count(*)) FROM kread WHERE id <> $1', params => ARRAY['id'],
                            watches => 'manual');
SELECT docsync.watch('beside', 'kside', keys_sql => 'SELECT k.pid FROM kside_keys k WHERE k.sid = $1',
                     keys_args => ARRAY['id']) > 0 AS watched;
INSERT INTO fp VALUES ('beside', docsync.fingerprint('beside'));
SELECT pg_temp.changed() AS keys_watch_added;
DROP TABLE kside_keys;
SELECT pg_temp.changed() AS keys_table_dropped;
ALTER TABLE kread ADD COLUMN w int;
SELECT pg_temp.changed() AS beside_a_broken_keys_query;

SELECT docsync.drop_query(name) FROM docsync.query_defs ORDER BY name;
RESET search_path;
DROP SCHEMA closure CASCADE;
