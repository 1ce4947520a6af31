-- sql/parts/08_worker_contracts.sql: worker contracts: the dependency closure and fingerprint,
-- batched forms, uncovered queries, key types, worker_definitions, plugin_tables and doc-version
-- generations.
-------------------------------------------------------------------------------
-- Worker contracts: definitions, plugin tables option, doc-version generations
-------------------------------------------------------------------------------

-- The dependency closure of a doc query beyond what it names (docsync.query_depends), as text
-- docsync.fingerprint() hashes: when unsure, recompute.
--   relations: every inheritance child below a relation read (ALTER TABLE … INHERIT, ATTACH), with
--     each one's storage (relfilenode: a table rewrite, such as ALTER COLUMN … TYPE … USING with the
--     same type, changes values without a decoded change) and its columns' collations;
--   functions at any depth: a function with a SQL-standard body (BEGIN ATOMIC) records what it
--     calls and reads in pg_depend, followed to its end; a body docsync cannot see into (plpgsql,
--     a SQL function's string, any other procedural language) may call anything, so then the state
--     of every function of the database counts (a CREATE OR REPLACE anywhere recomputes the query);
--   types at any depth: column, argument and result types, array elements, domain bases with their
--     constraints and defaults, composite attributes, range subtypes; enum labels in order;
--   collations: provider, locale, determinism and version of each one used.
-- (Its plan's estimates are far above jit_above_cost while it reads a handful of catalog rows: JIT off.)
CREATE FUNCTION docsync.closure_state(rels oid[], fns oid[], typs oid[], colls oid[]) RETURNS text
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp SET jit = off AS $$
  WITH RECURSIVE
  fn(oid) AS (
    SELECT DISTINCT f FROM unnest(fns) f
    UNION
    SELECT n.next FROM fn CROSS JOIN LATERAL (
           SELECT d.refobjid FROM pg_depend d
            WHERE d.classid = 'pg_proc'::regclass AND d.objid = fn.oid AND d.refclassid = 'pg_proc'::regclass
           UNION ALL
           -- an aggregate's support functions
           SELECT x FROM pg_aggregate a
                CROSS JOIN LATERAL unnest(ARRAY[a.aggtransfn, a.aggfinalfn, a.aggcombinefn, a.aggserialfn,
                                                a.aggdeserialfn, a.aggmtransfn, a.aggminvtransfn, a.aggmfinalfn]::oid[]) x
            WHERE a.aggfnoid = fn.oid AND x <> 0) n(next)),
  tree(relid) AS (
    SELECT DISTINCT r FROM unnest(rels) r
    UNION
    SELECT d.refobjid FROM fn JOIN pg_depend d
        ON d.classid = 'pg_proc'::regclass AND d.objid = fn.oid AND d.refclassid = 'pg_class'::regclass
    UNION
    SELECT i.inhrelid FROM tree t JOIN pg_inherits i ON i.inhparent = t.relid),
  ty(oid) AS (
    SELECT DISTINCT t FROM unnest(typs) t WHERE t >= 16384
    UNION
    SELECT a.atttypid FROM tree t JOIN pg_attribute a ON a.attrelid = t.relid AND a.attnum > 0 AND NOT a.attisdropped
     WHERE a.atttypid >= 16384
    UNION
    SELECT x FROM fn JOIN pg_proc p ON p.oid = fn.oid
         CROSS JOIN LATERAL unnest(p.prorettype || p.proargtypes::oid[] || coalesce(p.proallargtypes, '{}')) x
     WHERE x >= 16384
    UNION
    SELECT d.refobjid FROM fn JOIN pg_depend d
        ON d.classid = 'pg_proc'::regclass AND d.objid = fn.oid AND d.refclassid = 'pg_type'::regclass
     WHERE d.refobjid >= 16384
    UNION
    SELECT n.next FROM ty JOIN pg_type t ON t.oid = ty.oid
         CROSS JOIN LATERAL (
           SELECT t.typelem WHERE t.typelem <> 0
           UNION ALL SELECT t.typbasetype WHERE t.typbasetype <> 0
           UNION ALL SELECT a.atttypid FROM pg_attribute a
                      WHERE a.attrelid = t.typrelid AND a.attnum > 0 AND NOT a.attisdropped
           UNION ALL SELECT r.rngsubtype FROM pg_range r WHERE r.rngtypid = t.oid
           UNION ALL SELECT r.rngtypid FROM pg_range r WHERE r.rngmultitypid = t.oid) n(next)
     WHERE n.next >= 16384),
  co(oid) AS (
    SELECT DISTINCT c FROM unnest(colls) c WHERE c <> 0
    UNION
    SELECT a.attcollation FROM tree t JOIN pg_attribute a ON a.attrelid = t.relid AND a.attnum > 0
     WHERE a.attcollation <> 0
    UNION
    SELECT t.typcollation FROM ty JOIN pg_type t ON t.oid = ty.oid WHERE t.typcollation <> 0
    UNION
    SELECT a.attcollation FROM ty JOIN pg_type t ON t.oid = ty.oid
      JOIN pg_attribute a ON a.attrelid = t.typrelid AND a.attnum > 0 AND NOT a.attisdropped
     WHERE a.attcollation <> 0)
  SELECT concat_ws(E'\n',
    (SELECT string_agg(format('%s %s %s', c.oid::regclass, c.relfilenode,
                              (SELECT string_agg(format('%s:%s:%s', a.attname, format_type(a.atttypid, a.atttypmod),
                                                        a.attcollation::regcollation), ',' ORDER BY a.attnum)
                                 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped)),
                       E'\n' ORDER BY c.oid::regclass::text)
       FROM tree JOIN pg_class c ON c.oid = tree.relid),
    (SELECT string_agg(format('%s %s', p.oid::regprocedure, md5(pg_get_functiondef(p.oid))), E'\n'
                       ORDER BY p.oid::regprocedure::text)
       FROM fn JOIN pg_proc p ON p.oid = fn.oid WHERE p.oid >= 16384 AND p.prokind IN ('f', 'p')),
    -- aggregates: their support functions (followed above), initial states and the rest of pg_aggregate
    (SELECT string_agg(format('%s aggregate %s %s %s %s %s %s %s %s %s %s %s %s %s %s %s', p.oid::regprocedure,
                              a.aggkind, a.aggnumdirectargs, a.aggtransfn, a.aggfinalfn, a.aggcombinefn,
                              a.aggserialfn, a.aggdeserialfn, a.aggmtransfn, a.aggminvtransfn, a.aggmfinalfn,
                              a.aggfinalextra, a.aggfinalmodify, a.aggsortop::regoperator,
                              a.aggtranstype::regtype, a.agginitval) || format(' %s %s', a.aggmtranstype::regtype,
                              a.aggminitval), E'\n' ORDER BY p.oid::regprocedure::text)
       FROM fn JOIN pg_proc p ON p.oid = fn.oid JOIN pg_aggregate a ON a.aggfnoid = p.oid
      WHERE p.oid >= 16384),
    -- a body docsync cannot see into may read anything: the catalog state of every user function,
    -- relation (storage, shape, row security), column, type, policy, schema and text search object
    -- of the database, so any DDL on any of them (a table rewrite, say) recomputes the query
    (SELECT 'opaque ' || md5(string_agg(format('%s %s %s', o.cat, o.id, o.xmin), ',' ORDER BY o.cat, o.id))
       FROM (SELECT 'proc' AS cat, p.oid::text AS id, p.xmin::text AS xmin FROM pg_proc p WHERE p.oid >= 16384
             UNION ALL SELECT 'class', c.oid::text || ' ' || c.relfilenode, c.xmin::text FROM pg_class c
              WHERE c.oid >= 16384 AND c.relkind IN ('r', 'p', 'm', 'f', 'v', 'S')
             UNION ALL SELECT 'attribute', a.attrelid || ':' || a.attnum, a.xmin::text FROM pg_attribute a
               JOIN pg_class c ON c.oid = a.attrelid
              WHERE a.attrelid >= 16384 AND a.attnum > 0 AND c.relkind IN ('r', 'p', 'm', 'f', 'v', 'c')
             UNION ALL SELECT 'type', t.oid::text, t.xmin::text FROM pg_type t WHERE t.oid >= 16384
             UNION ALL SELECT 'enum', e.oid::text, e.xmin::text FROM pg_enum e
             UNION ALL SELECT 'policy', y.oid::text, y.xmin::text FROM pg_policy y
             UNION ALL SELECT 'namespace', n.oid::text, n.xmin::text FROM pg_namespace n WHERE n.oid >= 16384
             UNION ALL SELECT 'collation', l.oid::text, l.xmin::text FROM pg_collation l WHERE l.oid >= 16384
             UNION ALL SELECT 'operator', r.oid::text, r.xmin::text FROM pg_operator r WHERE r.oid >= 16384
             UNION ALL SELECT 'cast', k.oid::text, k.xmin::text FROM pg_cast k WHERE k.oid >= 16384
             UNION ALL SELECT 'inherits', i.inhrelid || ':' || i.inhparent, i.xmin::text FROM pg_inherits i
             UNION ALL SELECT 'rewrite', w.oid::text, w.xmin::text FROM pg_rewrite w WHERE w.oid >= 16384
             UNION ALL SELECT 'tsconfig', x.oid::text, x.xmin::text FROM pg_ts_config x
             UNION ALL SELECT 'tsmap', m.mapcfg || ':' || m.maptokentype || ':' || m.mapseqno, m.xmin::text
                         FROM pg_ts_config_map m
             UNION ALL SELECT 'tsdict', x.oid::text, x.xmin::text FROM pg_ts_dict x
             UNION ALL SELECT 'server', v.oid::text, v.xmin::text FROM pg_foreign_server v
             UNION ALL SELECT 'foreign table', f.ftrelid::text, f.xmin::text FROM pg_foreign_table f
             UNION ALL SELECT 'refreshes', m.relid::text, m.refreshes::text FROM docsync.matview_refreshes m) o
      WHERE EXISTS (SELECT FROM fn JOIN pg_proc q ON q.oid = fn.oid
                     WHERE q.oid >= 16384 AND q.prosqlbody IS NULL
                       AND q.prolang NOT IN (SELECT l.oid FROM pg_language l WHERE l.lanname IN ('internal', 'c')))),
    -- row security and foreign data: what the compute role may see, and where a foreign table reads
    (SELECT string_agg(format('%s rls %s %s {%s} %s %s', c.oid::regclass, c.relrowsecurity, c.relforcerowsecurity,
                              (SELECT string_agg(format('%s %s %s %s %s %s', y.polname, y.polcmd, y.polpermissive,
                                                        y.polroles::regrole[], pg_get_expr(y.polqual, y.polrelid),
                                                        pg_get_expr(y.polwithcheck, y.polrelid)), ','
                                                 ORDER BY y.polname)
                                 FROM pg_policy y WHERE y.polrelid = c.oid),
                              (SELECT format('%s %s %s %s %s', f.ftoptions, v.srvname, v.srvoptions, w.fdwname, w.fdwoptions)
                                 FROM pg_foreign_table f JOIN pg_foreign_server v ON v.oid = f.ftserver
                                 JOIN pg_foreign_data_wrapper w ON w.oid = v.srvfdw WHERE f.ftrelid = c.oid),
                              (SELECT string_agg(format('%s:%s', a.attname, a.attfdwoptions), ',' ORDER BY a.attnum)
                                 FROM pg_attribute a
                                WHERE a.attrelid = c.oid AND a.attnum > 0 AND a.attfdwoptions IS NOT NULL)),
                       E'\n' ORDER BY c.oid::regclass::text)
       FROM tree JOIN pg_class c ON c.oid = tree.relid
      WHERE c.relrowsecurity OR c.relforcerowsecurity OR c.relkind = 'f'
         OR EXISTS (SELECT FROM pg_policy y WHERE y.polrelid = c.oid)),
    -- a matview refreshed CONCURRENTLY keeps its storage: its count of such refreshes
    (SELECT string_agg(format('%s refreshes %s', c.oid::regclass, coalesce(r.refreshes, 0)), E'\n'
                       ORDER BY c.oid::regclass::text)
       FROM tree JOIN pg_class c ON c.oid = tree.relid LEFT JOIN docsync.matview_refreshes r ON r.relid = c.oid
      WHERE c.relkind = 'm'),
    -- text search: a tsvector, tsquery, regconfig or regdictionary anywhere in the query makes the
    -- state of every text search configuration and dictionary count (which one a call uses is a
    -- value, often a setting's)
    (SELECT 'text search ' || md5(concat_ws(E'\n',
              (SELECT string_agg(format('%s %s %s', x.oid::regconfig, x.cfgparser,
                                        (SELECT string_agg(format('%s:%s:%s', m.maptokentype, m.mapseqno,
                                                                  m.mapdict::regdictionary), ',' ORDER BY m.maptokentype, m.mapseqno)
                                           FROM pg_ts_config_map m WHERE m.mapcfg = x.oid)), E'\n' ORDER BY x.oid)
                 FROM pg_ts_config x),
              (SELECT string_agg(format('%s %s %s', x.oid::regdictionary, x.dicttemplate, x.dictinitoption), E'\n'
                                 ORDER BY x.oid)
                 FROM pg_ts_dict x)))
      WHERE EXISTS (SELECT FROM unnest(typs) t WHERE t IN ('tsvector'::regtype, 'tsquery'::regtype,
                                                             'regconfig'::regtype, 'regdictionary'::regtype))),
    (SELECT string_agg(format('%s %s %s %s %s %s %s [%s] {%s} (%s)', t.oid::regtype, t.typtype, t.typbasetype::regtype,
                              t.typtypmod, t.typnotnull, t.typdefault, t.typcollation::regcollation,
                              (SELECT string_agg(e.enumlabel, ',' ORDER BY e.enumsortorder)
                                 FROM pg_enum e WHERE e.enumtypid = t.oid),
                              (SELECT string_agg(format('%s:%s:%s', a.attname, format_type(a.atttypid, a.atttypmod),
                                                        a.attcollation::regcollation), ',' ORDER BY a.attnum)
                                 FROM pg_attribute a
                                WHERE a.attrelid = t.typrelid AND a.attnum > 0 AND NOT a.attisdropped),
                              (SELECT string_agg(format('%s %s', k.conname, pg_get_constraintdef(k.oid)), ','
                                                 ORDER BY k.conname)
                                 FROM pg_constraint k WHERE k.contypid = t.oid)),
                       E'\n' ORDER BY t.oid::regtype::text)
       FROM ty JOIN pg_type t ON t.oid = ty.oid),
    (SELECT string_agg(format('%s %s %s %s %s %s %s', c.oid::regcollation, c.collprovider, c.collisdeterministic,
                              c.collcollate, c.collctype, c.colliculocale, c.collversion),
                       E'\n' ORDER BY c.oid::regcollation::text)
       FROM co JOIN pg_collation c ON c.oid = co.oid))
$$;

-- What a stored query's docs depend on besides its rows, as one hash: the columns (names, types,
-- typmods) of every table and view its doc and keys queries read, views' definitions, partitions
-- and their bounds, and the definitions of the user functions they call. DDL that changes any of
-- it changes the hash, and the worker recomputes the query's live docs; a query that no longer
-- analyses hashes its error, so it is recomputed (and fails visibly) too.
CREATE FUNCTION docsync.fingerprint(query text) RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  q docsync.query_defs;
  rels oid[] := '{}';
  fns oid[] := '{}';
  typs oid[] := '{}';
  colls oid[] := '{}';
  d record;
  w docsync.watch_defs;
  failed text[] := '{}';
BEGIN
  SELECT * INTO q FROM docsync.query_defs x WHERE x.name = fingerprint.query;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  BEGIN
    SELECT * INTO d FROM docsync.query_depends(q.sql, q.search_path, docsync.definer_role(q.defined_by));
  EXCEPTION WHEN OTHERS THEN
    RETURN md5('error: ' || SQLERRM);
  END;
  rels := d.relations;
  fns := d.functions;
  typs := d.types;
  colls := d.collations;
  -- each keys query apart: one that no longer analyses (another definer's watch, whose table was
  -- dropped, say) hashes its error beside what the others depend on, never instead of it
  -- (over an array: a loop's cursor would be open while code a parse runs could move it)
  FOREACH w IN ARRAY ARRAY(SELECT x FROM docsync.watch_defs x WHERE x.query = q.name AND x.keys_sql IS NOT NULL
                            ORDER BY x.id) LOOP
    BEGIN
      SELECT * INTO d FROM docsync.query_depends(w.keys_sql, docsync.stored_path(w.search_path), docsync.definer_role(w.defined_by));
      rels := rels || d.relations;
      fns := fns || d.functions;
      typs := typs || d.types;
      colls := colls || d.collations;
    EXCEPTION WHEN OTHERS THEN
      failed := failed || format('watch %s: %s', w.id, SQLERRM);
    END;
  END LOOP;
  rels := rels || ARRAY(SELECT t.relid::oid FROM unnest(rels) r(oid) CROSS JOIN LATERAL pg_partition_tree(r.oid) t);
  RETURN md5(concat_ws(E'\n',
    -- names, never OIDs or attnums (closure_state's storage identity aside: a restored copy's
    -- fingerprint differs there, and its docs are recomputed once); a partition's or child's link
    -- to its parent by its row's xmin, so that a partition detached, changed and attached again
    -- with the same bounds recomputes: its changes while it was out were never its root's
    (SELECT string_agg(format('%s %s %s %s %s %s', c.oid::regclass, c.relkind,
                              (SELECT string_agg(format('%s:%s', a.attname, format_type(a.atttypid, a.atttypmod)),
                                                 ',' ORDER BY a.attnum)
                                 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped),
                              CASE WHEN c.relkind IN ('v', 'm') THEN pg_get_viewdef(c.oid) END,
                              pg_get_expr(c.relpartbound, c.oid),
                              (SELECT string_agg(i.inhparent::regclass || ':' || i.xmin, ',' ORDER BY i.inhseqno)
                                 FROM pg_inherits i WHERE i.inhrelid = c.oid)), E'\n' ORDER BY c.oid::regclass::text)
       FROM pg_class c WHERE c.oid IN (SELECT DISTINCT unnest(rels))),
    (SELECT string_agg(format('%s %s', p.oid::regprocedure, md5(pg_get_functiondef(p.oid))), E'\n'
                       ORDER BY p.oid::regprocedure::text)
       FROM pg_proc p
      WHERE p.oid IN (SELECT DISTINCT unnest(fns)) AND p.oid >= 16384 AND p.prokind IN ('f', 'p')),
    docsync.closure_state(rels, fns, typs, colls),
    nullif(array_to_string(failed, E'\n'), '')));
END
$$;

-- The batched form (docsync.batch_sql) of a stored doc query, or with watch, of that watch's keys
-- query; null when it has none, and null too when it does not analyse now (a table it reads was
-- dropped, say): the worker then computes one doc at a time, and those computes report the failure.
-- It runs as the extension's owner, like fingerprint(), because the worker's replication role calls
-- it through worker_definitions() and may not even see the schemas the query reads; the text is
-- analysed as its definer (docsync.batch_sql's definer). Only stored queries, never text from the
-- caller.
CREATE FUNCTION docsync.stored_batch_sql(query text, watch bigint DEFAULT NULL) RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  q docsync.query_defs;
  src text;
  definer name;
  path text;
BEGIN
  SELECT * INTO q FROM docsync.query_defs d WHERE d.name = stored_batch_sql.query;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  SELECT t.src, t.definer, t.path INTO src, definer, path FROM docsync.stored_text(q, watch) t;
  IF src IS NULL THEN
    RETURN NULL;
  END IF;
  RETURN docsync.batch_sql(src, docsync.stored_path(path), docsync.definer_role(definer));
EXCEPTION WHEN OTHERS THEN
  RETURN NULL;
END
$$;
COMMENT ON FUNCTION docsync.stored_batch_sql(text, bigint) IS
  'the batched form of a stored doc query, or of the keys query of one of its watches; null when it has none or no longer analyses';

-- The unwatched tables of a query, or the reason they cannot be computed.
CREATE FUNCTION docsync.query_check(q docsync.query_defs, OUT reads regclass[], OUT unwatched regclass[],
                                    OUT problem text)
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  watched regclass[];
  k text;
BEGIN
  SELECT coalesce(array_agg(DISTINCT w.relid), '{}') INTO watched
    FROM docsync.watch_targets w WHERE w.query = q.name AND w.problem IS NULL;
  reads := docsync.tables_read(q.name);
  SELECT coalesce(array_agg(r ORDER BY r), '{}') INTO unwatched
    FROM unnest(reads) r WHERE NOT r = ANY (watched);
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS k = MESSAGE_TEXT;
  problem := k;
END
$$;

-- Each query whose docs go stale because a table it reads has no watch, one line each (for the
-- worker's log and docsync.status); refused queries are not run, so they are left out. Like
-- fingerprint(), it may be called by roles that cannot read the definition tables; each query is
-- analysed as its definer (docsync.stored_analysis, through query_check and tables_read).
-- docsync.status reads it: it must never wait for a customer's lock (a migration holding ACCESS
-- EXCLUSIVE on a table a query reads blocks its analysis), so each lock is waited for 100 ms at most,
-- and a query that cannot be analysed now is left out (query_check and refusal catch the timeout).
CREATE FUNCTION docsync.uncovered_queries(OUT query text, OUT tables text[], OUT message text)
RETURNS SETOF record
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET lock_timeout = '100ms' AS $$
BEGIN
  RETURN QUERY SELECT q.name, chk.unwatched::text[],
         format('doc query "%s" reads %s, which no watch covers: its docs go stale when %s; watch %s with docsync.watch(%L, …)',
                q.name, array_to_string(chk.unwatched, ', '),
                CASE WHEN cardinality(chk.unwatched) = 1 THEN 'it changes' ELSE 'they change' END,
                CASE WHEN cardinality(chk.unwatched) = 1 THEN 'it' ELSE 'each' END, q.name)
    FROM docsync.query_defs q
   CROSS JOIN LATERAL docsync.query_check(q) chk
   WHERE cardinality(chk.unwatched) > 0 AND docsync.refusal(q.name) IS NULL
   ORDER BY q.name;
END
$$;
COMMENT ON FUNCTION docsync.uncovered_queries() IS
  'doc queries that read a table no watch covers (their docs go stale when it changes), with a line saying so';

-- Why a stored doc query's docs, or the lookups of one of its keys queries, are computed one by one
-- (docsync.batch_problem of each, the keys queries named by watch id), or NULL when every one has a
-- batched form. Each text is analysed as its definer, as stored_batch_sql's is.
CREATE FUNCTION docsync.stored_batch_problem(query text) RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  q docsync.query_defs;
  out text[] := '{}';
  w docsync.watch_defs;
  problem text;
BEGIN
  SELECT * INTO q FROM docsync.query_defs d WHERE d.name = stored_batch_problem.query;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  BEGIN
    problem := docsync.batch_problem(q.sql, q.search_path, docsync.definer_role(q.defined_by));
  EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS problem = MESSAGE_TEXT;
    problem := format('it does not analyse (%s)', problem);
  END;
  IF problem IS NOT NULL THEN
    out := out || format('doc query: %s', problem);
  END IF;
  -- (over an array: a loop's cursor would be open while code a parse runs could move it)
  FOREACH w IN ARRAY ARRAY(SELECT d FROM docsync.watch_defs d WHERE d.query = q.name AND d.keys_sql IS NOT NULL
                            ORDER BY d.id) LOOP
    BEGIN
      problem := docsync.batch_problem(w.keys_sql, docsync.stored_path(w.search_path), docsync.definer_role(w.defined_by));
    EXCEPTION WHEN OTHERS THEN
      GET STACKED DIAGNOSTICS problem = MESSAGE_TEXT;
      problem := format('it does not analyse (%s)', problem);
    END;
    IF problem IS NOT NULL THEN
      out := out || format('keys query of watch %s: %s', w.id, problem);
    END IF;
  END LOOP;
  RETURN nullif(array_to_string(out, '; '), '');
END
$$;
COMMENT ON FUNCTION docsync.stored_batch_problem(text) IS
  'why the docs or keys lookups of a stored doc query are computed one by one (no batched form), or null';

-- The doc queries whose batched forms a worker of this database running now set aside (they failed
-- where their docs alone run), with why: what its status file says (docsync.status_file_queries,
-- declared with the status functions below; plugin/status.c), the files read once. A worker tries
-- them again when the definitions reload (grant_reader raises the generation when it grants).
CREATE FUNCTION docsync.batch_set_aside(OUT query text, OUT why text) RETURNS SETOF record
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  RETURN QUERY
    SELECT f.query, string_agg(DISTINCT f.batch_set_aside, '; ')
      FROM docsync.status_file_queries() f
      JOIN docsync.status_files() s ON s.database = f.database AND s.slot_name = f.slot_name
     WHERE f.database = current_database() AND f.batch_set_aside IS NOT NULL AND s.state <> 'stopped'
       AND (s.lock_held OR s.heartbeat_at > clock_timestamp() - interval '5 seconds')
     GROUP BY f.query;
END
$$;
COMMENT ON FUNCTION docsync.batch_set_aside() IS
  'the doc queries a running worker computes one by one although they have a batched form (the form failed where the docs alone run), and why';

-- The key types of a stored doc query: for each param, the pg_type name of its base type when that
-- lies in pg_catalog, else ''. The worker and docsync-gateway refuse a channel whose key is not in
-- its type's canonical text (worker/engine/key_text.hpp). NULL when the query does not analyse now.
-- Analysed as its definer (docsync.stored_analysis).
CREATE FUNCTION docsync.stored_key_types(query text) RETURNS text[]
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  q docsync.query_defs;
BEGIN
  SELECT * INTO q FROM docsync.query_defs d WHERE d.name = stored_key_types.query;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  -- a domain's size (varchar(3), bpchar(5), timestamp(0), bit(4), varbit(8)) goes with its base
  -- type; any other typmod makes the key unchecked ('')
  RETURN (SELECT coalesce(array_agg(CASE WHEN ty.typnamespace <> 'pg_catalog'::regnamespace THEN ''
                                         WHEN m.typmod IS NULL THEN ty.typname::text
                                         WHEN ty.typname IN ('varchar', 'bpchar') AND m.typmod >= 4
                                           THEN format('%s(%s)', ty.typname, m.typmod - 4)
                                         WHEN ty.typname IN ('timestamp', 'timestamptz', 'bit', 'varbit')
                                           THEN format('%s(%s)', ty.typname, m.typmod)
                                         ELSE '' END ORDER BY p.k), '{}')
            FROM unnest((docsync.stored_analysis(q.name)).param_types) WITH ORDINALITY AS p(t, k)
            JOIN pg_type ty ON ty.oid = docsync.base_type(p.t)
            LEFT JOIN LATERAL (
              WITH RECURSIVE d(oid, typtype, typbasetype, typtypmod) AS (
                SELECT oid, typtype, typbasetype, typtypmod FROM pg_type WHERE oid = p.t
                UNION ALL
                SELECT b.oid, b.typtype, b.typbasetype, b.typtypmod FROM pg_type b JOIN d ON b.oid = d.typbasetype
                 WHERE d.typtype = 'd')
              SELECT max(d.typtypmod) AS typmod FROM d WHERE d.typtype = 'd' AND d.typtypmod >= 0) m ON true);
EXCEPTION WHEN OTHERS THEN
  RETURN NULL;
END
$$;
COMMENT ON FUNCTION docsync.stored_key_types(text) IS
  'the base type (pg_type name, '''' outside pg_catalog) of each param of a stored doc query: how channels spell its keys';

-- Each query carries "refused": why the worker must not run it now (docsync.refusal, or a definer
-- without a reader role: docsync.reader_missing), or null; "reader_role": the role its computes run
-- as (SET LOCAL ROLE through docsync.compute_as; a keys query's is its watch's "keys_reader_role");
-- "fingerprint": what its docs depend on besides rows (docsync.fingerprint); "key_types": the base
-- type of each param (docsync.stored_key_types); and "batch_sql": its
-- batched form (docsync.stored_batch_sql), null when it has none, is refused or no longer analyses.
-- Watches are resolved by name in this database; those that do not resolve are left out of
-- "watches" and listed in "unresolved" with the problem, for the worker to report; "uncovered"
-- names the queries that read a table no watch covers, for the worker to log. A reverse-index
-- watch carries "keys_batch_sql", the batched form of its keys query, null likewise. Every watch
-- carries "broadcast" (each change of its table recomputes every live doc of the query) and
-- "read_columns", the columns of its table the query reads as {"name", "attnum"} (null: all of them),
-- so the worker skips an UPDATE none of them changed. refusal() runs once per query.
-- Why the worker cannot compute a query's docs with its definers' rights yet, or NULL: the definer of
-- the query or of one of its keys queries has no reader role (grant_reader makes them).
CREATE FUNCTION docsync.reader_missing(query text) RETURNS text
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
  SELECT format('its definer %s has no reader role yet: run SELECT docsync.grant_reader(<the worker''s pool role>), which makes one and grants it what the definer''s queries read',
                quote_ident(d.definer))
    FROM (SELECT q.defined_by AS definer, 0 AS ord FROM docsync.query_defs q WHERE q.name = reader_missing.query
          UNION ALL
          -- another definer's keys watch without a reader role is set aside (docsync.watch_set_aside)
          SELECT w.defined_by, w.id FROM docsync.watch_defs w JOIN docsync.query_defs q ON q.name = w.query
           WHERE w.query = reader_missing.query AND w.keys_sql IS NOT NULL AND w.defined_by = q.defined_by) d
   WHERE NOT EXISTS (SELECT FROM docsync.reader_roles rr
                      WHERE rr.definer = d.definer AND to_regrole(quote_ident(rr.reader)) IS NOT NULL)
   ORDER BY d.ord
   LIMIT 1
$$;

CREATE FUNCTION docsync.worker_definitions() RETURNS jsonb
LANGUAGE sql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
  WITH qs AS (
    SELECT q.*, coalesce(r.refused, docsync.reader_missing(q.name)) AS refused, rr.reader AS reader_role
      FROM docsync.query_defs q CROSS JOIN LATERAL docsync.refusal(q.name) AS r(refused)
      LEFT JOIN docsync.reader_roles rr ON rr.definer = q.defined_by)
  SELECT jsonb_build_object(
    'generation', (SELECT generation FROM docsync.def_generation),
    'queries', coalesce((SELECT jsonb_agg(jsonb_build_object(
                          'name', q.name, 'sql', q.sql, 'params', to_jsonb(q.params),
                          'search_path', q.search_path, 'refused', q.refused, 'reader_role', q.reader_role,
                          'fingerprint', docsync.fingerprint(q.name),
                          'batch_sql', CASE WHEN q.refused IS NULL THEN docsync.stored_batch_sql(q.name) END,
                          'key_types', docsync.stored_key_types(q.name))
                          ORDER BY q.name)
                         FROM qs q), '[]'),
    'watches', coalesce((SELECT jsonb_agg(jsonb_build_object(
                          'query', w.query, 'relid', w.relid::oid::bigint, 'schema', w.table_schema, 'table', w.table_name,
                          'columns', CASE WHEN w.keys_sql IS NULL THEN m.cols ELSE '[]' END,
                          'keys_sql', w.keys_sql,
                          'keys_search_path', CASE WHEN w.keys_sql IS NOT NULL THEN w.search_path END,
                          'keys_reader_role', CASE WHEN w.keys_sql IS NOT NULL
                                                   THEN (SELECT rr.reader FROM docsync.reader_roles rr
                                                          WHERE rr.definer = w.defined_by) END,
                          'keys_batch_sql', CASE WHEN w.keys_sql IS NOT NULL AND q.refused IS NULL
                                                 THEN docsync.stored_batch_sql(w.query, w.id) END,
                          'keys_args', CASE WHEN w.keys_sql IS NULL THEN '[]' ELSE m.cols END,
                          'allow_broadcast', w.allow_broadcast, 'broadcast', d.broadcast,
                          'read_columns', rc.cols) ORDER BY w.query, w.id)
                         FROM docsync.watch_targets w
                         JOIN docsync.watch_defs d ON d.id = w.id
                         JOIN qs q ON q.name = w.query
                         CROSS JOIN LATERAL (
                           -- the columns the query reads, resolved: null when read_columns is null (every
                           -- column) or one no longer resolves (dropped or renamed unseen): the watch then
                           -- counts every column as read, which never skips a change it needs
                           SELECT CASE WHEN d.read_columns IS NOT NULL AND coalesce(bool_and(a.attnum IS NOT NULL), true) THEN
                                    coalesce(jsonb_agg(jsonb_build_object('name', a.attname, 'attnum', a.attnum) ORDER BY a.attnum)
                                               FILTER (WHERE a.attnum IS NOT NULL), '[]') END AS cols
                             FROM (SELECT DISTINCT u.col FROM unnest(d.read_columns) AS u(col)) u
                             LEFT JOIN pg_attribute a
                               ON a.attrelid = w.relid AND a.attname = u.col AND a.attnum > 0 AND NOT a.attisdropped) rc
                         JOIN pg_class c ON c.oid = w.relid
                         JOIN pg_namespace n ON n.oid = c.relnamespace
                         CROSS JOIN LATERAL (
                           SELECT coalesce(jsonb_agg(jsonb_build_object('name', u.col, 'attnum', u.num) ORDER BY u.ord), '[]') AS cols
                             FROM unnest(w.columns, w.attnums) WITH ORDINALITY AS u(col, num, ord)) m
                        CROSS JOIN LATERAL docsync.watch_set_aside(w.id) AS a(problem)
                        WHERE w.problem IS NULL AND a.problem IS NULL), '[]'),
    'unresolved', coalesce((SELECT jsonb_agg(jsonb_build_object('query', w.query, 'id', w.id, 'problem', p.problem)
                                             ORDER BY w.query, w.id)
                              FROM docsync.watch_targets w
                              CROSS JOIN LATERAL (SELECT coalesce(w.problem, docsync.watch_set_aside(w.id)) AS problem) p
                             WHERE p.problem IS NOT NULL), '[]'),
    'uncovered', coalesce((SELECT jsonb_agg(jsonb_build_object('query', u.query, 'message', u.message) ORDER BY u.query)
                             FROM docsync.uncovered_queries() u), '[]'))
$$;
COMMENT ON FUNCTION docsync.worker_definitions() IS 'all definitions as one jsonb, for docsync-worker';

CREATE FUNCTION docsync.plugin_tables() RETURNS text
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
  SELECT coalesce(string_agg(e.entry, ',' ORDER BY e.relid), '')
    FROM (SELECT r.relid,
                 r.relid::text || coalesce('(' || (SELECT string_agg(n::text, ',' ORDER BY n)
                                                      FROM (SELECT unnest(w.attnums) AS n
                                                              FROM docsync.watch_targets w
                                                             WHERE w.relid::oid = r.relid AND w.problem IS NULL
                                                            UNION
                                                            -- and the columns its queries read, as the worker
                                                            -- has them: none when one no longer resolves
                                                            SELECT a.attnum
                                                              FROM docsync.watch_targets w
                                                              JOIN docsync.watch_defs d ON d.id = w.id
                                                              JOIN pg_attribute a
                                                                ON a.attrelid = w.relid AND a.attname = ANY (d.read_columns)
                                                               AND a.attnum > 0 AND NOT a.attisdropped
                                                             WHERE w.relid::oid = r.relid AND w.problem IS NULL
                                                               AND NOT EXISTS (SELECT FROM unnest(d.read_columns) AS u(col)
                                                                                WHERE NOT EXISTS (SELECT FROM pg_attribute x
                                                                                                   WHERE x.attrelid = w.relid AND x.attname = u.col
                                                                                                     AND x.attnum > 0 AND NOT x.attisdropped))) a) || ')', '') AS entry
            FROM (SELECT DISTINCT w.relid::oid AS relid FROM docsync.watch_targets w WHERE w.problem IS NULL) r) e
$$;
COMMENT ON FUNCTION docsync.plugin_tables() IS
  'the output plugin''s tables option for the current definitions: OID(attnum,…) entries';

CREATE FUNCTION docsync.advance_generation(slot name, system_identifier text, timeline integer,
                                           floor bigint, force boolean)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  st docsync.worker_state;
  gen bigint;
BEGIN
  IF slot IS NULL OR system_identifier IS NULL OR timeline IS NULL OR force IS NULL THEN
    RAISE EXCEPTION 'docsync.advance_generation arguments must not be null'
      USING ERRCODE = 'null_value_not_allowed',
            DETAIL = 'slot, system_identifier, timeline and force identify the stream.',
            HINT = 'Pass every argument; floor may be 0.';
  END IF;
  INSERT INTO docsync.worker_state (slot, system_identifier, timeline, generation)
  VALUES (slot, system_identifier, timeline, 0)
  ON CONFLICT ON CONSTRAINT worker_state_pkey DO NOTHING;
  SELECT * INTO st FROM docsync.worker_state w WHERE w.slot = advance_generation.slot FOR UPDATE;
  IF st.system_identifier = advance_generation.system_identifier AND st.timeline = advance_generation.timeline
     AND NOT force AND st.generation > 0 THEN
    gen := greatest(st.generation, coalesce(floor, 0));
  ELSE
    gen := greatest(st.generation, coalesce(floor, 0)) + 1;
  END IF;
  UPDATE docsync.worker_state w
     SET system_identifier = advance_generation.system_identifier, timeline = advance_generation.timeline,
         generation = gen, updated_at = now()
   WHERE w.slot = advance_generation.slot;
  RETURN gen;
END
$$;
COMMENT ON FUNCTION docsync.advance_generation(name, text, integer, bigint, boolean) IS
  'doc-version generation of a slot: raised when the slot, server identity or timeline changes';

