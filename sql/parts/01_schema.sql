-- sql/parts/01_schema.sql: the script's guard, the UTF-8 check and the docsync schema. The parts
-- of sql/parts/ are concatenated in name order into the install script docsync--0.1.sql by the
-- Makefile; each opens with a comment like this one.
/* docsync--0.1.sql: the docsync extension's schema, definitions and views. */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION docsync" to load this file. \quit

-- docsync speaks UTF-8 end to end: the plugin's output is the database's bytes, unconverted, and
-- channels, docs and definitions travel as UTF-8. Refuse other databases now rather than publish
-- mangled names or fail at every compute later.
DO $$
BEGIN
  IF pg_catalog.current_setting('server_encoding') <> 'UTF8' THEN
    RAISE EXCEPTION 'docsync needs a UTF8 database; database "%" is %',
                    pg_catalog.current_database(), pg_catalog.current_setting('server_encoding')
      USING ERRCODE = 'feature_not_supported',
            DETAIL = 'Logical decoding emits text in the database''s encoding, and docsync''s channels and docs are UTF-8.',
            HINT = 'Create the database with ENCODING ''UTF8'' (CREATE DATABASE … ENCODING ''UTF8'' TEMPLATE template0), or dump it and restore it into one.';
  END IF;
END
$$;

-- The schema is the extension's own member, so DROP EXTENSION drops it with its privileges and
-- leaves nothing behind (a leftover schema in template1 would break every later restore).
DO $$
BEGIN
  IF EXISTS (SELECT FROM pg_catalog.pg_namespace WHERE nspname = 'docsync') THEN
    RAISE EXCEPTION 'schema "docsync" already exists in database "%"', pg_catalog.current_database()
      USING ERRCODE = 'duplicate_schema',
            DETAIL = 'CREATE EXTENSION docsync creates that schema and owns it; one left from an earlier install, or made by hand, is in the way.',
            HINT = 'If it holds nothing you need, run DROP SCHEMA docsync CASCADE; otherwise rename it: ALTER SCHEMA docsync RENAME TO docsync_old;';
  END IF;
END
$$;
CREATE SCHEMA docsync;
COMMENT ON SCHEMA docsync IS 'docsync: live JSON documents computed from SQL queries';

-- Which install this is: 'extension' (CREATE EXTENSION, with the C library) or 'portable' (the
-- SQL-only script docsync-portable.sql of docs/portable.md, where that script replaces this).
CREATE FUNCTION docsync.install_kind() RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT 'extension'::text $$;
COMMENT ON FUNCTION docsync.install_kind() IS 'extension (CREATE EXTENSION) or portable (the SQL-only install)';

