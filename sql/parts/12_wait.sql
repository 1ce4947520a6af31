-- sql/parts/12_wait.sql: read-your-writes: the procedure docsync.wait_published (plugin/wait.c).
-- Read-your-writes: true once the docsync slots of this database (or the one named) have confirmed
-- lsn, i.e. the worker published the docs of every transaction before it and the server processed
-- its acknowledgement; false at the timeout. A procedure (plugin/wait.c), so that a CALL outside a
-- transaction block commits before it waits and holds no snapshot meanwhile.
CREATE PROCEDURE docsync.wait_published(
    lsn pg_lsn DEFAULT pg_catalog.pg_current_wal_insert_lsn(),
    timeout interval DEFAULT '5s',
    slot name DEFAULT NULL,
    INOUT published boolean DEFAULT NULL)
AS 'MODULE_PATHNAME', 'docsync_wait_published'
LANGUAGE C;
COMMENT ON PROCEDURE docsync.wait_published(pg_lsn, interval, name, boolean) IS
  'waits until the docs of every transaction before lsn are published (the docsync slots of this database, or slot, confirmed it); published is false at the timeout';

