-- sql/parts/06_define.sql: defining: define_query, watch, unwatch, drop_query (the key type
-- checks behind them are in 05_key_types.sql).
-------------------------------------------------------------------------------
-- Defining
-------------------------------------------------------------------------------

-- The API functions that write definitions are C trampolines (docsync_api_call): each runs
-- docsync._<its name> with the same arguments as the extension's owner, and that implementation
-- reads the caller from docsync.api_caller(), checks its rights and records it as the definer.

-- Raises when a doc or keys query's text is over the 1 MiB docsync-worker computes (its
-- kMaxQueryTextBytes): the text goes into every compute's statement.
CREATE FUNCTION docsync.check_text_size(what text, sql text) RETURNS void
LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF octet_length(sql) > 1048576 THEN
    RAISE EXCEPTION '% is % bytes long, over the 1 MiB docsync-worker computes', what, octet_length(sql)
      USING ERRCODE = 'program_limit_exceeded',
            DETAIL = 'The text goes into every compute''s statement.',
            HINT = 'Shorten it (comments count), or move what it repeats into a view or a function.';
  END IF;
END
$$;

CREATE FUNCTION docsync._define_query(name text, sql text, params text[], or_replace boolean, search_path text,
                                      watches text, allow_uncovered boolean)
RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  caller regrole := docsync.api_caller();
  path text := _define_query.search_path;
  info record;
  existing docsync.query_defs;
  p text;
  rtype regtype;
  nwatches bigint;
BEGIN
  PERFORM docsync.require_admin('define docsync queries');
  PERFORM docsync.check_segment('docsync query name', name);
  PERFORM docsync.check_text_size(format('doc query "%s"', name), sql);
  -- stored as the caller resolves it, so that what is checked is what runs (plugin/definer.c)
  path := docsync.pin_search_path(path);
  IF params IS NULL THEN params := '{}'; END IF;
  IF watches IS NULL OR watches NOT IN ('derived', 'manual') THEN
    RAISE EXCEPTION 'watches must be ''derived'' or ''manual'', not %', coalesce(quote_literal(watches), 'NULL')
      USING ERRCODE = 'invalid_parameter_value',
            DETAIL = 'derived: the watches are derived from the query (and again after DDL); manual: only docsync.watch makes them.',
            HINT = 'Leave watches out to derive them, or pass watches => ''manual''.';
  END IF;
  allow_uncovered := coalesce(allow_uncovered, false);
  IF array_ndims(params) > 1 THEN
    RAISE EXCEPTION 'params must be a one-dimensional array'
      USING ERRCODE = 'invalid_parameter_value', DETAIL = 'params names $1, $2, … in order.',
            HINT = 'Pass params => ARRAY[''order_id''].';
  END IF;
  FOREACH p IN ARRAY params LOOP
    PERFORM docsync.check_segment('doc param name', p);
  END LOOP;
  IF (SELECT count(DISTINCT x) FROM unnest(params) x) <> cardinality(params) THEN
    RAISE EXCEPTION 'duplicate doc param name in %', params
      USING ERRCODE = 'invalid_parameter_value', DETAIL = 'Each param names one of $1, $2, … of the doc query.',
            HINT = 'Give every param its own name.';
  END IF;

  SELECT * INTO existing FROM docsync.query_defs q WHERE q.name = _define_query.name FOR UPDATE;
  IF FOUND AND NOT or_replace THEN
    RAISE EXCEPTION 'docsync query "%" already exists', name
      USING ERRCODE = 'duplicate_object',
            DETAIL = 'Redefining a query changes every doc it publishes, so it is never done silently.',
            HINT = 'Pass or_replace => true to redefine it, or choose another name.';
  END IF;
  IF FOUND THEN
    PERFORM docsync.require_owner('redefine', format('docsync query "%s"', name), existing.defined_by);
  END IF;

  IF sql IS NULL THEN
    RAISE EXCEPTION 'doc query "%" must not be null', name
      USING ERRCODE = 'null_value_not_allowed', DETAIL = 'A doc query is one SELECT statement returning one JSON value.',
            HINT = 'Pass the SELECT text.';
  END IF;
  info := docsync.analyze_for(format('doc query "%s"', name), sql, path);
  IF cardinality(info.param_types) <> cardinality(params) THEN
    RAISE EXCEPTION 'doc query "%" uses % parameter(s) but % param name(s) were declared',
                    name, cardinality(info.param_types), cardinality(params)
      USING ERRCODE = 'invalid_parameter_value',
            DETAIL = format('The query references $1 … $%s; params => %s.', cardinality(info.param_types), params),
            HINT = 'Declare one name per parameter, in $n order, and use every one in the query.';
  END IF;
  IF cardinality(info.result_types) <> 1 THEN
    RAISE EXCEPTION 'doc query "%" returns % columns, not one', name, cardinality(info.result_types)
      USING ERRCODE = 'datatype_mismatch',
            DETAIL = 'A doc is one JSON value: the query returns exactly one json or jsonb column.',
            HINT = 'Build the doc with jsonb_build_object(…) or to_jsonb(t) in a single column.';
  END IF;
  rtype := docsync.base_type(info.result_types[1]);
  IF rtype NOT IN ('json'::regtype, 'jsonb'::regtype) THEN
    RAISE EXCEPTION 'doc query "%" returns %, not json or jsonb', name, info.result_types[1]
      USING ERRCODE = 'datatype_mismatch',
            DETAIL = 'A doc is one JSON value.',
            HINT = 'Wrap the result in to_jsonb(…) or build it with jsonb_build_object(…).';
  END IF;
  FOR i IN 1 .. cardinality(info.param_types) LOOP
    PERFORM docsync.check_key_type(docsync.param_label(params[i], name, info.param_types[i], info.param_collations[i]),
                                   info.param_types[i], info.param_collations[i]);
  END LOOP;
  PERFORM docsync.check_query_rights(format('doc query "%s"', name), sql, path, caller);

  IF existing.name IS NOT NULL THEN
    -- the derived watches are derived again below, from the new text (or dropped, for 'manual')
    DELETE FROM docsync.watch_defs w WHERE w.query = _define_query.name AND w.origin = 'derived';
    IF cardinality(existing.params) <> cardinality(params) THEN
      SELECT count(*) INTO nwatches FROM docsync.watch_defs w WHERE w.query = _define_query.name;
      IF nwatches > 0 THEN
        RAISE EXCEPTION 'cannot change the number of params of docsync query "%" from % to % while it has % watch(es)',
                        name, cardinality(existing.params), cardinality(params), nwatches
          USING ERRCODE = 'object_in_use',
                DETAIL = 'Each watch supplies one value per doc param.',
                HINT = format('Remove its watches first: SELECT docsync.unwatch(%L, table) for each table in docsync.queries.', name);
      END IF;
    END IF;
    UPDATE docsync.query_defs q
       SET sql = _define_query.sql, params = _define_query.params, search_path = path,
           defined_by = caller::name, defined_at = now(), watches = _define_query.watches,
           allow_uncovered = _define_query.allow_uncovered, derive_problem = NULL
     WHERE q.name = _define_query.name
    RETURNING * INTO existing;
    -- the definer's own keys queries resolve as its doc query does (docsync._watch); another
    -- definer's keep the path they were made with
    UPDATE docsync.watch_defs w SET search_path = path
     WHERE w.query = _define_query.name AND w.defined_by = caller::name AND w.keys_sql IS NOT NULL
       AND w.search_path IS DISTINCT FROM path;
    -- the watches' keys must still have the (new) params' types
    PERFORM docsync.check_watch_key_types(existing, w.relid, w.columns, w.keys_sql, w.defined_by, w.search_path)
       FROM docsync.watch_targets w WHERE w.query = _define_query.name AND w.problem IS NULL ORDER BY w.id;
  ELSE
    INSERT INTO docsync.query_defs (name, sql, params, search_path, defined_by, watches, allow_uncovered)
    VALUES (_define_query.name, _define_query.sql, _define_query.params, path, caller::name, _define_query.watches,
            _define_query.allow_uncovered)
    RETURNING * INTO existing;
  END IF;
  IF watches = 'derived' THEN
    PERFORM docsync.derive_stored(existing);
  END IF;
  -- Tables the query reads that no watch covers are named at commit (docsync.notice_uncovered),
  -- once the watches that usually follow in the same transaction are in place.
END
$$;
-- search_path defaults to the caller's (a default is evaluated in the calling statement).
-- watches: 'derived' (derive them from the query, docsync.derive_stored) or 'manual'.
CREATE FUNCTION docsync.define_query(name text, sql text, params text[] DEFAULT '{}',
                                     or_replace boolean DEFAULT false,
                                     search_path text DEFAULT pg_catalog.current_setting('search_path'),
                                     watches text DEFAULT 'derived', allow_uncovered boolean DEFAULT false)
RETURNS void LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'docsync_api_call';
COMMENT ON FUNCTION docsync.define_query(text, text, text[], boolean, text, text, boolean) IS
  'define (or, with or_replace => true, redefine) a doc query; its watches are derived from it unless watches => ''manual''';

-- Resolves a table name for watch/unwatch as the caller, under its search_path, with a helpful error.
CREATE FUNCTION docsync.resolve_table(tab text, path text) RETURNS regclass
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  rel regclass;
BEGIN
  IF tab IS NULL THEN
    RAISE EXCEPTION 'table must not be null'
      USING ERRCODE = 'null_value_not_allowed', DETAIL = 'A watch names the table whose changes affect docs.',
            HINT = 'Pass the table name, schema-qualified if it is not on the search_path.';
  END IF;
  BEGIN
    -- as the caller, under its search_path (plugin/definer.c): never as the extension's owner
    rel := docsync.resolve_relation(tab, path);
  EXCEPTION WHEN invalid_name THEN
    RAISE EXCEPTION 'invalid table name "%"', tab
      USING ERRCODE = 'invalid_name',
            DETAIL = 'A table is named as in SQL: name or schema.name, double-quoting a name that holds other characters than letters, digits and _.',
            HINT = format('If the table is named exactly so, pass %s (a double quote inside a quoted name is written twice).', quote_ident(tab));
  END;
  IF rel IS NULL THEN
    RAISE EXCEPTION 'table "%" does not exist', tab
      USING ERRCODE = 'undefined_table',
            DETAIL = format('It was looked up with search_path = %s.', path),
            HINT = 'Create the table first, or qualify its name with its schema.';
  END IF;
  RETURN rel;
END
$$;

-- Whether values of two types print the same way, so a key read as one and a doc param of the other
-- name the same channel: the same base type, or two integer types, or two unpadded string types.
CREATE FUNCTION docsync.same_text_form(a regtype, b regtype) RETURNS boolean
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
  SELECT x = y
      OR (x IN ('smallint'::regtype, 'integer'::regtype, 'bigint'::regtype) AND
          y IN ('smallint'::regtype, 'integer'::regtype, 'bigint'::regtype))
      -- a text longer than 63 bytes is cut as a name: only a name feeds a name param
      OR (x IN ('text'::regtype, 'character varying'::regtype, 'name'::regtype) AND
          y IN ('text'::regtype, 'character varying'::regtype))
    FROM (SELECT docsync.base_type(a) AS x, docsync.base_type(b) AS y) t
$$;

-- Refuses a watch whose keys (the watched columns, or keys_sql's columns) have other types than the
-- doc query's params: channels spell a param as its value prints, so order 42 read as text '042'
-- would name a doc of its own, and the doc of 42 would miss the change.
CREATE FUNCTION docsync.check_key_types(query docsync.query_defs, key_types regtype[], key_labels text[],
                                        from_keys_sql boolean)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  doc_types regtype[];
BEGIN
  BEGIN
    -- the doc query is its definer's text: analysed as it, whoever adds the watch
    doc_types := (docsync.analyze_query(query.sql, query.search_path, docsync.definer_role(query.defined_by))).param_types;
  EXCEPTION WHEN OTHERS THEN
    RETURN;  -- the doc query no longer prepares (say, a column was dropped): its computes say so
  END;
  FOR i IN 1 .. cardinality(key_types) LOOP
    CONTINUE WHEN docsync.same_text_form(key_types[i], doc_types[i]);
    RAISE EXCEPTION '% is %, but param "%" of docsync query "%" is %',
                    key_labels[i], key_types[i], query.params[i], query.name, doc_types[i]
      USING ERRCODE = 'datatype_mismatch',
            DETAIL = 'A doc''s channel spells each param as its value prints: keys of another type could name other docs than the query''s own (''042'' and 42).',
            HINT = CASE WHEN from_keys_sql
                        THEN format('Cast the column in keys_sql to the param''s type: SELECT …::%s.', doc_types[i])
                        ELSE format('Give the doc query''s $%s the column''s type (write $%s::%s), or watch a column of type %s.',
                                    i, i, key_types[i], doc_types[i]) END;
  END LOOP;
END
$$;

-- check_key_types for a watch: a direct one (keys_sql NULL) reads the key from the columns cols of
-- rel, a reverse index from keys_sql's result columns.
CREATE FUNCTION docsync.check_watch_key_types(query docsync.query_defs, rel regclass, cols name[], keys_sql text,
                                              keys_definer name, keys_path text)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  types regtype[];
  collations regcollation[];
BEGIN
  IF keys_sql IS NULL THEN
    PERFORM docsync.check_key_type(format('column %I of %s', a.attname, rel), a.atttypid::regtype, a.attcollation,
                                   docsync.watch_key_hint(query.name, rel, a.attname, a.atttypid::regtype))
       FROM unnest(cols) WITH ORDINALITY p(name, n)
       JOIN pg_attribute a ON a.attrelid = rel AND a.attname = p.name ORDER BY p.n;
    PERFORM docsync.check_key_types(query,
      ARRAY(SELECT a.atttypid::regtype FROM unnest(cols) WITH ORDINALITY p(name, n)
              JOIN pg_attribute a ON a.attrelid = rel AND a.attname = p.name ORDER BY p.n),
      ARRAY(SELECT format('column %I of %s', p.name, rel) FROM unnest(cols) WITH ORDINALITY p(name, n) ORDER BY p.n),
      false);
  ELSE
    BEGIN
      -- keys_sql is its watch definer's text, analysed as it under the watch's own search_path
      SELECT a.result_types, a.result_collations INTO types, collations
        FROM docsync.analyze_query(keys_sql, keys_path, docsync.definer_role(keys_definer)) a;
    EXCEPTION WHEN OTHERS THEN
      RETURN;  -- a keys query that no longer prepares: its lookups say so
    END;
    PERFORM docsync.check_key_type(format('column %s of keys_sql', n), types[n], collations[n])
       FROM generate_series(1, cardinality(types)) n;
    PERFORM docsync.check_key_types(query, types,
      ARRAY(SELECT format('column %s of keys_sql', n) FROM generate_series(1, cardinality(types)) n), true);
  END IF;
END
$$;

-- The checks every watch gets, hand-written (docsync._watch) or derived (docsync.derive_stored), as
-- its definer under the search_path it is stored with: a direct watch (params: one column of rel per
-- doc param) or a reverse index (keys_sql fed keys_args), or with both null a broadcast watch; the
-- keys' types, the keys query's shape, the replica identity and the definer's rights. A mapped column
-- outside the replica identity raises (on_gap 'raise'), is accepted ('accept': allow_broadcast) or
-- raises a NOTICE naming the fix ('notice'); returns whether there was such a column.
CREATE FUNCTION docsync.check_watch_def(q docsync.query_defs, rel regclass, params text[], keys_sql text,
                                        keys_args text[], definer regrole, path text, on_gap text)
RETURNS boolean
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  query text := q.name;
  cols text[] := coalesce(params, keys_args, '{}');
  info record;
  gap record;
  gaps jsonb := '[]';
  g jsonb;
BEGIN
  IF params IS NOT NULL THEN
    IF cardinality(params) <> cardinality(q.params) THEN
      RAISE EXCEPTION 'watch of % supplies % column(s) but docsync query "%" takes % param(s)',
                      rel, cardinality(params), query, cardinality(q.params)
        USING ERRCODE = 'invalid_parameter_value',
              DETAIL = format('Query "%s" takes params %s, in $n order.', query, q.params),
              HINT = 'Name one column per doc param, in order; use keys_sql when the row does not hold them all.';
    END IF;
    PERFORM docsync.check_watch_key_types(q, rel, params::name[], NULL, definer::name, path);
  ELSIF keys_sql IS NOT NULL THEN
    IF cardinality(q.params) = 0 THEN
      RAISE EXCEPTION 'docsync query "%" takes no params: keys_sql has nothing to look up', query
        USING ERRCODE = 'invalid_parameter_value',
              DETAIL = 'Its only doc is the one without params.',
              HINT = format('Use params => ARRAY[]::text[] to recompute that doc on every change of %s.', rel);
    END IF;
    info := docsync.analyze_for('keys_sql', keys_sql, path, definer);
    IF cardinality(info.param_types) <> cardinality(keys_args) THEN
      RAISE EXCEPTION 'keys_sql uses % parameter(s) but % keys_args were given',
                      cardinality(info.param_types), cardinality(keys_args)
        USING ERRCODE = 'invalid_parameter_value',
              DETAIL = format('keys_args => %s feeds keys_sql''s $1, $2, … in order.', keys_args),
              HINT = 'Name one column of the changed row per keys_sql parameter, and use every parameter.';
    END IF;
    IF cardinality(info.result_types) <> cardinality(q.params) THEN
      RAISE EXCEPTION 'keys_sql returns % column(s) but docsync query "%" takes % param(s)',
                      cardinality(info.result_types), query, cardinality(q.params)
        USING ERRCODE = 'datatype_mismatch',
              DETAIL = format('Each row of keys_sql names one doc: its columns are the params %s, in order.', q.params),
              HINT = 'Select exactly one column per doc param.';
    END IF;
    PERFORM docsync.check_watch_key_types(q, rel, NULL, keys_sql, definer::name, path);
  END IF;
  -- the changed row's old values of the mapped columns (params, or keys_args that feed keys_sql)
  -- must be logged, or a delete or an update of them cannot name the docs the old row fed
  FOR gap IN SELECT * FROM docsync.identity_gaps(rel, cols::name[]) LOOP
    gaps := gaps || jsonb_build_object('missing', array_to_string(gap.missing, ', '), 'identity', gap.identity,
                                       'leaf', gap.leaf::text);
    IF on_gap = 'raise' THEN
      RAISE EXCEPTION 'column(s) % of % outside its REPLICA IDENTITY (%)', array_to_string(gap.missing, ', '), gap.leaf, gap.identity
        USING ERRCODE = 'object_not_in_prerequisite_state',
              DETAIL = CASE WHEN params IS NULL
                            THEN 'A delete, or an update that changes these columns, would not log their old values, so keys_sql could not look up the docs the old row fed.'
                            ELSE 'A delete, or an update that changes these columns, would not log their old values, so the old doc could not be named.' END,
              HINT = format('Run ALTER TABLE %s REPLICA IDENTITY FULL. Or pass allow_broadcast => true and accept the cost: every such change of %s then recomputes every live doc of query "%s", all of them, each time.',
                            gap.leaf, rel, query);
    END IF;
  END LOOP;

  PERFORM docsync.check_watch_rights(query, rel, cols::name[], keys_sql, path, definer);
  -- named once the watch is known to be stored
  IF on_gap = 'notice' THEN
    FOR g IN SELECT * FROM jsonb_array_elements(gaps) LOOP
      RAISE NOTICE 'derived watch of docsync query "%" on %: column(s) % outside the REPLICA IDENTITY (%) of %',
                   query, rel, g->>'missing', g->>'identity', g->>'leaf'
        USING DETAIL = 'A delete, or an update that changes these columns, does not log their old values: such a change recomputes every live doc of the query (allow_broadcast).',
              HINT = format('Run ALTER TABLE %s REPLICA IDENTITY FULL to name the old docs instead.', g->>'leaf');
    END LOOP;
  END IF;
  RETURN jsonb_array_length(gaps) > 0;
END
$$;

CREATE FUNCTION docsync._watch(query text, "table" text, params text[], keys_sql text, keys_args text[],
                               allow_broadcast boolean, search_path text, broadcast boolean)
RETURNS bigint
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  caller regrole := docsync.api_caller();
  rel regclass;
  q docsync.query_defs;
  cls pg_catalog.pg_class;
  nsp name;
  cols text[];
  col text;
  new_id bigint;
  path text;
BEGIN
  PERFORM docsync.require_admin('define docsync watches');
  PERFORM docsync.check_text_size(format('keys_sql of a watch of docsync query "%s"', query), keys_sql);
  rel := docsync.resolve_table("table", search_path);

  SELECT * INTO q FROM docsync.query_defs d WHERE d.name = _watch.query FOR SHARE;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'docsync query "%" does not exist', query
      USING ERRCODE = 'undefined_object', DETAIL = 'A watch belongs to a doc query.',
            HINT = 'Define it first with docsync.define_query(), or check the name in docsync.queries.';
  END IF;
  -- the search_path keys_sql is checked and run under, stored with the watch: its doc query's when
  -- the query is the caller's own (its redefinitions carry it along), else the one the caller gave,
  -- pinned for it; never a path another definer chose
  path := CASE WHEN q.defined_by = caller::name THEN q.search_path ELSE docsync.pin_search_path(_watch.search_path) END;

  SELECT * INTO cls FROM pg_class WHERE oid = rel;
  nsp := (SELECT n.nspname FROM pg_namespace n WHERE n.oid = cls.relnamespace);
  IF cls.relkind NOT IN ('r', 'p') THEN
    RAISE EXCEPTION '% is not a table', rel
      USING ERRCODE = 'wrong_object_type',
            DETAIL = 'Only changes of tables and partitioned tables are decoded.',
            HINT = 'Watch the tables underneath the view or materialized view.';
  END IF;
  IF cls.relnamespace = 'docsync'::regnamespace OR cls.relpersistence = 't' THEN
    RAISE EXCEPTION '% cannot be watched', rel
      USING ERRCODE = 'wrong_object_type',
            DETAIL = 'docsync''s own tables and temporary tables are never watched.',
            HINT = 'Watch a regular table.';
  END IF;
  IF cls.relispartition THEN
    RAISE EXCEPTION '% is a partition', rel
      USING ERRCODE = 'wrong_object_type',
            DETAIL = format('Changes of partitions are reported as changes of their root %s.', pg_partition_root(rel)::regclass),
            HINT = format('Watch %s instead.', pg_partition_root(rel)::regclass);
  END IF;

  broadcast := coalesce(broadcast, false);
  IF broadcast AND (params IS NOT NULL OR keys_sql IS NOT NULL OR keys_args IS NOT NULL) THEN
    RAISE EXCEPTION 'a broadcast watch takes no params, keys_sql or keys_args'
      USING ERRCODE = 'invalid_parameter_value',
            DETAIL = 'broadcast => true recomputes every live doc of the query on every change of the table: it names no doc.',
            HINT = 'Drop params, keys_sql and keys_args, or drop broadcast => true to name the docs a change affects.';
  END IF;
  IF NOT broadcast AND (params IS NULL) = (keys_sql IS NULL) THEN
    RAISE EXCEPTION 'a watch takes either params or keys_sql'
      USING ERRCODE = 'invalid_parameter_value',
            DETAIL = 'params maps the changed row''s columns to the doc params directly; keys_sql looks the doc params up.',
            HINT = 'Pass params => ARRAY[column, …], or keys_sql => ''SELECT …'' with keys_args => ARRAY[column, …] (or broadcast => true when no key path exists).';
  END IF;
  IF NOT broadcast AND params IS NULL AND coalesce(cardinality(keys_args), 0) = 0 THEN
    RAISE EXCEPTION 'keys_sql needs keys_args'
      USING ERRCODE = 'invalid_parameter_value',
            DETAIL = 'keys_args names the changed row''s columns that feed keys_sql''s $1, $2, …; a reverse index looks docs up from at least one of them.',
            HINT = 'Pass keys_args => ARRAY[column, …]; to recompute docs on any change of the table without a lookup, use a direct watch.';
  END IF;
  IF params IS NOT NULL AND keys_args IS NOT NULL THEN
    RAISE EXCEPTION 'keys_args only goes with keys_sql'
      USING ERRCODE = 'invalid_parameter_value',
            DETAIL = 'A direct watch maps the changed row''s columns to the doc params with params alone.',
            HINT = 'Drop keys_args, or use keys_sql instead of params.';
  END IF;
  cols := coalesce(params, keys_args, '{}');
  IF array_ndims(cols) > 1 THEN
    RAISE EXCEPTION 'column list must be one-dimensional'
      USING ERRCODE = 'invalid_parameter_value', DETAIL = format('Got %s.', cols),
            HINT = 'Pass ARRAY[column, …].';
  END IF;
  FOREACH col IN ARRAY cols LOOP
    IF col IS NULL OR NOT EXISTS (SELECT FROM pg_attribute a
                                   WHERE a.attrelid = rel AND a.attname = col AND a.attnum > 0 AND NOT a.attisdropped) THEN
      RAISE EXCEPTION 'column "%" of table % does not exist', coalesce(col, 'NULL'), rel
        USING ERRCODE = 'undefined_column',
              DETAIL = format('Table %s has columns %s.', rel,
                              (SELECT string_agg(quote_ident(a.attname), ', ' ORDER BY a.attnum) FROM pg_attribute a
                                WHERE a.attrelid = rel AND a.attnum > 0 AND NOT a.attisdropped)),
              HINT = 'Name columns exactly as the table spells them.';
    END IF;
  END LOOP;

  PERFORM docsync.check_watch_def(q, rel, params, keys_sql, keys_args, caller, path,
                                  CASE WHEN allow_broadcast THEN 'accept' ELSE 'raise' END);

  -- a watch by hand replaces the derived ones of its table (docsync._unwatch derives them again);
  -- only the query's definer (or a role that may act for it) replaces what was derived for it
  IF pg_has_role(caller, docsync.definer_role(q.defined_by), 'MEMBER') THEN
    DELETE FROM docsync.watch_defs w
     WHERE w.query = _watch.query AND w.origin = 'derived' AND w.table_schema = nsp AND w.table_name = cls.relname;
  END IF;
  IF EXISTS (SELECT FROM docsync.watch_defs w
              WHERE w.query = _watch.query AND w.table_schema = nsp AND w.table_name = cls.relname
                AND w.columns = cols::name[] AND w.keys_sql IS NOT DISTINCT FROM _watch.keys_sql
                AND w.broadcast = _watch.broadcast) THEN
    RAISE EXCEPTION 'docsync query "%" already watches % this way', query, rel
      USING ERRCODE = 'duplicate_object',
            DETAIL = 'An identical watch exists.',
            HINT = format('To change it, remove it with docsync.unwatch(%L, %L) first.', query, rel::text);
  END IF;

  INSERT INTO docsync.watch_defs (query, table_schema, table_name, columns, keys_sql, allow_broadcast, defined_by,
                                  search_path, origin, broadcast)
  VALUES (_watch.query, nsp, cls.relname, cols::name[], _watch.keys_sql, coalesce(_watch.allow_broadcast, false),
          caller::name, path, 'manual', _watch.broadcast)
  RETURNING id INTO new_id;
  RETURN new_id;
END
$$;
CREATE FUNCTION docsync.watch(query text, "table" text, params text[] DEFAULT NULL,
                              keys_sql text DEFAULT NULL, keys_args text[] DEFAULT NULL,
                              allow_broadcast boolean DEFAULT false,
                              search_path text DEFAULT pg_catalog.current_setting('search_path'),
                              broadcast boolean DEFAULT false)
RETURNS bigint LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'docsync_api_call';
COMMENT ON FUNCTION docsync.watch(text, text, text[], text, text[], boolean, text, boolean) IS
  'make changes of a table affect docs of a query: directly (params), through a reverse index (keys_sql) or every live doc (broadcast); replaces the derived watches of the table';

-- Removes the watches ids of a query, each only by its definer (docsync.require_owner); returns how many.
CREATE FUNCTION docsync.unwatch_ids(query text, ids bigint[]) RETURNS integer
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  w docsync.watch_defs;
  n integer;
BEGIN
  FOR w IN SELECT * FROM docsync.watch_defs x WHERE x.id = ANY (ids) ORDER BY x.id FOR UPDATE LOOP
    PERFORM docsync.require_owner('unwatch', format('the watch of docsync query "%s" on %I.%I', query, w.table_schema, w.table_name),
                                  w.defined_by);
  END LOOP;
  DELETE FROM docsync.watch_defs x WHERE x.id = ANY (ids);
  GET DIAGNOSTICS n = ROW_COUNT;
  RETURN n;
END
$$;

CREATE FUNCTION docsync._unwatch(query text, "table" text, params text[], keys_sql text, search_path text)
RETURNS integer
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  ids bigint[];
  rel regclass;
  parts text[];
  n integer;
BEGIN
  PERFORM docsync.require_admin('define docsync watches');
  BEGIN
    rel := docsync.resolve_table("table", search_path);
  EXCEPTION WHEN undefined_table THEN
    -- a watch whose table no longer exists (docsync.watches shows its problem) is named as it was
    BEGIN
      parts := parse_ident("table");
    EXCEPTION WHEN OTHERS THEN
      parts := NULL;
    END;
    IF cardinality(parts) IN (1, 2) THEN
      ids := ARRAY(SELECT t.id FROM docsync.watch_targets t JOIN docsync.watch_defs d ON d.id = t.id
                    WHERE t.relid IS NULL AND t.query = _unwatch.query AND d.origin = 'manual'
                      AND t.table_name = parts[cardinality(parts)] AND (cardinality(parts) = 1 OR t.table_schema = parts[1]));
      IF cardinality(ids) > 0 THEN
        RETURN docsync.unwatch_ids(query, ids);
      END IF;
    END IF;
  END;
  rel := coalesce(rel, docsync.resolve_table("table", search_path));
  ids := ARRAY(SELECT t.id FROM docsync.watch_targets t JOIN docsync.watch_defs d ON d.id = t.id
                WHERE t.query = _unwatch.query AND t.relid = rel AND d.origin = 'manual'
                  AND (_unwatch.params IS NULL OR (t.keys_sql IS NULL AND t.columns = _unwatch.params::name[]))
                  AND (_unwatch.keys_sql IS NULL OR t.keys_sql = _unwatch.keys_sql));
  n := docsync.unwatch_ids(query, ids);
  IF n = 0 AND EXISTS (SELECT FROM docsync.watch_targets t JOIN docsync.watch_defs d ON d.id = t.id
                        WHERE t.query = _unwatch.query AND t.relid = rel AND d.origin = 'derived') THEN
    RAISE EXCEPTION 'the watches of docsync query "%" on % are derived, not written by hand', query, rel
      USING ERRCODE = 'object_not_in_prerequisite_state',
            DETAIL = 'Derived watches follow the query: define_query made them, and DDL that changes the query makes them again.',
            HINT = format('To replace them, watch %s by hand with docsync.watch(); to make every watch by hand, redefine the query with watches => ''manual''.', rel);
  END IF;
  IF n = 0 THEN
    RAISE EXCEPTION 'docsync query "%" has no such watch of %', query, rel
      USING ERRCODE = 'undefined_object',
            DETAIL = CASE WHEN params IS NULL AND keys_sql IS NULL THEN 'No watch of the query names this table.'
                          ELSE 'No watch of the query on this table has these params or this keys_sql.' END,
            HINT = 'See the watches in docsync.watches.';
  END IF;
  -- the last watch by hand of a table of a query with derived watches: derive that table's again
  PERFORM docsync.derive_stored(q) FROM docsync.query_defs q WHERE q.name = _unwatch.query AND q.watches = 'derived';
  RETURN n;
END
$$;
CREATE FUNCTION docsync.unwatch(query text, "table" text, params text[] DEFAULT NULL,
                                keys_sql text DEFAULT NULL,
                                search_path text DEFAULT pg_catalog.current_setting('search_path'))
RETURNS integer LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'docsync_api_call';
COMMENT ON FUNCTION docsync.unwatch(text, text, text[], text, text) IS
  'remove the watches of a query on a table (all of them, or the one with these params or keys_sql); returns how many';

CREATE FUNCTION docsync._drop_query(name text)
RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  owner name;
BEGIN
  PERFORM docsync.require_admin('drop docsync queries');
  SELECT q.defined_by INTO owner FROM docsync.query_defs q WHERE q.name = _drop_query.name FOR UPDATE;
  IF FOUND THEN
    PERFORM docsync.require_owner('drop', format('docsync query "%s"', name), owner);
  END IF;
  DELETE FROM docsync.watch_defs w WHERE w.query = _drop_query.name;
  DELETE FROM docsync.query_defs q WHERE q.name = _drop_query.name;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'docsync query "%" does not exist', name
      USING ERRCODE = 'undefined_object', DETAIL = 'Nothing was dropped.',
            HINT = 'See the defined queries in docsync.queries.';
  END IF;
END
$$;
CREATE FUNCTION docsync.drop_query(name text) RETURNS void LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'docsync_api_call';
COMMENT ON FUNCTION docsync.drop_query(text) IS 'drop a doc query and its watches';

