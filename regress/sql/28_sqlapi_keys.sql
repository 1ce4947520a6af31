-- Equal keys name one doc: a channel spells each key as its value prints, so key types whose equal
-- values print differently are refused where they would name docs, with why and what to use
\set VERBOSITY default
\set SHOW_CONTEXT never
SET synchronous_commit = on;
SET client_min_messages = warning;

CREATE SCHEMA keys;
SET search_path = keys;
CREATE EXTENSION IF NOT EXISTS citext SCHEMA keys;
CREATE COLLATION keys.ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
CREATE TABLE acct (id int PRIMARY KEY, rate numeric, score float8, span interval, email citext,
                   handle text COLLATE keys.ci, code text, at timestamptz);
ALTER TABLE acct REPLICA IDENTITY FULL;
RESET client_min_messages;

-- doc query params: numeric (1.0 = 1.00), floats (0 = -0), interval (1 day = 24:00:00), citext
SELECT docsync.define_query('byrate', 'SELECT to_jsonb(count(*)) FROM acct WHERE rate = $1::numeric', params => ARRAY['rate'], watches => 'manual');
SELECT docsync.define_query('byscore', 'SELECT to_jsonb(count(*)) FROM acct WHERE score = $1', params => ARRAY['score'], watches => 'manual');
SELECT docsync.define_query('byspan', 'SELECT to_jsonb(count(*)) FROM acct WHERE span = $1', params => ARRAY['span'], watches => 'manual');
SELECT docsync.define_query('byemail', 'SELECT to_jsonb(count(*)) FROM acct WHERE email = $1', params => ARRAY['email'], watches => 'manual');
-- numeric ranges ([1.0,2) = [1.00,2)) and a domain over numeric(p,s) (its scale fixed, its input
-- not: 1.5 and 1.50 are one value)
CREATE DOMAIN cents AS numeric(10,2);
SELECT docsync.define_query('byband', 'SELECT to_jsonb(count(*)) FROM acct WHERE rate <@ $1::numrange', params => ARRAY['band'], watches => 'manual');
SELECT docsync.define_query('bybands', 'SELECT to_jsonb(count(*)) FROM acct WHERE rate <@ $1::nummultirange', params => ARRAY['band'], watches => 'manual');
SELECT docsync.define_query('bycents', 'SELECT to_jsonb(count(*)) FROM acct WHERE rate = $1::cents', params => ARRAY['rate'], watches => 'manual');
-- the canonical form the hint suggests is accepted
SELECT docsync.define_query('byrate', 'SELECT to_jsonb(count(*)) FROM acct WHERE trim_scale(rate)::text = $1::text', params => ARRAY['rate'], watches => 'manual');
-- a direct watch on the numeric column is refused with the route that works for a watch (the
-- query-side $n::text cannot apply there), and that route is accepted
SELECT docsync.watch('byrate', 'acct', params => ARRAY['rate']);
SELECT docsync.watch('byrate', 'acct', keys_sql => 'SELECT trim_scale($1::numeric)::text', keys_args => ARRAY['rate']) > 0 AS watched_rate;
-- text params are fine, and so is timestamptz: every worker connection prints it in UTC
SELECT docsync.define_query('bycode', 'SELECT to_jsonb(count(*)) FROM acct WHERE code = $1', params => ARRAY['code'], watches => 'manual');
SELECT docsync.define_query('byat', 'SELECT to_jsonb(count(*)) FROM acct WHERE at = $1', params => ARRAY['at'], watches => 'manual');
-- a watched column under a nondeterministic collation ('A' = 'a') cannot name docs either
SELECT docsync.watch('bycode', 'acct', params => ARRAY['handle']);
SELECT docsync.define_query('byemail', 'SELECT to_jsonb(count(*)) FROM acct WHERE lower(email::text) = $1::text', params => ARRAY['email'], watches => 'manual');
SELECT docsync.watch('byemail', 'acct', params => ARRAY['email']);
SELECT docsync.watch('bycode', 'acct', params => ARRAY['code']) > 0 AS watched_code;
SELECT docsync.watch('byat', 'acct', params => ARRAY['at']) > 0 AS watched_timestamptz;
-- nor a keys query returning such a type
SELECT docsync.define_query('one', 'SELECT to_jsonb($1::int)', params => ARRAY['id'], watches => 'manual');
SELECT docsync.watch('one', 'acct', keys_sql => 'SELECT rate FROM acct WHERE id = $1', keys_args => ARRAY['id']);
-- a name param takes a name only: a text longer than 63 bytes is cut as a name, so the change
-- would name another channel than its doc's; a name column feeds a text param
ALTER TABLE acct ADD COLUMN login text, ADD COLUMN nick name;
SELECT docsync.define_query('bylogin', 'SELECT to_jsonb(count(*)) FROM acct WHERE login::name = $1::name', params => ARRAY['login'], watches => 'manual');
SELECT docsync.watch('bylogin', 'acct', params => ARRAY['login']);
SELECT docsync.watch('bylogin', 'acct', params => ARRAY['nick']) > 0 AS watched_name;
SELECT docsync.watch('bycode', 'acct', params => ARRAY['nick']) > 0 AS watched_name_as_text;
-- a domain's size goes with its key type (the worker refuses 'abc ' for a varchar(3), 'B1010'
-- for a bit(4)); another typmod leaves the key unchecked ('')
CREATE DOMAIN code3 AS varchar(3);
CREATE DOMAIN code3b AS code3;
CREATE DOMAIN flag5 AS char(5);
CREATE DOMAIN at0 AS timestamptz(0);
CREATE DOMAIN bits4 AS bit(4);
SELECT docsync.define_query('sized', 'SELECT to_jsonb(ARRAY[$1::code3::text, $2::code3b::text, $3::flag5::text, $4::at0::text, $5::varchar::text, $6::bits4::text])',
                            params => ARRAY['a', 'b', 'c', 'd', 'e', 'f'], watches => 'manual');
SELECT docsync.stored_key_types('sized');
-- a char(n) column's param, $n::bpchar and $n::character are bpchar without a width, whose keys
-- the worker spells without trailing spaces, as docsync.channel() spells a char(n) value (its
-- text cast); a bpchar[] key with each element so cut (array's text[] cast)
CREATE TABLE countries (code char(3) PRIMARY KEY);
SELECT docsync.define_query('bychar', 'SELECT to_jsonb(c) FROM countries c WHERE c.code = $1 AND $2::bpchar IS NOT NULL AND $3::character IS NOT NULL AND c.code = ANY ($4::bpchar[])',
                            params => ARRAY['a', 'b', 'c', 'd'], watches => 'manual');
SELECT docsync.stored_key_types('bychar');
SELECT docsync.channel('bychar', code, code, code, ARRAY[code, NULL]::text[]::text)
  FROM (VALUES ('FR'::char(3)), ('  '::char(3)), ('F R'::char(3))) v(code);
SELECT name FROM docsync.queries ORDER BY name;

SELECT docsync.drop_query(name) FROM docsync.query_defs WHERE name IN ('byrate', 'byemail', 'bycode', 'byat', 'one', 'bylogin', 'sized', 'bychar');
SET client_min_messages = warning;
DROP SCHEMA keys CASCADE;
RESET client_min_messages;
