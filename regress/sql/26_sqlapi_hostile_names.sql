-- SQL injection attempts in every name the SQL API takes. Each one is refused with an error naming
-- the problem and the fix, or stored as given and used safely: SQL built from names quotes them,
-- and the canary table the injections try to drop survives.
\set VERBOSITY default
\set SHOW_CONTEXT never
SET synchronous_commit = on;

CREATE TABLE canary (id int PRIMARY KEY);
INSERT INTO canary VALUES (1);
-- Legal PostgreSQL names that look like injections: docsync must take them as they are.
CREATE TABLE "'; DROP TABLE canary; --" ("x"" , ""y" int PRIMARY KEY, "a\b" text, "ünïcødé" int, "it's" int);
ALTER TABLE "'; DROP TABLE canary; --" REPLICA IDENTITY FULL;
CREATE TABLE "k"" ; DROP TABLE canary; --" ("ref""); DROP TABLE canary; --" int, "x"" , ""y" int);
CREATE TABLE ppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppp (id int PRIMARY KEY);

-- query names are channel segments: everything else is refused, saying what a name may hold
SELECT docsync.define_query(E'\'; DROP TABLE canary; --', $$SELECT '{}'::jsonb$$, watches => 'manual');
SELECT docsync.define_query('x" , "y', $$SELECT '{}'::jsonb$$, watches => 'manual');
SELECT docsync.define_query(E'a\\b', $$SELECT '{}'::jsonb$$, watches => 'manual');
SELECT docsync.define_query('ünïcødé', $$SELECT '{}'::jsonb$$, watches => 'manual');
SELECT docsync.define_query('a:b', $$SELECT '{}'::jsonb$$, watches => 'manual');
SELECT docsync.define_query('50%', $$SELECT '{}'::jsonb$$, watches => 'manual');
SELECT docsync.define_query(E'tab\there', $$SELECT '{}'::jsonb$$, watches => 'manual');
SELECT docsync.define_query('', $$SELECT '{}'::jsonb$$, watches => 'manual');
SELECT docsync.define_query(NULL, $$SELECT '{}'::jsonb$$, watches => 'manual');
SELECT docsync.define_query(repeat('q', 64), $$SELECT '{}'::jsonb$$, watches => 'manual');
SELECT docsync.define_query(repeat('q', 63), $$SELECT '{}'::jsonb$$, watches => 'manual');   -- the longest allowed
SELECT docsync.drop_query(repeat('q', 63));

-- param names likewise
SELECT docsync.define_query('p', $$SELECT jsonb_build_object('id', $1::int)$$, params => ARRAY[E'\'; DROP TABLE canary; --'], watches => 'manual');
SELECT docsync.define_query('p', $$SELECT jsonb_build_object('id', $1::int)$$, params => ARRAY['x" , "y'], watches => 'manual');
SELECT docsync.define_query('p', $$SELECT jsonb_build_object('id', $1::int)$$, params => ARRAY[E'a\\b'], watches => 'manual');
SELECT docsync.define_query('p', $$SELECT jsonb_build_object('id', $1::int)$$, params => ARRAY[repeat('p', 64)], watches => 'manual');
SELECT docsync.define_query('p', $$SELECT jsonb_build_object('id', $1::int)$$, params => ARRAY[NULL], watches => 'manual');

-- a doc query over the hostile table: the query text is the customer's own SQL, one statement
SELECT docsync.define_query('h', $$SELECT to_jsonb(h) FROM "'; DROP TABLE canary; --" h WHERE "x"" , ""y" = $1$$,
                            params => ARRAY['id'], watches => 'manual');
SELECT docsync.define_query('h2', $$SELECT '{}'::jsonb; DROP TABLE canary$$, watches => 'manual');

-- table names are SQL names: unquoted special characters are refused with the quoted spelling as the fix
SELECT docsync.watch('h', E'\'; DROP TABLE canary; --', params => ARRAY['x" , "y']);
SELECT docsync.watch('h', 'x" , "y', params => ARRAY['x" , "y']);
SELECT docsync.watch('h', E'a\\b', params => ARRAY['x" , "y']);
-- over-long names are truncated as everywhere in SQL (the table was created truncated too)
SELECT docsync.watch('h', 'ppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppp', params => ARRAY['id']) IS NOT NULL AS watched;
SELECT docsync.watch('h', 'pppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppxx', params => ARRAY['id']);
-- column names are taken exactly as the table spells them (no quoting): others are listed quoted
SELECT docsync.watch('h', '"''; DROP TABLE canary; --"', params => ARRAY['"x"" , ""y"']);
SELECT docsync.watch('h', '"''; DROP TABLE canary; --"', params => ARRAY['x , y']);
SELECT docsync.watch('h', '"''; DROP TABLE canary; --"', params => ARRAY[repeat('x', 70)]);
SELECT docsync.watch('h', '"''; DROP TABLE canary; --"', params => ARRAY['x" , "y']) IS NOT NULL AS direct_watch;
-- keys queries: the keys_args columns exactly as spelled, keys_sql one read-only SELECT
SELECT docsync.watch('h', '"k"" ; DROP TABLE canary; --"', keys_sql => 'SELECT 1; DROP TABLE canary',
                     keys_args => ARRAY['ref"); DROP TABLE canary; --']);
SELECT docsync.watch('h', '"k"" ; DROP TABLE canary; --"',
                     keys_sql => 'WITH d AS (DELETE FROM canary RETURNING id) SELECT id FROM d WHERE id = $1',
                     keys_args => ARRAY['ref"); DROP TABLE canary; --']);
SELECT docsync.watch('h', '"k"" ; DROP TABLE canary; --"', keys_sql => $$SELECT $1::int$$,
                     keys_args => ARRAY['ref"; DROP TABLE canary; --']);
SELECT docsync.watch('h', '"k"" ; DROP TABLE canary; --"',
                     keys_sql => $$SELECT "x"" , ""y" FROM "k"" ; DROP TABLE canary; --" WHERE "ref""); DROP TABLE canary; --" = $1$$,
                     keys_args => ARRAY['ref"); DROP TABLE canary; --'], allow_broadcast => true) IS NOT NULL AS keys_watch;

-- stored as given, shown quoted where they are SQL names
SELECT query, "table", kind, columns, attnums, keys_sql FROM docsync.watches ORDER BY id;
SELECT name, watched_tables, unwatched_tables, warning FROM docsync.queries ORDER BY name;
SELECT "table", columns, queries, warning FROM docsync.watched_tables ORDER BY "table"::text;
-- the worker gets names as JSON strings and the plugin only OIDs and attnums
SELECT jsonb_path_query(docsync.worker_definitions(), '$.watches[*]') - 'relid' AS watch;
SELECT docsync.plugin_tables() ~ '^[0-9]+\([0-9,]+\)(,[0-9]+\([0-9,]+\))*$' AS oids_and_attnums_only;

-- grant_reader quotes the role and every table
CREATE ROLE "regress_reader'; DROP TABLE canary; --";
SELECT * FROM docsync.grant_reader(E'regress_reader\'; DROP TABLE canary; --');
SELECT * FROM docsync.grant_reader(E'nobody\'; DROP TABLE canary; --');
SELECT has_table_privilege('docsync_reader_postgres', '"''; DROP TABLE canary; --"', 'SELECT') AS can_read,
       pg_has_role(E'regress_reader\'; DROP TABLE canary; --', 'docsync_reader_postgres', 'MEMBER') AS pool_is_member;

-- channels: a hostile query name is refused; a hostile value is only escaped
SELECT docsync.channel(E'\'; DROP TABLE canary; --', '1');
SELECT docsync.channel('x" , "y');
SELECT docsync.channel(repeat('q', 64));
SELECT docsync.channel('h', E'\'; DROP TABLE canary; --:%\n"');

-- unwatch and drop_query with hostile names
SELECT docsync.unwatch('h', E'\'; DROP TABLE canary; --');
SELECT docsync.unwatch('h', '"''; DROP TABLE canary; --"', params => ARRAY['x" , "y']) AS unwatched;
SELECT docsync.drop_query(E'\'; DROP TABLE canary; --');

-- dropping the hostile table removes its watches, naming them
DROP TABLE "k"" ; DROP TABLE canary; --";
SELECT count(*) AS watches_left FROM docsync.watch_defs;

-- nothing else ran
SELECT * FROM canary;

-- clean up
SELECT docsync.drop_query('h');
DROP OWNED BY "regress_reader'; DROP TABLE canary; --";
DROP ROLE "regress_reader'; DROP TABLE canary; --";
DROP TABLE "'; DROP TABLE canary; --", ppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppp, canary;
