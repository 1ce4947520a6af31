-- sql/parts/04_generation.sql: the definitions generation (its sequence, view and bump triggers)
-- and docsync.watch_targets, every watch resolved by name.
-- The definitions generation: raised by every definition change and by DDL that can change what a
-- doc query reads. It is a sequence, and the in-stream signal is a transactional logical message
-- (prefix docsync.definitions, content the new generation) that the worker reads at the commit:
-- no row is locked, so a customer's DDL never waits, deadlocks or fails a serializable transaction
-- because of docsync, and the signal is decoded exactly when the transaction commits. Not kept by
-- pg_dump: a restored database starts its own count.
CREATE SEQUENCE docsync.def_generation_seq;
SELECT pg_catalog.setval('docsync.def_generation_seq', 1);
CREATE VIEW docsync.def_generation AS SELECT s.last_value AS generation FROM docsync.def_generation_seq s;
COMMENT ON VIEW docsync.def_generation IS 'the definitions generation, raised by every definition change and by DDL a doc query depends on';
GRANT SELECT ON docsync.def_generation TO docsync_admin;
-- nextval on the sequence, and pg_logical_emit_message(true, 'docsync.definitions', <value>) (plugin/ddl.c)
CREATE FUNCTION docsync.next_generation() RETURNS bigint
LANGUAGE c VOLATILE AS 'MODULE_PATHNAME', 'docsync_next_generation';

-- A definition changed: bump the generation. Row triggers, so a statement that changes no row
-- (the sql_drop trigger's DELETE when no watched table was dropped) bumps nothing; TRUNCATE has
-- only a statement trigger.
CREATE FUNCTION docsync.bump_generation() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM docsync.next_generation();
  RETURN NULL;
END
$$;
CREATE TRIGGER bump_generation AFTER INSERT OR UPDATE OR DELETE ON docsync.query_defs
  FOR EACH ROW EXECUTE FUNCTION docsync.bump_generation();
CREATE TRIGGER bump_generation AFTER INSERT OR UPDATE OR DELETE ON docsync.watch_defs
  FOR EACH ROW EXECUTE FUNCTION docsync.bump_generation();
CREATE TRIGGER bump_generation_truncate AFTER TRUNCATE ON docsync.query_defs
  FOR EACH STATEMENT EXECUTE FUNCTION docsync.bump_generation();
-- a reader role made or dropped changes which role the worker computes a definer's docs as
CREATE TRIGGER bump_generation AFTER INSERT OR UPDATE OR DELETE ON docsync.reader_roles
  FOR EACH ROW EXECUTE FUNCTION docsync.bump_generation();
CREATE TRIGGER bump_generation_truncate AFTER TRUNCATE ON docsync.watch_defs
  FOR EACH STATEMENT EXECUTE FUNCTION docsync.bump_generation();

-- Every watch resolved by name in this database: relid and attnums (what the plugin and the worker
-- use), or the problem when its table or a column does not resolve (dropped or renamed while the
-- event triggers did not fire, a restore of part of a database): such a watch is never used, and
-- docsync.watches, docsync.watched_tables and the worker report it.
CREATE VIEW docsync.watch_targets AS
  SELECT w.id, w.query, w.table_schema, w.table_name, w.columns, w.keys_sql, w.allow_broadcast,
         w.defined_by, w.defined_at, w.search_path, t.relid,
         CASE WHEN t.relid IS NOT NULL AND m.missing IS NULL THEN coalesce(m.nums, '{}') END AS attnums,
         CASE
           WHEN t.relid IS NULL THEN
             format('table %I.%I does not exist: it was dropped or renamed while docsync''s event triggers did not fire (session_replication_role = replica, or a partial restore); run %s and watch the table it is now',
                    w.table_schema, w.table_name, u.unwatch)
           WHEN m.missing IS NOT NULL THEN
             format('column(s) %s of %I.%I do not exist: dropped or renamed while docsync''s event triggers did not fire; run %s and watch the columns it has now',
                    m.missing, w.table_schema, w.table_name, u.unwatch)
         END AS problem
    FROM docsync.watch_defs w
    LEFT JOIN LATERAL (
      SELECT c.oid::regclass AS relid
        FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
       WHERE n.nspname = w.table_schema AND c.relname = w.table_name AND c.relkind IN ('r', 'p')) t ON true
    CROSS JOIN LATERAL (
      SELECT array_agg(a.attnum ORDER BY u.ord) FILTER (WHERE a.attnum IS NOT NULL) AS nums,
             string_agg(quote_ident(u.col), ', ' ORDER BY u.ord) FILTER (WHERE a.attnum IS NULL) AS missing
        FROM unnest(w.columns) WITH ORDINALITY AS u(col, ord)
        LEFT JOIN pg_attribute a
          ON a.attrelid = t.relid AND a.attname = u.col AND a.attnum > 0 AND NOT a.attisdropped) m
    CROSS JOIN LATERAL (
      SELECT format('SELECT docsync.unwatch(%L, %L, %s)', w.query, format('%I.%I', w.table_schema, w.table_name),
                    CASE WHEN w.keys_sql IS NULL THEN format('params => %L', w.columns)
                         ELSE format('keys_sql => %L', w.keys_sql) END) AS unwatch) u;
COMMENT ON VIEW docsync.watch_targets IS
  'every watch resolved by name: its table''s regclass and the columns'' attnums, or why it does not resolve';


