-- Keys are checked again after DDL: a column migrated to a type or a collation that cannot name docs,
-- or an attribute of such a type added to a composite key type, refuses the definition
-- (docsync.refusal, the "refused" the worker reads in worker_definitions), naming the reason;
-- a watch of the query's definer refuses the query, the same watch of another definer is set aside.
\set VERBOSITY terse
SET synchronous_commit = on;
SET client_min_messages = warning;

CREATE SCHEMA krecheck;
SET search_path = krecheck;
CREATE COLLATION krecheck.ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
CREATE TYPE code AS (a int, b text);
CREATE TABLE acc (id int PRIMARY KEY, n int NOT NULL);
CREATE TABLE named (id int PRIMARY KEY, name text NOT NULL, n int NOT NULL);
ALTER TABLE named REPLICA IDENTITY FULL;
CREATE TABLE coded (id int PRIMARY KEY, c code NOT NULL, n int NOT NULL);
CREATE TABLE src (id int PRIMARY KEY, acc_id int NOT NULL, name text NOT NULL);
SELECT docsync.define_query('acc', 'SELECT jsonb_build_object(''n'', n) FROM acc WHERE id = $1', params => ARRAY['id'], watches => 'manual');
SELECT docsync.watch('acc', 'acc', params => ARRAY['id']) > 0 AS watched;
SELECT docsync.define_query('named', 'SELECT jsonb_build_object(''n'', n) FROM named WHERE name = $1', params => ARRAY['name'], watches => 'manual');
SELECT docsync.define_query('coded', 'SELECT jsonb_build_object(''n'', n) FROM coded WHERE c = $1::code', params => ARRAY['c'], watches => 'manual');
SELECT docsync.define_query('bytext', 'SELECT to_jsonb($1::text)', params => ARRAY['name'], watches => 'manual');
SELECT docsync.watch('bytext', 'named', params => ARRAY['name']) > 0 AS watched_direct;
SELECT docsync.watch('bytext', 'src', keys_sql => 'SELECT name FROM krecheck.src WHERE id = $1',
                     keys_args => ARRAY['id']) > 0 AS watched_keys;
SELECT name, docsync.refusal(name) FROM docsync.query_defs WHERE name IN ('acc', 'named', 'coded', 'bytext') ORDER BY name;

-- the migrations; each reloads the worker's definitions (the generation rises)
SELECT generation AS gen_before FROM docsync.def_generation \gset
ALTER TABLE acc ALTER COLUMN id TYPE numeric;
SELECT generation > :gen_before AS reloads_after_type_change FROM docsync.def_generation;
SELECT generation AS gen_before FROM docsync.def_generation \gset
ALTER TABLE named ALTER COLUMN name TYPE text COLLATE ci;
ALTER TYPE code ADD ATTRIBUTE price numeric;
SELECT generation > :gen_before AS reloads_after_collation_and_attribute FROM docsync.def_generation;
SELECT name, docsync.refusal(name) FROM docsync.query_defs WHERE name IN ('acc', 'named', 'coded', 'bytext') ORDER BY name;
-- the worker is told: worker_definitions carries the reason, and no batched form
SELECT d->>'name' AS name, d->>'refused' LIKE '%cannot name docs%' AS refused, d->'batch_sql' = 'null' AS no_batch
  FROM jsonb_array_elements(docsync.worker_definitions()->'queries') d
 WHERE d->>'name' IN ('acc', 'named', 'coded', 'bytext') ORDER BY 1;
-- the keys query's column made nondeterministic alone: the watch's own reason
ALTER TABLE named ALTER COLUMN name TYPE text COLLATE "default";
SELECT docsync.refusal('bytext');
ALTER TABLE src ALTER COLUMN name TYPE text COLLATE ci;
SELECT docsync.refusal('bytext');
-- migrated back: accepted again
ALTER TABLE src ALTER COLUMN name TYPE text COLLATE "default";
ALTER TABLE acc ALTER COLUMN id TYPE int;
ALTER TYPE code DROP ATTRIBUTE price;
SELECT name, docsync.refusal(name) FROM docsync.query_defs WHERE name IN ('acc', 'named', 'coded', 'bytext') ORDER BY name;

SELECT docsync.drop_query(name) FROM docsync.query_defs WHERE name IN ('acc', 'named', 'coded', 'bytext') ORDER BY name;
DROP SCHEMA krecheck CASCADE;
RESET client_min_messages;
RESET search_path;
