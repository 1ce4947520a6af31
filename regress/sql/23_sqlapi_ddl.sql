-- definitions generation: raised by definition changes and by DDL that can change what a doc query
-- reads, without locking any row; renames of watched columns followed
\set VERBOSITY default
\set SHOW_CONTEXT never
SET synchronous_commit = on;

CREATE SCHEMA ddl;
SET search_path = ddl;
CREATE TABLE items (id int PRIMARY KEY, owner_id int, label text);
ALTER TABLE items REPLICA IDENTITY FULL;
CREATE TABLE bystander (id int PRIMARY KEY);
CREATE TABLE parts (id int, k int, owner_id int) PARTITION BY LIST (k);
CREATE TABLE parts_1 PARTITION OF parts FOR VALUES IN (1);
ALTER TABLE parts_1 REPLICA IDENTITY FULL;

CREATE TEMP TABLE gen AS SELECT generation AS g FROM docsync.def_generation;
CREATE FUNCTION pg_temp.bumped() RETURNS boolean LANGUAGE sql AS $$
  WITH cur AS (SELECT generation FROM docsync.def_generation),
       old AS (SELECT g FROM gen),
       upd AS (UPDATE gen SET g = (SELECT generation FROM cur))
  SELECT (SELECT generation FROM cur) > (SELECT g FROM old)
$$;

SELECT docsync.define_query('owner', 'SELECT to_jsonb(count(*)) FROM items WHERE owner_id = $1', params => ARRAY['owner_id'], watches => 'manual');
SELECT pg_temp.bumped() AS define_bumps;
SELECT docsync.watch('owner', 'items', params => ARRAY['owner_id']) > 0;
SELECT pg_temp.bumped() AS watch_bumps;
SELECT docsync.watch('owner', 'parts', params => ARRAY['owner_id']) > 0;
SELECT pg_temp.bumped() AS watch_bumps;

-- DDL on an unwatched table raises it too: a doc query may read the table (the worker compares each
-- query's fingerprint and recomputes only what changed); temporary tables, GRANT and COMMENT do not
ALTER TABLE bystander ADD COLUMN v text;
SELECT pg_temp.bumped() AS unwatched_ddl_bumps;
ALTER TABLE bystander DROP COLUMN v;
SELECT pg_temp.bumped() AS unwatched_drop_column_bumps;
CREATE TEMP TABLE scratch (id int);
ALTER TABLE scratch ADD COLUMN v int;
DROP TABLE scratch;
GRANT SELECT ON bystander TO PUBLIC;
REVOKE SELECT ON bystander FROM PUBLIC;
COMMENT ON TABLE bystander IS 'not watched';
SELECT pg_temp.bumped() AS temp_grant_comment_bumps;

-- altering, renaming a column, renaming the table: bumped, and the watch follows
ALTER TABLE items ADD COLUMN extra int;
SELECT pg_temp.bumped() AS alter_bumps;
ALTER TABLE items RENAME COLUMN owner_id TO holder_id;
SELECT pg_temp.bumped() AS rename_column_bumps;
ALTER TABLE items RENAME TO things;
SELECT pg_temp.bumped() AS rename_table_bumps;
SELECT "table", columns, attnums FROM docsync.watches ORDER BY id;
SELECT w ->> 'table' AS "table", w -> 'columns' AS columns
  FROM jsonb_array_elements(docsync.worker_definitions() -> 'watches') w ORDER BY 1;
-- the doc query still names the old table: docsync.queries says so
SELECT name, warning FROM docsync.queries;
SELECT docsync.define_query('owner', 'SELECT to_jsonb(count(*)) FROM things WHERE holder_id = $1',
                            params => ARRAY['owner_id'], or_replace => true, watches => 'manual');
SELECT name, warning FROM docsync.queries;

-- replica identity and indexes of a watched table, DDL on a partition of one
ALTER TABLE things REPLICA IDENTITY DEFAULT;
SELECT pg_temp.bumped() AS replica_identity_bumps;
SELECT name, warning FROM docsync.watched_tables ORDER BY name;
CREATE INDEX ON things (label);
SELECT pg_temp.bumped() AS create_index_bumps;
ALTER TABLE parts_1 REPLICA IDENTITY DEFAULT;
SELECT pg_temp.bumped() AS partition_ddl_bumps;
CREATE TABLE parts_2 PARTITION OF parts FOR VALUES IN (2);
SELECT pg_temp.bumped() AS new_partition_bumps;

-- dropping a mapped column or a watched table removes the watches it broke, with a warning
ALTER TABLE things DROP COLUMN extra;
SELECT count(*) AS watches_kept FROM docsync.watch_defs;
ALTER TABLE things DROP COLUMN holder_id;
SELECT pg_temp.bumped() AS drop_column_bumps;
DROP TABLE parts;
SELECT pg_temp.bumped() AS drop_table_bumps;
SELECT count(*) AS watches_left FROM docsync.watch_defs;

-- a row change or TRUNCATE of a definition table bumps it too
SELECT docsync.watch('owner', 'bystander', params => ARRAY['id']) > 0;
SELECT pg_temp.bumped();
TRUNCATE docsync.watch_defs;
SELECT pg_temp.bumped() AS truncate_bumps;

-- DDL by a table owner who is no docsync admin is followed just the same
CREATE ROLE regress_ddl_owner;
GRANT USAGE, CREATE ON SCHEMA ddl TO regress_ddl_owner;
CREATE TABLE owned (id int PRIMARY KEY, k int);
ALTER TABLE owned OWNER TO regress_ddl_owner;
SELECT docsync.watch('owner', 'owned', params => ARRAY['id']) > 0;
SELECT pg_temp.bumped();
SET ROLE regress_ddl_owner;
ALTER TABLE owned RENAME COLUMN id TO ident;
RESET ROLE;
SELECT pg_temp.bumped() AS owner_ddl_bumps;
SELECT columns FROM docsync.watches WHERE "table" = 'owned'::regclass;
SET ROLE regress_ddl_owner;
DROP TABLE owned;
RESET ROLE;
SELECT count(*) AS owned_watches FROM docsync.watch_defs WHERE query = 'owner' AND columns = '{ident}';
REVOKE ALL ON SCHEMA ddl FROM regress_ddl_owner;
DROP ROLE regress_ddl_owner;

-- the generation is a sequence read through a view: nobody edits it by hand
DELETE FROM docsync.def_generation;

SELECT docsync.drop_query('owner');
DROP SCHEMA ddl CASCADE;
RESET search_path;
