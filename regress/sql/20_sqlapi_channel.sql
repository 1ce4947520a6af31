-- docsync.channel(): channel names with the worker's escaping, checked against the shared vectors
\set VERBOSITY default
\set SHOW_CONTEXT never
SET synchronous_commit = on;

\getenv abs_srcdir PG_ABS_SRCDIR
\set vectors_path :abs_srcdir '/../tests/channel_vectors.tsv'
CREATE TEMP TABLE channel_vectors AS
  SELECT n AS line, split_part(l, E'\t', 1) AS query, split_part(l, E'\t', 2)::jsonb AS vals,
         split_part(l, E'\t', 3) AS expected
    FROM regexp_split_to_table(pg_read_file(:'vectors_path'), E'\n') WITH ORDINALITY AS t(l, n)
   WHERE l <> '' AND l NOT LIKE '#%';

-- the file has vectors for every case the specification names
SELECT count(*) >= 15 AS enough_vectors,
       bool_or(vals @> '[null]') AS has_null,
       bool_or(vals @> '[""]') AS has_empty,
       bool_or(expected LIKE '%\%3A%') AS has_colon,
       bool_or(expected LIKE '%\%25%') AS has_percent,
       bool_or(vals::text LIKE '% %') AS has_space,
       bool_or(octet_length(vals::text) > length(vals::text)) AS has_unicode,
       bool_or(jsonb_array_length(vals) = 0) AS has_no_values
  FROM channel_vectors;

-- every vector: no mismatches (each shows up here if it fails)
SELECT v.line, v.query, v.vals, v.expected, c.channel AS got
  FROM channel_vectors v
  CROSS JOIN LATERAL (
    SELECT docsync.channel(v.query, VARIADIC coalesce(array_agg(e #>> '{}' ORDER BY i), '{}'::text[])) AS channel
      FROM jsonb_array_elements(v.vals) WITH ORDINALITY AS a(e, i)) c
 WHERE c.channel IS DISTINCT FROM v.expected;
SELECT count(*) AS vectors_checked FROM channel_vectors;

-- the spellings a client writes by hand
SELECT docsync.channel('order', '42');
SELECT docsync.channel('order', 'a:b', NULL, '');
SELECT docsync.channel('order', 42::text, 'x');
SELECT docsync.channel('leaderboard');
SELECT docsync.channel('game.board', VARIADIC ARRAY['7', '%']);

-- injective: values that differ only by escaping give different channels
SELECT docsync.channel('q', 'a:b') <> docsync.channel('q', 'a', 'b') AS colon_vs_two_values,
       docsync.channel('q', NULL) <> docsync.channel('q', '%00') AS null_vs_text,
       docsync.channel('q', '') <> docsync.channel('q', NULL) AS empty_vs_null,
       docsync.channel('q', '') <> docsync.channel('q') AS empty_vs_none;

-- values crafted to collide (tests/unit/channel_test.cpp checks the same atoms in the worker): every
-- sequence of up to three of them names another doc and gets its own channel
WITH atoms(a) AS (VALUES (NULL), (''), (':'), ('%'), ('%3A'), ('%00'), ('%25'), ('a'), ('a:'), (':a'),
                         (E'\x01'), (E'\n'), ('%0A')),
     seqs(v) AS (SELECT ARRAY[]::text[]
                 UNION ALL SELECT ARRAY[a1.a] FROM atoms a1
                 UNION ALL SELECT ARRAY[a1.a, a2.a] FROM atoms a1, atoms a2
                 UNION ALL SELECT ARRAY[a1.a, a2.a, a3.a] FROM atoms a1, atoms a2, atoms a3)
SELECT count(*) AS sequences, count(DISTINCT docsync.channel('q', VARIADIC v)) AS channels FROM seqs;

-- errors
SELECT docsync.channel(NULL, '1');
SELECT docsync.channel('bad name', '1');
SELECT docsync.channel('-dash', '1');
SELECT docsync.channel(repeat('q', 64));
SELECT docsync.channel(repeat('q', 63)) = 'db:' || repeat('q', 63) AS longest_name;
SELECT docsync.channel('order', VARIADIC NULL::text[]);
SELECT docsync.channel('order', VARIADIC ARRAY[['a', 'b'], ['c', 'd']]);
