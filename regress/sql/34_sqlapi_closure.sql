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

SELECT docsync.define_query('plain', 'SELECT to_jsonb(t.n) FROM t WHERE id = $1', params => ARRAY['id']);
SELECT docsync.define_query('mood', 'SELECT to_jsonb(t.m) FROM t WHERE id = $1', params => ARRAY['id']);
SELECT docsync.define_query('comp', 'SELECT to_jsonb(t.p) FROM t WHERE id = $1', params => ARRAY['id']);
SELECT docsync.define_query('dom', 'SELECT to_jsonb(t.s) FROM t WHERE id = $1', params => ARRAY['id']);
SELECT docsync.define_query('sorted', 'SELECT jsonb_agg(label ORDER BY label) FROM t WHERE id <> $1', params => ARRAY['id']);
SELECT docsync.define_query('via_plpgsql', 'SELECT to_jsonb(outer_plpgsql(n)) FROM t WHERE id = $1', params => ARRAY['id']);
SELECT docsync.define_query('via_atomic', 'SELECT to_jsonb(outer_atomic(n)) FROM t WHERE id = $1', params => ARRAY['id']);
SELECT docsync.define_query('tree', 'SELECT to_jsonb(count(*)) FROM parent WHERE id <> $1', params => ARRAY['id']);

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
-- DDL on what no query reads changes no fingerprint but the opaque one's (a plpgsql body may read anything)
ALTER TABLE bystander ADD COLUMN v int;
SELECT pg_temp.changed() AS unrelated_table;
CREATE FUNCTION unrelated(int) RETURNS int LANGUAGE sql AS 'SELECT 1';
SELECT pg_temp.changed() AS unrelated_function;

SELECT docsync.drop_query(name) FROM docsync.query_defs ORDER BY name;
RESET search_path;
DROP SCHEMA closure CASCADE;
