-- Equal keys name one doc at any depth: an array, a composite (in a composite, in an array, with an
-- array attribute), a range or a multirange whose parts have equal values that print differently is
-- refused where it would name docs, naming the part; keys made only of parts that print alike are not
\set VERBOSITY terse
SET synchronous_commit = on;
SET client_min_messages = warning;

CREATE SCHEMA nest;
SET search_path = nest;
CREATE EXTENSION IF NOT EXISTS citext SCHEMA nest;
CREATE COLLATION nest.ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
CREATE TYPE pair AS (name text, price numeric);             -- (x,1.0) = (x,1.00)
CREATE TYPE outer_pair AS (p pair, n int);                  -- a composite in a composite
CREATE TYPE scores AS (n int, xs float8[]);                 -- an array attribute: {0} = {-0}
CREATE TYPE spans AS (n int, span interval);                -- 1 day = 24:00:00
CREATE TYPE mails AS (n int, mail citext);                  -- A = a
CREATE TYPE handles AS (n int, handle text COLLATE ci);     -- an attribute's own collation
CREATE TYPE coded AS (code bpchar, n int);                  -- (FR,1) and ("FR ",1), printed as given
CREATE TYPE codes AS (codes bpchar[], n int);
CREATE TYPE floatrange AS RANGE (subtype = float8);         -- [0,1) = [-0,1)
CREATE TYPE cirange AS RANGE (subtype = text, collation = ci);
CREATE TYPE charrange AS RANGE (subtype = bpchar);          -- [FR,GE) = ["FR ",GE)
CREATE DOMAIN pair_dom AS pair;
CREATE DOMAIN ci_text AS text COLLATE ci;
CREATE TYPE cut AS (a int, gone numeric, b text);
ALTER TYPE cut DROP ATTRIBUTE gone;                         -- a dropped attribute is no part
-- accepted: what prints alike when equal, at any depth
CREATE TYPE fixed AS (code char(2), n int);                 -- a width: printed padded, one spelling
CREATE TYPE plain AS (name text, n int, at timestamptz, tags text[]);
CREATE TYPE nested_plain AS (p plain, f fixed[]);
CREATE TYPE mood AS ENUM ('red', 'green');
CREATE TYPE textrange AS RANGE (subtype = text, collation = "C");
CREATE TABLE acct (id int PRIMARY KEY, tags text[] COLLATE ci, pq pair, fx fixed);
ALTER TABLE acct REPLICA IDENTITY FULL;
RESET client_min_messages;

-- arrays of refused types
SELECT docsync.define_query('k', 'SELECT to_jsonb($1::numeric[])', params => ARRAY['k'], watches => 'manual');
SELECT docsync.define_query('k', 'SELECT to_jsonb($1::float8[])', params => ARRAY['k'], watches => 'manual');
SELECT docsync.define_query('k', 'SELECT to_jsonb($1::real[])', params => ARRAY['k'], watches => 'manual');
SELECT docsync.define_query('k', 'SELECT to_jsonb($1::interval[])', params => ARRAY['k'], watches => 'manual');
SELECT docsync.define_query('k', 'SELECT to_jsonb($1::citext[])', params => ARRAY['k'], watches => 'manual');
SELECT docsync.define_query('k', 'SELECT to_jsonb($1::ci_text[])', params => ARRAY['k'], watches => 'manual');
SELECT docsync.define_query('k', 'SELECT to_jsonb($1::numrange[])', params => ARRAY['k'], watches => 'manual');
-- composites with a refused attribute, at any depth
SELECT docsync.define_query('k', 'SELECT to_jsonb($1::pair)', params => ARRAY['k'], watches => 'manual');
SELECT docsync.define_query('k', 'SELECT to_jsonb($1::outer_pair)', params => ARRAY['k'], watches => 'manual');
SELECT docsync.define_query('k', 'SELECT to_jsonb($1::pair[])', params => ARRAY['k'], watches => 'manual');
SELECT docsync.define_query('k', 'SELECT to_jsonb($1::scores)', params => ARRAY['k'], watches => 'manual');
SELECT docsync.define_query('k', 'SELECT to_jsonb($1::spans)', params => ARRAY['k'], watches => 'manual');
SELECT docsync.define_query('k', 'SELECT to_jsonb($1::mails)', params => ARRAY['k'], watches => 'manual');
SELECT docsync.define_query('k', 'SELECT to_jsonb($1::handles)', params => ARRAY['k'], watches => 'manual');
-- a width-less bpchar attribute (and array attribute) keeps the blanks it was given
SELECT docsync.define_query('k', 'SELECT to_jsonb($1::coded)', params => ARRAY['k'], watches => 'manual');
SELECT docsync.define_query('k', 'SELECT to_jsonb($1::codes)', params => ARRAY['k'], watches => 'manual');
-- ranges and multiranges over a refused subtype, or under a nondeterministic collation
SELECT docsync.define_query('k', 'SELECT to_jsonb($1::floatrange)', params => ARRAY['k'], watches => 'manual');
SELECT docsync.define_query('k', 'SELECT to_jsonb($1::floatmultirange)', params => ARRAY['k'], watches => 'manual');
SELECT docsync.define_query('k', 'SELECT to_jsonb($1::cirange)', params => ARRAY['k'], watches => 'manual');
SELECT docsync.define_query('k', 'SELECT to_jsonb($1::charrange)', params => ARRAY['k'], watches => 'manual');
SELECT docsync.define_query('k', 'SELECT to_jsonb($1::numrange)', params => ARRAY['k'], watches => 'manual');
SELECT docsync.define_query('k', 'SELECT to_jsonb($1::nummultirange)', params => ARRAY['k'], watches => 'manual');
-- domains over any of them
SELECT docsync.define_query('k', 'SELECT to_jsonb($1::pair_dom)', params => ARRAY['k'], watches => 'manual');
SELECT docsync.define_query('k', 'SELECT to_jsonb($1::pair_dom[])', params => ARRAY['k'], watches => 'manual');
SELECT name FROM docsync.query_defs WHERE name = 'k';
-- a type nested deeper than the walk goes is refused rather than taken unchecked (composites cannot
-- contain themselves; 40 levels of composites of composites stand in for a loop)
SET client_min_messages = warning;
CREATE TYPE deep0 AS (n int);
DO $$
BEGIN
  FOR i IN 1 .. 40 LOOP
    EXECUTE format('CREATE TYPE nest.deep%s AS (d nest.deep%s)', i, i - 1);
  END LOOP;
END
$$;
RESET client_min_messages;
SELECT docsync.key_type_problem('deep20') IS NULL AS deep20_accepted;
SELECT regexp_replace(docsync.key_type_problem('deep40'), '^(attribute "d" of type nest.deep[0-9]+: )+', '') AS deep40;

-- the error in full: why, and a route that works for a key with parts
\set VERBOSITY default
\set SHOW_CONTEXT never
SELECT docsync.define_query('k', 'SELECT to_jsonb($1::pair)', params => ARRAY['k'], watches => 'manual');
SELECT docsync.define_query('k', 'SELECT to_jsonb($1::numeric[])', params => ARRAY['k'], watches => 'manual');
-- that route is accepted
SELECT docsync.define_query('bypair', 'SELECT to_jsonb(count(*)) FROM acct a WHERE ROW((a.pq).name, trim_scale((a.pq).price))::text = $1::text',
                            params => ARRAY['pq'], watches => 'manual');
-- a watched column (a text[] under a nondeterministic collation, a composite): the route for a watch
SELECT docsync.watch('bypair', 'acct', params => ARRAY['tags']);
SELECT docsync.watch('bypair', 'acct', params => ARRAY['pq']);
SELECT docsync.watch('bypair', 'acct', keys_sql => 'SELECT ROW(($1::nest.pair).name, trim_scale(($1::nest.pair).price))::text',
                     keys_args => ARRAY['pq']) > 0 AS watched_pair;
-- a keys query returning such a type
SELECT docsync.define_query('one', 'SELECT to_jsonb($1::int)', params => ARRAY['id'], watches => 'manual');
SELECT docsync.watch('one', 'acct', keys_sql => 'SELECT ARRAY[id::numeric] FROM acct WHERE id = $1', keys_args => ARRAY['id']);
\set VERBOSITY terse

-- accepted: a char(2) attribute (printed padded), text/int composites and composites of them, arrays
-- of composites, a width-less bpchar and bpchar[] at the top level (the worker cuts their blanks),
-- int4range, a text range under "C", an enum array, a composite whose refused attribute was dropped
SELECT docsync.define_query('ok', 'SELECT to_jsonb(ARRAY[$1::fixed::text, $2::plain::text, $3::nested_plain::text, $4::fixed[]::text,
                                   $5::bpchar::text, $6::bpchar[]::text, $7::int4range::text, $8::textrange::text, $9::mood[]::text,
                                   $10::cut::text, $11::int8multirange::text, $12::text[]::text])',
                            params => ARRAY['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j', 'k', 'l'], watches => 'manual');
SELECT docsync.watch('ok', 'acct', keys_sql => $$SELECT fx, NULL::nest.plain, NULL::nest.nested_plain, ARRAY[fx], 'FR'::bpchar, '{FR}'::bpchar[],
                                                         '[1,2)'::int4range, NULL::nest.textrange, '{red}'::nest.mood[], NULL::nest.cut,
                                                         '{}'::int8multirange, '{a}'::text[] FROM acct WHERE id = $1$$,
                     keys_args => ARRAY['id']) > 0 AS watched_ok;
SELECT docsync.define_query('byfixed', 'SELECT to_jsonb(count(*)) FROM acct WHERE fx = $1::fixed', params => ARRAY['fx'], watches => 'manual');
SELECT docsync.watch('byfixed', 'acct', params => ARRAY['fx']) > 0 AS watched_fixed;
SELECT name FROM docsync.queries WHERE name IN ('ok', 'byfixed', 'bypair') ORDER BY name;

SELECT docsync.drop_query(name) FROM docsync.query_defs WHERE name IN ('bypair', 'one', 'ok', 'byfixed') ORDER BY name;
SET client_min_messages = warning;
DROP SCHEMA nest CASCADE;
RESET client_min_messages;
RESET search_path;
