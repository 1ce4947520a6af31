-- docsync.derive_watches: what a query runs besides the functions its expressions name is checked
-- like a function it calls (a body docsync cannot see into is uncovered): casts to json of the
-- values it turns into json, at any depth; domain CHECK constraints; the defaults of omitted
-- arguments; a SQL body's statements that are not a SELECT. pg_catalog functions that run SQL
-- text or read large objects or sequences, and relations whose changes are never decoded
-- (catalogs, sequences, foreign tables), are uncovered too.
\set VERBOSITY default
\set SHOW_CONTEXT never
SET synchronous_commit = on;

CREATE SCHEMA cov;
SET search_path = cov;
CREATE TABLE orders (id int PRIMARY KEY, status text);
CREATE TABLE hidden (id int PRIMARY KEY, v text);
CREATE FUNCTION d(sql text) RETURNS TABLE (tbl name, kind text, columns name[], why text)
LANGUAGE sql AS $$
  SELECT table_name, kind, columns, why FROM docsync.derive_watches(sql, 'cov', NULL)
   ORDER BY table_name NULLS LAST, kind, why
$$;
CREATE FUNCTION peek(int) RETURNS text LANGUAGE plpgsql STABLE
  AS $$BEGIN RETURN (SELECT v FROM cov.hidden WHERE id = $1); END$$;

-- a cast to json of a user type runs in to_json(b), json(b)_agg, json(b)_build_object, row_to_json
CREATE TYPE mood AS ENUM ('a', 'b');
CREATE FUNCTION mood_json(mood) RETURNS json LANGUAGE plpgsql STABLE
  AS $$BEGIN RETURN to_json(cov.peek(1)); END$$;
CREATE CAST (mood AS json) WITH FUNCTION mood_json(mood);
SELECT * FROM d($$SELECT jsonb_build_object('id', o.id, 'm', 'a'::mood) FROM orders o WHERE o.id = $1$$);
-- … through a column of a table (a whole-row value), an array, a domain, a composite's column
CREATE TABLE moods (id int PRIMARY KEY, m mood);
SELECT * FROM d($$SELECT to_jsonb(x) FROM moods x WHERE x.id = $1$$);
SELECT * FROM d($$SELECT json_agg(ARRAY[x.m]) FROM moods x WHERE x.id = $1$$);
CREATE DOMAIN mood_d AS mood;
CREATE TYPE pair AS (n int, m mood_d);
SELECT * FROM d($$SELECT row_to_json(ROW(o.id, ROW(1, 'b')::pair)) FROM orders o WHERE o.id = $1$$);
-- a type with no cast to json is fine; a cast to jsonb counts the same (a SQL body: analysed)
CREATE TYPE tone AS ENUM ('x');
SELECT * FROM d($$SELECT to_jsonb('x'::tone) FROM orders o WHERE o.id = $1$$);
CREATE FUNCTION tone_jsonb(tone) RETURNS jsonb LANGUAGE sql STABLE AS $$SELECT to_jsonb(count(*)) FROM cov.hidden$$;
CREATE CAST (tone AS jsonb) WITH FUNCTION tone_jsonb(tone);
SELECT * FROM d($$SELECT to_jsonb('x'::tone) FROM orders o WHERE o.id = $1$$);
-- define_query refuses it without allow_uncovered
SELECT docsync.define_query('cast_leak', $$SELECT jsonb_build_object('id', o.id, 'm', 'a'::mood)
  FROM orders o WHERE o.id = $1$$, params => ARRAY['id']);

-- types are followed 16 levels deep (domains, arrays, columns); deeper is uncovered, saying so
DO $$BEGIN
  CREATE DOMAIN cov.deep1 AS int;
  FOR i IN 2..17 LOOP EXECUTE format('CREATE DOMAIN cov.deep%s AS cov.deep%s', i, i - 1); END LOOP;
END$$;
SELECT * FROM d($$SELECT to_jsonb(1::deep16) FROM orders o WHERE o.id = $1$$);
SELECT * FROM d($$SELECT to_jsonb(1::deep17) FROM orders o WHERE o.id = $1$$);

-- a domain's CHECK constraint runs where a value is coerced to it, and where a row type with
-- such a column is filled from json
CREATE FUNCTION known(int) RETURNS boolean LANGUAGE plpgsql STABLE
  AS $$BEGIN RETURN EXISTS (SELECT FROM cov.hidden WHERE id = $1); END$$;
CREATE DOMAIN known_id AS int CHECK (known(VALUE));
CREATE DOMAIN known_id2 AS known_id;
SELECT * FROM d($$SELECT jsonb_build_object('id', o.id::known_id2) FROM orders o WHERE o.id = $1$$);
CREATE TYPE ref AS (id known_id);
SELECT * FROM d($$SELECT to_jsonb(count(*)) FROM orders o, jsonb_populate_record(NULL::ref, '{"id": 1}') r
  WHERE o.id = $1$$);
SELECT * FROM d($$SELECT to_jsonb(count(*)) FROM orders o, jsonb_to_recordset('[{"id": 1}]') AS r(id known_id)
  WHERE o.id = $1$$);
-- a range (and its multirange) over such a domain: range_in runs the domain's CHECK
CREATE TYPE known_range AS RANGE (subtype = known_id);
SELECT * FROM d($$SELECT to_jsonb(o.id) FROM orders o WHERE o.id = $1 AND format('[%s,%s)', o.id, o.id + 1)::known_range IS NOT NULL$$);
SELECT * FROM d($$SELECT to_jsonb(o.id) FROM orders o WHERE o.id = $1
  AND format('{[%s,%s)}', o.id, o.id + 1)::known_multirange IS NOT NULL$$);
-- a CHECK calling a SQL function: its body is analysed, the table it reads broadcast
CREATE FUNCTION known_sql(int) RETURNS boolean LANGUAGE sql STABLE
  AS 'SELECT EXISTS (SELECT FROM cov.hidden WHERE id = $1)';
CREATE DOMAIN known_sql_id AS int CHECK (known_sql(VALUE));
SELECT * FROM d($$SELECT jsonb_build_object('id', o.id::known_sql_id) FROM orders o WHERE o.id = $1$$);

-- an omitted argument's default runs as if the query named it
CREATE FUNCTION label(id int, extra text DEFAULT peek(0), sep text DEFAULT '-') RETURNS text
  LANGUAGE sql STABLE AS 'SELECT id || sep || extra';
SELECT * FROM d($$SELECT to_jsonb(label(o.id)) FROM orders o WHERE o.id = $1$$);
SELECT * FROM d($$SELECT to_jsonb(label(o.id, sep => ':')) FROM orders o WHERE o.id = $1$$);
SELECT * FROM d($$SELECT to_jsonb(label(o.id, 'given')) FROM orders o WHERE o.id = $1$$);
CREATE FUNCTION hidden_count() RETURNS bigint LANGUAGE sql STABLE AS 'SELECT count(*) FROM cov.hidden';
CREATE FUNCTION tagged(id int, n bigint DEFAULT hidden_count()) RETURNS text
  LANGUAGE sql STABLE AS 'SELECT id::text || n::text';
SELECT * FROM d($$SELECT to_jsonb(tagged(o.id)) FROM orders o WHERE o.id = $1$$);

-- a SQL body running a utility statement (DO, CALL) or a write is not analysed: uncovered
CREATE FUNCTION via_do() RETURNS text LANGUAGE sql VOLATILE AS $f$
  DO $$BEGIN PERFORM set_config('cov.h', cov.peek(1), false); END$$;
  SELECT current_setting('cov.h');
$f$;
CREATE PROCEDURE stash() LANGUAGE plpgsql AS $$BEGIN PERFORM set_config('cov.h', cov.peek(1), false); END$$;
CREATE FUNCTION via_call() RETURNS text LANGUAGE sql VOLATILE AS $f$
  CALL cov.stash();
  SELECT current_setting('cov.h');
$f$;
CREATE FUNCTION via_insert() RETURNS int LANGUAGE sql VOLATILE
  AS 'INSERT INTO cov.hidden VALUES (99, $$x$$) RETURNING id';
SELECT * FROM d($$SELECT jsonb_build_object('id', o.id, 'h', via_do()) FROM orders o WHERE o.id = $1$$);
SELECT * FROM d($$SELECT jsonb_build_object('id', o.id, 'h', via_call()) FROM orders o WHERE o.id = $1$$);
SELECT * FROM d($$SELECT jsonb_build_object('id', o.id, 'h', via_insert()) FROM orders o WHERE o.id = $1$$);

-- pg_catalog functions: ts_rewrite(tsquery, text) runs its text (the tsquery form does not);
-- large objects and sequences change without a decoded change
CREATE SEQUENCE seq;
SELECT * FROM d($$SELECT to_jsonb(ts_rewrite('a'::tsquery, 'SELECT t, s FROM cov.hidden')::text) FROM orders o WHERE o.id = $1$$);
SELECT * FROM d($$SELECT to_jsonb(ts_rewrite('a'::tsquery, 'a'::tsquery, 'b'::tsquery)::text) FROM orders o WHERE o.id = $1$$);
SELECT * FROM d($$SELECT to_jsonb(lo_get(o.id)) FROM orders o WHERE o.id = $1$$);
SELECT * FROM d($$SELECT to_jsonb(pg_sequence_last_value('seq')) FROM orders o WHERE o.id = $1$$);
SELECT * FROM d($$SELECT to_jsonb(currval('seq')) FROM orders o WHERE o.id = $1$$);

-- set_config in the query changes the path a SQL function's text body is parsed under at its
-- first call (here cov_shadow.t instead of cov.t): uncovered, naming set_config
CREATE SCHEMA cov_shadow;
CREATE TABLE cov_shadow.t (v text);
CREATE TABLE t (v text);
CREATE FUNCTION readt(text) RETURNS text LANGUAGE sql STABLE AS 'SELECT v FROM t';
SELECT * FROM d($$SELECT jsonb_build_object('id', o.id,
  'v', readt(set_config('search_path', 'cov_shadow, cov', true))) FROM orders o WHERE o.id = $1$$);

-- relations whose changes are never decoded: system catalogs (through information_schema too),
-- sequences, foreign tables; a materialized view is watched (its refresh is DDL, which recomputes)
SELECT * FROM d($$SELECT jsonb_build_object('id', o.id, 'tables', (SELECT count(*) FROM pg_class c
  WHERE c.relnamespace = 'cov'::regnamespace)) FROM orders o WHERE o.id = $1$$);
SELECT * FROM d($$SELECT to_jsonb(count(*)) FROM information_schema.columns c WHERE c.table_name = $1$$);
SELECT * FROM d($$SELECT to_jsonb(s.last_value) FROM seq s, orders o WHERE o.id = $1$$);
CREATE FOREIGN DATA WRAPPER cov_fdw;
CREATE SERVER cov_server FOREIGN DATA WRAPPER cov_fdw;
CREATE FOREIGN TABLE remote (id int, v text) SERVER cov_server;
SELECT * FROM d($$SELECT jsonb_agg(r.v) FROM remote r WHERE r.id = $1$$);
-- an inheritance child that is a foreign table: the parent is watched, the child uncovered
CREATE TABLE stock (id int PRIMARY KEY, qty int);
CREATE FOREIGN TABLE stock_remote () INHERITS (stock) SERVER cov_server;
SELECT * FROM d($$SELECT jsonb_agg(s.qty) FROM stock s WHERE s.id = $1$$);
CREATE MATERIALIZED VIEW hidden_mv AS SELECT id, v FROM hidden;
SELECT * FROM d($$SELECT jsonb_agg(m.v) FROM hidden_mv m WHERE m.id = $1$$);
SELECT docsync.define_query('catalog', $$SELECT to_jsonb(c.reltuples) FROM pg_class c WHERE c.oid = $1::regclass$$,
  params => ARRAY['rel']);
SELECT docsync.define_query('catalog', $$SELECT to_jsonb(c.reltuples) FROM pg_class c WHERE c.oid = $1::regclass$$,
  params => ARRAY['rel'], allow_uncovered => true);
SELECT table_name, kind FROM docsync.watches WHERE query = 'catalog';
SELECT docsync.drop_query('catalog');

RESET search_path;
SET client_min_messages = warning;
DROP SCHEMA cov CASCADE;
DROP SCHEMA cov_shadow CASCADE;
DROP SERVER cov_server;
DROP FOREIGN DATA WRAPPER cov_fdw;
RESET client_min_messages;
