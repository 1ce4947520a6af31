-- sql/parts/06_derive.sql: derived watches: storing what docsync.derive_watches finds for a doc
-- query (at define_query, after an unwatch, after DDL) and docsync.explain.
-------------------------------------------------------------------------------
-- Derived watches
-------------------------------------------------------------------------------

-- Derives the watches of a stored doc query (docsync.derive_watches, as its definer under its
-- stored search_path) and stores them with origin 'derived' in place of its previous derived ones,
-- each through the checks a hand-written watch gets (docsync.check_watch_def): a mapped column
-- outside the replica identity gives allow_broadcast and a NOTICE, a definer who may not read what
-- a watch reads gets the refusal. A table that the query's definer (or a member of its role)
-- watches by hand keeps its hand-written watches only. Raises, naming each one, when the query calls
-- functions whose reads cannot be analysed and was not defined with allow_uncovered. Checks and
-- writes nothing when the derived watches stay the same (DDL derives them again: a migration that
-- changes nothing for the query changes no row). Records in query_defs.derived_from the relations
-- they were derived from, which DDL must touch to change them (plugin/ddl_derive.c).
CREATE FUNCTION docsync.derive_stored(q docsync.query_defs) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  definer regrole := docsync.definer_role(q.defined_by);
  found_rows jsonb;
  uncovered text;
  d record;
  rel regclass;
  cls pg_catalog.pg_class;
  nsp name;
  want jsonb := '[]';
  have jsonb;
  found text;
  derived_rels regclass[];
  -- set just before the error that carries the result: code the analysis runs (a domain's CHECK)
  -- could raise DSY01 with a detail of its own
  derived boolean := false;
BEGIN
  -- Found in a subtransaction rolled back on purpose, the result leaving through the detail of the
  -- error that ends it: the analysis locks every relation the query reads, and a migration (DDL
  -- derives again) must not hold those locks to its commit, where another session's DDL on those
  -- tables would wait for it. The checks below, when the watches changed, lock what they read.
  BEGIN
    SELECT coalesce(jsonb_agg(to_jsonb(x)), '[]') INTO found_rows
      FROM docsync.derive_watches(q.sql, q.search_path, definer) x;
    SELECT string_agg(x.why, '; ' ORDER BY x.why) INTO uncovered
      FROM jsonb_to_recordset(found_rows) AS x(kind text, why text) WHERE x.kind = 'uncovered';
    IF uncovered IS NOT NULL AND NOT q.allow_uncovered THEN
      RAISE EXCEPTION 'doc query "%" calls functions whose reads docsync cannot analyse: %', q.name, uncovered
        USING ERRCODE = 'feature_not_supported',
              DETAIL = 'No watch can be derived for the tables such a function reads: a change there would leave the docs stale.',
              HINT = format('Pass allow_uncovered => true, then watch the tables those functions read with docsync.watch(%L, table, broadcast => true) or a hand-written watch.', q.name);
    END IF;

    FOR d IN
      SELECT DISTINCT x.table_schema, x.table_name, x.kind, x.columns, x.keys_sql, x.keys_args, x.read_columns
        FROM jsonb_to_recordset(found_rows)
             AS x(table_schema name, table_name name, kind text, columns name[], keys_sql text, keys_args name[],
                  read_columns name[])
       WHERE x.kind IN ('direct', 'keys', 'broadcast')
       ORDER BY x.table_schema, x.table_name, x.kind, x.columns, x.keys_sql
    LOOP
      rel := to_regclass(format('%I.%I', d.table_schema, d.table_name));
      CONTINUE WHEN rel IS NULL;
      SELECT * INTO cls FROM pg_class c WHERE c.oid = rel;
      -- a partition read directly is watched as its root, whose changes the plugin reports
      IF cls.relispartition THEN
        rel := pg_partition_root(rel);
        SELECT * INTO cls FROM pg_class c WHERE c.oid = rel;
      END IF;
      -- only tables' changes are decoded: a matview or foreign table is followed by the fingerprint
      CONTINUE WHEN cls.relkind NOT IN ('r', 'p') OR cls.relnamespace = 'docsync'::regnamespace;
      nsp := (SELECT n.nspname FROM pg_namespace n WHERE n.oid = cls.relnamespace);
      CONTINUE WHEN EXISTS (SELECT FROM docsync.watch_defs w
                             WHERE w.query = q.name AND w.origin = 'manual' AND w.table_schema = nsp
                               AND w.table_name = cls.relname
                               AND to_regrole(quote_ident(w.defined_by)) IS NOT NULL
                               AND pg_has_role(to_regrole(quote_ident(w.defined_by)), definer, 'MEMBER'));
      want := want || jsonb_build_object(
        'table_schema', nsp, 'table_name', cls.relname,
        'columns', CASE d.kind WHEN 'direct' THEN d.columns WHEN 'keys' THEN d.keys_args ELSE '{}' END,
        'keys_sql', CASE WHEN d.kind = 'keys' THEN d.keys_sql END,
        'broadcast', d.kind = 'broadcast', 'read_columns', d.read_columns,
        -- docsync.identity_gaps, cheaper for a plain table (this runs in migrations)
        'allow_broadcast', CASE WHEN d.kind = 'broadcast' THEN false
                                WHEN cls.relkind = 'r' THEN cls.relreplident <> 'f' AND NOT (
                                  CASE d.kind WHEN 'direct' THEN d.columns ELSE d.keys_args END
                                    <@ docsync.identity_columns(rel))
                                ELSE EXISTS (SELECT FROM docsync.identity_gaps(rel, CASE d.kind WHEN 'direct' THEN d.columns
                                                                                                ELSE d.keys_args END)) END,
        'rel', rel::oid, 'kind', d.kind, 'keys_args', d.keys_args);
    END LOOP;
    SELECT coalesce(jsonb_agg(DISTINCT x), '[]') INTO want FROM jsonb_array_elements(want) x;
    -- what DDL must touch to change them (docsync._rederive)
    want := jsonb_build_object('watches', want, 'from',
      (SELECT to_jsonb(dep.relations) FROM docsync.query_depends(q.sql, q.search_path, definer) dep));
    derived := true;
    RAISE EXCEPTION 'docsync: derived' USING ERRCODE = 'DSY01', DETAIL = want::text;
  EXCEPTION WHEN SQLSTATE 'DSY01' THEN
    IF NOT derived THEN
      RAISE EXCEPTION 'the analysis of doc query "%" raised docsync''s own SQLSTATE DSY01', q.name
        USING ERRCODE = 'raise_exception',
              DETAIL = 'A function its text reaches (a domain''s CHECK, a type''s input) raised it; docsync reads that code as the result of a derivation.',
              HINT = 'Make such functions raise another SQLSTATE.';
    END IF;
    GET STACKED DIAGNOSTICS found = PG_EXCEPTION_DETAIL;
    want := found::jsonb;
  END;
  derived_rels := ARRAY(SELECT r::oid::regclass FROM jsonb_array_elements_text(want->'from') r);
  want := want->'watches';

  SELECT coalesce(jsonb_agg(DISTINCT jsonb_build_object(
           'table_schema', w.table_schema, 'table_name', w.table_name, 'columns', w.columns,
           'keys_sql', w.keys_sql, 'broadcast', w.broadcast, 'read_columns', w.read_columns,
           'allow_broadcast', w.allow_broadcast)), '[]') INTO have
    FROM docsync.watch_defs w WHERE w.query = q.name AND w.origin = 'derived';
  -- the same watches as stored (checked when they were made; docsync.refusal checks them again at
  -- every load): nothing to write, so DDL that changes nothing for the query costs one analysis
  IF have IS DISTINCT FROM (SELECT coalesce(jsonb_agg(DISTINCT x - 'rel' - 'kind' - 'keys_args'), '[]')
                              FROM jsonb_array_elements(want) x)
     OR EXISTS (SELECT FROM docsync.watch_defs w
                 WHERE w.query = q.name AND w.origin = 'derived'
                   AND (w.defined_by <> q.defined_by OR w.search_path IS DISTINCT FROM q.search_path)) THEN
    FOR d IN SELECT * FROM jsonb_to_recordset(want) AS x(rel oid, kind text, columns name[], keys_sql text,
                                                         keys_args name[], table_schema name, table_name name)
              ORDER BY x.table_schema, x.table_name, x.kind, x.columns, x.keys_sql LOOP
      PERFORM docsync.check_watch_def(q, d.rel::regclass, CASE WHEN d.kind = 'direct' THEN d.columns::text[] END,
                                      d.keys_sql, CASE WHEN d.kind = 'keys' THEN d.keys_args::text[] END,
                                      definer, q.search_path, 'notice');
    END LOOP;
    DELETE FROM docsync.watch_defs w WHERE w.query = q.name AND w.origin = 'derived';
    INSERT INTO docsync.watch_defs (query, table_schema, table_name, columns, keys_sql, allow_broadcast, origin,
                                    broadcast, read_columns, defined_by, search_path)
    SELECT q.name, x.table_schema, x.table_name, x.columns, x.keys_sql, x.allow_broadcast, 'derived',
           x.broadcast, x.read_columns, q.defined_by, q.search_path
      FROM jsonb_to_recordset(want)
           AS x(table_schema name, table_name name, columns name[], keys_sql text, broadcast boolean,
                read_columns name[], allow_broadcast boolean)
     ORDER BY x.table_schema, x.table_name, x.broadcast, x.columns, x.keys_sql;
  END IF;
  UPDATE docsync.query_defs x SET derive_problem = NULL, derived_from = derived_rels
   WHERE x.name = q.name
     AND (x.derive_problem IS NOT NULL OR x.derived_from IS DISTINCT FROM derived_rels);
END
$$;

-- After DDL (plugin/ddl.c calls it as the extension's owner, before raising the generation): derives
-- the watches of the queries named (those with derived watches that the DDL may change: see
-- query_defs.derived_from) again, as each one's definer. When unsure,
-- recompute: a query whose watches cannot be derived now (it no longer analyses, a lock is held
-- elsewhere past lock_timeout, a function became uncovered, its definer may no longer read a table)
-- keeps its derived watches and gets a derived broadcast watch on every table they covered and on
-- every table it reads now that no watch covers and its definer may read, and docsync.queries
-- reports why (query_defs.derive_problem) until DDL or a redefinition derives them.
-- Never raises: the DDL is a customer's, and must not fail because of docsync.
CREATE FUNCTION docsync._rederive(queries text[]) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp SET lock_timeout = '100ms' AS $$
DECLARE
  q docsync.query_defs;
  msg text;
  reads regclass[];
  read boolean;
BEGIN
  FOR q IN SELECT * FROM docsync.query_defs x WHERE x.watches = 'derived' AND x.name = ANY (queries) ORDER BY x.name LOOP
    BEGIN
      PERFORM docsync.derive_stored(q);
    EXCEPTION WHEN OTHERS THEN
      GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT;
      BEGIN
        UPDATE docsync.query_defs x SET derive_problem = msg
         WHERE x.name = q.name AND x.derive_problem IS DISTINCT FROM msg;
        read := false;
        BEGIN
          -- the tables it reads now that no watch covers, when it still analyses, and its definer
          -- may read them (a watch its definer may not read would refuse the whole query); found,
          -- like derive_stored's, in a subtransaction rolled back so as to release its locks
          reads := ARRAY(SELECT r FROM unnest(docsync.tables_read(q.name)) r
                          WHERE has_any_column_privilege(docsync.definer_role(q.defined_by)::oid, r::oid, 'SELECT')
                            AND NOT EXISTS (SELECT FROM docsync.watch_targets t WHERE t.query = q.name AND t.relid = r));
          read := true;
          RAISE EXCEPTION 'docsync: read' USING ERRCODE = 'DSY01', DETAIL = reads::oid[]::text;
        EXCEPTION
          WHEN SQLSTATE 'DSY01' THEN
            -- (DSY01 raised by code the analysis ran carries no result)
            GET STACKED DIAGNOSTICS msg = PG_EXCEPTION_DETAIL;
            reads := CASE WHEN read THEN msg::oid[]::regclass[] ELSE '{}' END;
          WHEN OTHERS THEN
            reads := '{}';
        END;
        INSERT INTO docsync.watch_defs (query, table_schema, table_name, columns, keys_sql, origin, broadcast,
                                        read_columns, defined_by, search_path)
        SELECT DISTINCT q.name, t.nspname, t.relname, '{}'::name[], NULL::text, 'derived', true,
               NULL::name[], q.defined_by, q.search_path
          FROM (SELECT w.table_schema AS nspname, w.table_name AS relname FROM docsync.watch_defs w
                 WHERE w.query = q.name AND w.origin = 'derived'
                   AND to_regclass(format('%I.%I', w.table_schema, w.table_name)) IS NOT NULL
                UNION
                SELECT n.nspname, c.relname FROM unnest(reads) r JOIN pg_class c ON c.oid = r
                  JOIN pg_namespace n ON n.oid = c.relnamespace) t
         WHERE NOT EXISTS (SELECT FROM docsync.watch_defs b
                            WHERE b.query = q.name AND b.origin = 'derived' AND b.broadcast
                              AND b.table_schema = t.nspname AND b.table_name = t.relname);
      EXCEPTION WHEN OTHERS THEN
        NULL;   -- the worker refuses a query it cannot judge (docsync.refusal)
      END;
    END;
  END LOOP;
END
$$;

-- Distinct values of columns of a table (their product, at most its rows), estimated from pg_class
-- and pg_stats (a single-column unique index: one per row); null when the table was never analysed.
CREATE FUNCTION docsync.distinct_values(rel regclass, cols name[]) RETURNS float8
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
  WITH t AS (
    SELECT c.oid, c.relkind, n.nspname, c.relname,
           CASE WHEN c.relkind = 'p'
                THEN (SELECT sum(greatest(x.reltuples, 0)) FROM pg_partition_tree(c.oid) p
                        JOIN pg_class x ON x.oid = p.relid WHERE p.isleaf)
                WHEN c.reltuples >= 0 THEN c.reltuples END AS rows
      FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = rel),
  v AS (
    SELECT CASE
             WHEN EXISTS (SELECT FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
                           WHERE i.indrelid = t.oid AND i.indisunique AND i.indnkeyatts = 1 AND a.attname = u.col)
               THEN greatest(t.rows, 1)
             WHEN s.n_distinct > 0 THEN s.n_distinct
             WHEN s.n_distinct < 0 THEN greatest(-s.n_distinct * t.rows, 1)
           END AS d
      FROM t CROSS JOIN unnest(cols) u(col)
      LEFT JOIN pg_stats s ON s.schemaname = t.nspname AND s.tablename = t.relname AND s.attname = u.col
                          AND s.inherited = (t.relkind = 'p'))
  SELECT CASE WHEN t.rows IS NULL OR bool_or(v.d IS NULL) THEN NULL
              ELSE least(round(exp(sum(ln(greatest(v.d, 1))))), greatest(t.rows, 1)) END
    FROM t, v GROUP BY t.rows
$$;

-- Rows of a table per value of its columns cols, estimated as docsync.distinct_values does.
CREATE FUNCTION docsync.rows_per_value(rel regclass, cols name[]) RETURNS float8
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
  SELECT CASE WHEN cardinality(cols) = 0 THEN greatest(r.rows, 1)
              ELSE greatest(round(r.rows / docsync.distinct_values(rel, cols)), 1) END
    FROM (SELECT CASE WHEN c.relkind = 'p'
                      THEN (SELECT sum(greatest(x.reltuples, 0)) FROM pg_partition_tree(c.oid) p
                              JOIN pg_class x ON x.oid = p.relid WHERE p.isleaf)
                      WHEN c.reltuples >= 0 THEN c.reltuples END AS rows
            FROM pg_class c WHERE c.oid = rel) r
$$;

-- The CREATE INDEX statements for the columns of a table that lead no index (null: each leads one).
CREATE FUNCTION docsync.missing_indexes(rel regclass, cols name[]) RETURNS text
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
  SELECT string_agg(format('CREATE INDEX ON %I.%I (%I)', n.nspname, c.relname, u.col), '; ' ORDER BY u.ord)
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
   CROSS JOIN unnest(cols) WITH ORDINALITY u(col, ord)
   WHERE c.oid = rel
     AND NOT EXISTS (SELECT FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
                      WHERE i.indrelid = rel AND a.attname = u.col)
$$;

-- One row per watch of a doc query, derived or hand-written: what it maps, what one change of its
-- table costs in doc queries (estimated: direct 1, or 2 when an update can move a row between docs;
-- keys: the rows its keys query returns per key; broadcast: the live docs, estimated as the distinct
-- values of the param columns), why (the equality chain, or why no key path exists) and the indexes
-- its lookups lack. The text is analysed as its definer, whoever asks; nothing is run.
CREATE FUNCTION docsync.explain(query text)
RETURNS TABLE ("table" regclass, kind text, origin text, mapping text, keys_sql text, read_columns name[],
               doc_queries_per_change float8, why text, missing_index text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  q docsync.query_defs;
  derived jsonb := '[]';
  lookups jsonb;
  live float8;
  w record;
BEGIN
  SELECT * INTO q FROM docsync.query_defs d WHERE d.name = explain.query;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'docsync query "%" does not exist', query
      USING ERRCODE = 'undefined_object', HINT = 'See the defined queries in docsync.queries.';
  END IF;
  BEGIN
    SELECT coalesce(jsonb_agg(to_jsonb(x)), '[]') INTO derived
      FROM docsync.derive_watches(q.sql, q.search_path, docsync.definer_role(q.defined_by)) x;
  EXCEPTION WHEN OTHERS THEN
    derived := '[]';   -- why stays null: docsync.queries says why the query does not analyse
  END;
  live := CASE WHEN cardinality(q.params) = 0 THEN 1 ELSE (
            SELECT max(docsync.distinct_values(t.relid, t.columns))
              FROM docsync.watch_targets t JOIN docsync.watch_defs d ON d.id = t.id
             WHERE t.query = q.name AND t.relid IS NOT NULL AND t.keys_sql IS NULL AND NOT d.broadcast
               AND cardinality(t.columns) = cardinality(q.params)) END;
  FOR w IN
    SELECT t.relid, t.table_schema, t.table_name, t.columns, t.keys_sql, t.defined_by, t.search_path,
           d.origin, d.broadcast, d.read_columns,
           CASE WHEN d.broadcast THEN 'broadcast' WHEN t.keys_sql IS NOT NULL THEN 'keys' ELSE 'direct' END AS kind
      FROM docsync.watch_targets t JOIN docsync.watch_defs d ON d.id = t.id
     WHERE t.query = q.name
     ORDER BY t.table_schema, t.table_name, d.origin, d.broadcast, t.keys_sql NULLS FIRST, t.id
  LOOP
    "table" := w.relid;
    kind := w.kind;
    origin := w.origin;
    keys_sql := w.keys_sql;
    read_columns := w.read_columns;
    why := CASE WHEN w.origin = 'manual' THEN 'written by hand with docsync.watch'
                ELSE (SELECT string_agg(DISTINCT x.why, '; ')
                        FROM jsonb_to_recordset(derived)
                             AS x(table_schema name, table_name name, kind text, columns name[], keys_sql text,
                                  keys_args name[], why text)
                       WHERE x.table_schema = w.table_schema AND x.table_name = w.table_name AND x.kind = w.kind
                         AND (w.kind = 'broadcast' OR (w.kind = 'direct' AND x.columns = w.columns)
                              OR (w.kind = 'keys' AND x.keys_sql = w.keys_sql))) END;
    IF w.origin = 'derived' AND w.broadcast AND why IS NULL AND q.derive_problem IS NOT NULL THEN
      why := format('kept while the watches cannot be derived again: %s', q.derive_problem);
    END IF;
    IF w.kind = 'direct' THEN
      mapping := (SELECT string_agg(format('%I.%I → $%s', w.table_name, u.col, u.n), ', ' ORDER BY u.n)
                    FROM unnest(w.columns) WITH ORDINALITY u(col, n));
      doc_queries_per_change := CASE
        WHEN cardinality(w.columns) = 0 THEN 1
        WHEN w.columns <@ coalesce((SELECT array_agg(a.attname) FROM pg_index i
                                      JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)
                                     WHERE i.indrelid = w.relid AND i.indisprimary), '{}') THEN 1
        ELSE 2 END;
      missing_index := CASE WHEN cardinality(w.columns) > 0 THEN docsync.missing_indexes(w.relid, w.columns) END;
    ELSIF w.kind = 'keys' THEN
      mapping := format('%s → keys_sql → %s',
                        (SELECT string_agg(format('%I.%I', w.table_name, c), ', ') FROM unnest(w.columns) c),
                        (SELECT string_agg(format('$%s', n), ', ') FROM generate_series(1, cardinality(q.params)) n));
      -- the keys query's own lookups: what derive_watches finds for its tables, keyed by its $n
      BEGIN
        SELECT coalesce(jsonb_agg(to_jsonb(x)), '[]') INTO lookups
          FROM docsync.derive_watches(w.keys_sql, w.search_path, docsync.definer_role(w.defined_by)) x
         WHERE x.kind IN ('direct', 'keys');
      EXCEPTION WHEN OTHERS THEN
        lookups := NULL;
      END;
      SELECT CASE WHEN count(*) = 0 OR bool_or(r.v IS NULL) THEN NULL
                  ELSE least(round(exp(sum(ln(r.v)))), coalesce(live, 'infinity')) END,
             string_agg(r.missing, '; ' ORDER BY r.rel::text)
        INTO doc_queries_per_change, missing_index
        FROM (SELECT to_regclass(format('%I.%I', x.table_schema, x.table_name)) AS rel,
                     docsync.rows_per_value(to_regclass(format('%I.%I', x.table_schema, x.table_name)),
                                            CASE x.kind WHEN 'direct' THEN x.columns ELSE x.keys_args END) AS v,
                     docsync.missing_indexes(to_regclass(format('%I.%I', x.table_schema, x.table_name)),
                                             CASE x.kind WHEN 'direct' THEN x.columns ELSE x.keys_args END) AS missing
                FROM jsonb_to_recordset(lookups)
                     AS x(table_schema name, table_name name, kind text, columns name[], keys_args name[])) r;
    ELSE
      mapping := 'every change → every live doc';
      doc_queries_per_change := live;
      missing_index := NULL;
    END IF;
    RETURN NEXT;
  END LOOP;
END
$$;
COMMENT ON FUNCTION docsync.explain(text) IS
  'each watch of a doc query, derived or hand-written: its kind, mapping, keys query, columns read, estimated doc queries per change, why, and the indexes its lookups lack';
