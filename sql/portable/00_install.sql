-- sql/portable/00_install.sql: the portable script's frame (one transaction, the refusal of a second
-- install), install_kind and what replaces pg_dump's extension registration. The blocks below are
-- portable forms (sql/portable/build.py): each replaces, where it stood, the statement of sql/parts/
-- its `-- portable:` line names.

-- portable: psql guard
-- docsync-portable.sql: docsync without its C library, for servers that load none (managed
-- PostgreSQL). Run it with psql as the database's owner (no superuser needed):
--   psql -v ON_ERROR_STOP=1 -d DATABASE -f docsync-portable.sql
-- It runs in one transaction: a failure leaves nothing behind. docs/portable.md says what differs
-- from the extension.
\set ON_ERROR_STOP 1
BEGIN;
-- as CREATE EXTENSION does: functions may name functions made further down
SET LOCAL check_function_bodies = off;
SET LOCAL client_min_messages = warning;

-- portable: replaces /ERRCODE = 'duplicate_schema'/
-- A second run refuses, saying what is installed: it does not upgrade in place. To move to a newer
-- script, dump the definitions, drop the schema and run the new script (docs/portable.md).
DO $$
DECLARE
  kind text;
BEGIN
  IF EXISTS (SELECT FROM pg_catalog.pg_namespace WHERE nspname = 'docsync') THEN
    IF EXISTS (SELECT FROM pg_catalog.pg_extension WHERE extname = 'docsync') THEN
      kind := 'the docsync extension (CREATE EXTENSION)';
    ELSIF EXISTS (SELECT FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
                   WHERE n.nspname = 'docsync' AND p.proname = 'install_kind') THEN
      kind := 'docsync''s portable install';
    END IF;
    RAISE EXCEPTION 'schema "docsync" already exists in database "%"', pg_catalog.current_database()
      USING ERRCODE = 'duplicate_schema',
            DETAIL = coalesce(format('It holds %s. This script installs docsync; it does not upgrade an install in place.', kind),
                              'A schema of that name, not made by docsync, is in the way.'),
            HINT = CASE WHEN kind IS NULL
                        THEN 'If it holds nothing you need, run DROP SCHEMA docsync CASCADE; otherwise rename it: ALTER SCHEMA docsync RENAME TO docsync_old;'
                        ELSE 'To reinstall, save the definitions (pg_dump --data-only --schema=docsync), run DROP SCHEMA docsync CASCADE, run this script, then restore them; docs/portable.md describes the steps.' END;
  END IF;
END
$$;

-- portable: replaces /CREATE FUNCTION docsync\.install_kind\(\)/
CREATE FUNCTION docsync.install_kind() RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT 'portable'::text $$;
COMMENT ON FUNCTION docsync.install_kind() IS 'extension (CREATE EXTENSION) or portable (the SQL-only install)';

-- portable: config_dump
-- (no extension here: pg_dump dumps docsync's tables with the schema, as any others)

-- portable: append
-- The portable API's writers: callable by anyone (they refuse whoever may not define, as the
-- extension's API functions do), after the blanket REVOKE of sql/parts/13_grants.sql.
GRANT EXECUTE ON FUNCTION docsync._api_define_query(regrole, text, text, text[], boolean, text, text, boolean),
  docsync._api_watch(regrole, text, text, text[], text, text[], boolean, text, boolean),
  docsync._api_unwatch(regrole, text, text, text[], text, text), docsync._api_drop_query(regrole, text)
  TO PUBLIC;
-- and the helpers of the portable forms that run as their caller
GRANT EXECUTE ON FUNCTION docsync.api_caller(), docsync.check_definer(text, text, regrole), docsync.check_definer_in(text, text, regrole),
  docsync.channel_segment(text), docsync.path_schemas(text, regrole), docsync.one_statement(text), docsync.ident_char(text), docsync.prove_one_statement(text),
  docsync.parse_select(text, text), docsync.parse_under(text, text), docsync.refuse_temporary(oid[], oid[], oid[]),
  docsync.checked_relations(oid[]), docsync.docsync_slots(name), docsync.is_reader_role(name), docsync._lend_reader(name),
  docsync.sql_tokens(text), docsync.parse_params(text, text), docsync.batch_form(text, text, text),
  docsync.unicode_identifier(text, text), docsync.literal_first_char(text, text, integer),
  docsync.parse_as(regrole, text, text, text, text),
  docsync.parse_here(text, text, text, text)
  TO PUBLIC;
GRANT SELECT ON docsync.worker_status, docsync.worker_query_status TO pg_monitor;
DO $$
BEGIN
  IF NOT EXISTS (SELECT FROM pg_catalog.pg_event_trigger WHERE evtname = 'docsync_ddl_command_end') THEN
    RAISE WARNING 'docsync is installed without DDL event triggers (creating one takes superuser)'
      USING DETAIL = 'DDL that changes what a doc query reads is seen by the worker''s catalog check, within a minute, rather than at its commit; a rename of a watched table or column is not followed.',
            HINT = 'See docs/portable.md, "The DDL contract".';
  END IF;
END
$$;
COMMIT;
