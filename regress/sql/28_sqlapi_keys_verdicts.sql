-- The verdict for every built-in base type with an equality operator (an operator = or ~= of the
-- type with itself, or a default btree or hash operator class): which may name docs and why the
-- others may not. A type is accepted when equal values print alike, checked by the server below
-- for the ones whose equality is not plainly bytewise; a type a new PostgreSQL adds shows up here.
-- Also: jsonb and the geometric types are refused at definition with their hint, and an array of a
-- domain over bpchar without a width (which the worker could not trim) is refused, while the
-- domain alone is the worker's bpchar.
\set VERBOSITY terse
SET synchronous_commit = on;
SET client_min_messages = warning;

SELECT t.oid::regtype AS type, coalesce(docsync.key_type_problem(t.oid), 'accepted') AS verdict
  FROM pg_type t
 WHERE t.typnamespace = 'pg_catalog'::regnamespace AND t.typtype = 'b'
   AND t.typsubscript <> 'array_subscript_handler'::regproc
   AND (EXISTS (SELECT FROM pg_operator o WHERE o.oprname IN ('=', '~=') AND o.oprleft = t.oid AND o.oprright = t.oid)
        OR EXISTS (SELECT FROM pg_opclass c JOIN pg_am a ON a.oid = c.opcmethod
                    WHERE c.opcdefault AND c.opcintype = t.oid AND a.amname IN ('btree', 'hash')))
 ORDER BY t.typname;

-- accepted types whose = is not a plain byte comparison: equal values print alike
SELECT 'a & b'::tsquery = 'b & a'::tsquery AS tsquery_reordered_equal,
       'b:1 a:2'::tsvector::text = 'a:2 b:1'::tsvector::text AS tsvector_normalised,
       '1.5'::money::text = '1.50'::money::text AS money_canonical,
       '08:00:2b:01:02:03'::macaddr8::text = '08:00:2b:ff:fe:01:02:03'::macaddr8::text AS macaddr8_canonical,
       '10.0.0.1/32'::inet::text = '10.0.0.1'::inet::text AS inet_canonical,
       '10.0.0.1/32'::inet = '10.0.0.1/32'::cidr AS inet_equals_cidr,
       '0/16B3748'::pg_lsn::text = '0/16b3748'::pg_lsn::text AS lsn_canonical,
       '12:00+01'::timetz = '11:00+00'::timetz AS timetz_other_zone_equal,
       '101'::bit(3) = '101'::varbit AS bit_equals_varbit,
       'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11'::uuid::text = 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11' AS uuid_canonical,
       '1 2'::oidvector::text = '1  2'::oidvector::text AS oidvector_canonical;
-- refused ones: equal, printed differently
SELECT '{"size": 1}'::jsonb = '{"size": 1.0}'::jsonb AS jsonb_equal, '{"size": 1}'::jsonb::text, '{"size": 1.0}'::jsonb::text;
SELECT '(1,1),(0,0)'::box = '(2,0.5),(0,0)'::box AS box_equal, '<(0,0),1>'::circle = '<(5,5),1>'::circle AS circle_equal,
       '[(0,0),(1,1)]'::path = '[(5,5),(7,9)]'::path AS path_equal, '(0,0)'::point ~= '(-0,0)'::point AS point_same;

-- at definition: the message and the hint
CREATE SCHEMA kverd;
SET search_path = kverd;
CREATE TABLE items (id int PRIMARY KEY, attrs jsonb NOT NULL, area box NOT NULL, at point NOT NULL);
\set VERBOSITY default
\set SHOW_CONTEXT never
SELECT docsync.define_query('byattrs', 'SELECT to_jsonb(count(*)) FROM items WHERE attrs = $1', params => ARRAY['attrs'], watches => 'manual');
\set VERBOSITY terse
SELECT docsync.define_query('byarea', 'SELECT to_jsonb(count(*)) FROM items WHERE area = $1', params => ARRAY['area'], watches => 'manual');
SELECT docsync.define_query('byat', 'SELECT to_jsonb(count(*)) FROM items WHERE at ~= $1', params => ARRAY['at'], watches => 'manual');
SELECT docsync.define_query('byattrs', 'SELECT to_jsonb(count(*)) FROM items WHERE attrs = ANY($1)', params => ARRAY['attrs'], watches => 'manual');
-- the canonical route: a member of a canonical type
SELECT docsync.define_query('bysize', 'SELECT to_jsonb(count(*)) FROM items WHERE (attrs->>''size'')::int = $1', params => ARRAY['size'], watches => 'manual');
-- a direct watch on a jsonb column: refused, with no canonical-text hint that would not be one
SELECT docsync.define_query('bytext', 'SELECT to_jsonb($1::text)', params => ARRAY['k'], watches => 'manual');
SELECT docsync.watch('bytext', 'items', params => ARRAY['attrs']);

-- a domain over bpchar without a width: as an array, refused (no pg_catalog key type, so the
-- worker would not trim it); alone, the worker's bpchar; with a width, padded, so one spelling
CREATE DOMAIN bp AS bpchar;
CREATE DOMAIN bp_again AS bp;
CREATE DOMAIN bp2 AS bpchar(2);
CREATE DOMAIN bps AS bpchar[];
CREATE TABLE ships (id int PRIMARY KEY, codes bp[] NOT NULL, again bp_again[] NOT NULL, fixed bp2[] NOT NULL,
                    dom bps NOT NULL, code bp NOT NULL);
\set VERBOSITY default
\set SHOW_CONTEXT never
SELECT docsync.define_query('bycodes', 'SELECT to_jsonb(count(*)) FROM ships WHERE codes = $1', params => ARRAY['codes'], watches => 'manual');
\set VERBOSITY terse
SELECT docsync.define_query('byagain', 'SELECT to_jsonb(count(*)) FROM ships WHERE again = $1', params => ARRAY['again'], watches => 'manual');
SELECT '{FR}'::bp[] = '{"FR "}'::bp[] AS bp_array_equal;
SELECT docsync.define_query('byfixed', 'SELECT to_jsonb(count(*)) FROM ships WHERE fixed = $1', params => ARRAY['fixed'], watches => 'manual');
SELECT docsync.define_query('bydom', 'SELECT to_jsonb(count(*)) FROM ships WHERE dom = $1', params => ARRAY['dom'], watches => 'manual');
SELECT docsync.define_query('bycode', 'SELECT to_jsonb(count(*)) FROM ships WHERE code = $1', params => ARRAY['code'], watches => 'manual');
SELECT name, docsync.stored_key_types(name) FROM docsync.query_defs
 WHERE name IN ('byfixed', 'bydom', 'bycode') ORDER BY name;

SELECT docsync.drop_query(name) FROM docsync.query_defs WHERE name IN ('bysize', 'bytext', 'byfixed', 'bydom', 'bycode') ORDER BY name;
DROP SCHEMA kverd CASCADE;
RESET client_min_messages;
RESET search_path;
