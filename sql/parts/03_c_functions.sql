-- sql/parts/03_c_functions.sql: the C functions of the SQL API (plugin/sqlapi.c,
-- plugin/definer.c, plugin/reader.c): channel names, query analysis and batching, the definer
-- checks, compute_as and api_caller.
-- C helpers (plugin/sqlapi.c).
CREATE FUNCTION docsync.channel(query text, VARIADIC "values" text[])
RETURNS text LANGUAGE c IMMUTABLE PARALLEL SAFE
AS 'MODULE_PATHNAME', 'docsync_channel';
COMMENT ON FUNCTION docsync.channel(text, text[]) IS
  'channel name of a doc: db:<query>:<v1>:…, escaped as the worker does; NULL is %00';

CREATE FUNCTION docsync.channel(query text)
RETURNS text LANGUAGE c IMMUTABLE PARALLEL SAFE
AS 'MODULE_PATHNAME', 'docsync_channel';
COMMENT ON FUNCTION docsync.channel(text) IS 'channel name of the doc of a query without params';

-- Privilege boundary (plugin/definer.c): analyze_query, query_depends and batch_sql parse and
-- analyse the text as definer (by default the caller of the docsync API function now running, or
-- else the current user), under SECURITY_RESTRICTED_OPERATION, and only a member of that role may
-- name it. The SECURITY DEFINER functions below pass the stored definer, via docsync.definer_role.
CREATE FUNCTION docsync.analyze_query(sql text, search_path text DEFAULT NULL, definer regrole DEFAULT NULL,
  OUT param_types regtype[], OUT result_types regtype[], OUT relations regclass[],
  OUT checked regclass[], OUT param_collations regcollation[], OUT result_collations regcollation[])
RETURNS record LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'docsync_analyze_query';
COMMENT ON FUNCTION docsync.analyze_query(text, text, regrole) IS
  'parameter types, result column types, tables read, relations the caller needs SELECT on, the nondeterministic collation each parameter is compared under (or 0) and the collation of each result column, of a SELECT, without running it';

CREATE FUNCTION docsync.query_depends(sql text, search_path text, definer regrole DEFAULT NULL,
                                      OUT relations oid[], OUT functions oid[],
                                      OUT types oid[], OUT collations oid[], OUT operators oid[])
RETURNS record LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'docsync_query_depends';
COMMENT ON FUNCTION docsync.query_depends(text, text, regrole) IS
  'every relation (views and partitioned tables included), function, and expression type and collation a SELECT uses, without running it';

CREATE FUNCTION docsync.check_definer(sql text, search_path text, definer regrole)
RETURNS void LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'docsync_check_definer';
COMMENT ON FUNCTION docsync.check_definer(text, text, regrole) IS
  'raises unless the role may run the query: one SELECT, SELECT on what it reads, EXECUTE on what it calls, no row-level security applying to it';
-- computed false: the query is not computed as the definer's reader role (a watch's columns,
-- which the plugin sends from the stream), so row-level security that exempts the definer passes
CREATE FUNCTION docsync.check_definer(sql text, search_path text, definer regrole, computed boolean)
RETURNS void LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'docsync_check_definer';
COMMENT ON FUNCTION docsync.check_definer(text, text, regrole, boolean) IS
  'check_definer; computed false for a query never computed as the definer''s reader role (a watch''s columns)';

-- The watches docsync derives for a doc query (plugin/derive.c), analysed as definer like
-- analyze_query: one row per table occurrence (direct, keys or broadcast, deduplicated) and one per
-- function whose body it cannot see (uncovered). No SET search_path, as analyze_query.
CREATE FUNCTION docsync.derive_watches(sql text, search_path text, definer regrole)
RETURNS TABLE (table_schema name, table_name name, kind text, columns name[], keys_sql text,
               keys_args name[], read_columns name[], why text)
LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'docsync_derive_watches';
COMMENT ON FUNCTION docsync.derive_watches(text, text, regrole) IS
  'the watches derived for a doc query: per table occurrence its cheapest sound kind (direct, keys, broadcast) and the columns read; uncovered rows name functions whose bodies cannot be analysed';

-- No SET search_path: like analyze_query, a null search_path means the caller's.
CREATE FUNCTION docsync.batch_sql(sql text, search_path text, definer regrole DEFAULT NULL)
RETURNS text LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'docsync_batch_sql';
COMMENT ON FUNCTION docsync.batch_sql(text, text, regrole) IS
  'the batched form of a doc or keys query: one statement running it for arrays of param sets, returning (ord, present, its columns…) in ord order; null when it has none (docsync.batch_problem says why)';

-- No SET search_path, as batch_sql.
CREATE FUNCTION docsync.batch_problem(sql text, search_path text, definer regrole DEFAULT NULL)
RETURNS text LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'docsync_batch_problem';
COMMENT ON FUNCTION docsync.batch_problem(text, text, regrole) IS
  'why a doc or keys query has no batched form (no params, an array param, a param type whose array literal uses another delimiter, …), or null when it has one';

-- The search_path a definition is stored with: what the definer (by default the API caller) resolves
-- from the path it gave, "$user" spelled out, schemas it may not use left out, pg_temp last.
CREATE FUNCTION docsync.pin_search_path(search_path text, definer regrole DEFAULT NULL,
                                        usable_only boolean DEFAULT true)
RETURNS text LANGUAGE c STABLE
AS 'MODULE_PATHNAME', 'docsync_pin_search_path';
COMMENT ON FUNCTION docsync.pin_search_path(text, regrole, boolean) IS
  'the search_path a definition is stored with: the schemas the definer may use, "$user" spelled out, pg_temp last';

-- A watched table's name, looked up as the API caller under its search_path; null when none.
CREATE FUNCTION docsync.resolve_relation(name text, search_path text, definer regrole DEFAULT NULL)
RETURNS regclass LANGUAGE c STABLE
AS 'MODULE_PATHNAME', 'docsync_resolve_relation';

-- The first statement of every compute of the worker (plugin/reader.c): SET LOCAL ROLE to the reader
-- role of the definition's definer and SET LOCAL search_path to its stored one, and until the
-- transaction ends refuse to change the role again (SET ROLE, set_config, a function's SET clause).
-- grant_reader grants EXECUTE on it to the pool role.
CREATE FUNCTION docsync.compute_as(reader name, search_path text) RETURNS void LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'docsync_compute_as';

CREATE FUNCTION docsync.api_caller() RETURNS regrole LANGUAGE c STABLE
AS 'MODULE_PATHNAME', 'docsync_api_caller';
COMMENT ON FUNCTION docsync.api_caller() IS 'the role that called the docsync API function now running';

