-- Derived watches after DDL, when they cannot be derived again, and row-level security the docs
-- would be computed under: DDL that makes a query call a function whose reads cannot be analysed
-- refuses the query (unless allow_uncovered), as define_query would; a query whose watches could
-- not be derived again is derived again at the next DDL, whatever it touches; a table whose
-- policies exempt its owner, the definer, but apply to the reader role the docs are computed as is
-- refused, for derived and hand-written watches alike.
\set VERBOSITY default
\set SHOW_CONTEXT never
SET synchronous_commit = on;

CREATE SCHEMA drf;
CREATE TABLE drf.b (id int PRIMARY KEY, k int NOT NULL, v int NOT NULL);
CREATE TABLE drf.c (id int PRIMARY KEY, k int NOT NULL, bonus int NOT NULL);
CREATE FUNCTION drf.bonus(kk int) RETURNS int LANGUAGE plpgsql STABLE AS
  $$ BEGIN RETURN (SELECT coalesce(sum(bonus), 0) FROM drf.c WHERE k = kk); END $$;
CREATE VIEW drf.src AS SELECT k, v FROM drf.b;
SELECT docsync.define_query('viaview', $$SELECT jsonb_build_object('s', coalesce(sum(v), 0)) FROM src WHERE k = $1$$,
                            params => ARRAY['k'], search_path => 'drf');
SELECT docsync.define_query('loose', $$SELECT jsonb_build_object('s', coalesce(sum(v), 0)) FROM src WHERE k = $1$$,
                            params => ARRAY['k'], search_path => 'drf', allow_uncovered => true);
SELECT docsync.refusal('viaview') AS viaview, docsync.refusal('loose') AS loose;

-- the view replaced so that it calls the plpgsql function: the query without allow_uncovered is
-- refused (the worker computes it no more), the one with it keeps running on its derived watches
CREATE OR REPLACE VIEW drf.src AS SELECT k, v + drf.bonus(k) AS v FROM drf.b;

SELECT docsync.refusal('viaview');
SELECT docsync.refusal('loose') IS NULL AS loose_runs;
-- replaced back: derived again, and no longer refused
CREATE OR REPLACE VIEW drf.src AS SELECT k, v FROM drf.b;
SELECT docsync.refusal('viaview') AS refusal, warning FROM docsync.queries WHERE name = 'viaview';
SELECT table_name, kind, origin FROM docsync.watches WHERE query = 'viaview' ORDER BY table_name, kind;

-- a query whose watches could not be derived again is derived again at the next DDL, even one that
-- touches nothing it was derived from
CREATE ROLE regress_drf_def;
GRANT docsync_admin TO regress_drf_def;
GRANT USAGE ON SCHEMA drf TO regress_drf_def;
GRANT SELECT ON drf.b, drf.src TO regress_drf_def;
SET ROLE regress_drf_def;
SELECT docsync.define_query('mine', $$SELECT jsonb_build_object('s', coalesce(sum(v), 0)) FROM src WHERE k = $1$$,
                            params => ARRAY['k'], search_path => 'drf');
RESET ROLE;
-- a view that now reads a table its definer may not: the previous watches kept, broadcast added
CREATE OR REPLACE VIEW drf.src AS SELECT b.k, b.v + c.bonus AS v FROM drf.b b JOIN drf.c c ON c.k = b.k;
SELECT table_name, kind, origin FROM docsync.watches WHERE query = 'mine' ORDER BY table_name, kind;
SELECT derive_problem IS NOT NULL AS problem FROM docsync.query_defs WHERE name = 'mine';
-- the grant (not DDL) makes it derivable; DDL elsewhere derives it again
GRANT SELECT ON drf.c TO regress_drf_def;
CREATE TABLE drf.elsewhere (a int);
SELECT derive_problem FROM docsync.query_defs WHERE name = 'mine';
SELECT table_name, kind, origin, columns FROM docsync.watches WHERE query = 'mine' ORDER BY table_name, kind;
SELECT docsync.drop_query('mine');

-- row-level security on a table the definer owns: its policies exempt the definer, not the reader
-- role the docs are computed as
CREATE TABLE drf.mine (id int PRIMARY KEY, v text);
CREATE TABLE drf.hidden (id int PRIMARY KEY);
ALTER TABLE drf.mine OWNER TO regress_drf_def;
GRANT SELECT ON drf.hidden TO regress_drf_def;
GRANT CREATE ON SCHEMA drf TO regress_drf_def;
SET ROLE regress_drf_def;
ALTER TABLE drf.mine ENABLE ROW LEVEL SECURITY;
CREATE POLICY pp ON drf.mine USING (EXISTS (SELECT FROM drf.hidden h WHERE h.id = mine.id));
-- derived watches: refused
SELECT docsync.define_query('rlsown', $$SELECT coalesce((SELECT to_jsonb(m) FROM mine m WHERE m.id = $1), '"none"')$$,
                            params => ARRAY['id'], search_path => 'drf');
-- a hand-written watch whose keys query reads it: refused too
SELECT docsync.define_query('plain', $$SELECT to_jsonb(b) FROM b WHERE b.id = $1$$, params => ARRAY['id'],
                            search_path => 'drf', watches => 'manual');
SELECT docsync.watch('plain', 'drf.mine', keys_sql => 'SELECT m.id FROM drf.mine m WHERE m.id = $1',
                     keys_args => ARRAY['id'], search_path => 'drf');
-- through a security_barrier view the definer owns, which reads the table as its owner: defined
CREATE VIEW drf.mine_v WITH (security_barrier) AS SELECT id, v FROM drf.mine;
SELECT docsync.define_query('rlsview', $$SELECT coalesce((SELECT to_jsonb(m) FROM mine_v m WHERE m.id = $1), '"none"')$$,
                            params => ARRAY['id'], search_path => 'drf');
SELECT table_name, kind FROM docsync.watches WHERE query = 'rlsview';
-- FORCE ROW LEVEL SECURITY: the policies apply to the definer (the view's owner) too: refused at load
ALTER TABLE drf.mine FORCE ROW LEVEL SECURITY;
SELECT docsync.refusal('rlsview') IS NOT NULL AS refused;
RESET ROLE;

SELECT docsync.drop_query(name) FROM docsync.query_defs ORDER BY name;
SET client_min_messages = warning;
DROP SCHEMA drf CASCADE;
RESET client_min_messages;
DROP OWNED BY regress_drf_def;
DROP ROLE regress_drf_def;
