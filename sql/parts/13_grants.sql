-- sql/parts/13_grants.sql: function privileges: what PUBLIC and docsync_admin may run.
-- Functions: PUBLIC may run only docsync.channel(), which clients use to name docs, the API
-- functions, which refuse, saying why and how to get the right, anyone who is neither a superuser
-- nor a member of docsync_admin, and the procedure docsync.wait_published, which reveals no more
-- than the slots' positions. docsync_admin runs what the definition views call; the worker's
-- roles get theirs from grant_replication; pg_monitor reads the status views (above).
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA docsync FROM PUBLIC;
GRANT EXECUTE ON FUNCTION docsync.channel(text, text[]), docsync.channel(text), docsync.install_kind(),
  docsync.define_query(text, text, text[], boolean, text),
  docsync.watch(text, text, text[], text, text[], boolean, text), docsync.unwatch(text, text, text[], text, text),
  docsync.drop_query(text)
  TO PUBLIC;
GRANT EXECUTE ON PROCEDURE docsync.wait_published(pg_lsn, interval, name, boolean) TO PUBLIC;
GRANT EXECUTE ON FUNCTION docsync.analyze_query(text, text, regrole), docsync.batch_sql(text, text, regrole),
  docsync.batch_problem(text, text, regrole), docsync.stored_batch_problem(text), docsync.batch_set_aside(),
  docsync.pin_search_path(text, regrole, boolean),
  docsync.query_check(docsync.query_defs), docsync.tables_read(text), docsync.stored_analysis(text, bigint),
  docsync.refusal(text), docsync.reader_missing(text), docsync.watch_problem(bigint), docsync.watch_set_aside(bigint),
  docsync.stored_path(text), docsync.identity_gaps(regclass, name[]), docsync.leaf_tables(regclass), docsync.identity_columns(regclass),
  docsync.worker_definitions(), docsync.plugin_tables(), docsync.fingerprint(text),
  docsync.stored_batch_sql(text, bigint), docsync.stored_key_types(text), docsync.uncovered_queries()
  TO docsync_admin;
GRANT SELECT ON docsync.watch_targets TO docsync_admin;
