-- The doc and keys queries of tests/scenarios/portable_batch.sh: their tables and types (schema bc,
-- types off the search_path in bc_types) and the corpus, one row per query with the param sets its
-- batched and single results are compared on (one array literal per param, as the worker sends).
-- Loaded into the extension's database and the portable install's alike.
SET client_min_messages = warning;
CREATE SCHEMA bc;
CREATE SCHEMA bc_types;
SET search_path = bc;
CREATE TABLE items (id int PRIMARY KEY, owner int, tag text, price int);
INSERT INTO items VALUES (1, 10, 'a', 5), (2, 10, 'b', 7), (3, 20, 'a', 1), (4, NULL, 'c', 2);
CREATE TABLE docsync_batch (id int PRIMARY KEY, owner int);
INSERT INTO docsync_batch VALUES (1, 100), (2, 200);
CREATE DOMAIN bc_types.positive AS int CHECK (VALUE > 0);
CREATE DOMAIN bc_types.ints AS int[];
CREATE DOMAIN bc_types.code2 AS char(2) CHECK (VALUE <> 'XX');
CREATE TYPE bc_types.color AS ENUM ('red', 'green', 'é,"x"');
CREATE TYPE bc_types.pair AS (a text, b int);
CREATE DOMAIN bc_types.pair_dom AS bc_types.pair CHECK ((VALUE).b IS NULL OR (VALUE).b > 0);
CREATE TYPE bc_types.textrange AS RANGE (subtype = text, collation = "C");
CREATE TABLE countries (code char(2) PRIMARY KEY, name text);
INSERT INTO countries VALUES ('FR', 'France'), ('DE', 'Germany'), ('é ', 'accent');
CREATE TABLE orders (id int PRIMARY KEY, country char(2), pq bc_types.pair, flags bit(3));
INSERT INTO orders VALUES (1, 'FR', '(x,1)', '101'), (2, 'DE', '(y,2)', '010'), (3, 'FR', NULL, NULL);
CREATE TABLE "Odd Table$1" ("$1" int PRIMARY KEY, "a$1" text);
INSERT INTO "Odd Table$1" VALUES (1, 'one'), (2, 'two');

CREATE TABLE corpus (id serial PRIMARY KEY, sql text NOT NULL, args text[]);
INSERT INTO corpus (sql, args) VALUES
-- regress/sql/31_sqlapi_batch.sql
  ('SELECT json_agg(tag ORDER BY id) FROM items WHERE owner = $1 AND tag <> $2', '{"{10,20,NULL,99}","{a,b,a,c}"}'),
  ($q$SELECT jsonb_build_object('owner', $1::int,
                            'n', (SELECT count(*) FROM items WHERE owner = $1),
                            'ids', (SELECT jsonb_agg(id ORDER BY id) FROM items WHERE owner = $1 OR $1 IS NULL))$q$,
   '{"{10,20,NULL,99}"}'),
  ($q$SELECT jsonb_build_object('a', $1::int + 1, 'b', $2::text || '!', 'c', CAST($1 AS bigint) * 2)$q$,
   '{"{1,2,NULL}","{x,NULL,\"y z\"}"}'),
  ($q$WITH mine AS (SELECT * FROM items WHERE owner = $1)
  SELECT jsonb_build_object(
    'n', (SELECT count(*) FROM mine),
    'has_a', EXISTS (SELECT FROM items WHERE owner = $1 AND tag = 'a'),
    'in', (SELECT jsonb_agg(id ORDER BY id) FROM items WHERE id IN (SELECT id FROM items WHERE owner = $1)),
    'lat', (SELECT jsonb_agg(x.p ORDER BY x.p)
              FROM items i CROSS JOIN LATERAL (SELECT i.price * $2::int AS p) AS x WHERE i.owner = $1))$q$,
   '{"{10,20,99}","{2,3,4}"}'),
  ('SELECT json_agg(tag ORDER BY id) FROM items WHERE owner = $1', '{"{10,99,NULL}"}'),
  ('SELECT to_jsonb(i) FROM items i WHERE owner = $1 ORDER BY id', '{"{99,10,NULL,20}"}'),
  ('SELECT to_jsonb(i.id) FROM items i WHERE owner = $1 ORDER BY id LIMIT $2', '{"{10,10,10}","{0,1,NULL}"}'),
  ($q$SELECT jsonb_build_object('s', '$1', 'e', E'\'$1', 'd', $$ $1 $$, 'i', "$1".v, /* $1 */ 'p', $1::int)
  FROM (SELECT 'ident' AS v) AS "$1" -- $1$q$, '{"{7,NULL}"}'),
  ('SELECT to_jsonb($1::int);', '{"{1,NULL}"}'),
  ('SELECT to_jsonb($1::int); -- after the statement', '{"{1,NULL}"}'),
  ('SELECT to_jsonb($1::int) -- the id', '{"{1,NULL}"}'),
  ('SELECT to_jsonb(b.owner) FROM items b WHERE b.id = $1', '{"{1,2,9}"}'),
  ('SELECT to_jsonb(docsync_batch.owner) FROM docsync_batch WHERE docsync_batch.id = $1', '{"{2,1,3}"}'),
  ('SELECT to_jsonb(d1.owner) FROM Docsync_Batch d1 JOIN docsync_batch AS DOCSYNC_BATCH_1 USING (id) WHERE d1.id = $1', '{"{2,1,3}"}'),
  ('SELECT to_jsonb($1::bc_types.positive)', '{"{1,NULL,3}"}'),
  ('SELECT to_jsonb($1::bc_types.color)', '{"{green,NULL,red}"}'),
  ('SELECT to_jsonb($1::varchar || $2::"char"::text)', '{"{a,b}","{x,y}"}'),
  ('SELECT to_jsonb($1::int[])', NULL),
  ('SELECT to_jsonb($1::bc_types.ints)', NULL),
  ('SELECT to_jsonb($1::cstring::text)', NULL),
  ('SELECT to_jsonb(area($1::box))', NULL),
  ('SELECT to_jsonb(count(*)) FROM items', NULL),
  ('SELECT owner FROM items WHERE id = $1', '{"{1,4,9}"}'),
-- regress/sql/33_sqlapi_batch_types.sql
  ('SELECT to_jsonb(c) FROM countries c WHERE c.code = $1', '{"{FR,DE,\"é \",FRA,NULL}"}'),
  ('SELECT to_jsonb($1::bit(3)::text)', '{"{101,1,0101,NULL}"}'),
  ('SELECT id FROM orders WHERE country = $1', '{"{FR,DE,XX}"}'),
  ('SELECT to_jsonb(o.id) FROM orders o WHERE o.pq = $1::bc_types.pair', '{"{\"(x,1)\",\"(y,2)\",\"(z,3)\",NULL}"}'),
  ('SELECT pg_catalog.jsonb_build_array($1::bc_types.pair, $2::int)', '{"{\"(x,1)\",\"(y,2)\",NULL,\"(,)\",\"(\\\"a,b\\\",3)\"}","{7,7,7,7,7}"}'),
  ('SELECT pg_catalog.jsonb_build_array($2::int, $1::bc_types.pair)', '{"{\"(x,1)\",\"(y,2)\",NULL,\"(,)\"}","{7,7,7,7}"}'),
  ($q$SELECT to_jsonb(U&"docsync\005fbatch".id) FROM orders U&"docsync\005fbatch" WHERE U&"docsync\005fbatch".id = $1$q$, '{"{1,2,3}"}'),
  ($q$SELECT to_jsonb(U&"docsync!005Fbatch" UESCAPE '!'.id) FROM orders U&"docsync!005Fbatch" UESCAPE '!' WHERE id = $1$q$, '{"{1,2,3}"}'),
  ($q$SELECT to_jsonb(U&"docsync\+00005Fbatch".id) FROM orders U&"docsync\+00005Fbatch" WHERE id = $1$q$, '{"{1,2,3}"}'),
  ($q$SELECT to_jsonb(id) FROM orders AS U&"docsync\005fbatch" WHERE id = $1$q$, '{"{1,2,3}"}'),
  ('SELECT to_jsonb($1::int[]) AS k', NULL),
  ('SELECT $1::bc_types.pair_dom AS k', '{"{\"(x,1)\",NULL,\"(,)\"}"}'),
  ('SELECT $1::bc_types.pair_dom[] AS k', NULL),
  ('SELECT $1::bc_types.code2 AS k', '{"{FR,\"é \",NULL}"}'),
  ('SELECT $1::bc_types.textrange AS k', '{"{\"[a,b)\",empty,NULL}"}'),
  ('SELECT $1::bc_types.textmultirange AS k', '{"{\"{[a,b)}\",\"{}\",NULL}"}'),
-- hostile lexing
  -- UESCAPE with an E'' string and a dollar-quoted one, and escapes spelling the alias's letters
  ($q$SELECT to_jsonb(U&"docsync#005Fbatch" UESCAPE E'#'.id) FROM orders U&"docsync#005Fbatch" UESCAPE E'#' WHERE id = $1$q$, '{"{1,3}"}'),
  ($q$SELECT to_jsonb(U&"docsync!005Fbatch" UESCAPE $$!$$.id) FROM orders U&"docsync!005Fbatch" UESCAPE $$!$$ WHERE id = $1$q$, '{"{1,3}"}'),
  ($q$SELECT to_jsonb(U&"d\0070csync_b\0061tch".id) FROM orders u&"d\0070csync_b\0061tch" WHERE id = $1$q$, '{"{1,3}"}'),
  ($q$SELECT to_jsonb(U&"d\006Fcsync_batch".id) FROM orders U&"d\006Fcsync_batch" WHERE id = $1$q$, '{"{1,3}"}'),
  ($q$SELECT to_jsonb(U&"\0064ocsync_batch_1".id) FROM orders U&"\0064ocsync_batch_1", docsync_batch WHERE U&"\0064ocsync_batch_1".id = $1 AND docsync_batch.id = 1$q$, '{"{1,3}"}'),
  -- a U& string is no identifier; a u& after an identifier character is no prefix
  ($q$SELECT jsonb_build_array(U&'d\0061t\0061 $1', $1::int)$q$, '{"{1,NULL}"}'),
  -- E'' strings: an escaped quote, a backslash before the closing quote, a continuation across a
  -- newline (and a comment) in escape mode, where '\' escapes the quote
  ($q$SELECT jsonb_build_array(E'\\', E'it\'s $1', e'\\\' $1', $1::int)$q$, '{"{1,2}"}'),
  (E'SELECT jsonb_build_array(E''a''\n''\\'' $1 '', $1::int)', '{"{1,2}"}'),
  (E'SELECT jsonb_build_array(E''a'' -- c\n  -- d\n''\\'' $1 '', $1::int)', '{"{1,2}"}'),
  (E'SELECT jsonb_build_array(''a''\n''b $1'', $1::int)', '{"{1,2}"}'),
  -- a -- comment ends at a carriage return
  (E'SELECT to_jsonb(1 -- the param follows\r + $1::int)', '{"{1,NULL}"}'),
  -- dollar quotes: tagged, nested tags, a tag of non-ASCII characters, one longer than 200
  ($q$SELECT jsonb_build_array($a$ $1 $$ $1 $a$, $b$$a$ $1$b$, $é$ $1 $é$, $😀$ $1 $😀$, $1::int)$q$, '{"{1,2}"}'),
  ('SELECT jsonb_build_array($' || repeat('t', 250) || '$ $1 $' || repeat('t', 250) || '$, $1::int)', '{"{1,2}"}'),
  -- identifiers holding $: a$1 is one identifier, "$1" a quoted one, and $1 after them a param
  ('SELECT to_jsonb(a$1) FROM (SELECT $1::int AS a$1) s', '{"{5,NULL}"}'),
  ($q$SELECT jsonb_build_object('k', t."$1", 'v', t."a$1") FROM "Odd Table$1" t WHERE t."$1" = $1$q$, '{"{1,2,3}"}'),
  ($q$SELECT jsonb_build_array(x$1$, $1::int) FROM (SELECT 7 AS x$1$) s$q$, '{"{1,2}"}'),
  -- $10 is not $1 followed by 0; operators right before a param
  ($q$SELECT jsonb_build_array($1::int, $2::int, $3::int, $4::int, $5::int, $6::int, $7::int, $8::int, $9::int, $10::text, -$1, 2*$2, $3+$4, $1=$5)$q$,
   '{"{1,2}","{2,3}","{3,4}","{4,5}","{5,6}","{6,7}","{7,8}","{8,9}","{9,10}","{ten,NULL}"}'),
  -- nested comments holding quotes and params
  ($q$SELECT /* a /* nested ' $1 */ " $2 */ to_jsonb($1::int)$q$, '{"{1,2}"}'),
  -- params of composite, domain, char(n) and bit(n) types, a table's row type
  ('SELECT to_jsonb($1::items)', '{"{\"(1,10,a,5)\",NULL,\"(,,,)\"}"}'),
  ('SELECT to_jsonb(c.name) FROM countries c WHERE c.code = $1::char(2)', '{"{FR,\"é \",NULL}"}'),
  ('SELECT to_jsonb(o.id) FROM orders o WHERE o.flags = $1::bit(3)', '{"{101,010,NULL}"}'),
  ('SELECT to_jsonb(o.id) FROM orders o WHERE o.flags = $1', '{"{101,010,NULL}"}'),
  ('SELECT to_jsonb(c.name) FROM countries c WHERE c.code = $1::bc_types.code2', '{"{FR,DE,NULL}"}'),
  ('SELECT jsonb_build_array($1::bc_types.pair_dom, $2::bc_types.positive, $3::bc_types.color)', '{"{\"(x,1)\",NULL}","{1,2}","{red,NULL}"}'),
  ('SELECT to_jsonb($1::text[])', NULL),
  ('SELECT to_jsonb($1::point)', '{"{\"(1,2)\",NULL}"}'),
  -- queries that are no doc query: both raise
  ('SELECT 1; SELECT $1', NULL),
  ('SELECT to_jsonb(x) FROM no_such_table x WHERE x.id = $1', NULL),
  ('DELETE FROM items WHERE id = $1', NULL);
RESET client_min_messages;

-- hostile fragments, four at a time as a hash picks them: strings, comments, dollar quotes, escapes and
-- continuations holding $1, between real params, under a column alias that may spell the batched
-- form's own (\r stands for a carriage return)
CREATE TABLE fragments (k serial, f text);
INSERT INTO fragments (f) VALUES ($f$'$1'$f$), ($f$E'\'$1'$f$), ($f$E'\\'$f$), ($f$$$ $1 $$$f$), ($f$$t$ $1 $$ $t$$f$),
  ($f$'a''$1'$f$), ($f$U&'\0024 1'$f$), ($f$/* $1 ' /* $2 */ */ 1$f$), ($f$E'-- $1 \''
$f$), ($f$E'a'
'\' $1 '$f$), ($f$'a' -- c
'b $2'$f$), ($f$B'101'$f$), ($f$X'1F'$f$), ($f$$1::int + 1$f$), ($f$-$1::int$f$), ($f$$2::text || '$1'$f$),
  ($f$1 -- x\r+ $1::int$f$), ($f$$é$ $1 $é$$f$), ($f$(SELECT count(*) FROM items WHERE owner = $1)$f$), ($f$$1::int IS NULL$f$),
  ($f$e'\x24\x31'$f$), ($f$$2 = 'x'$f$), ($f$'$10'$f$), ($f$$x$$1$x$$f$);
CREATE TABLE aliases (k serial, a text);
INSERT INTO aliases (a) VALUES (''), (' AS "x$1"'), (' AS U&"d\006Fcsync_batch"'), (' AS docsync_batch'),
  ($f$ AS U&"docsync!005Fbatch" UESCAPE '!'$f$), (' AS a$1'), (' AS "DOCSYNC_BATCH_1"'), (' -- $1');
INSERT INTO corpus (sql, args)
SELECT replace('SELECT jsonb_build_array(' || string_agg(f.f, ', ' ORDER BY n.n) || ', $1::int, $2::text)'
               || (SELECT a FROM aliases WHERE aliases.k = 1 + abs(hashint4(q.q)) % 8), '\r', chr(13)),
       '{"{1,2,NULL}","{a,NULL,x}"}'
  FROM generate_series(1, 80) AS q(q) CROSS JOIN generate_series(1, 4) AS n(n)
  JOIN fragments f ON f.k = 1 + abs(hashint4(q.q * 10 + n.n)) % 24
 GROUP BY q.q ORDER BY q.q;

-- every base type of pg_catalog that has arrays, as a doc query's and as a keys query's param
INSERT INTO corpus (sql, args)
SELECT format(f, format('%I.%I', n.nspname, t.typname)), NULL
  FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace,
       (VALUES ('SELECT pg_catalog.to_jsonb(($1::%s)::text)'), ('SELECT $1::%s AS k')) AS v(f)
 WHERE t.typtype = 'b' AND n.nspname = 'pg_catalog' AND t.typarray <> 0
   AND t.typsubscript <> 'pg_catalog.array_subscript_handler'::regproc
 ORDER BY t.typname, f;
-- and with type modifiers, which the batched form's arrays must not apply
INSERT INTO corpus (sql, args)
SELECT format(f, m), NULL
  FROM unnest(ARRAY['char(2)', 'character(1)', 'bit(3)', 'bit varying(2)', 'varchar(3)', 'timestamp(0)',
                    'timestamptz(1)', 'time(0)', 'timetz(2)', '"char"', 'name', 'numeric(4,1)']) AS m,
       (VALUES ('SELECT pg_catalog.to_jsonb(($1::%s)::text)'), ('SELECT $1::%s AS k')) AS v(f);

-- The values a query without param sets of its own is tried with (most parse as few types).
CREATE TABLE vals (v text);
INSERT INTO vals VALUES
  (NULL), (''), (' '), ('0'), ('1'), ('-1'), ('1.5'), ('32767'), ('true'), ('f'), ('a'), ('FR'), ('FR '), ('é'),
  ('😀'), (','), (';'), ('"'), ('\'), ('{'), ('{}'), ('(1,2)'), ('(x,1)'), ('[1,5)'), ('101'), ('empty'), ('NaN'),
  ('2026-02-28'), ('2026-02-28 12:34:56.789+02'), ('24:00:00'), ('00000000-0000-0000-0000-000000000000'),
  ('127.0.0.1'), ('08:00:2b:01:02:03'), ('0/16B3F28'), ('\x00ff'), ('<a>é</a>'), ('{"k": [1, "é"]}'),
  ('pg_class'), (E'line\nbreak');

-- The worker's array literal of values: {"v1","v2",NULL,…}.
CREATE FUNCTION array_literal(vals text[]) RETURNS text LANGUAGE sql IMMUTABLE AS $f$
  SELECT '{' || coalesce(string_agg(CASE WHEN v IS NULL THEN 'NULL'
                                         ELSE '"' || replace(replace(v, '\', '\\'), '"', '\"') || '"' END,
                                    ',' ORDER BY k), '') || '}'
    FROM unnest(vals) WITH ORDINALITY AS u(v, k)
$f$;

-- Each query's batched form, or 'no batched form: ' and why, or 'raises' when it is no doc query.
CREATE FUNCTION forms() RETURNS TABLE (id int, form text) LANGUAGE plpgsql AS $f$
DECLARE
  c record;
BEGIN
  FOR c IN SELECT * FROM corpus ORDER BY corpus.id LOOP
    id := c.id;
    BEGIN
      form := coalesce(docsync.batch_sql(c.sql, current_setting('search_path')),
                       'no batched form: ' || docsync.batch_problem(c.sql, NULL));
    EXCEPTION WHEN OTHERS THEN
      form := 'raises';
    END;
    RETURN NEXT;
  END LOOP;
END
$f$;

-- How the query's batched form (bsql) differs from the query run alone on each param set, as the worker
-- runs both (PREPAREd, types inferred, on untyped literals: one array literal per param batched).
-- A set the query refuses alone is left out of the batch. No row when they agree.
CREATE FUNCTION differences(sql text, arrays text[], bsql text) RETURNS SETOF text LANGUAGE plpgsql AS $f$
DECLARE
  nparams int;
  m int;
  kept int[] := '{}';
  alone jsonb[] := '{}';
  res jsonb;
  got jsonb := '[]';
  mine jsonb;
  r record;
  i int;
BEGIN
  nparams := (SELECT count(*) FROM regexp_matches(bsql, 'pg_catalog\.(unnest|generate_subscripts)\(\$', 'g'));
  arrays := coalesce(arrays, ARRAY[array_literal((SELECT array_agg(v) FROM vals))]);
  IF cardinality(arrays) <> nparams THEN
    RETURN NEXT format('%s params, %s arrays', nparams, cardinality(arrays));
    RETURN;
  END IF;
  m := cardinality(arrays[1]::text[]);
  EXECUTE 'PREPARE diff_alone AS ' || sql;
  FOR i IN 1 .. m LOOP
    BEGIN
      res := '[]';
      FOR r IN EXECUTE format('EXECUTE diff_alone(%s)', (SELECT string_agg(quote_nullable((a::text[])[i]), ', ' ORDER BY k)
                                                            FROM unnest(arrays) WITH ORDINALITY AS u(a, k))) LOOP
        res := res || jsonb_build_array(to_jsonb(r));
      END LOOP;
      kept := kept || i;
      alone := alone || (SELECT coalesce(jsonb_agg(e ORDER BY e::text), '[]') FROM jsonb_array_elements(res) e);
    EXCEPTION WHEN OTHERS THEN
      NULL;
    END;
  END LOOP;
  DEALLOCATE diff_alone;
  IF cardinality(kept) = 0 THEN
    RETURN;
  END IF;
  EXECUTE 'PREPARE diff_batch AS ' || bsql;
  FOR r IN EXECUTE format('EXECUTE diff_batch(%s)',
                          (SELECT string_agg(quote_literal(array_literal(ARRAY(SELECT (a::text[])[j] FROM unnest(kept) WITH ORDINALITY AS x(j, o) ORDER BY o))),
                                             ', ' ORDER BY k)
                             FROM unnest(arrays) WITH ORDINALITY AS u(a, k))) LOOP
    got := got || jsonb_build_array(to_jsonb(r));
  END LOOP;
  DEALLOCATE diff_batch;
  IF (SELECT array_agg((e ->> 'ord')::int ORDER BY x.pos) FROM jsonb_array_elements(got) WITH ORDINALITY AS x(e, pos))
     IS DISTINCT FROM (SELECT array_agg((e ->> 'ord')::int ORDER BY (e ->> 'ord')::int) FROM jsonb_array_elements(got) AS x(e)) THEN
    RETURN NEXT format('batched rows out of ordinal order: %s', got);
  END IF;
  FOR i IN 1 .. cardinality(kept) LOOP
    mine := (SELECT coalesce(jsonb_agg(e - 'ord' ORDER BY e::text), '[]') FROM jsonb_array_elements(got) AS x(e)
              WHERE (e ->> 'ord')::int = i);
    IF alone[i] = '[]' THEN
      IF jsonb_array_length(mine) <> 1 OR EXISTS (SELECT FROM jsonb_each(mine -> 0) AS v WHERE v.value <> 'null') THEN
        RETURN NEXT format('set %s: alone no row, batched %s', kept[i], mine);
      END IF;
    ELSIF NOT (SELECT coalesce(bool_and(e -> 'present' = '1'), false) FROM jsonb_array_elements(mine) AS x(e))
          OR (SELECT jsonb_agg(e - 'present' ORDER BY (e - 'present')::text) FROM jsonb_array_elements(mine) AS x(e))
             IS DISTINCT FROM alone[i] THEN
      RETURN NEXT format('set %s: alone %s, batched %s', kept[i], alone[i], mine);
    END IF;
  END LOOP;
END
$f$;
