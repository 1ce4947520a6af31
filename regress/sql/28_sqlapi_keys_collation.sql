-- A nondeterministic collation the doc query compares a param under refuses the param, wherever the
-- collation comes from (the column's declared collation, COLLATE in the query, a domain) and wherever
-- the comparison is (WHERE, IN, a row comparison, a sublink, a CTE, a subquery); a keys query's
-- result column under such a collation is refused as a key. analyze_query reports both.
\set VERBOSITY terse
SET synchronous_commit = on;
SET client_min_messages = warning;

CREATE SCHEMA kcoll;
SET search_path = kcoll;
CREATE COLLATION kcoll.ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
CREATE COLLATION kcoll.exact (provider = icu, locale = 'und', deterministic = true);
CREATE TABLE people (id int PRIMARY KEY, name text COLLATE ci NOT NULL, n int NOT NULL);
CREATE TABLE plain (id int PRIMARY KEY, name text NOT NULL, n int NOT NULL);

-- what analyze_query reports: the collation each param is compared under, when nondeterministic
SELECT param_collations, result_collations
  FROM docsync.analyze_query('SELECT jsonb_build_object(''n'', n) FROM people WHERE name = $1');
SELECT q, (docsync.analyze_query(q)).param_collations FROM (VALUES
  ('SELECT 1 FROM plain WHERE name = $1 COLLATE ci'),
  ('SELECT 1 FROM plain WHERE name = $1 COLLATE exact'),
  ('SELECT 1 FROM plain WHERE name = $1'),
  ('SELECT 1 FROM people WHERE id = $1'),
  ('SELECT 1 FROM people WHERE name IN ($1, ''x'') AND id = $2'),
  ('SELECT 1 FROM people WHERE (name, id) = ($1, $2)'),
  ('SELECT 1 FROM people WHERE name IS DISTINCT FROM $1'),
  ('SELECT 1 FROM people WHERE name = ANY($1::text[])'),
  ('SELECT 1 FROM plain WHERE name COLLATE ci IN (SELECT $1::text)'),
  ('SELECT 1 FROM plain WHERE EXISTS (SELECT FROM people p WHERE p.name = $1)'),
  ('WITH c AS (SELECT * FROM people WHERE name = $1) SELECT 1 FROM c'),
  ('SELECT 1 FROM (SELECT * FROM people WHERE $1 = name) s'),
  ('SELECT 1 FROM plain WHERE name = $1 COLLATE "C"'),
  ('SELECT 1 FROM people WHERE lower(name) = lower($1::text) COLLATE "C"'),
  ('SELECT 1 FROM people WHERE nullif(name, $1) IS NULL'),
  ('SELECT max(name) = $1 FROM people'),
  ('SELECT greatest(name, $1) FROM people'),
  ('SELECT 1 FROM people WHERE CASE name WHEN $1 THEN true END')) v(q);
-- a keys query's result columns: the collation of each (0 for a type without one)
SELECT result_collations FROM docsync.analyze_query('SELECT name, id, name COLLATE "C" FROM people');

-- refused at definition, naming the param and the collation, with the canonical-text route
\set VERBOSITY default
\set SHOW_CONTEXT never
SELECT docsync.define_query('bycol', 'SELECT jsonb_build_object(''n'', n) FROM people WHERE name = $1', params => ARRAY['name'], watches => 'manual');
\set VERBOSITY terse
SELECT docsync.define_query('byq', 'SELECT jsonb_build_object(''n'', n) FROM plain WHERE name = $1 COLLATE ci', params => ARRAY['name'], watches => 'manual');
SELECT docsync.define_query('bysub', 'SELECT jsonb_build_object(''n'', n) FROM plain WHERE id IN (SELECT id FROM people WHERE name = $1)', params => ARRAY['name'], watches => 'manual');
SELECT docsync.define_query('bycte', 'WITH c AS (SELECT * FROM people WHERE (name, id) = ($1, $2)) SELECT to_jsonb(count(*)) FROM c', params => ARRAY['name', 'id'], watches => 'manual');
-- accepted: a deterministic collation, or the canonical text of the column
SELECT docsync.define_query('exact', 'SELECT jsonb_build_object(''n'', n) FROM plain WHERE name = $1 COLLATE exact', params => ARRAY['name'], watches => 'manual');
SELECT docsync.define_query('canon', 'SELECT to_jsonb(count(*)) FROM people WHERE lower(name::text) = $1::text COLLATE "C"', params => ARRAY['name'], watches => 'manual');
SELECT docsync.define_query('byid', 'SELECT jsonb_build_object(''n'', n) FROM people WHERE id = $1', params => ARRAY['id'], watches => 'manual');

-- a keys query giving the column under ci is refused; its canonical text is not
SELECT docsync.watch('canon', 'people', keys_sql => 'SELECT name FROM people WHERE id = $1', keys_args => ARRAY['id']);
SELECT docsync.watch('canon', 'people', keys_sql => 'SELECT lower(name::text) COLLATE "C" FROM people WHERE id = $1',
                     keys_args => ARRAY['id']) > 0 AS watched_canonical;
-- a direct watch on the ci column is refused too
SELECT docsync.define_query('bytext', 'SELECT to_jsonb(count(*)) FROM plain WHERE name = $1', params => ARRAY['name'], watches => 'manual');
SELECT docsync.watch('bytext', 'people', params => ARRAY['name']);

SELECT name FROM docsync.query_defs WHERE name IN ('bycol', 'byq', 'bysub', 'bycte', 'exact', 'canon', 'byid', 'bytext') ORDER BY name;
SELECT docsync.drop_query(name) FROM docsync.query_defs WHERE name IN ('exact', 'canon', 'byid', 'bytext') ORDER BY name;
DROP SCHEMA kcoll CASCADE;
RESET client_min_messages;
RESET search_path;
