-- docsync.batch_sql(): the batched form of a doc or keys query, which the worker runs to compute many
-- docs in one statement. Each case runs the batched statement on arrays of param sets, as the worker
-- sends them (one text array literal per param), and compares each ordinal's rows with the query run
-- alone on that set.
\set VERBOSITY default
\set SHOW_CONTEXT never
SET synchronous_commit = on;

CREATE SCHEMA batch;
CREATE SCHEMA batch_types;   -- never on the search_path
SET search_path = batch;
CREATE TABLE items (id int PRIMARY KEY, owner int, tag text, price int);
INSERT INTO items VALUES (1, 10, 'a', 5), (2, 10, 'b', 7), (3, 20, 'a', 1), (4, NULL, 'c', 2);
-- a table named like the batched form's alias
CREATE TABLE docsync_batch (id int PRIMARY KEY, owner int);
INSERT INTO docsync_batch VALUES (1, 100), (2, 200);
CREATE DOMAIN batch_types.positive AS int CHECK (VALUE > 0);
CREATE DOMAIN batch_types.ints AS int[];
CREATE TYPE batch_types.color AS ENUM ('red', 'green');

-- For each ordinal of the param sets: what the query returned alone (rows as jsonb, in a fixed order)
-- and whether the batched form returned the same rows for it: one row with present = 1 per row, or
-- one row with present and every column NULL when there was none. Raises unless the batched rows
-- come in ordinal order, each ordinal at least once.
CREATE FUNCTION compare(sql text, VARIADIC arrays text[])
RETURNS TABLE (ord int, alone jsonb, same boolean)
LANGUAGE plpgsql AS $f$
DECLARE
  bsql text := docsync.batch_sql(sql, current_setting('search_path'));
  types text := (SELECT string_agg(t::text, ', ')
                   FROM unnest((docsync.analyze_query(sql)).param_types) AS t);
  m int := cardinality(arrays[1]::text[]);
  got jsonb := '[]';
  mine jsonb;
  n int;
  r record;
BEGIN
  IF bsql IS NULL THEN
    RAISE EXCEPTION 'no batched form';
  END IF;
  -- unused trailing params are fine: every array is typed by the cast in the statement
  FOR r IN EXECUTE bsql USING arrays[1], arrays[2], arrays[3] LOOP
    got := got || jsonb_build_array(to_jsonb(r));
  END LOOP;
  IF (SELECT array_agg((e ->> 'ord')::int ORDER BY x.pos) FROM jsonb_array_elements(got) WITH ORDINALITY AS x(e, pos))
     IS DISTINCT FROM (SELECT array_agg((e ->> 'ord')::int ORDER BY (e ->> 'ord')::int) FROM jsonb_array_elements(got) AS x(e))
     OR (SELECT array_agg(DISTINCT (e ->> 'ord')::int) FROM jsonb_array_elements(got) AS x(e))
        IS DISTINCT FROM (SELECT array_agg(g) FROM generate_series(1, m) AS g) THEN
    RAISE EXCEPTION 'batched rows out of ordinal order: %', got;
  END IF;
  EXECUTE format('PREPARE batch_alone(%s) AS %s', types, sql);
  FOR n IN 1 .. m LOOP
    ord := n;
    alone := '[]';
    FOR r IN EXECUTE format('EXECUTE batch_alone(%s)',
                            (SELECT string_agg(quote_nullable((u.a::text[])[ord]), ', ' ORDER BY u.k)
                               FROM unnest(arrays) WITH ORDINALITY AS u(a, k))) LOOP
      alone := alone || jsonb_build_array(to_jsonb(r));
    END LOOP;
    alone := (SELECT coalesce(jsonb_agg(e ORDER BY e::text), '[]') FROM jsonb_array_elements(alone) AS x(e));
    mine := (SELECT jsonb_agg(e - 'ord' ORDER BY e::text) FROM jsonb_array_elements(got) AS x(e)
              WHERE (e ->> 'ord')::int = ord);
    IF alone = '[]' THEN
      -- one row, every value NULL
      same := jsonb_array_length(mine) = 1
              AND NOT EXISTS (SELECT FROM jsonb_each(mine -> 0) AS v WHERE v.value <> 'null');
    ELSE
      same := (SELECT bool_and(e -> 'present' = '1') FROM jsonb_array_elements(mine) AS x(e))
              AND (SELECT jsonb_agg(e - 'present' ORDER BY e::text) FROM jsonb_array_elements(mine) AS x(e)) = alone;
    END IF;
    RETURN NEXT;
  END LOOP;
  DEALLOCATE batch_alone;
END
$f$;

-- the batched form: unnest over the arrays, the query lateral to it with $k replaced by (A.pk)
SELECT docsync.batch_sql('SELECT json_agg(tag ORDER BY id) FROM items WHERE owner = $1 AND tag <> $2', 'batch');

-- $1 used several times
SELECT * FROM compare($q$
  SELECT jsonb_build_object('owner', $1::int,
                            'n', (SELECT count(*) FROM items WHERE owner = $1),
                            'ids', (SELECT jsonb_agg(id ORDER BY id) FROM items WHERE owner = $1 OR $1 IS NULL))
$q$, '{10,20,NULL,99}');

-- casts: $1::int, $2::text, CAST($1 AS bigint)
SELECT * FROM compare($q$
  SELECT jsonb_build_object('a', $1::int + 1, 'b', $2::text || '!', 'c', CAST($1 AS bigint) * 2)
$q$, '{1,2,NULL}', '{x,NULL,"y z"}');

-- subqueries: scalar, EXISTS, IN, a CTE and a LATERAL, each referencing the params
SELECT * FROM compare($q$
  WITH mine AS (SELECT * FROM items WHERE owner = $1)
  SELECT jsonb_build_object(
    'n', (SELECT count(*) FROM mine),
    'has_a', EXISTS (SELECT FROM items WHERE owner = $1 AND tag = 'a'),
    'in', (SELECT jsonb_agg(id ORDER BY id) FROM items WHERE id IN (SELECT id FROM items WHERE owner = $1)),
    'lat', (SELECT jsonb_agg(x.p ORDER BY x.p)
              FROM items i CROSS JOIN LATERAL (SELECT i.price * $2::int AS p) AS x WHERE i.owner = $1))
$q$, '{10,20,99}', '{2,3,4}');

-- an aggregate returns one row even when nothing matches: present = 1, value NULL
SELECT * FROM compare('SELECT json_agg(tag ORDER BY id) FROM items WHERE owner = $1', '{10,99,NULL}');

-- zero rows for some param sets, two for another
SELECT * FROM compare('SELECT to_jsonb(i) FROM items i WHERE owner = $1 ORDER BY id', '{99,10,NULL,20}');

-- LIMIT $2: PostgreSQL refuses only variables of the query's own level in LIMIT, so the lateral
-- reference (docsync_batch.p2, one level up) is accepted and each set gets its own limit
SELECT * FROM compare('SELECT to_jsonb(i.id) FROM items i WHERE owner = $1 ORDER BY id LIMIT $2',
                      '{10,10,10}', '{0,1,NULL}');

-- "$1" in a string, an E'' string, a dollar-quoted string, a quoted identifier and comments is text,
-- never a param: only the last $1 is one
SELECT docsync.batch_sql($q$SELECT jsonb_build_object('s', '$1', 'e', E'\'$1', 'd', $$ $1 $$, 'i', "$1".v, /* $1 */ 'p', $1::int)
  FROM (SELECT 'ident' AS v) AS "$1" -- $1$q$, 'batch');
SELECT * FROM compare($q$SELECT jsonb_build_object('s', '$1', 'e', E'\'$1', 'd', $$ $1 $$, 'i', "$1".v, /* $1 */ 'p', $1::int)
  FROM (SELECT 'ident' AS v) AS "$1" -- $1$q$, '{7,NULL}');

-- a trailing ';' is left out; a trailing comment without a newline ends before the closing ')'
SELECT docsync.batch_sql('SELECT to_jsonb($1::int);', 'batch');
SELECT docsync.batch_sql('SELECT to_jsonb($1::int); -- after the statement', 'batch');
SELECT docsync.batch_sql('SELECT to_jsonb($1::int) -- the id', 'batch');
SELECT * FROM compare('SELECT to_jsonb($1::int);', '{1,NULL}');
SELECT * FROM compare('SELECT to_jsonb($1::int) -- the id', '{1,NULL}');

-- a query that names docsync_batch (in any case) gets another alias, so its own cannot hide the params
SELECT substring(docsync.batch_sql(s, 'batch') FROM 'AS (docsync_batch[_0-9]*)\(') AS alias
  FROM (VALUES ('SELECT to_jsonb(b.owner) FROM items b WHERE b.id = $1'),
               ('SELECT to_jsonb(docsync_batch.owner) FROM docsync_batch WHERE docsync_batch.id = $1'),
               ('SELECT to_jsonb(d1.owner) FROM Docsync_Batch d1 JOIN docsync_batch AS DOCSYNC_BATCH_1 USING (id) WHERE d1.id = $1'))
       AS v(s) ORDER BY 1;
SELECT * FROM compare('SELECT to_jsonb(docsync_batch.owner) FROM docsync_batch WHERE docsync_batch.id = $1', '{2,1,3}');
SELECT * FROM compare('SELECT to_jsonb(d1.owner) FROM Docsync_Batch d1 JOIN docsync_batch AS DOCSYNC_BATCH_1 USING (id) WHERE d1.id = $1',
                      '{2,1,3}');

-- param types are spelled schema-qualified: a domain, an enum off the search_path
SELECT substring(docsync.batch_sql(s, 'batch') FROM 'ROWS FROM \((.*)\) WITH') AS arrays
  FROM (VALUES ('SELECT to_jsonb($1::batch_types.positive)'),
               ('SELECT to_jsonb($1::batch_types.color)'),
               ('SELECT to_jsonb($1::varchar || $2::"char"::text)')) AS v(s) ORDER BY 1;
SELECT * FROM compare('SELECT to_jsonb($1::batch_types.positive)', '{1,NULL,3}');
SELECT * FROM compare('SELECT to_jsonb($1::batch_types.color)', '{green,NULL,red}');
-- no batched form: an array param (unnest would flatten it), a domain over an array, a pseudo-type,
-- a type whose arrays are not comma-separated (box), no params
SELECT s, docsync.batch_sql(s, 'batch') IS NULL AS no_batched_form
  FROM (VALUES ('SELECT to_jsonb($1::int[])'),
               ('SELECT to_jsonb($1::batch_types.ints)'),
               ('SELECT to_jsonb($1::cstring::text)'),
               ('SELECT to_jsonb(area($1::box))'),
               ('SELECT to_jsonb(count(*)) FROM items')) AS v(s) ORDER BY 1;
-- what a doc query may not be, batch_sql raises for, as analyze_query does
SELECT docsync.batch_sql(NULL, 'batch');
SELECT docsync.batch_sql('SELECT 1; SELECT 2', 'batch');
SELECT docsync.batch_sql('SELECT to_jsonb(x) FROM no_such_table x WHERE x.id = $1', 'batch');

-- worker_definitions(): each query's batched form in "batch_sql", each keys query's in
-- "keys_batch_sql"; null for a query refused to the worker, and for one that no longer analyses
SELECT docsync.define_query('b_owner', 'SELECT json_agg(tag ORDER BY id) FROM items WHERE owner = $1', params => ARRAY['owner'], watches => 'manual');
SELECT docsync.watch('b_owner', 'items', keys_sql => 'SELECT owner FROM items WHERE id = $1', keys_args => ARRAY['id']) > 0 AS watched;
SELECT docsync.define_query('b_all', 'SELECT json_agg(id ORDER BY id) FROM items', watches => 'manual');
CREATE TABLE gone (id int);
SELECT docsync.define_query('b_gone', 'SELECT to_jsonb(count(*)) FROM gone WHERE id = $1', params => ARRAY['id'], watches => 'manual');
DROP TABLE gone;
INSERT INTO docsync.query_defs (name, sql, params, search_path, defined_by)
VALUES ('b_ghost', 'SELECT to_jsonb($1::int)', '{id}', 'batch', 'regress_no_such_role');
SELECT q ->> 'name' AS name, q ? 'batch_sql' AS has_key, q ->> 'batch_sql' IS NOT NULL AS batched,
       q ->> 'refused' IS NOT NULL AS refused
  FROM jsonb_array_elements(docsync.worker_definitions() -> 'queries') q ORDER BY 1;
SELECT w ->> 'query' AS query, w ->> 'keys_sql' AS keys_sql, w ? 'keys_batch_sql' AS has_key,
       w ->> 'keys_batch_sql' AS keys_batch_sql
  FROM jsonb_array_elements(docsync.worker_definitions() -> 'watches') w ORDER BY 1;
-- the keys query's batched form has the same shape: ord, present, the keys
SELECT * FROM compare('SELECT owner FROM items WHERE id = $1', '{1,4,9}');
-- the worker's replication role gets the batched forms, though it may not use the schema they read
CREATE ROLE regress_batch_repl LOGIN;
SET client_min_messages = warning;
SELECT count(*) AS grants FROM docsync.grant_replication('regress_batch_repl');
RESET client_min_messages;
SET ROLE regress_batch_repl;
SELECT has_schema_privilege('batch', 'USAGE') AS uses_batch,
       q ->> 'name' AS name, q ->> 'batch_sql' IS NOT NULL AS batched
  FROM jsonb_array_elements(docsync.worker_definitions() -> 'queries') q ORDER BY 2;
RESET ROLE;

-- clean up
DELETE FROM docsync.query_defs WHERE name = 'b_ghost';
SELECT docsync.drop_query(name) FROM docsync.query_defs WHERE name LIKE 'b\_%' ORDER BY name;
DROP OWNED BY regress_batch_repl;
DROP ROLE regress_batch_repl;
SET client_min_messages = warning;
DROP SCHEMA batch, batch_types CASCADE;
RESET client_min_messages;
RESET search_path;
