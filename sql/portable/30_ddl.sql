-- sql/portable/30_ddl.sql: portable forms of the DDL event triggers (plugin/ddl.c). Creating an
-- event trigger takes superuser: when the installing role has it they are made, with plpgsql
-- functions; otherwise there are none, and the worker compares the catalog itself (docs/portable.md:
-- the DDL contract).

-- portable: function docsync.on_ddl_command_end/0
-- Raises the definitions generation, as the C trigger does, unless docsync has no doc query or the
-- DDL touched only temporary objects. Renames are not followed: pg_event_trigger_ddl_commands()
-- gives plpgsql no statement to read the old name from, so a watch of a renamed table or column
-- stops resolving and docsync.watches reports it.
CREATE FUNCTION docsync.on_ddl_command_end() RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF NOT EXISTS (SELECT FROM docsync.query_defs) THEN
    RETURN;
  END IF;
  IF EXISTS (SELECT FROM pg_event_trigger_ddl_commands() c
              WHERE c.schema_name IS NULL OR (c.schema_name <> 'pg_temp' AND c.schema_name !~ '^pg_temp_'))
     OR NOT EXISTS (SELECT FROM pg_event_trigger_ddl_commands()) THEN
    IF TG_TAG = 'REFRESH MATERIALIZED VIEW' THEN
      PERFORM docsync._refreshed(c.objid) FROM pg_event_trigger_ddl_commands() c WHERE c.object_type = 'materialized view';
    END IF;
    PERFORM docsync.next_generation();
  END IF;
END
$$;

-- portable: event trigger docsync_ddl_command_end
DO $portable$
BEGIN
  IF (SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname = current_user) THEN
    EXECUTE $ddl$@ORIGINAL@$ddl$;
  END IF;
END
$portable$;

-- portable: function docsync.on_sql_drop/0
CREATE FUNCTION docsync.on_sql_drop() RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  o record;
  persistent boolean := false;
BEGIN
  IF NOT EXISTS (SELECT FROM docsync.query_defs) THEN
    RETURN;
  END IF;
  FOR o IN SELECT * FROM pg_event_trigger_dropped_objects() LOOP
    CONTINUE WHEN o.is_temporary;
    persistent := true;
    IF o.object_type IN ('table', 'table column', 'foreign table', 'foreign table column')
       AND cardinality(o.address_names) >= 2
       AND EXISTS (SELECT FROM docsync.watch_defs w
                    WHERE w.table_schema = o.address_names[1] AND w.table_name = o.address_names[2]) THEN
      PERFORM docsync._forget_dropped(o.address_names, o.object_identity);
    END IF;
  END LOOP;
  IF persistent THEN
    PERFORM docsync.next_generation();
  END IF;
END
$$;

-- portable: event trigger docsync_sql_drop
DO $portable$
BEGIN
  IF (SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname = current_user) THEN
    EXECUTE $ddl$@ORIGINAL@$ddl$;
  END IF;
END
$portable$;

-- portable: function docsync.on_drop_extension/0
-- No extension to drop: before DROP SCHEMA docsync CASCADE, the installing role runs
-- SELECT docsync._before_drop(); (docs/portable.md), which this trigger runs in the extension.
CREATE FUNCTION docsync.on_drop_extension() RETURNS event_trigger
LANGUAGE plpgsql AS $$
BEGIN
  RETURN;
END
$$;

-- portable: event trigger docsync_drop_extension
-- (none: the portable install is no extension)
