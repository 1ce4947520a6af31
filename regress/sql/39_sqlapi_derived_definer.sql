-- Derived watches and their definer: each derived watch is checked, stored and run as the query's
-- definer under its pinned search_path, exactly like a hand-written one, whoever makes it (the
-- definer at define_query, the author of a migration whose DDL derives them again). A definer who
-- may not read what a derived watch reads gets a refusal, not a watch; names that need quoting and
-- a search_path that shadows a table change nothing.
\set VERBOSITY default
\set SHOW_CONTEXT never
SET synchronous_commit = on;

CREATE SCHEMA ddef;
CREATE TABLE ddef.secrets (id int PRIMARY KEY, owner_id int, ssn text);
CREATE TABLE ddef.orders (id int PRIMARY KEY, note text);
CREATE VIEW ddef.secret_view AS SELECT id, owner_id FROM ddef.secrets;
CREATE VIEW ddef.order_notes AS SELECT o.id, o.note FROM ddef.orders o;
CREATE ROLE regress_dalice;
GRANT docsync_admin TO regress_dalice;
GRANT USAGE ON SCHEMA ddef TO regress_dalice;
GRANT SELECT ON ddef.orders, ddef.secret_view, ddef.order_notes TO regress_dalice;
GRANT SELECT (id) ON ddef.secrets TO regress_dalice;

SET ROLE regress_dalice;
-- through a view it may read, the derived watch of the table behind it maps a column the definer
-- may read: stored, as the definer
SELECT docsync.define_query('by_id', 'SELECT to_jsonb(v) FROM secret_view v WHERE v.id = $1', params => ARRAY['id'],
                            search_path => 'ddef');
SELECT table_schema, table_name, kind, origin, columns, defined_by, search_path FROM docsync.watches WHERE query = 'by_id';
-- a derived watch would send a column it may not read (the view reads it as its owner): refused
SELECT docsync.define_query('by_owner', 'SELECT to_jsonb(v) FROM secret_view v WHERE v.owner_id = $1',
                            params => ARRAY['owner'], search_path => 'ddef');
-- a derived keys query would read a column of a table it may not read: refused
SELECT docsync.define_query('via_owner', 'SELECT to_jsonb(o) FROM secret_view v JOIN orders o ON o.id = v.owner_id WHERE v.id = $1',
                            params => ARRAY['id'], search_path => 'ddef');
SELECT name FROM docsync.query_defs WHERE name IN ('by_owner', 'via_owner');
-- a view it reads, redefined by someone else
SELECT docsync.define_query('notes', 'SELECT to_jsonb(n) FROM order_notes n WHERE n.id = $1', params => ARRAY['id'],
                            search_path => 'ddef');
SELECT table_name, kind, origin, columns, defined_by FROM docsync.watches WHERE query = 'notes' ORDER BY table_name, kind;
RESET ROLE;
-- another definer's watch on the query's table adds to its derived watches, never replaces them
CREATE ROLE regress_dbob;
GRANT docsync_admin TO regress_dbob;
GRANT USAGE ON SCHEMA ddef TO regress_dbob;
GRANT SELECT ON ddef.orders TO regress_dbob;
SET ROLE regress_dbob;
SELECT docsync.watch('notes', 'ddef.orders', params => ARRAY['id'], search_path => 'ddef');
SELECT docsync.watch('notes', 'ddef.orders', keys_sql => 'SELECT o.id FROM ddef.orders o WHERE o.id = $1',
                     keys_args => ARRAY['id'], search_path => 'ddef') > 0 AS watched;
SELECT table_name, kind, origin, defined_by FROM docsync.watches WHERE query = 'notes' ORDER BY table_name, kind, origin;
SELECT docsync.unwatch('notes', 'ddef.orders');
RESET ROLE;
SELECT table_name, kind, origin, defined_by FROM docsync.watches WHERE query = 'notes' ORDER BY table_name, kind, origin;

-- the migration's author derives them again, as the query's definer: a watch the definer may not
-- read is refused as it would be at define_query; the previous watches are kept, every table they
-- covered and the table the query reads now recompute every live doc, and docsync.queries says why
CREATE OR REPLACE VIEW ddef.order_notes AS
  SELECT o.id, o.note, s.ssn FROM ddef.orders o LEFT JOIN ddef.secrets s ON s.owner_id = o.id;
SELECT table_name, kind, origin, columns, defined_by FROM docsync.watches WHERE query = 'notes' ORDER BY table_name, kind;
SELECT name, broadcast_tables, warning FROM docsync.queries WHERE name = 'notes';
-- a grant, then DDL: derived in full as the definer, the warning gone
GRANT SELECT (owner_id) ON ddef.secrets TO regress_dalice;
CREATE OR REPLACE VIEW ddef.order_notes AS
  SELECT o.id, o.note, s.ssn FROM ddef.orders o LEFT JOIN ddef.secrets s ON s.owner_id = o.id;
SELECT table_name, kind, origin, columns, defined_by FROM docsync.watches WHERE query = 'notes' ORDER BY table_name, kind;
SELECT name, broadcast_tables, warning FROM docsync.queries WHERE name = 'notes';

-- names that need quoting, everywhere a derived watch or its keys query names them
CREATE SCHEMA "Odd ""Schema""";
CREATE TABLE "Odd ""Schema"""."Line; Items" ("Parent Key" int, "Thing" int, label text, PRIMARY KEY ("Parent Key", "Thing"));
CREATE TABLE "Odd ""Schema""".things ("Id" int PRIMARY KEY, "Name" text);
INSERT INTO "Odd ""Schema""".things VALUES (1, 'a'), (2, 'b');
INSERT INTO "Odd ""Schema"""."Line; Items" VALUES (7, 1, 'x'), (8, 1, 'y'), (8, 2, 'z');
SELECT docsync.define_query('odd', $$SELECT jsonb_agg(t."Name" ORDER BY t."Name") FROM "Odd ""Schema"""."Line; Items" li
  JOIN "Odd ""Schema""".things t ON t."Id" = li."Thing" WHERE li."Parent Key" = $1$$, params => ARRAY['parent']);
SELECT table_schema, table_name, kind, columns FROM docsync.watches WHERE query = 'odd' ORDER BY table_name;
-- the keys query of things names the line items of a thing
CREATE FUNCTION pg_temp.keys_of(q text, tab name, arg int) RETURNS int[] LANGUAGE plpgsql AS $$
DECLARE
  src text;
  got int[];
BEGIN
  SELECT w.keys_sql INTO src FROM docsync.watch_defs w WHERE w.query = q AND w.table_name = tab AND w.keys_sql IS NOT NULL;
  EXECUTE format('SELECT array_agg(k ORDER BY k) FROM (%s) AS r(k)', replace(src, '$1', arg::text)) INTO got;
  RETURN got;
END
$$;
SELECT pg_temp.keys_of('odd', 'things', 1) AS thing_1, pg_temp.keys_of('odd', 'things', 2) AS thing_2;
SELECT keys_sql FROM docsync.watches WHERE query = 'odd' AND kind = 'keys';

-- a search_path trick: a table of the same name in a schema searched first, made after the
-- definition, changes neither the watched tables nor what the keys queries read
CREATE SCHEMA app;
CREATE SCHEMA evil;
CREATE TABLE app.items (order_id int, sku int, PRIMARY KEY (order_id, sku));
CREATE TABLE app.skus (sku int PRIMARY KEY, name text);
INSERT INTO app.skus VALUES (1, 'one');
INSERT INTO app.items VALUES (5, 1), (6, 1);
SET search_path = app;
SELECT docsync.define_query('basket', 'SELECT jsonb_agg(s.name) FROM items i JOIN skus s ON s.sku = i.sku WHERE i.order_id = $1',
                            params => ARRAY['order_id']);
RESET search_path;
CREATE TABLE evil.items (order_id int, sku int);
INSERT INTO evil.items VALUES (666, 1);
SET search_path = evil, app;
SELECT table_schema, table_name, kind, columns, search_path FROM docsync.watches WHERE query = 'basket' ORDER BY table_name;
SELECT pg_temp.keys_of('basket', 'skus', 1) AS sku_1;
SELECT keys_sql FROM docsync.watches WHERE query = 'basket' AND kind = 'keys';
-- DDL in the shadowing schema derives them again, under the stored path: still app's tables
CREATE TABLE evil.skus (sku int PRIMARY KEY, name text);
SELECT table_schema, table_name, kind, columns FROM docsync.watches WHERE query = 'basket' ORDER BY table_name;
RESET search_path;
-- a table made later in a schema the stored path searches first takes the name: the query reads it
-- now, and its watches are derived again for it
CREATE SCHEMA shadowing;
SET search_path = shadowing, app;
SELECT docsync.define_query('shadowed', 'SELECT jsonb_agg(s.name) FROM skus s WHERE s.sku = $1', params => ARRAY['sku']);
SELECT table_schema, table_name, kind, columns, search_path FROM docsync.watches WHERE query = 'shadowed';
CREATE TABLE shadowing.skus (sku int PRIMARY KEY, name text);
SELECT table_schema, table_name, kind, columns FROM docsync.watches WHERE query = 'shadowed';
RESET search_path;

-- code the analysis runs (a domain's CHECK reached by a literal) that raises docsync's own SQLSTATE
-- DSY01, whose detail carries a derivation's result, is an error of the derivation: its detail
-- never becomes the query's watches (here: none, which would leave the docs stale)
CREATE FUNCTION ddef.forge(int) RETURNS boolean LANGUAGE plpgsql AS $f$
BEGIN
  IF current_setting('regress.forge', true) = 'on' THEN
    RAISE EXCEPTION 'forged' USING ERRCODE = 'DSY01', DETAIL = '{"watches": [], "from": []}';
  END IF;
  RETURN true;
END
$f$;
CREATE DOMAIN ddef.forged AS int CHECK (ddef.forge(VALUE));
SET ROLE regress_dalice;
SELECT docsync.define_query('forging', 'SELECT to_jsonb(''{1}''::forged[]) || to_jsonb(o) FROM orders o WHERE o.id = $1',
                            params => ARRAY['id'], search_path => 'ddef', allow_uncovered => true);
SELECT table_name, kind, origin, columns FROM docsync.watches WHERE query = 'forging';
RESET ROLE;
SET regress.forge = on;
ALTER TABLE ddef.orders ADD COLUMN forged_at int;
RESET regress.forge;
SELECT table_name, kind, origin, columns FROM docsync.watches WHERE query = 'forging';
SELECT derive_problem FROM docsync.query_defs WHERE name = 'forging';
SELECT docsync.drop_query(name) FROM docsync.query_defs ORDER BY name;
SET client_min_messages = warning;
DROP SCHEMA ddef, "Odd ""Schema""", app, evil, shadowing CASCADE;
RESET client_min_messages;
DROP ROLE regress_dalice, regress_dbob;
