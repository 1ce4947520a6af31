-- Batched equals alone, for every param type: a differential test of docsync.batch_sql() over every
-- base type in pg_type that define_query accepts as a param, plus domains (with and without type
-- modifiers), enums, composites, ranges, multiranges and arrays of each. Each query runs as the
-- worker runs it: alone, PREPAREd with its param types inferred and EXECUTEd on an untyped literal;
-- batched, PREPAREd the same way and EXECUTEd on one array literal per param, built as the worker
-- builds it (every element quoted, '"' and '\' escaped, NULL bare). Values are NULL, empty, extreme,
-- Unicode and the delimiter characters; a value the query refuses alone must make the batch fail too.
-- A query without a batched form must say why (docsync.batch_problem): never a silent difference.
\set VERBOSITY terse
SET synchronous_commit = on;

CREATE SCHEMA bt;
CREATE SCHEMA bt_types;   -- never on the search_path
SET search_path = bt;

-- The differences between the query run alone and batched on the values (one param), or with
-- `second` as every set's second param: no row when they agree; 'not batched: <why>' when the query
-- has no batched form.
CREATE FUNCTION batch_diff(sql text, vals text[], second text DEFAULT NULL, two boolean DEFAULT false)
RETURNS SETOF text LANGUAGE plpgsql AS $f$
DECLARE
  path text := current_setting('search_path');
  bsql text := docsync.batch_sql(sql, path);
  ok text[] := '{}';
  alone jsonb[] := '{}';
  res jsonb;
  got jsonb;
  v text;
  r record;
  i int;
  args text;
BEGIN
  IF bsql IS NULL THEN
    RETURN NEXT 'not batched: ' || docsync.batch_problem(sql, path);
    RETURN;
  END IF;
  EXECUTE format('PREPARE diff_alone AS %s', sql);
  EXECUTE format('PREPARE diff_batch AS %s', bsql);
  FOREACH v IN ARRAY vals LOOP
    BEGIN
      res := '[]';
      args := quote_nullable(v) || CASE WHEN two THEN ', ' || quote_nullable(second) ELSE '' END;
      FOR r IN EXECUTE format('EXECUTE diff_alone(%s)', args) LOOP
        res := res || jsonb_build_array(to_jsonb(r));
      END LOOP;
      ok := ok || v;
      alone := alone || (SELECT coalesce(jsonb_agg(e ORDER BY e::text), '[]') FROM jsonb_array_elements(res) e);
    EXCEPTION WHEN OTHERS THEN
      -- refused alone: a batch holding it must fail as well
      BEGIN
        FOR r IN EXECUTE format('EXECUTE diff_batch(%s)', array_args(ARRAY[v], second, two)) LOOP
        END LOOP;
        RETURN NEXT format('%L fails alone but not batched', v);
      EXCEPTION WHEN OTHERS THEN
        NULL;
      END;
    END;
  END LOOP;
  IF cardinality(ok) > 0 THEN
    got := '[]';
    FOR r IN EXECUTE format('EXECUTE diff_batch(%s)', array_args(ok, second, two)) LOOP
      got := got || jsonb_build_array(to_jsonb(r));
    END LOOP;
    FOR i IN 1 .. cardinality(ok) LOOP
      res := (SELECT coalesce(jsonb_agg(e - 'ord' - 'present' ORDER BY (e - 'ord' - 'present')::text), '[]')
                FROM jsonb_array_elements(got) e
               WHERE (e ->> 'ord')::int = i AND e ->> 'present' IS NOT NULL);
      IF res <> alone[i] OR NOT EXISTS (SELECT FROM jsonb_array_elements(got) e WHERE (e ->> 'ord')::int = i) THEN
        RETURN NEXT format('%L: alone %s, batched %s', ok[i], alone[i], res);
      END IF;
    END LOOP;
    IF EXISTS (SELECT FROM jsonb_array_elements(got) e
                WHERE (e ->> 'ord')::int NOT BETWEEN 1 AND cardinality(ok)) THEN
      RETURN NEXT format('ordinals out of range: %s', got);
    END IF;
  END IF;
  DEALLOCATE diff_alone;
  DEALLOCATE diff_batch;
END
$f$;

-- The worker's array literals: {"v1","v2",NULL,…} for the values, and for a second param the same
-- value in every set.
CREATE FUNCTION array_literal(vals text[]) RETURNS text LANGUAGE sql IMMUTABLE AS $f$
  SELECT '{' || string_agg(CASE WHEN v IS NULL THEN 'NULL'
                                ELSE '"' || replace(replace(v, '\', '\\'), '"', '\"') || '"' END,
                           ',' ORDER BY k) || '}'
    FROM unnest(vals) WITH ORDINALITY AS u(v, k)
$f$;
CREATE FUNCTION array_args(vals text[], second text, two boolean) RETURNS text LANGUAGE sql IMMUTABLE AS $f$
  SELECT quote_literal(array_literal(vals))
         || CASE WHEN two THEN ', ' || quote_literal(array_literal(array_fill(second, ARRAY[cardinality(vals)])))
                 ELSE '' END
$f$;

-- the values every type is tried with (most do not parse as most types: they must fail both ways)
CREATE TABLE vals (v text);
INSERT INTO vals VALUES
  (NULL), (''), (' '), ('  x  '), ('0'), ('1'), ('-1'), ('+1'), ('01'), ('101'), ('1.5'), ('-0'),
  ('32767'), ('-32768'), ('2147483647'), ('-2147483648'), ('9223372036854775807'), ('-9223372036854775808'),
  ('true'), ('f'), ('NULL'), ('null'), ('a'), ('FR'), ('FR '), ('é'), ('日本'), ('😀'), ('Ω≈'),
  (','), (';'), (':'), ('%'), ('"'), ('\'), ('\\'), ('{'), ('}'), ('('), (')'), ('['), (']'), ('{}'), ('()'),
  ('a,b'), ('a;b'), ('"x"'), ('{1,2}'), ('(1,2)'), ('(x,1)'), ('("a,b",2)'), ('(,)'), ('[1,5)'), ('empty'),
  ('{[1,5)}'), ('infinity'), ('-infinity'), ('NaN'), ('2026-02-28'), ('4713-01-01 BC'), ('294276-12-31'),
  ('2026-02-28 12:34:56.789+02'), ('24:00:00'), ('00000000-0000-0000-0000-000000000000'),
  ('A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11'), ('127.0.0.1'), ('::1'), ('10.0.0.0/8'), ('08:00:2b:01:02:03'),
  ('0/16B3F28'), ('\x00ff'), ('<a>é</a>'), ('{"k": [1, "é"]}'), ('[1, 2]'), ('red'), ('green'),
  ('pg_class'), ('public'), ('10:20:10:'), (repeat('x', 3000)), (E'tab\there'), (E'line\nbreak');

-- every base type define_query accepts as a param, named without a modifier: the same query text
-- alone and batched
CREATE TABLE base_types AS
  SELECT t.oid::regtype AS t, format('%I.%I', n.nspname, t.typname) AS name
    FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
   WHERE t.typtype = 'b' AND n.nspname = 'pg_catalog' AND t.typarray <> 0
     AND t.typsubscript <> 'array_subscript_handler'::regproc
     AND docsync.key_type_problem(t.oid) IS NULL;
-- (about fifty: numeric, floats, interval, jsonb and the geometric types cannot be keys)
SELECT count(*) > 40 AS many_base_types FROM base_types;

-- doc queries (one json column) and keys queries (the key itself) over each base type: no difference
-- (some values draw notices: an identifier truncated, a text-search query without lexemes)
SET client_min_messages = warning;
SELECT b.t, d AS difference
  FROM base_types b,
       LATERAL (SELECT batch_diff(format('SELECT pg_catalog.to_jsonb(($1::%s)::text)', b.name),
                                  (SELECT array_agg(v) FROM vals))
                UNION ALL
                SELECT batch_diff(format('SELECT $1::%s AS k', b.name), (SELECT array_agg(v) FROM vals))) AS x(d)
 ORDER BY 1, 2;
RESET client_min_messages;
-- every base type has a batched form, but those whose arrays are not comma-separated
SELECT b.t, docsync.batch_problem(format('SELECT $1::%s AS k', b.name), NULL) AS not_batched
  FROM base_types b
 WHERE docsync.batch_problem(format('SELECT $1::%s AS k', b.name), NULL) IS NOT NULL ORDER BY 1;
-- box, whose arrays are separated by ';', cannot be a key (its = compares areas), but batch_sql
-- still refuses to batch it
SELECT docsync.batch_problem('SELECT $1::box AS k', NULL) AS box_not_batched;

-- Byte for byte: the doc's text as the worker reads it (json keeps its input's bytes, key order and
-- spaces), alone and batched, for every base type pg_type holds now: a value of the type from a
-- text param (numeric, floats and intervals too, which cannot be keys), and a param of the type.
CREATE FUNCTION batch_bytes(sql text, vals text[]) RETURNS SETOF text LANGUAGE plpgsql AS $f$
DECLARE
  bsql text := docsync.batch_sql(sql, current_setting('search_path'));
  ok text[] := '{}';
  alone text[] := '{}';
  batched text[];
  got text;
  v text;
  r record;
  i int;
BEGIN
  IF bsql IS NULL THEN
    RETURN NEXT 'not batched: ' || docsync.batch_problem(sql, current_setting('search_path'));
    RETURN;
  END IF;
  EXECUTE format('PREPARE bytes_alone AS SELECT w.d::text FROM (%s) AS w(d)', sql);
  EXECUTE format('PREPARE bytes_batch AS SELECT w.ord, w.d::text FROM (%s) AS w(ord, present, d) WHERE w.present IS NOT NULL', bsql);
  FOREACH v IN ARRAY vals LOOP
    BEGIN
      EXECUTE format('EXECUTE bytes_alone(%s)', quote_nullable(v)) INTO got;
      ok := ok || v;
      alone := alone || coalesce('doc ' || got, 'null');
    EXCEPTION WHEN OTHERS THEN
      NULL;  -- batch_diff holds that a batch holding it fails too
    END;
  END LOOP;
  IF cardinality(ok) = 0 THEN
    RETURN;
  END IF;
  batched := array_fill(NULL::text, ARRAY[cardinality(ok)]);
  FOR r IN EXECUTE format('EXECUTE bytes_batch(%s)', quote_literal(array_literal(ok))) LOOP
    IF batched[r.ord] IS NOT NULL THEN
      RETURN NEXT format('%L: two rows batched', ok[r.ord]);
    END IF;
    batched[r.ord] := coalesce('doc ' || r.d, 'null');
  END LOOP;
  FOR i IN 1 .. cardinality(ok) LOOP
    IF batched[i] IS DISTINCT FROM alone[i] THEN
      RETURN NEXT format('%L: alone %s, batched %s', ok[i], alone[i], coalesce(batched[i], 'no row'));
    END IF;
  END LOOP;
  DEALLOCATE bytes_alone;
  DEALLOCATE bytes_batch;
END
$f$;

SET client_min_messages = warning;
SELECT t.oid::regtype AS t, d AS difference
  FROM pg_type t,
       LATERAL (SELECT batch_bytes(format('SELECT pg_catalog.to_json($1::text::pg_catalog.%I)', t.typname),
                                   (SELECT array_agg(v) FROM vals))
                UNION ALL
                SELECT batch_bytes(format('SELECT pg_catalog.json_build_object(''v'', $1::pg_catalog.%I, ''t'', $1::pg_catalog.%I::text)',
                                          t.typname, t.typname), (SELECT array_agg(v) FROM vals))
                 WHERE docsync.key_type_problem(t.oid) IS NULL) AS x(d)
 WHERE t.typnamespace = 'pg_catalog'::regnamespace AND t.typtype = 'b' AND t.typarray <> 0
   AND t.typsubscript <> 'array_subscript_handler'::regproc
 ORDER BY 1, 2;
RESET client_min_messages;

-- type modifiers: the param has none (analysis infers the type alone), the query applies its own
CREATE TABLE mod_types (t text);
INSERT INTO mod_types VALUES ('char(2)'), ('character(1)'), ('bit(3)'), ('bit varying(2)'), ('varchar(3)'),
  ('timestamp(0)'), ('timestamptz(1)'), ('time(0)'), ('timetz(2)'), ('"char"'), ('name');
SELECT m.t, d AS difference
  FROM mod_types m,
       LATERAL (SELECT batch_diff(format('SELECT pg_catalog.to_jsonb(($1::%s)::text)', m.t), (SELECT array_agg(v) FROM vals))
                UNION ALL
                SELECT batch_diff(format('SELECT $1::%s AS k', m.t), (SELECT array_agg(v) FROM vals))) AS x(d)
 ORDER BY 1, 2;

-- domains with and without modifiers, an enum, composites, ranges, a domain over a composite, all
-- off the search_path
CREATE DOMAIN bt_types.code2 AS char(2) CHECK (VALUE <> 'XX');
CREATE DOMAIN bt_types.bits3 AS bit(3);
CREATE DOMAIN bt_types.short AS varchar(3);
CREATE DOMAIN bt_types.word AS text CHECK (VALUE !~ '\s');
CREATE DOMAIN bt_types.positive AS int CHECK (VALUE > 0);
CREATE TYPE bt_types.mood AS ENUM ('red', 'green', 'é,"x"');
CREATE TYPE bt_types.pair AS (a text, b int);
CREATE TYPE bt_types.coded AS (code char(2), flags bit(3));
CREATE DOMAIN bt_types.pair_dom AS bt_types.pair CHECK ((VALUE).b IS NULL OR (VALUE).b > 0);
CREATE TYPE bt_types.textrange AS RANGE (subtype = text, collation = "C");
CREATE TABLE other_types (t text);
INSERT INTO other_types VALUES ('bt_types.code2'), ('bt_types.bits3'), ('bt_types.short'), ('bt_types.word'),
  ('bt_types.positive'), ('bt_types.mood'), ('bt_types.pair'), ('bt_types.coded'), ('bt_types.pair_dom'),
  ('bt_types.textrange'), ('bt_types.textmultirange'), ('int4range'), ('daterange'), ('tstzrange'),
  ('int8multirange');
INSERT INTO vals VALUES ('(FR,101)'), ('(FRA,1)'), ('(,)'), ('("",)'), ('(x,-1)'), ('("é,""x""",7)'), ('[a,b)'),
  ('{[a,b)}'), ('é,"x"'), ('XX'), ('[2026-01-01,2026-02-01)'), ('{[1,3),[5,7)}');
SELECT o.t, d AS difference
  FROM other_types o,
       LATERAL (SELECT batch_diff(format('SELECT pg_catalog.to_jsonb(($1::%s)::text)', o.t), (SELECT array_agg(v) FROM vals))
                UNION ALL
                SELECT batch_diff(format('SELECT $1::%s AS k', o.t), (SELECT array_agg(v) FROM vals))) AS x(d)
 ORDER BY 1, 2;
-- a composite param beside a scalar one: each set keeps its own ordinal
SELECT batch_diff('SELECT pg_catalog.jsonb_build_array($1::bt_types.pair, $2::int)',
                  ARRAY['(x,1)', '(y,2)', NULL, '(,)', '("a,b",3)'], '7', true) AS difference;
SELECT batch_diff('SELECT pg_catalog.jsonb_build_array($2::int, $1::bt_types.pair)',
                  ARRAY['(x,1)', '(y,2)', NULL, '(,)'], '7', true) AS difference;

-- arrays of each kind: no batched form, and the reason says so
SELECT a.t, d AS difference
  FROM (VALUES ('int[]'), ('text[]'), ('char(2)[]'), ('bit(3)[]'), ('bt_types.code2[]'), ('bt_types.mood[]'),
               ('bt_types.pair[]'), ('int4range[]'), ('bt_types.pair_dom[]')) AS a(t),
       LATERAL batch_diff(format('SELECT $1::%s AS k', a.t), ARRAY['{}', NULL]) AS d
 ORDER BY 1, 2;

-- the cases of the doc and keys queries that named the wrong docs
CREATE TABLE countries (code char(2) PRIMARY KEY, name text);
INSERT INTO countries VALUES ('FR', 'France'), ('DE', 'Germany'), ('é ', 'accent');
CREATE TABLE orders (id int PRIMARY KEY, country char(2), pq bt_types.pair);
INSERT INTO orders VALUES (1, 'FR', '(x,1)'), (2, 'DE', '(y,2)'), (3, 'FR', NULL);
-- a char(2) key: the doc of each country, not null
SELECT batch_diff('SELECT to_jsonb(c) FROM countries c WHERE c.code = $1', ARRAY['FR', 'DE', 'é ', 'FRA', NULL]) AS difference;
-- $1::bit(3) with 101 is 101
SELECT batch_diff('SELECT to_jsonb($1::bit(3)::text)', ARRAY['101', '1', '0101', NULL]) AS difference;
-- a reverse index keyed on a char(2) column finds its orders with two lookups in one statement
SELECT batch_diff('SELECT id FROM orders WHERE country = $1', ARRAY['FR', 'DE', 'XX']) AS difference;
-- a composite key: each channel gets its own doc
SELECT batch_diff('SELECT to_jsonb(o.id) FROM orders o WHERE o.pq = $1::bt_types.pair', ARRAY['(x,1)', '(y,2)', '(z,3)', NULL]) AS difference;
-- an alias spelt with Unicode escapes (UESCAPE too) cannot hide the batched form's own
SELECT batch_diff(s, ARRAY['1', '2', '3']) AS difference
  FROM (VALUES ($q$SELECT to_jsonb(U&"docsync\005fbatch".id) FROM orders U&"docsync\005fbatch" WHERE U&"docsync\005fbatch".id = $1$q$),
               ($q$SELECT to_jsonb(U&"docsync!005Fbatch" UESCAPE '!'.id) FROM orders U&"docsync!005Fbatch" UESCAPE '!' WHERE id = $1$q$),
               ($q$SELECT to_jsonb(U&"docsync\+00005Fbatch".id) FROM orders U&"docsync\+00005Fbatch" WHERE id = $1$q$)) AS v(s);
SELECT substring(docsync.batch_sql($q$SELECT to_jsonb(id) FROM orders AS U&"docsync\005fbatch" WHERE id = $1$q$, NULL)
                 FROM 'AS (docsync_batch[_0-9]*)\(') AS alias;

-- docsync.queries says why a query's docs are computed one by one, doc and keys queries alike
SELECT docsync.define_query('bt_arr', 'SELECT to_jsonb($1::int[])', params => ARRAY['ids'], watches => 'manual');
SELECT docsync.define_query('bt_country', 'SELECT to_jsonb(c) FROM countries c WHERE c.code = $1', params => ARRAY['code'], watches => 'manual');
SELECT docsync.watch('bt_country', 'countries', params => ARRAY['code']) > 0 AS watched;
CREATE TABLE shapes (b box, country char(2));
ALTER TABLE shapes REPLICA IDENTITY FULL;
SELECT docsync.watch('bt_country', 'shapes', keys_sql => 'SELECT country FROM shapes WHERE b ~= $1',
                     keys_args => ARRAY['b']) > 0 AS watched;
SELECT name, regexp_replace(not_batched, 'watch [0-9]+', 'watch N') AS not_batched FROM docsync.queries
 WHERE name LIKE 'bt\_%' ORDER BY name;

-- grant_reader: the pool role may use the schema of a param type the batched form names, where the
-- definer may (the query alone needs no name, its types inferred)
CREATE ROLE regress_bt_reader LOGIN;
SELECT docsync.define_query('bt_pair', 'SELECT to_jsonb(o.id) FROM orders o WHERE o.pq = $1::bt_types.pair', params => ARRAY['pq'], watches => 'manual');
SELECT g FROM docsync.grant_reader('regress_bt_reader') AS g ORDER BY 1;
-- what grant_reader grants may let a batched form a worker set aside run: the definitions reload
-- (the worker tries the form again); a grant_reader that grants nothing new reloads nothing
CREATE TABLE extras (id int PRIMARY KEY);
SELECT docsync.define_query('bt_extra', 'SELECT to_jsonb(count(*)) FROM extras WHERE id = $1', params => ARRAY['id'], watches => 'manual');
SELECT generation AS gen_before FROM docsync.def_generation \gset
SELECT g FROM docsync.grant_reader('regress_bt_reader') AS g ORDER BY 1;
SELECT generation > :gen_before AS definitions_reloaded FROM docsync.def_generation;
SELECT generation AS gen_before FROM docsync.def_generation \gset
SELECT count(*) AS granted_again FROM docsync.grant_reader('regress_bt_reader');
SELECT generation = :gen_before AS nothing_reloaded FROM docsync.def_generation;
SELECT docsync.batch_sql(sql, search_path) AS batch, search_path AS path FROM docsync.query_defs WHERE name = 'bt_pair' \gset
SELECT reader_role AS reader FROM docsync.queries WHERE name = 'bt_pair' \gset
-- as the worker runs it: the pool role, in a read-only transaction, as the definer's reader role
SET ROLE regress_bt_reader;
BEGIN READ ONLY;
SELECT docsync.compute_as(:'reader', :'path');
-- (no PREPARE in a security-restricted operation: the param goes in as a literal)
SELECT replace(:'batch', '$1', quote_literal('{"(x,1)","(y,2)","(z,3)"}')) \gexec
ROLLBACK;
RESET ROLE;

-- clean up
SELECT docsync.revoke_reader('regress_bt_reader') IS NOT NULL AS revoked;
SELECT docsync.drop_query(name) FROM docsync.query_defs WHERE name LIKE 'bt\_%' ORDER BY name;
DROP ROLE regress_bt_reader;
SET client_min_messages = warning;
DROP SCHEMA bt, bt_types CASCADE;
RESET client_min_messages;
RESET search_path;
