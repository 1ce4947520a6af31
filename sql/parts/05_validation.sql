-- sql/parts/05_validation.sql: the checks behind the API: who may define, what a definer may
-- read, replica identity, stored analyses, and why a watch is set aside or a query refused.
-- Raises unless the role calling the API may change definitions.
CREATE FUNCTION docsync.require_admin(action text) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF NOT pg_has_role(docsync.api_caller(), 'docsync_admin', 'USAGE') THEN
    RAISE EXCEPTION 'permission denied to %', action
      USING ERRCODE = 'insufficient_privilege',
            DETAIL = format('Role "%s" is neither a superuser nor a member of docsync_admin.', docsync.api_caller()),
            HINT = format('A superuser can run: GRANT docsync_admin TO %s; (docsync_admin is cluster-wide: it makes a role a definer in every database of this cluster that has docsync)', docsync.api_caller());
  END IF;
END
$$;

-- The role a stored definition runs as: raises when it no longer exists, so that nothing stored is
-- ever analysed as the role calling (a NULL definer would mean the current user).
CREATE FUNCTION docsync.definer_role(definer name) RETURNS regrole
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  r regrole := pg_catalog.to_regrole(pg_catalog.quote_ident(definer));
BEGIN
  IF r IS NULL THEN
    RAISE EXCEPTION 'definer % no longer exists', pg_catalog.quote_ident(definer)
      USING ERRCODE = 'undefined_object',
            DETAIL = 'A definition is parsed, checked and run only with its definer''s rights.',
            HINT = 'Redefine it as an existing role, or drop it.';
  END IF;
  RETURN r;
END
$$;

-- Raises unless name is a valid channel segment ([A-Za-z0-9_] first, then also '.', '-').
CREATE FUNCTION docsync.check_segment(what text, name text) RETURNS void
LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF name IS NULL OR name !~ '^[A-Za-z0-9_][A-Za-z0-9_.-]*$' OR length(name) > 63 THEN
    RAISE EXCEPTION 'invalid % "%"', what, coalesce(name, 'NULL')
      USING ERRCODE = 'invalid_parameter_value',
            DETAIL = 'Names are channel segments: 1 to 63 ASCII letters, digits and ''_'', and also ''.'' and ''-'' after the first character.',
            HINT = 'Choose a name such as order or game.board.';
  END IF;
END
$$;

-- analyze_query with the failure rephrased for the definition being made (as definer; null: the API
-- caller).
CREATE FUNCTION docsync.analyze_for(what text, sql text, search_path text, definer regrole DEFAULT NULL,
  OUT param_types regtype[], OUT result_types regtype[], OUT relations regclass[],
  OUT param_collations regcollation[], OUT result_collations regcollation[])
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  state text; msg text; det text; hnt text;
BEGIN
  SELECT a.param_types, a.result_types, a.relations, a.param_collations, a.result_collations
    INTO param_types, result_types, relations, param_collations, result_collations
    FROM docsync.analyze_query(sql, search_path, definer) a;
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
                          det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
  RAISE EXCEPTION '% does not prepare: %', what, msg
    USING ERRCODE = state,
          DETAIL = coalesce(nullif(det, ''), format('The query was analysed with search_path = %s.', search_path)),
          HINT = coalesce(nullif(hnt, ''),
                          'Fix the query; PREPARE it by hand to check it (cast parameters whose type cannot be inferred, e.g. $1::int).');
END
$$;

-- The columns a leaf table's REPLICA IDENTITY covers; NULL means FULL (all columns).
CREATE FUNCTION docsync.identity_columns(rel regclass) RETURNS name[]
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
  SELECT CASE c.relreplident
           WHEN 'f' THEN NULL
           WHEN 'n' THEN '{}'::name[]
           ELSE coalesce((SELECT array_agg(a.attname ORDER BY a.attnum)
                            FROM pg_index i
                            JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)
                           WHERE i.indrelid = c.oid
                             AND CASE c.relreplident WHEN 'd' THEN i.indisprimary ELSE i.indisreplident END),
                         '{}'::name[])
         END
    FROM pg_class c WHERE c.oid = rel
$$;

-- The tables whose rows a watch on rel sees: rel itself, or every leaf partition of it.
CREATE FUNCTION docsync.leaf_tables(rel regclass) RETURNS SETOF regclass
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
  SELECT t.relid FROM pg_partition_tree(rel) t WHERE t.isleaf
  UNION ALL
  SELECT rel WHERE NOT EXISTS (SELECT FROM pg_partition_tree(rel))
$$;

-- Per leaf table: the given columns outside its replica identity (only leaves with some).
CREATE FUNCTION docsync.identity_gaps(rel regclass, cols name[],
  OUT leaf regclass, OUT identity text, OUT missing name[])
RETURNS SETOF record
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
  SELECT l.leaf,
         CASE c.relreplident WHEN 'd' THEN 'default' WHEN 'f' THEN 'full'
                             WHEN 'i' THEN 'index' WHEN 'n' THEN 'nothing' END,
         m.missing
    FROM docsync.leaf_tables(rel) AS l(leaf)
    JOIN pg_class c ON c.oid = l.leaf
    CROSS JOIN LATERAL (
      SELECT array_agg(col ORDER BY ord) AS missing
        FROM unnest(cols) WITH ORDINALITY AS u(col, ord)
       WHERE docsync.identity_columns(l.leaf) IS NOT NULL
         AND NOT col = ANY (docsync.identity_columns(l.leaf))) m
   WHERE m.missing IS NOT NULL
$$;

-- A stored search_path, raising when there is none (a row written around the API): a null path
-- would mean the session's, and stored text is never resolved under anyone's but its own.
CREATE FUNCTION docsync.stored_path(path text) RETURNS text
LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF path IS NULL THEN
    RAISE EXCEPTION 'a docsync definition has no stored search_path'
      USING ERRCODE = 'invalid_parameter_value',
            DETAIL = 'Its row was written around the docsync API; text is resolved only under the path pinned when it was defined.',
            HINT = 'Remove the watch with docsync.unwatch() and watch it again.';
  END IF;
  RETURN path;
END
$$;

-- The text of a stored doc query (watch null), or of the keys query of one of its watches, with the
-- definer it runs as and the search_path it is resolved under (a keys query's are its watch's own);
-- no row when the watch does not exist or has no keys query.
CREATE FUNCTION docsync.stored_text(q docsync.query_defs, watch bigint, OUT src text, OUT definer name, OUT path text)
RETURNS SETOF record LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
  SELECT q.sql, q.defined_by, q.search_path WHERE watch IS NULL
  UNION ALL
  SELECT w.keys_sql, w.defined_by, w.search_path FROM docsync.watch_defs w
   WHERE watch IS NOT NULL AND w.id = watch AND w.query = q.name AND w.keys_sql IS NOT NULL
$$;

-- The analysis (docsync.analyze_query) of a stored doc query, or with watch, of that watch's keys
-- query, made as its definer under its stored search_path, whoever asks: the docsync.queries view
-- and grant_reader read it, and neither their reader nor the DBA may run a definer's text.
CREATE FUNCTION docsync.stored_analysis(query text, watch bigint DEFAULT NULL,
  OUT param_types regtype[], OUT result_types regtype[], OUT relations regclass[], OUT checked regclass[],
  OUT functions oid[], OUT schemas oid[], OUT param_collations regcollation[], OUT result_collations regcollation[])
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  q docsync.query_defs;
  src text;
  definer name;
  path text;
BEGIN
  SELECT * INTO q FROM docsync.query_defs d WHERE d.name = stored_analysis.query;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'docsync query "%" does not exist', stored_analysis.query
      USING ERRCODE = 'undefined_object', HINT = 'See the queries in docsync.queries.';
  END IF;
  SELECT t.src, t.definer, t.path INTO src, definer, path FROM docsync.stored_text(q, watch) t;
  IF src IS NULL THEN
    RAISE EXCEPTION 'docsync query "%" has no watch % with a keys query', q.name, watch
      USING ERRCODE = 'undefined_object', HINT = 'See the watches in docsync.watches.';
  END IF;
  SELECT a.param_types, a.result_types, a.relations, a.checked, a.param_collations, a.result_collations
    INTO param_types, result_types, relations, checked, param_collations, result_collations
    FROM docsync.analyze_query(src, docsync.stored_path(path), docsync.definer_role(definer)) a;
  -- schemas: every schema the text's name resolution used (relations, functions, operators,
  -- types, collations), which its reader role needs USAGE on to resolve it the same way
  SELECT d.functions,
         ARRAY(SELECT DISTINCT u.nsp FROM (
                 SELECT c.relnamespace FROM pg_class c WHERE c.oid = ANY (d.relations)
                 UNION SELECT p.pronamespace FROM pg_proc p WHERE p.oid = ANY (d.functions)
                 UNION SELECT o.oprnamespace FROM pg_operator o WHERE o.oid = ANY (d.operators)
                 UNION SELECT t.typnamespace FROM pg_type t WHERE t.oid = ANY (d.types || param_types::oid[])
                 UNION SELECT co.collnamespace FROM pg_collation co WHERE co.oid = ANY (d.collations)) u(nsp)
                WHERE u.nsp NOT IN ('pg_catalog'::regnamespace, 'information_schema'::regnamespace) ORDER BY 1)
    INTO functions, schemas
    FROM docsync.query_depends(src, docsync.stored_path(path), docsync.definer_role(definer)) d;
END
$$;

-- Why the keys of a stored doc query cannot name docs now, or NULL: its params (their types and the
-- collations it compares them under) or, with watch, that watch's keys (the watched columns, or the
-- keys query's result columns). define_query and watch refuse such keys; this sees them again after
-- DDL (a column's type or collation changed, an attribute added to a composite key type), so that
-- docsync.refusal and docsync.watch_problem refuse a definition the DDL made unfit. Analysed as
-- its definer under its stored search_path, as docsync.stored_analysis does (without the
-- dependencies, which this does not need).
CREATE FUNCTION docsync.stored_key_problem(query text, watch bigint DEFAULT NULL) RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  q docsync.query_defs;
  w record;
  a record;
  problem text;
BEGIN
  SELECT * INTO q FROM docsync.query_defs d WHERE d.name = stored_key_problem.query;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  IF watch IS NULL THEN
    SELECT x.* INTO a FROM docsync.stored_text(q, NULL) t
     CROSS JOIN LATERAL docsync.analyze_query(t.src, docsync.stored_path(t.path), docsync.definer_role(t.definer)) x;
    FOR i IN 1 .. coalesce(cardinality(a.param_types), 0) LOOP
      problem := docsync.key_type_problem(a.param_types[i], coalesce(a.param_collations[i]::oid, 0));
      IF problem IS NOT NULL THEN
        RETURN format('%s cannot name docs: %s: redefine it with docsync.define_query(%L, …, or_replace => true) taking the param as $%s::text compared with a canonical text (lower(col::text), col::text COLLATE "C", trim_scale(col)::text)',
                      docsync.param_label(q.params[i], q.name, a.param_types[i], a.param_collations[i]), problem, q.name, i);
      END IF;
    END LOOP;
    RETURN NULL;
  END IF;
  SELECT * INTO w FROM docsync.watch_targets x WHERE x.id = stored_key_problem.watch;
  IF NOT FOUND OR w.problem IS NOT NULL THEN
    RETURN NULL;
  END IF;
  IF w.keys_sql IS NULL THEN
    SELECT format('column %I of %s, which its watch maps to a doc param, cannot name docs: %s: unwatch it and map the column through a keys query that gives its canonical text (docsync.watch(…, keys_sql => …))',
                  p.name, w.relid::regclass, docsync.key_type_problem(t.atttypid, t.attcollation))
      INTO problem
      FROM unnest(w.columns) WITH ORDINALITY p(name, n)
      JOIN pg_attribute t ON t.attrelid = w.relid AND t.attname = p.name AND NOT t.attisdropped
     WHERE docsync.key_type_problem(t.atttypid, t.attcollation) IS NOT NULL
     ORDER BY p.n LIMIT 1;
    RETURN problem;
  END IF;
  SELECT x.* INTO a FROM docsync.stored_text(q, w.id) t
   CROSS JOIN LATERAL docsync.analyze_query(t.src, docsync.stored_path(t.path), docsync.definer_role(t.definer)) x;
  FOR i IN 1 .. coalesce(cardinality(a.result_types), 0) LOOP
    problem := docsync.key_type_problem(a.result_types[i], coalesce(a.result_collations[i]::oid, 0));
    IF problem IS NOT NULL THEN
      RETURN format('column %s of the keys query of its watch on %s cannot name docs: %s: unwatch it and watch it again with a keys query that gives a canonical text (lower(x::text), x::text COLLATE "C", trim_scale(x)::text)',
                    i, w.relid::regclass, problem);
    END IF;
  END LOOP;
  RETURN NULL;
END
$$;

-- The tables a stored doc query reads, partitions reported as their root, only tables (whose
-- changes can be decoded). Raises when the query no longer analyses.
CREATE FUNCTION docsync.tables_read(query text) RETURNS regclass[]
LANGUAGE sql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
  SELECT coalesce(array_agg(DISTINCT root ORDER BY root), '{}')
    FROM unnest((docsync.stored_analysis(query)).relations) AS r(rel)
    CROSS JOIN LATERAL (SELECT coalesce(pg_partition_root(r.rel), r.rel)::regclass AS root) p
    JOIN pg_class c ON c.oid = p.root
   WHERE c.relkind IN ('r', 'p')
$$;

-- Raises unless the definer may run a doc or keys query (docsync.check_definer), saying which
-- definition it is and how to fix it. computed false: the query stands for what a watch sends from
-- the stream, never run as the definer's reader role.
CREATE FUNCTION docsync.check_query_rights(what text, sql text, path text, definer regrole,
                                           computed boolean DEFAULT true)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  msg text; det text; hnt text;
BEGIN
  PERFORM docsync.check_definer(sql, path, definer, computed);
EXCEPTION WHEN insufficient_privilege THEN
  GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
  RAISE EXCEPTION '% reads what its definer % may not: %', what, definer, msg
    USING ERRCODE = 'insufficient_privilege',
          DETAIL = coalesce(nullif(det, ''),
                            'A definition never reads more than the role that defines it may: the worker''s pool role is granted only that.'),
          HINT = coalesce(nullif(hnt, ''),
                          format('Grant %s SELECT on what the query reads (and EXECUTE on what it calls), or have a role that may read it define the query.', definer));
END
$$;

-- Raises unless the definer of a watch may read what it sends: the watched columns (their values
-- name docs and travel to the sink in channel names), without row-level security applying to it,
-- and what its keys query reads.
CREATE FUNCTION docsync.check_watch_rights(query text, rel regclass, cols name[], keys_sql text, path text,
                                           definer regrole)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  col name;
  what text := format('the watch of docsync query "%s" on %s', query, rel);
BEGIN
  FOREACH col IN ARRAY cols LOOP
    IF NOT has_column_privilege(definer::oid, rel::oid, col::text, 'SELECT') THEN
      RAISE EXCEPTION '% sends column % of %, which its definer % may not SELECT', what, quote_ident(col), rel, definer
        USING ERRCODE = 'insufficient_privilege',
              DETAIL = 'A watch publishes the values of the columns it maps, in channel names and doc params, so its definer must be able to read them.',
              HINT = format('Grant it first: GRANT SELECT (%I) ON %s TO %s; or watch columns %s may read.', col, rel, definer, definer);
    END IF;
  END LOOP;
  -- the same columns read as a query: row-level security of the table, checked as the executor would
  -- (the plugin sends them from the stream: never computed as the definer's reader role)
  PERFORM docsync.check_query_rights(what,
    format('SELECT %s FROM %s', (SELECT string_agg(quote_ident(c), ', ' ORDER BY o) FROM unnest(cols) WITH ORDINALITY u(c, o)), rel),
    NULL, definer, false);
  IF keys_sql IS NOT NULL THEN
    PERFORM docsync.check_query_rights(format('the keys query of %s', what), keys_sql, path, definer);
  END IF;
END
$$;

-- Raises unless the role calling the API may change a definition that definer made: the definer
-- itself, a member of the definer role, or a superuser. Membership in docsync_admin alone lets a
-- role define its own queries and watches, never redefine, drop or unwatch another definer's.
CREATE FUNCTION docsync.require_owner(action text, what text, definer name) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  caller regrole := docsync.api_caller();
  owner regrole := pg_catalog.to_regrole(pg_catalog.quote_ident(definer));
BEGIN
  IF caller::name = definer
     OR (SELECT r.rolsuper FROM pg_roles r WHERE r.oid = caller)
     OR (owner IS NOT NULL AND pg_has_role(caller, owner, 'MEMBER')) THEN
    RETURN;
  END IF;
  RAISE EXCEPTION 'permission denied to % %: it was defined by %', action, what, quote_ident(definer)
    USING ERRCODE = 'insufficient_privilege',
          DETAIL = format('Only the definer of a definition, a member of its role or a superuser may change or remove it, and %s is none of them.', caller),
          HINT = format('Ask %s (or a superuser) to do it, or define a query or watch of your own.', quote_ident(definer));
END
$$;

-- Why one watch cannot be used now, or NULL: its definer no longer exists or may no longer read
-- what it sends or what its keys query reads, its keys query no longer prepares, or it has no
-- stored search_path (written around the API). Fails closed: an error judging it is the reason.
CREATE FUNCTION docsync.watch_problem(watch bigint) RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  w record;
  msg text;
BEGIN
  SELECT * INTO w FROM docsync.watch_targets x WHERE x.id = watch_problem.watch;
  IF NOT FOUND OR w.problem IS NOT NULL THEN
    RETURN w.problem;
  END IF;
  IF to_regrole(quote_ident(w.defined_by)) IS NULL THEN
    RETURN format('the definer %s of its watch on %I.%I no longer exists: unwatch and watch it again',
                  quote_ident(w.defined_by), w.table_schema, w.table_name);
  END IF;
  IF w.keys_sql IS NOT NULL AND w.search_path IS NULL THEN
    RETURN format('its watch on %I.%I has a keys query with no stored search_path (written around docsync.watch()): unwatch and watch it again',
                  w.table_schema, w.table_name);
  END IF;
  BEGIN
    PERFORM docsync.check_watch_rights(w.query, w.relid, w.columns, w.keys_sql, w.search_path,
                                       to_regrole(quote_ident(w.defined_by)));
    -- keys that DDL made unfit to name docs since the watch was made
    msg := docsync.stored_key_problem(w.query, w.id);
    IF msg IS NOT NULL THEN
      RETURN msg;
    END IF;
    IF w.keys_sql IS NOT NULL THEN
      msg := docsync.reader_stale(w.defined_by);
      IF msg IS NOT NULL THEN
        RETURN msg;
      END IF;
    END IF;
  EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT;
    RETURN msg;
  END;
  RETURN NULL;
END
$$;

-- Why a watch is set aside, or NULL: another definer's watch on the query that no longer checks
-- (docsync.watch_problem). Such a watch is left out of what the worker runs and reported in
-- docsync.watches and docsync.queries.warning; it never refuses the query, so one definer cannot
-- stop another's docs by breaking a watch it attached.
CREATE FUNCTION docsync.watch_set_aside(watch bigint) RETURNS text
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
  SELECT coalesce(docsync.watch_problem(w.id),
                  CASE WHEN w.keys_sql IS NOT NULL AND NOT EXISTS (
                              SELECT FROM docsync.reader_roles rr
                               WHERE rr.definer = w.defined_by AND to_regrole(quote_ident(rr.reader)) IS NOT NULL)
                       THEN format('its definer %s has no reader role yet: run SELECT docsync.grant_reader(<the worker''s pool role>)',
                                   quote_ident(w.defined_by)) END)
    FROM docsync.watch_defs w JOIN docsync.query_defs q ON q.name = w.query
   WHERE w.id = watch_set_aside.watch AND w.defined_by <> q.defined_by
$$;

-- Why a query with derived watches defined without allow_uncovered must not run: DDL since its
-- definition made it call a function whose reads docsync cannot analyse (docsync._rederive could
-- not derive its watches again, query_defs.derive_problem), so a table such a function reads is
-- watched by nothing. NULL otherwise, and when the query no longer analyses (the previous watches
-- and their broadcast fallback then stand, and docsync.queries.warning says why).
CREATE FUNCTION docsync.uncovered_since_ddl(q docsync.query_defs) RETURNS text
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  uncovered text;
BEGIN
  IF q.watches <> 'derived' OR q.allow_uncovered OR q.derive_problem IS NULL THEN
    RETURN NULL;
  END IF;
  BEGIN
    SELECT string_agg(DISTINCT x.why, '; ') INTO uncovered
      FROM docsync.derive_watches(q.sql, q.search_path, docsync.definer_role(q.defined_by)) x
     WHERE x.kind = 'uncovered';
  EXCEPTION WHEN OTHERS THEN
    RETURN NULL;
  END;
  RETURN CASE WHEN uncovered IS NOT NULL THEN
    format('since DDL changed what it reads, it calls functions whose reads docsync cannot analyse (%s), so the tables they read are watched by nothing: change the DDL back (a view, a function) so that it calls none, or redefine it with docsync.define_query(%L, …, or_replace => true, allow_uncovered => true) and watch the tables those functions read with docsync.watch(%L, table, broadcast => true)',
           uncovered, q.name, q.name) END;
END
$$;

-- Why the worker must not run a stored query now, or NULL: its definer (or the definer of one of its
-- watches) no longer exists or may no longer read what it reads, or its SQL is not one SELECT (the
-- definition tables were written around the API, say by a restore with triggers disabled), or its
-- search_path no longer resolves as it did when it was checked (a schema dropped, renamed or no
-- longer usable by the definer), or DDL made it call a function whose reads cannot be analysed
-- (docsync.uncovered_since_ddl). It fails closed: any error while judging a definition, such as a
-- query that no longer prepares after DDL, refuses it with that error as the reason.
CREATE FUNCTION docsync.refusal(query text) RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  q docsync.query_defs;
  wid bigint;
  msg text;
  pinned text;
BEGIN
  SELECT * INTO q FROM docsync.query_defs d WHERE d.name = refusal.query;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  IF to_regrole(quote_ident(q.defined_by)) IS NULL THEN
    RETURN format('its definer %s no longer exists: redefine it with docsync.define_query(%L, …, or_replace => true)',
                  quote_ident(q.defined_by), q.name);
  END IF;
  BEGIN
    PERFORM docsync.check_query_rights(format('doc query "%s"', q.name), q.sql, q.search_path,
                                       to_regrole(quote_ident(q.defined_by)));
    -- params that DDL made unfit to name docs since the query was defined
    msg := docsync.stored_key_problem(q.name);
    IF msg IS NOT NULL THEN
      RETURN msg;
    END IF;
    -- the query's definer's own watches refuse the query when they no longer check; another
    -- definer's are set aside alone (docsync.watch_set_aside); a watch that does not resolve is
    -- never used (docsync.watch_targets reports it)
    -- (over an array: a loop's cursor would be open while code a parse runs could move it)
    FOREACH wid IN ARRAY ARRAY(SELECT x.id FROM docsync.watch_targets x
                                WHERE x.query = q.name AND x.problem IS NULL AND x.defined_by = q.defined_by
                                ORDER BY x.id) LOOP
      msg := docsync.watch_problem(wid);
      IF msg IS NOT NULL THEN
        RETURN msg;
      END IF;
    END LOOP;
    -- DDL made a query with derived watches call a function whose reads cannot be analysed (a view
    -- replaced): define_query refuses that shape without allow_uncovered, and so does a load
    msg := docsync.uncovered_since_ddl(q);
    IF msg IS NOT NULL THEN
      RETURN msg;
    END IF;
    -- a REVOKE from the definer takes effect now, not when grant_reader next runs
    msg := docsync.reader_stale(q.defined_by);
    IF msg IS NOT NULL THEN
      RETURN msg;
    END IF;
    -- what was checked is what runs: every schema of the stored path that exists is still usable
    -- by its definer, and "$user" (which the worker's role would spell otherwise) is spelled out
    pinned := docsync.pin_search_path(q.search_path, to_regrole(quote_ident(q.defined_by)));
    IF pinned IS DISTINCT FROM docsync.pin_search_path(q.search_path, to_regrole(quote_ident(q.defined_by)), false)
       OR q.search_path LIKE '%$user%' THEN
      RETURN format('its search_path %s no longer resolves as it did for its definer %s (now %s: a schema was dropped, renamed or is no longer usable by it): redefine it with docsync.define_query(%L, …, or_replace => true)',
                    q.search_path, quote_ident(q.defined_by), pinned, q.name);
    END IF;
  EXCEPTION
    WHEN OTHERS THEN
      -- fail closed: a definition that cannot be judged is not run
      GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT;
      RETURN msg;
  END;
  RETURN NULL;
END
$$;

