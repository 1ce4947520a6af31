-- sql/parts/09_definition_views.sql: definition views: the uncovered-table NOTICE,
-- docsync.queries, docsync.watches, output_plugin_problem and docsync.watched_tables.
-------------------------------------------------------------------------------
-- Definition views
-------------------------------------------------------------------------------


-- What no watch covers, named once a definition is complete: at the commit of the transaction that
-- defined a query or added a watch, once per query, and only for a query with at least one watch
-- (one with none is still being defined: docsync.queries, the worker's log and docsync.status say
-- so). Defining a query and its watches in one transaction gives no NOTICE unless one is missing.
-- Never an error, nor a long wait: the commit it runs in may be a customer's (DDL whose watches
-- could not be derived again writes their broadcast fallback, docsync._rederive), so it waits at
-- most 100 ms for a lock on what the query reads, and names nothing when it was not granted
-- (docsync.queries still does). As the extension's owner, who ran the definition
-- (docsync_api_call) and may read the definition tables whoever commits.
CREATE FUNCTION docsync.notice_uncovered() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET lock_timeout = '100ms' AS $$
DECLARE
  qname text;
  q docsync.query_defs;
  chk record;
  seen text := coalesce(current_setting('docsync_notice.uncovered', true), '');
BEGIN
  IF TG_TABLE_NAME = 'query_defs' THEN qname := NEW.name; ELSE qname := NEW.query; END IF;
  IF position(E'\n' || qname || E'\n' IN seen) > 0 THEN RETURN NULL; END IF;   -- named already
  PERFORM set_config('docsync_notice.uncovered', coalesce(nullif(seen, ''), E'\n') || qname || E'\n', true);
  SELECT * INTO q FROM docsync.query_defs d WHERE d.name = qname;
  IF NOT FOUND OR NOT EXISTS (SELECT FROM docsync.watch_defs w WHERE w.query = qname) THEN
    RETURN NULL;
  END IF;
  BEGIN
    SELECT * INTO chk FROM docsync.query_check(q);
  EXCEPTION WHEN OTHERS THEN
    RETURN NULL;   -- docsync.queries shows why it does not analyse
  END;
  IF cardinality(chk.unwatched) > 0 THEN
    RAISE NOTICE 'doc query "%" reads %, which no watch covers', qname, array_to_string(chk.unwatched, ', ')
      USING DETAIL = 'A change there never refreshes the query''s docs: they go stale. docsync.queries lists such tables in unwatched_tables, and docsync.status warns while a worker runs the query.',
            HINT = format('Watch each with SELECT docsync.watch(%L, table, params => ARRAY[…]), or with keys_sql => … when its rows do not hold the doc''s params.', qname);
  END IF;
  RETURN NULL;
END
$$;
CREATE CONSTRAINT TRIGGER notice_uncovered AFTER INSERT OR UPDATE OF sql, search_path ON docsync.query_defs
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION docsync.notice_uncovered();
CREATE CONSTRAINT TRIGGER notice_uncovered AFTER INSERT ON docsync.watch_defs
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION docsync.notice_uncovered();


CREATE VIEW docsync.queries AS
  WITH set_aside AS MATERIALIZED (SELECT * FROM docsync.batch_set_aside())
  SELECT q.name,
         q.params,
         q.sql,
         q.search_path,
         coalesce((SELECT array_agg(DISTINCT w.relid ORDER BY w.relid) FROM docsync.watch_targets w
                    WHERE w.query = q.name AND w.problem IS NULL), '{}') AS watched_tables,
         chk.unwatched AS unwatched_tables,
         CASE
           WHEN chk.problem IS NOT NULL THEN
             format('the doc query no longer prepares (%s): fix it with docsync.define_query(%L, …, or_replace => true)',
                    chk.problem, q.name)
           WHEN q.derive_problem IS NOT NULL THEN
             format('its watches could not be derived again after DDL (%s): the previous ones are kept, and every change of %s recomputes every live doc; fix the cause, then redefine it with docsync.define_query(%L, …, or_replace => true)',
                    q.derive_problem,
                    (SELECT string_agg(DISTINCT format('%I.%I', w.table_schema, w.table_name), ', ')
                       FROM docsync.watch_defs w WHERE w.query = q.name AND w.broadcast),
                    q.name)
           WHEN EXISTS (SELECT FROM docsync.watch_targets w WHERE w.query = q.name AND w.problem IS NOT NULL) THEN
             (SELECT format('a watch does not resolve, so changes it maps never reach the docs: %s',
                            string_agg(w.problem, '; ' ORDER BY w.id))
                FROM docsync.watch_targets w WHERE w.query = q.name AND w.problem IS NOT NULL)
           WHEN EXISTS (SELECT FROM docsync.watch_defs w WHERE w.query = q.name AND w.defined_by <> q.defined_by
                           AND docsync.watch_set_aside(w.id) IS NOT NULL) THEN
             (SELECT format('another definer''s watch no longer checks and is set aside (its changes do not reach the docs): %s',
                            string_agg(format('watch %s on %I.%I by %s: %s', w.id, w.table_schema, w.table_name,
                                              quote_ident(w.defined_by), docsync.watch_set_aside(w.id)), '; ' ORDER BY w.id))
                FROM docsync.watch_defs w WHERE w.query = q.name AND docsync.watch_set_aside(w.id) IS NOT NULL)
           WHEN cardinality(chk.unwatched) > 0 THEN
             format('reads %s, which no watch covers: its docs go stale when they change; watch them with docsync.watch(%L, …)',
                    array_to_string(chk.unwatched, ', '), q.name)
         END AS warning,
         q.defined_by,
         q.defined_at,
         coalesce(docsync.refusal(q.name), docsync.reader_missing(q.name)) AS refused,
         (SELECT rr.reader FROM docsync.reader_roles rr WHERE rr.definer = q.defined_by) AS reader_role,
         b.not_batched,
         CASE WHEN b.set_aside IS NOT NULL THEN 'set aside'
              WHEN b.not_batched IS NOT NULL THEN 'not batched'
              ELSE 'batched' END AS batched,
         b.set_aside AS batch_set_aside,
         q.watches,
         coalesce((SELECT array_agg(DISTINCT w.relid ORDER BY w.relid)
                     FROM docsync.watch_targets w JOIN docsync.watch_defs d ON d.id = w.id
                    WHERE w.query = q.name AND w.problem IS NULL AND d.broadcast), '{}') AS broadcast_tables
    FROM docsync.query_defs q
    CROSS JOIN LATERAL docsync.query_check(q) chk
    CROSS JOIN LATERAL (SELECT docsync.stored_batch_problem(q.name) AS not_batched,
                               (SELECT sa.why FROM set_aside sa WHERE sa.query = q.name) AS set_aside) b;
COMMENT ON VIEW docsync.queries IS
  'one row per doc query, with its watched tables, what no watch covers, its definer, why the worker refuses it, the reader role its docs are computed as, why its docs are computed one by one (not_batched), and whether a running worker batches them (batched: batched, not batched or set aside; batch_set_aside: why a worker set its batched form aside), whether its watches are derived or manual, and the tables whose every change recomputes every live doc (broadcast_tables)';

CREATE VIEW docsync.watches AS
  SELECT w.id, w.query, w.relid AS "table", w.table_schema, w.table_name,
         CASE WHEN d.broadcast THEN 'broadcast' WHEN w.keys_sql IS NULL THEN 'direct' ELSE 'keys' END AS kind,
         w.columns, w.attnums, w.keys_sql, w.allow_broadcast, w.defined_by, w.defined_at,
         coalesce(w.problem, docsync.watch_set_aside(w.id)) AS problem, w.search_path,
         d.origin, d.read_columns
    FROM docsync.watch_targets w JOIN docsync.watch_defs d ON d.id = w.id;
COMMENT ON VIEW docsync.watches IS
  'one row per watch, resolved by name: its table and the columns'' attnums, or the problem when they do not resolve; derived (origin) or hand-written, and the columns its query reads (null: all)';

-- What keeps the server from decoding with docsync for a role without superuser: NULL when docsync
-- is in output_plugin_libraries (split as the server splits it) or the server has no such setting;
-- otherwise the problem, a list set as one quoted string included, and the ALTER SYSTEM that fixes it.
CREATE FUNCTION docsync.output_plugin_problem() RETURNS text
AS 'MODULE_PATHNAME', 'docsync_output_plugin_problem'
LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION docsync.output_plugin_problem() IS
  'NULL when the server lets REPLICATION roles decode with docsync; otherwise what is wrong with output_plugin_libraries and the fix';
GRANT EXECUTE ON FUNCTION docsync.output_plugin_problem() TO docsync_admin, pg_monitor;

CREATE VIEW docsync.watched_tables AS
  WITH t AS (
    SELECT w.table_schema, w.table_name,
           min(w.relid::oid)::regclass AS relid,
           array_agg(DISTINCT w.query ORDER BY w.query) AS queries,
           (SELECT array_agg(DISTINCT u.col) FROM docsync.watch_defs w2, unnest(w2.columns) u(col)
             WHERE w2.table_schema = w.table_schema AND w2.table_name = w.table_name) AS cols,
           string_agg(DISTINCT w.problem, '; ') AS problems
      FROM docsync.watch_targets w GROUP BY w.table_schema, w.table_name)
  SELECT t.relid AS "table",
         t.table_schema AS schema,
         t.table_name AS name,
         coalesce((SELECT array_agg(a.attname ORDER BY a.attnum) FROM pg_attribute a
                    WHERE a.attrelid = t.relid AND a.attname = ANY (t.cols) AND a.attnum > 0
                      AND NOT a.attisdropped), '{}') AS columns,
         CASE c.relreplident WHEN 'd' THEN 'default' WHEN 'f' THEN 'full'
                             WHEN 'i' THEN 'index' WHEN 'n' THEN 'nothing' END AS replica_identity,
         t.queries,
         nullif(concat_ws('; ',
           t.problems,
           (SELECT string_agg(format('%s of %s %s outside its REPLICA IDENTITY (%s): a delete, or an update changing %s, cannot name the old doc; run ALTER TABLE %s REPLICA IDENTITY FULL',
                                     array_to_string(g.missing, ', '), g.leaf,
                                     CASE WHEN cardinality(g.missing) = 1 THEN 'is' ELSE 'are' END,
                                     g.identity,
                                     CASE WHEN cardinality(g.missing) = 1 THEN 'it' ELSE 'them' END, g.leaf), '; ')
              FROM docsync.identity_gaps(t.relid, t.cols) g WHERE t.relid IS NOT NULL),
           CASE WHEN c.relpersistence = 'u' THEN
             format('%s is UNLOGGED: its changes are never decoded; run ALTER TABLE %s SET LOGGED', t.relid, t.relid) END,
           CASE WHEN t.relid IS NOT NULL AND NOT EXISTS (SELECT FROM pg_index i WHERE i.indrelid = t.relid AND i.indisprimary) THEN
             format('%s has no primary key: add one (or a REPLICA IDENTITY USING INDEX) so changes name their rows', t.relid) END,
           docsync.output_plugin_problem()
         ), '') AS warning
    FROM t
    LEFT JOIN pg_class c ON c.oid = t.relid;
COMMENT ON VIEW docsync.watched_tables IS
  'one row per watched table: the columns the plugin emits, its replica identity, and what is wrong';

GRANT SELECT ON docsync.queries, docsync.watches, docsync.watched_tables TO docsync_admin;

