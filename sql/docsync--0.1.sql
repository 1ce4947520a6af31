/* docsync--0.1.sql: the docsync extension's schema, definitions and views. */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION docsync" to load this file. \quit

COMMENT ON SCHEMA docsync IS 'docsync: live JSON documents computed from SQL queries';
