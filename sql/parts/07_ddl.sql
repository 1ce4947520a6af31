-- sql/parts/07_ddl.sql: DDL: the helpers the C event triggers (plugin/ddl.c) call, matview
-- refresh counts and the event triggers.
-------------------------------------------------------------------------------
-- DDL
-------------------------------------------------------------------------------

-- DDL can change what a doc query reads (a column's type, a view's definition, a partition) or
-- what a watch names. The event triggers are C (plugin/ddl.c): while docsync has doc queries, DDL in
-- their WHEN TAG lists that touched anything but temporary objects raises the generation, so the
-- worker compares each query's dependencies (docsync.fingerprint) and recomputes the docs of those
-- that changed. They lock no row and run no SQL unless the DDL renames or drops something a watch
-- may name; then they call the helpers below as the extension's owner.

-- Follows a rename the current DDL made (kind: column, table, schema, set schema), by name: the old
-- name comes from the statement itself. A column renamed on a parent is renamed on its inheritance
-- children too. ALTER TABLE … SET SCHEMA written without the old schema moves the watches of the
-- first schema on the statement's search_path (path) whose watched table of that name no longer
-- exists.
CREATE FUNCTION docsync._follow_rename(kind text, rel oid, old_schema text, old_name text, new_name text,
                                       path oid[])
RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  nsp name;
  cur name;
BEGIN
  SELECT n.nspname, c.relname INTO nsp, cur
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = rel;
  CASE kind
    WHEN 'column' THEN
      UPDATE docsync.watch_defs w SET columns = array_replace(w.columns, old_name::name, new_name::name)
        FROM (WITH RECURSIVE tree(relid) AS (
                SELECT rel
                UNION
                SELECT i.inhrelid FROM pg_inherits i JOIN tree t ON i.inhparent = t.relid)
              SELECT n.nspname, c.relname
                FROM tree t JOIN pg_class c ON c.oid = t.relid JOIN pg_namespace n ON n.oid = c.relnamespace) r
       WHERE w.table_schema = r.nspname AND w.table_name = r.relname AND old_name::name = ANY (w.columns);
    WHEN 'table' THEN
      UPDATE docsync.watch_defs w SET table_name = cur
       WHERE w.table_schema = nsp AND w.table_name = old_name::name;
    WHEN 'schema' THEN
      UPDATE docsync.watch_defs w SET table_schema = new_name::name WHERE w.table_schema = old_name::name;
    WHEN 'set schema' THEN
      UPDATE docsync.watch_defs w SET table_schema = nsp
       WHERE w.table_name = cur
         AND w.table_schema = coalesce(old_schema::name, (
               SELECT n.nspname
                 FROM unnest(path) WITH ORDINALITY AS s(oid, ord) JOIN pg_namespace n ON n.oid = s.oid
                WHERE n.nspname <> nsp
                  AND EXISTS (SELECT FROM docsync.watch_defs x WHERE x.table_schema = n.nspname AND x.table_name = cur)
                  AND to_regclass(format('%I.%I', n.nspname, cur)) IS NULL
                ORDER BY s.ord LIMIT 1));
  END CASE;
END
$$;

-- A watched table, or a column a watch maps, was dropped (names: the dropped object's address).
-- Its watches can never fire again: remove them, with a WARNING naming each.
CREATE FUNCTION docsync._forget_dropped(names text[], identity text) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  gone record;
BEGIN
  FOR gone IN
    DELETE FROM docsync.watch_defs w
     WHERE w.table_schema = names[1] AND w.table_name = names[2]
       AND (cardinality(names) = 2 OR names[3]::name = ANY (w.columns))
    RETURNING w.query
  LOOP
    RAISE WARNING 'removed a watch of docsync query "%": % was dropped', gone.query, identity
      USING DETAIL = 'Changes to a dropped table or column can no longer affect its docs.',
            HINT = 'Check the query in docsync.queries, and watch its new tables with docsync.watch().';
  END LOOP;
END
$$;

-- REFRESH MATERIALIZED VIEW CONCURRENTLY changes a matview's rows in place: its storage and
-- definition stay, and no row change of it is decoded. The event trigger counts each such refresh
-- here (one row per matview, written by the refresh's own transaction, which already holds the
-- matview's lock, so no refresh waits on another because of it), and docsync.closure_state()
-- hashes the count of every matview a doc query reads.
CREATE TABLE docsync.matview_refreshes (relid oid PRIMARY KEY, refreshes bigint NOT NULL);
COMMENT ON TABLE docsync.matview_refreshes IS 'how many times each matview was refreshed CONCURRENTLY (docsync.closure_state hashes it)';
-- kept out of a subscriber's apply, like docsync's other tables
CREATE TRIGGER skip_replicated BEFORE INSERT OR UPDATE OR DELETE ON docsync.matview_refreshes
  FOR EACH ROW EXECUTE FUNCTION docsync.skip_replicated();
ALTER TABLE docsync.matview_refreshes ENABLE REPLICA TRIGGER skip_replicated;
CREATE FUNCTION docsync._refreshed(relid oid) RETURNS void
LANGUAGE sql SET search_path = pg_catalog, pg_temp AS $$
  INSERT INTO docsync.matview_refreshes AS r VALUES (relid, 1)
    ON CONFLICT (relid) DO UPDATE SET refreshes = r.refreshes + 1
$$;

CREATE FUNCTION docsync.on_ddl_command_end() RETURNS event_trigger
LANGUAGE c AS 'MODULE_PATHNAME', 'docsync_on_ddl_command_end';
-- Every command that can change what a doc query's names resolve to or what it returns (a new object
-- in an earlier schema of its search_path, a definition, a policy, a text search configuration, a
-- table's storage); docs/design.md "When unsure, recompute" lists those left out and why (GRANT,
-- REVOKE, COMMENT, SECURITY LABEL, indexes, statistics, triggers, sequences' values, roles, event
-- triggers, publications and subscriptions change no result a doc query computes).
CREATE EVENT TRIGGER docsync_ddl_command_end ON ddl_command_end
  WHEN TAG IN ('ALTER TABLE', 'CREATE TABLE', 'CREATE TABLE AS', 'SELECT INTO', 'ALTER VIEW', 'CREATE VIEW',
               'ALTER MATERIALIZED VIEW', 'CREATE MATERIALIZED VIEW', 'REFRESH MATERIALIZED VIEW',
               'CREATE FOREIGN TABLE', 'ALTER FOREIGN TABLE', 'IMPORT FOREIGN SCHEMA', 'CREATE SEQUENCE',
               'ALTER SEQUENCE', 'CREATE FUNCTION', 'ALTER FUNCTION', 'CREATE PROCEDURE', 'ALTER PROCEDURE',
               'ALTER ROUTINE', 'CREATE AGGREGATE', 'ALTER AGGREGATE', 'CREATE TYPE', 'ALTER TYPE',
               'CREATE DOMAIN', 'ALTER DOMAIN', 'CREATE COLLATION', 'ALTER COLLATION', 'CREATE CAST',
               'CREATE OPERATOR', 'ALTER OPERATOR', 'CREATE OPERATOR CLASS', 'ALTER OPERATOR CLASS',
               'CREATE OPERATOR FAMILY', 'ALTER OPERATOR FAMILY', 'CREATE CONVERSION', 'ALTER CONVERSION',
               'CREATE RULE', 'ALTER RULE', 'CREATE POLICY', 'ALTER POLICY', 'CREATE SCHEMA', 'ALTER SCHEMA',
               'CREATE EXTENSION', 'ALTER EXTENSION', 'CREATE TEXT SEARCH CONFIGURATION',
               'ALTER TEXT SEARCH CONFIGURATION', 'CREATE TEXT SEARCH DICTIONARY', 'ALTER TEXT SEARCH DICTIONARY',
               'CREATE TEXT SEARCH PARSER', 'ALTER TEXT SEARCH PARSER', 'CREATE TEXT SEARCH TEMPLATE',
               'ALTER TEXT SEARCH TEMPLATE', 'CREATE SERVER', 'ALTER SERVER', 'CREATE FOREIGN DATA WRAPPER',
               'ALTER FOREIGN DATA WRAPPER', 'CREATE USER MAPPING', 'ALTER USER MAPPING', 'CREATE TRANSFORM',
               'CREATE LANGUAGE', 'ALTER LANGUAGE')
  EXECUTE FUNCTION docsync.on_ddl_command_end();

CREATE FUNCTION docsync.on_sql_drop() RETURNS event_trigger
LANGUAGE c AS 'MODULE_PATHNAME', 'docsync_on_sql_drop';
CREATE EVENT TRIGGER docsync_sql_drop ON sql_drop
  WHEN TAG IN ('DROP TABLE', 'DROP VIEW', 'DROP MATERIALIZED VIEW', 'DROP FOREIGN TABLE', 'DROP SEQUENCE',
               'DROP FUNCTION', 'DROP PROCEDURE', 'DROP ROUTINE', 'DROP AGGREGATE', 'DROP TYPE', 'DROP DOMAIN',
               'DROP COLLATION', 'DROP CAST', 'DROP OPERATOR', 'DROP OPERATOR CLASS', 'DROP OPERATOR FAMILY',
               'DROP CONVERSION', 'DROP RULE', 'DROP POLICY', 'DROP SCHEMA', 'DROP OWNED',
               'DROP TEXT SEARCH CONFIGURATION', 'DROP TEXT SEARCH DICTIONARY', 'DROP TEXT SEARCH PARSER',
               'DROP TEXT SEARCH TEMPLATE', 'DROP SERVER', 'DROP FOREIGN DATA WRAPPER', 'DROP USER MAPPING',
               'DROP TRANSFORM', 'DROP LANGUAGE', 'ALTER TABLE')
  EXECUTE FUNCTION docsync.on_sql_drop();

