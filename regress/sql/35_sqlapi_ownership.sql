-- Privilege boundaries between definers: a definer's text is analysed only as it (whoever redefines
-- or watches), only a definition's definer may redefine, drop or unwatch it, a keys query keeps the
-- search_path its watch was made with, another definer's broken watch never stops the query owner's
-- docs, and a reader role never keeps a grant its definer has lost.
SET client_min_messages = warning;
CREATE ROLE regress_vic LOGIN IN ROLE docsync_admin;
CREATE ROLE regress_mal LOGIN IN ROLE docsync_admin;
CREATE ROLE regress_own_pool LOGIN;
CREATE SCHEMA own_app;
CREATE TABLE own_app.orders (id int PRIMARY KEY, total int);
CREATE TABLE own_app.ev (id int PRIMARY KEY);
CREATE TABLE own_app.salaries (id int PRIMARY KEY, pay int);
CREATE SCHEMA own_vs AUTHORIZATION regress_vic;
CREATE SCHEMA own_m AUTHORIZATION regress_mal;
GRANT USAGE ON SCHEMA own_app TO regress_mal;
GRANT SELECT ON own_app.salaries TO regress_mal;

-- (1) another definer's text is analysed as that definer, never as the DBA calling the API
SELECT docsync.define_query('own_dq', $$SELECT jsonb_build_object('t', total) FROM own_app.orders WHERE id = $1$$,
                            ARRAY['id'], search_path => 'own_app', watches => 'manual');
SET ROLE regress_mal;
CREATE TABLE own_m.k (id int PRIMARY KEY);
CREATE FUNCTION own_m.pwn(int) RETURNS boolean LANGUAGE plpgsql AS $f$
BEGIN
  IF (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
    EXECUTE 'ALTER ROLE regress_mal SUPERUSER';
  END IF;
  RETURN true;
END $f$;
CREATE DOMAIN own_m.d AS int CHECK (own_m.pwn(VALUE));
SELECT docsync.watch('own_dq', 'own_m.k', keys_sql => $$SELECT $1::int + cardinality('{1}'::own_m.d[])$$,
                     keys_args => ARRAY['id'], search_path => 'own_m') > 0 AS mal_watches_the_dbas_query;
SELECT docsync.define_query('own_mq', $$SELECT jsonb_build_object('x', cardinality('{1}'::own_m.d[]) + $1)$$,
                            ARRAY['id'], search_path => 'own_m', watches => 'manual');
RESET ROLE;
SELECT docsync.define_query('own_dq', $$SELECT jsonb_build_object('t', total, 'v', 2) FROM own_app.orders WHERE id = $1$$,
                            ARRAY['id'], or_replace => true, search_path => 'own_app', watches => 'manual');
SELECT rolsuper AS mal_super_after_redefine FROM pg_roles WHERE rolname = 'regress_mal';
ALTER ROLE regress_mal NOSUPERUSER;
SELECT docsync.watch('own_mq', 'own_app.ev', params => ARRAY['id'], search_path => 'own_app') > 0 AS dba_watches_mals_query;
SELECT rolsuper AS mal_super_after_watch FROM pg_roles WHERE rolname = 'regress_mal';
ALTER ROLE regress_mal NOSUPERUSER;
SELECT docsync.unwatch('own_mq', 'own_app.ev');
SELECT docsync.unwatch('own_dq', 'own_m.k');  -- the DBA is a superuser: it may remove anyone's watch
SELECT docsync.drop_query('own_dq');
-- stored text analysed inside a security-definer function must name its definer: a forgotten one
-- fails closed instead of analysing the text as the function's owner
CREATE FUNCTION pg_temp.own_forgot(q text) RETURNS regtype[] LANGUAGE sql SECURITY DEFINER
  AS $$ SELECT (docsync.analyze_query(q, 'own_m')).param_types $$;
SELECT pg_temp.own_forgot($$SELECT cardinality('{1}'::own_m.d[]) + $1::int$$);
SELECT rolsuper AS mal_super_after_forgotten_definer FROM pg_roles WHERE rolname = 'regress_mal';
ALTER ROLE regress_mal NOSUPERUSER;

-- (2a) only a definition's definer (a member of its role, a superuser) redefines, drops or unwatches it
SET ROLE regress_vic;
CREATE TABLE own_vs.orders (code text PRIMARY KEY, total int);
CREATE TABLE own_vs.items (id int PRIMARY KEY, code text);
CREATE FUNCTION own_vs.code_of(i int) RETURNS text LANGUAGE sql STABLE AS $$ SELECT code FROM own_vs.items WHERE id = i $$;
SELECT docsync.define_query('own_vq', $$SELECT jsonb_build_object('total', (SELECT total FROM orders WHERE code = $1))$$,
                            ARRAY['code'], search_path => 'own_vs', watches => 'manual');
SELECT docsync.watch('own_vq', 'own_vs.orders', params => ARRAY['code'], search_path => 'own_vs') > 0 AS watched;
SELECT docsync.watch('own_vq', 'own_vs.items', keys_sql => 'SELECT code_of($1)', keys_args => ARRAY['id'],
                     search_path => 'own_vs') > 0 AS watched;
GRANT USAGE ON SCHEMA own_vs TO regress_mal;
GRANT SELECT ON own_vs.orders TO regress_mal;
RESET ROLE;
SET ROLE regress_mal;
CREATE FUNCTION own_m.code_of(i int) RETURNS text LANGUAGE sql STABLE AS $$ SELECT 'stolen' $$;
SELECT docsync.define_query('own_vq', $$SELECT jsonb_build_object('leak', $1::text)$$, ARRAY['code'],
                            or_replace => true, search_path => 'own_m', watches => 'manual');
SELECT docsync.drop_query('own_vq');
SELECT docsync.unwatch('own_vq', 'own_vs.orders');
RESET ROLE;
SELECT name, sql LIKE '%total%' AS unchanged, defined_by FROM docsync.queries WHERE name = 'own_vq';
SELECT count(*) AS vic_watches FROM docsync.watch_defs WHERE query = 'own_vq';

-- (2b) a keys query runs under its watch's stored search_path, not its doc query's: vic's
-- redefinition under another path moves vic's own keys query along, never another definer's
SELECT w.keys_sql, w.search_path FROM docsync.watches w WHERE w.query = 'own_vq' AND w.kind = 'keys';
SELECT (SELECT w ->> 'keys_search_path' FROM jsonb_array_elements(docsync.worker_definitions() -> 'watches') w
         WHERE w ->> 'query' = 'own_vq' AND w ->> 'keys_sql' IS NOT NULL) AS worker_keys_path;
SET ROLE regress_mal;
SELECT docsync.watch('own_vq', 'own_m.k', keys_sql => 'SELECT code_of($1)', keys_args => ARRAY['id'],
                     search_path => 'own_m') > 0 AS mal_keys_watch;
RESET ROLE;
SET ROLE regress_vic;
SELECT docsync.define_query('own_vq', $$SELECT jsonb_build_object('total', (SELECT total FROM own_vs.orders WHERE code = $1), 'v', 2)$$,
                            ARRAY['code'], or_replace => true, search_path => 'own_vs, public', watches => 'manual');
RESET ROLE;
SELECT w.table_name, w.defined_by, w.search_path FROM docsync.watches w WHERE w.query = 'own_vq' AND w.kind = 'keys' ORDER BY w.id;

-- (3) another definer's watch that no longer checks is set aside, never refusing the owner's query;
-- grant_reader still grants what every valid definition needs
SET ROLE regress_mal;
DROP FUNCTION own_m.code_of(int);
RESET ROLE;
SELECT count(*) > 0 AS granted FROM docsync.grant_reader('regress_own_pool');
SELECT name, refused, warning LIKE '%set aside%' AS warned FROM docsync.queries WHERE name = 'own_vq';
SELECT table_name, problem FROM docsync.watches WHERE query = 'own_vq' ORDER BY id;
SELECT (SELECT count(*) FROM jsonb_array_elements(docsync.worker_definitions() -> 'watches') w
         WHERE w ->> 'query' = 'own_vq') AS watches_run,
       (SELECT count(*) FROM jsonb_array_elements(docsync.worker_definitions() -> 'unresolved') u
         WHERE u ->> 'query' = 'own_vq') AS watches_reported;
SELECT has_table_privilege('docsync_reader_regress_vic', 'own_vs.orders', 'SELECT') AS vic_reader_granted;
SET ROLE regress_mal;
SELECT docsync.unwatch('own_vq', 'own_m.k');
RESET ROLE;

-- (4) a reader role never keeps a grant its definer lost: refused at once, taken back by grant_reader
SET ROLE regress_mal;
CREATE TABLE own_m.t (id int PRIMARY KEY);
SELECT docsync.define_query('own_pay', $$SELECT jsonb_build_object('n', count(*)) FROM own_app.salaries WHERE id = $1$$,
                            ARRAY['id'], search_path => 'own_m', watches => 'manual');
SELECT docsync.watch('own_pay', 'own_m.t', params => ARRAY['id'], search_path => 'own_m') > 0 AS watched;
RESET ROLE;
SELECT stmt FROM docsync.grant_reader('regress_own_pool') AS g(stmt) ORDER BY 1;
SELECT has_table_privilege('docsync_reader_regress_mal', 'own_app.salaries', 'SELECT') AS mal_reader_may;
REVOKE SELECT ON own_app.salaries FROM regress_mal;
-- at once: a compute as mal's reader role is refused, before anything is redefined or re-granted
BEGIN READ ONLY;
SET LOCAL ROLE regress_own_pool;
SELECT docsync.compute_as('docsync_reader_regress_mal', 'own_m, pg_temp');
ROLLBACK;
-- mal moves the read into a function of its own, which the definer check does not look into
SET ROLE regress_mal;
CREATE FUNCTION own_m.peek() RETURNS text LANGUAGE plpgsql STABLE AS $f$
DECLARE r text; BEGIN EXECUTE 'SELECT string_agg(pay::text, '','') FROM own_app.salaries' INTO r; RETURN r; END $f$;
SELECT docsync.define_query('own_pay', $$SELECT jsonb_build_object('pay', own_m.peek()) FROM own_m.t WHERE id = $1$$,
                            ARRAY['id'], or_replace => true, search_path => 'own_m', watches => 'manual');
RESET ROLE;
SELECT name, refused FROM docsync.queries WHERE name = 'own_pay';
SELECT stmt FROM docsync.grant_reader('regress_own_pool') AS g(stmt) WHERE stmt LIKE 'REVOKE%' ORDER BY 1;
SELECT has_table_privilege('docsync_reader_regress_mal', 'own_app.salaries', 'SELECT') AS mal_reader_may,
       (SELECT refused FROM docsync.queries WHERE name = 'own_pay') AS refused;
SELECT count(*) AS recorded FROM docsync.reader_grants WHERE reader = 'docsync_reader_regress_mal' AND table_name = 'salaries';
BEGIN READ ONLY;
SET LOCAL ROLE regress_own_pool;
SELECT docsync.compute_as('docsync_reader_regress_mal', 'own_m, pg_temp') AS computes_again;
ROLLBACK;

-- clean up
SELECT docsync.drop_query(name) FROM docsync.query_defs WHERE name LIKE 'own\_%' ORDER BY name;
SELECT count(*) >= 0 AS revoked FROM docsync.revoke_reader('regress_own_pool');
DROP SCHEMA own_app, own_vs, own_m CASCADE;
DROP ROLE regress_own_pool;
DROP OWNED BY docsync_reader_regress_vic, docsync_reader_regress_mal;
DELETE FROM docsync.reader_roles WHERE definer IN ('regress_vic', 'regress_mal');
DROP ROLE docsync_reader_regress_vic, docsync_reader_regress_mal;
DROP ROLE regress_vic, regress_mal;
