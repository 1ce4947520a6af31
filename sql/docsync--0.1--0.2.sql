-- docsync 0.1 → 0.2: derived watches. define_query derives the watches of a query
-- (watches => 'derived', its new default); definitions made before this update keep
-- watches = 'manual', exactly as they were. Also docsync.install_kind(), and the status views
-- that list the slots of the portable install's workers.
--
-- Written by hand from the difference between the parts of 0.1 (sql/docsync--0.1.sql) and those
-- of 0.2; packaging/upgrade-diff.sh prints what a fresh 0.2 install has that 0.1 updated by this
-- script lacks, and tests/scenarios/sql_upgrade.sh requires that nothing does.

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION docsync UPDATE TO '0.2'" to load this file. \quit

ALTER TABLE docsync.watch_defs
  ADD COLUMN origin text NOT NULL DEFAULT 'manual' CHECK (origin IN ('manual', 'derived')),
  ADD COLUMN broadcast boolean NOT NULL DEFAULT false,
  ADD COLUMN read_columns name[];
ALTER TABLE docsync.query_defs
  ADD COLUMN watches text NOT NULL DEFAULT 'manual' CHECK (watches IN ('manual', 'derived')),
  ADD COLUMN allow_uncovered boolean NOT NULL DEFAULT false,
  ADD COLUMN derive_problem text,
  ADD COLUMN derived_from regclass[];

-- which install this is (sql/parts/01_schema.sql); the portable install replaces it
CREATE FUNCTION docsync.install_kind() RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT 'extension'::text $$;
COMMENT ON FUNCTION docsync.install_kind() IS 'extension (CREATE EXTENSION) or portable (the SQL-only install)';

-- new arguments: the old signatures go
DROP FUNCTION docsync.define_query(text, text, text[], boolean, text);
DROP FUNCTION docsync._define_query(text, text, text[], boolean, text);
DROP FUNCTION docsync.watch(text, text, text[], text, text[], boolean, text);
DROP FUNCTION docsync._watch(text, text, text[], text, text[], boolean, text);
DROP FUNCTION docsync.analyze_for(text, text, text);

CREATE FUNCTION docsync.derive_watches(sql text, search_path text, definer regrole)
RETURNS TABLE (table_schema name, table_name name, kind text, columns name[], keys_sql text,
               keys_args name[], read_columns name[], why text)
LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'docsync_derive_watches';

COMMENT ON FUNCTION docsync.derive_watches(text, text, regrole) IS
  'the watches derived for a doc query: per table occurrence its cheapest sound kind (direct, keys, broadcast) and the columns read; uncovered rows name functions whose bodies cannot be analysed';

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

CREATE OR REPLACE FUNCTION docsync.define_query(name text, sql text, params text[] DEFAULT '{}',
                                     or_replace boolean DEFAULT false,
                                     search_path text DEFAULT pg_catalog.current_setting('search_path'),
                                     watches text DEFAULT 'derived', allow_uncovered boolean DEFAULT false)
RETURNS void LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'docsync_api_call';

COMMENT ON FUNCTION docsync.define_query(text, text, text[], boolean, text, text, boolean) IS
  'define (or, with or_replace => true, redefine) a doc query; its watches are derived from it unless watches => ''manual''';

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

CREATE OR REPLACE FUNCTION docsync.watch(query text, "table" text, params text[] DEFAULT NULL,
                              keys_sql text DEFAULT NULL, keys_args text[] DEFAULT NULL,
                              allow_broadcast boolean DEFAULT false,
                              search_path text DEFAULT pg_catalog.current_setting('search_path'),
                              broadcast boolean DEFAULT false)
RETURNS bigint LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'docsync_api_call';

COMMENT ON FUNCTION docsync.watch(text, text, text[], text, text[], boolean, text, boolean) IS
  'make changes of a table affect docs of a query: directly (params), through a reverse index (keys_sql) or every live doc (broadcast); replaces the derived watches of the table';

CREATE OR REPLACE FUNCTION docsync._unwatch(query text, "table" text, params text[], keys_sql text, search_path text)
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

CREATE FUNCTION docsync.missing_indexes(rel regclass, cols name[]) RETURNS text
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
  SELECT string_agg(format('CREATE INDEX ON %I.%I (%I)', n.nspname, c.relname, u.col), '; ' ORDER BY u.ord)
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
   CROSS JOIN unnest(cols) WITH ORDINALITY u(col, ord)
   WHERE c.oid = rel
     AND NOT EXISTS (SELECT FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
                      WHERE i.indrelid = rel AND a.attname = u.col)
$$;

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

CREATE OR REPLACE FUNCTION docsync.worker_definitions() RETURNS jsonb
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

CREATE OR REPLACE FUNCTION docsync.plugin_tables() RETURNS text
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

-- grant_replication (sql/parts/10_roles.sql): in a portable install, the status tables too
CREATE OR REPLACE FUNCTION docsync.grant_replication(role text) RETURNS SETOF text
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  r pg_roles;
  stmt text;
BEGIN
  SELECT * INTO r FROM pg_roles WHERE rolname = role;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'role "%" does not exist', role
      USING ERRCODE = 'undefined_object', DETAIL = 'grant_replication grants to an existing role.',
            HINT = format('Create it first: CREATE ROLE %I LOGIN REPLICATION;', role);
  END IF;
  IF NOT r.rolreplication AND NOT r.rolsuper THEN
    RAISE NOTICE 'role "%" has no REPLICATION attribute yet', role
      USING HINT = format('docsync-worker streams the slot with it: ALTER ROLE %I REPLICATION;', role);
  END IF;
  FOREACH stmt IN ARRAY ARRAY[
    format('GRANT USAGE ON SCHEMA docsync TO %I', role),
    format('GRANT SELECT ON docsync.query_defs, docsync.watch_defs, docsync.watch_targets, docsync.def_generation, docsync.reader_roles TO %I', role),
    format('GRANT EXECUTE ON FUNCTION docsync.worker_definitions(), docsync.plugin_tables(), docsync.refusal(text), docsync.reader_missing(text), docsync.watch_problem(bigint), docsync.watch_set_aside(bigint), docsync.fingerprint(text), docsync.stored_batch_sql(text, bigint), docsync.stored_key_types(text), docsync.uncovered_queries(), docsync.advance_generation(name, text, integer, bigint, boolean), docsync.sink_recorded(name, text), docsync.sink_confirmed(name, text, bigint, pg_lsn), docsync.journal_name(name, text[]), docsync.journal_forget(name, text[]), docsync.journal_channels(name) TO %I', role)]
  LOOP
    EXECUTE stmt;
    RETURN NEXT stmt;
  END LOOP;
  -- a portable install's worker reports in these tables instead of a status file (its row is an
  -- upsert, and it removes the row of a start that made no slot: docs/portable.md)
  IF docsync.install_kind() = 'portable' THEN
    stmt := format('GRANT SELECT, INSERT, UPDATE, DELETE ON docsync.worker_status, docsync.worker_query_status TO %I', role);
    EXECUTE stmt;
    RETURN NEXT stmt;
  END IF;
END
$$;
COMMENT ON FUNCTION docsync.grant_replication(text) IS
  'grant the worker''s replication role what it reads and calls in the docsync schema (and, in a portable install, writes: its status rows); returns the GRANTs run';

CREATE OR REPLACE VIEW docsync.queries AS
  WITH set_aside AS MATERIALIZED (SELECT * FROM docsync.batch_set_aside())
  SELECT q.name,
         q.params,
         q.sql,
         q.search_path,
         coalesce((SELECT array_agg(DISTINCT w.relid ORDER BY w.relid) FROM docsync.watch_targets w
                    WHERE w.query = q.name AND w.problem IS NULL), '{}') AS watched_tables,
         chk.unwatched AS unwatched_tables,
         CASE
           WHEN chk.problem IS NOT NULL THEN
             format('the doc query no longer prepares (%s): fix it with docsync.define_query(%L, …, or_replace => true)',
                    chk.problem, q.name)
           WHEN q.derive_problem IS NOT NULL THEN
             format('its watches could not be derived again after DDL (%s): the previous ones are kept, and every change of %s recomputes every live doc; fix the cause, then redefine it with docsync.define_query(%L, …, or_replace => true)',
                    q.derive_problem,
                    (SELECT string_agg(DISTINCT format('%I.%I', w.table_schema, w.table_name), ', ')
                       FROM docsync.watch_defs w WHERE w.query = q.name AND w.broadcast),
                    q.name)
           WHEN EXISTS (SELECT FROM docsync.watch_targets w WHERE w.query = q.name AND w.problem IS NOT NULL) THEN
             (SELECT format('a watch does not resolve, so changes it maps never reach the docs: %s',
                            string_agg(w.problem, '; ' ORDER BY w.id))
                FROM docsync.watch_targets w WHERE w.query = q.name AND w.problem IS NOT NULL)
           WHEN EXISTS (SELECT FROM docsync.watch_defs w WHERE w.query = q.name AND w.defined_by <> q.defined_by
                           AND docsync.watch_set_aside(w.id) IS NOT NULL) THEN
             (SELECT format('another definer''s watch no longer checks and is set aside (its changes do not reach the docs): %s',
                            string_agg(format('watch %s on %I.%I by %s: %s', w.id, w.table_schema, w.table_name,
                                              quote_ident(w.defined_by), docsync.watch_set_aside(w.id)), '; ' ORDER BY w.id))
                FROM docsync.watch_defs w WHERE w.query = q.name AND docsync.watch_set_aside(w.id) IS NOT NULL)
           WHEN cardinality(chk.unwatched) > 0 THEN
             format('reads %s, which no watch covers: its docs go stale when they change; watch them with docsync.watch(%L, …)',
                    array_to_string(chk.unwatched, ', '), q.name)
         END AS warning,
         q.defined_by,
         q.defined_at,
         coalesce(docsync.refusal(q.name), docsync.reader_missing(q.name)) AS refused,
         (SELECT rr.reader FROM docsync.reader_roles rr WHERE rr.definer = q.defined_by) AS reader_role,
         b.not_batched,
         CASE WHEN b.set_aside IS NOT NULL THEN 'set aside'
              WHEN b.not_batched IS NOT NULL THEN 'not batched'
              ELSE 'batched' END AS batched,
         b.set_aside AS batch_set_aside,
         q.watches,
         coalesce((SELECT array_agg(DISTINCT w.relid ORDER BY w.relid)
                     FROM docsync.watch_targets w JOIN docsync.watch_defs d ON d.id = w.id
                    WHERE w.query = q.name AND w.problem IS NULL AND d.broadcast), '{}') AS broadcast_tables
    FROM docsync.query_defs q
    CROSS JOIN LATERAL docsync.query_check(q) chk
    CROSS JOIN LATERAL (SELECT docsync.stored_batch_problem(q.name) AS not_batched,
                               (SELECT sa.why FROM set_aside sa WHERE sa.query = q.name) AS set_aside) b;

COMMENT ON VIEW docsync.queries IS
  'one row per doc query, with its watched tables, what no watch covers, its definer, why the worker refuses it, the reader role its docs are computed as, why its docs are computed one by one (not_batched), and whether a running worker batches them (batched: batched, not batched or set aside; batch_set_aside: why a worker set its batched form aside), whether its watches are derived or manual, and the tables whose every change recomputes every live doc (broadcast_tables)';

CREATE OR REPLACE VIEW docsync.watches AS
  SELECT w.id, w.query, w.relid AS "table", w.table_schema, w.table_name,
         CASE WHEN d.broadcast THEN 'broadcast' WHEN w.keys_sql IS NULL THEN 'direct' ELSE 'keys' END AS kind,
         w.columns, w.attnums, w.keys_sql, w.allow_broadcast, w.defined_by, w.defined_at,
         coalesce(w.problem, docsync.watch_set_aside(w.id)) AS problem, w.search_path,
         d.origin, d.read_columns
    FROM docsync.watch_targets w JOIN docsync.watch_defs d ON d.id = w.id;

COMMENT ON VIEW docsync.watches IS
  'one row per watch, resolved by name: its table and the columns'' attnums, or the problem when they do not resolve; derived (origin) or hand-written, and the columns its query reads (null: all)';

-- the status views (sql/parts/11_status.sql): the slots of the portable install's workers too
-- The workers of each slot, from their leases (worker/replication/lease.hpp): on a connection of its
-- own, the active worker holds a session-level advisory lock on hashtextextended(slot, 1685288801)
-- and every hot spare (--standby) a shared one on hashtextextended(slot, 1685288819). Their
-- connections' backend_start is when the worker started, or began to wait. Anyone may take an
-- advisory lock: only sessions of roles that can stream a slot (REPLICATION or superuser) are
-- listed, so a session squatting on a key is no worker here (the worker's log names it).
CREATE OR REPLACE VIEW docsync.workers AS
SELECT s.database::text AS database,
       s.slot_name::text AS slot_name,
       k.role,
       l.pid AS backend_pid,
       a.application_name,
       a.client_addr,
       a.backend_start AS connected_at,
       CASE WHEN k.role = 'standby'
            THEN round(extract(epoch FROM pg_catalog.statement_timestamp() - a.backend_start)::numeric, 1)::double precision
       END AS waiting_seconds
  FROM pg_catalog.pg_replication_slots s
 CROSS JOIN LATERAL (VALUES ('active', 'ExclusiveLock', pg_catalog.hashtextextended(s.slot_name::text, 1685288801)),
                            ('standby', 'ShareLock', pg_catalog.hashtextextended(s.slot_name::text, 1685288819)))
       AS k(role, mode, key)
  JOIN pg_catalog.pg_locks l
    ON l.locktype = 'advisory' AND l.granted AND l.mode = k.mode AND l.objsubid = 1 AND l.database = s.datoid
   AND l.classid = ((k.key >> 32) & 4294967295)::oid AND l.objid = (k.key & 4294967295)::oid
  JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid
  JOIN pg_catalog.pg_roles r ON r.oid = a.usesysid AND (r.rolreplication OR r.rolsuper)
 WHERE s.plugin = 'docsync' OR (s.slot_type = 'logical' AND docsync.install_kind() = 'portable');
COMMENT ON VIEW docsync.workers IS
  'the workers of each docsync slot: the active one and its hot spares (--standby), from the leases they hold';

CREATE OR REPLACE VIEW docsync.status AS
WITH files AS (
    SELECT * FROM docsync.status_files()
), slots AS (
    SELECT s.slot_name::text AS slot_name, s.database::text AS database, s.active, s.active_pid,
           s.restart_lsn, s.confirmed_flush_lsn, s.wal_status
      FROM pg_catalog.pg_replication_slots s
     -- or a slot a worker reports on whatever its plugin (pgoutput, in the portable install)
     WHERE s.plugin = 'docsync' OR s.slot_name::text IN (SELECT f.slot_name FROM files f WHERE f.database = s.database::text)
), server AS (
    SELECT CASE WHEN pg_catalog.pg_is_in_recovery() THEN pg_catalog.pg_last_wal_replay_lsn()
                ELSE pg_catalog.pg_current_wal_lsn() END AS wal_lsn,
           pg_catalog.statement_timestamp() AS now,
           docsync.status_directory() AS dir,
           -- servers with output_plugin_libraries let a role without superuser use only listed plugins
           docsync.output_plugin_problem() AS plugin_problem
), uncovered AS (
    -- this database's doc queries whose docs go stale because a table they read has no watch, and
    -- those whose watches DDL could not derive again (kept, with a broadcast fallback, until DDL
    -- derives them: docsync._rederive)
    SELECT pg_catalog.string_agg(u.message, '; ' ORDER BY u.query) AS problem
      FROM (SELECT x.query, x.message FROM docsync.uncovered_queries() x
            UNION ALL
            SELECT q.name, pg_catalog.format('the watches of doc query "%s" could not be derived again after DDL (%s): the previous ones are kept and every change of a table they cover recomputes every live doc; DDL derives them again, or docsync.define_query(%L, …, or_replace => true)',
                                             q.name, q.derive_problem, q.name)
              FROM docsync.query_defs q
             WHERE q.derive_problem IS NOT NULL) u
), joined AS (
    SELECT coalesce(s.database, f.database) AS database,
           coalesce(s.slot_name, f.slot_name) AS slot_name,
           s.slot_name IS NOT NULL AS slot_exists,
           -- a file's slot name taken by a slot of another database (or another plugin)
           (SELECT coalesce(o.database::text, '(none: a physical slot)') FROM pg_catalog.pg_replication_slots o
             WHERE s.slot_name IS NULL AND o.slot_name = f.slot_name) AS slot_elsewhere,
           coalesce(s.active, false) AS slot_active,
           s.active_pid AS walsender_pid,
           s.wal_status,
           s.confirmed_flush_lsn,
           pg_catalog.pg_wal_lsn_diff(v.wal_lsn, s.restart_lsn)::bigint AS retained_wal_bytes,
           greatest(pg_catalog.pg_wal_lsn_diff(v.wal_lsn, s.confirmed_flush_lsn), 0)::bigint AS ack_lag_bytes,
           CASE WHEN f.received_lsn > coalesce(f.acked_lsn, '0/0'::pg_lsn)
                THEN greatest(extract(epoch FROM v.now - coalesce(f.acked_at, f.started_at)), 0)::double precision
                WHEN f.status_file IS NOT NULL AND f.read_error IS NULL THEN 0::double precision
           END AS ack_lag_seconds,
           f.status_file IS NOT NULL AS has_file,
           f.read_error IS NULL AND f.status_file IS NOT NULL AS file_ok,
           f.heartbeat_at > v.now - interval '5 seconds' AS fresh,
           extract(epoch FROM v.now - f.heartbeat_at)::double precision AS heartbeat_age_seconds,
           f.status_file, f.read_error, f.worker_pid, f.state, f.started_at, f.heartbeat_at, f.generation,
           f.received_lsn, f.acked_lsn, f.acked_at, f.open_txns, f.dirty_depth, f.in_flight, f.live_docs,
           f.changes, f.recomputes, f.publishes, f.permanent_failures, f.transient_retries, f.valve_resets,
           f.not_visible_retries, f.audit_samples, f.audit_divergences, f.recompute, f.recompute_done,
           f.recompute_total, f.recompute_started_at, f.recompute_finished_at, f.lock_held,
           -- the recompute's mean rate since it started, and the time left at that rate
           CASE WHEN f.recompute IS NOT NULL THEN
                f.recompute_done / nullif(extract(epoch FROM coalesce(f.recompute_finished_at, v.now) - f.recompute_started_at), 0)
           END::double precision AS recompute_rate,
           f.last_error, f.last_error_at, v.dir, v.plugin_problem, v.now,
           CASE WHEN coalesce(s.database, f.database) = pg_catalog.current_database() THEN u.problem END AS uncovered
      FROM slots s
      FULL JOIN files f ON f.slot_name = s.slot_name AND f.database = s.database
     CROSS JOIN server v
     CROSS JOIN uncovered u
), judged AS (
    SELECT j.*,
           CASE WHEN j.recompute_finished_at IS NULL AND j.recompute_rate > 0
                THEN (j.recompute_total - j.recompute_done) / j.recompute_rate
           END AS recompute_seconds_left,
           CASE WHEN NOT j.file_ok THEN NULL
                WHEN j.state = 'stopped' THEN 'stopped'
                -- no process holds the worker's lock file: it is gone, whatever its last heartbeat
                WHEN NOT j.slot_active AND j.lock_held IS FALSE THEN 'stopped'
                WHEN NOT j.fresh AND NOT j.slot_active THEN 'stopped'
                ELSE j.state
           END AS worker_state
      FROM joined j
)
SELECT j.database,
       j.slot_name,
       j.slot_active,
       j.walsender_pid,
       j.worker_pid,
       j.worker_state,
       h.health,
       h.reason,
       (SELECT count(*) FROM docsync.workers w
         WHERE w.slot_name = j.slot_name AND w.database = j.database AND w.role = 'standby') AS standby_workers,
       (SELECT min(w.connected_at) FROM docsync.workers w
         WHERE w.slot_name = j.slot_name AND w.database = j.database AND w.role = 'standby') AS standby_since,
       j.heartbeat_at,
       round(j.heartbeat_age_seconds::numeric, 1)::double precision AS heartbeat_age_seconds,
       j.started_at,
       j.generation,
       j.received_lsn,
       j.acked_lsn,
       j.acked_at,
       j.confirmed_flush_lsn,
       j.retained_wal_bytes,
       j.ack_lag_bytes,
       round(j.ack_lag_seconds::numeric, 1)::double precision AS ack_lag_seconds,
       r.flush_lag AS replication_flush_lag,
       j.open_txns,
       j.dirty_depth,
       j.in_flight,
       j.live_docs,
       j.changes,
       j.recomputes,
       j.publishes,
       j.permanent_failures,
       j.transient_retries,
       j.valve_resets,
       j.not_visible_retries,
       j.audit_samples,
       j.audit_divergences,
       j.recompute,
       j.recompute_done,
       j.recompute_total,
       round(j.recompute_rate::numeric, 1)::double precision AS recompute_rate,
       round(j.recompute_seconds_left::numeric)::double precision AS recompute_seconds_left,
       j.recompute_started_at,
       j.recompute_finished_at,
       j.last_error,
       j.last_error_at,
       j.status_file,
       j.read_error
  FROM judged j
  LEFT JOIN pg_catalog.pg_stat_replication r ON r.pid = j.walsender_pid
 CROSS JOIN LATERAL (
    SELECT * FROM (VALUES
      (1, j.plugin_problem IS NOT NULL, 'plugin not allowed', j.plugin_problem),
      (2, NOT j.has_file AND j.slot_active, 'unknown',
       pg_catalog.format('slot is active (walsender pid %s) but no status file for it is in %s: the server reads docsync.status_dir (postgresql.conf, then reload) '
                         'and the worker writes to its --status-dir; set both to one directory the server and the worker share',
                         j.walsender_pid, j.dir)),
      (3, NOT j.has_file, 'stopped',
       pg_catalog.format('no worker: the slot is inactive and no status file for it is in %s (docsync.status_dir, which must name the worker''s --status-dir)', j.dir)),
      (4, j.has_file AND NOT j.file_ok, 'unknown',
       pg_catalog.format('status file %s not trusted: %s', j.status_file, j.read_error)),
      -- a stale file: its slot is gone (a misspelt --slot, a slot dropped for good) or is another database's
      (5, NOT j.slot_exists AND j.worker_state = 'stopped', 'stopped',
       pg_catalog.format('stale status file: slot %s does not exist in database %s%s; worker pid %s was last seen at %s UTC. '
                         'If no worker is to use this slot here (a misspelt --slot, a slot dropped for good), forget it: SELECT docsync.forget_slot(%L%s);',
                         j.slot_name, j.database,
                         CASE WHEN j.slot_elsewhere IS NOT NULL THEN pg_catalog.format(' (a slot of that name belongs to database %s)', j.slot_elsewhere) ELSE '' END,
                         j.worker_pid, pg_catalog.to_char(j.heartbeat_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS'),
                         j.slot_name,
                         CASE WHEN j.database IS DISTINCT FROM pg_catalog.current_database() THEN pg_catalog.format(', %L', j.database) ELSE '' END)),
      (6, NOT j.slot_exists, 'failing',
       pg_catalog.format('worker pid %s reports on slot %s, which does not exist', j.worker_pid, j.slot_name)),
      (7, j.worker_state = 'stopped' AND j.state = 'stopped', 'stopped',
       pg_catalog.format('worker pid %s exited at %s UTC', j.worker_pid,
                         pg_catalog.to_char(j.heartbeat_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS'))),
      (8, j.worker_state = 'stopped', 'stopped',
       pg_catalog.format('worker pid %s last seen %s s ago (state %s) and the slot is inactive: it is gone',
                         j.worker_pid, round(j.heartbeat_age_seconds::numeric), j.state)),
      (9, NOT j.fresh, 'failing',
       pg_catalog.format('worker heartbeat is %s s old while the slot is active (walsender pid %s): the worker is hung, or another client holds the slot',
                         round(j.heartbeat_age_seconds::numeric), j.walsender_pid)),
      (10, j.state = 'reconnecting', 'failing',
       pg_catalog.format('worker is reconnecting; last error: %s', coalesce(j.last_error, 'none'))),
      -- an error of the last minute, unless the doc that failed has been published since (the
      -- worker then shows it as 'recovered: …', worker/status/snapshot.hpp)
      (11, j.last_error_at > j.now - interval '1 minute' AND j.last_error NOT LIKE 'recovered: %', 'failing',
       pg_catalog.format('error %s s ago: %s', round(extract(epoch FROM j.now - j.last_error_at)), j.last_error)),
      (12, j.ack_lag_seconds > 30 OR j.ack_lag_bytes > 256 * 1024 * 1024, 'lagging',
       pg_catalog.format('acknowledged position is %s behind and %s s old, %s docs waiting',
                         pg_catalog.pg_size_pretty(j.ack_lag_bytes), round(j.ack_lag_seconds::numeric), j.dirty_depth)),
      -- a backlog that does not move, whatever the cause (a sink that takes no writes, computes stuck
      -- behind locks): many transactions waiting, or WAL waiting, while nothing was acknowledged
      (13, (j.open_txns >= 1000 AND j.acked_at < j.now - interval '10 seconds')
           OR (j.ack_lag_bytes > 0 AND j.acked_at < j.now - interval '60 seconds'), 'lagging',
       pg_catalog.format('nothing acknowledged for %s s while %s transactions and %s of WAL wait, %s docs dirty (state %s)',
                         round(extract(epoch FROM j.now - j.acked_at)), j.open_txns,
                         pg_catalog.pg_size_pretty(j.ack_lag_bytes), j.dirty_depth, j.state)),
      -- a worker runs a query whose docs go stale: a table it reads has no watch
      (14, j.uncovered IS NOT NULL AND j.file_ok AND j.worker_state NOT IN ('stopped', 'draining'), 'warning', j.uncovered),
      (15, j.recompute IS NOT NULL AND j.recompute_finished_at IS NULL AND j.state IN ('starting', 'connecting', 'streaming'), 'ok',
       pg_catalog.format('%s: %s of %s live docs (%s%%), %s docs/s, %s',
                         CASE j.recompute WHEN 'valve' THEN 'WAL safety valve recompute' ELSE j.recompute || ' recompute' END,
                         j.recompute_done, j.recompute_total,
                         j.recompute_done * 100 / nullif(j.recompute_total, 0),
                         round(coalesce(j.recompute_rate, 0)::numeric),
                         coalesce('about ' || round(j.recompute_seconds_left::numeric) || ' s left', 'time left unknown'))),
      (16, j.state <> 'streaming', 'ok', pg_catalog.format('worker is %s', j.state)),
      (17, true, 'ok',
       pg_catalog.format('streaming; %s behind, %s docs waiting', pg_catalog.pg_size_pretty(j.ack_lag_bytes), j.dirty_depth))
    ) AS c(rank, applies, health, reason)
    WHERE c.applies
    ORDER BY c.rank
    LIMIT 1
 ) h;
COMMENT ON VIEW docsync.status IS
  'one row per docsync slot or status file: is the worker up, how far behind, how much WAL held, what failed last';

-- 0.2: row-level security judged for the reader role a query is computed as; a query that DDL made
-- call what cannot be analysed is refused

CREATE FUNCTION docsync.check_definer(sql text, search_path text, definer regrole, computed boolean)
RETURNS void LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'docsync_check_definer';

COMMENT ON FUNCTION docsync.check_definer(text, text, regrole, boolean) IS
  'check_definer; computed false for a query never computed as the definer''s reader role (a watch''s columns)';

DROP FUNCTION docsync.check_query_rights(text, text, text, regrole);

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

CREATE OR REPLACE FUNCTION docsync.check_watch_rights(query text, rel regclass, cols name[], keys_sql text, path text,
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

CREATE OR REPLACE FUNCTION docsync.refusal(query text) RETURNS text
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

CREATE OR REPLACE FUNCTION docsync.notice_uncovered() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET lock_timeout = '100ms' AS $$
DECLARE
  qname text;
  q docsync.query_defs;
  chk record;
  seen text := coalesce(current_setting('docsync_notice.uncovered', true), '');
BEGIN
  IF TG_TABLE_NAME = 'query_defs' THEN qname := NEW.name; ELSE qname := NEW.query; END IF;
  IF position(E'\n' || qname || E'\n' IN seen) > 0 THEN RETURN NULL; END IF;   -- named already
  PERFORM set_config('docsync_notice.uncovered', coalesce(nullif(seen, ''), E'\n') || qname || E'\n', true);
  SELECT * INTO q FROM docsync.query_defs d WHERE d.name = qname;
  IF NOT FOUND OR NOT EXISTS (SELECT FROM docsync.watch_defs w WHERE w.query = qname) THEN
    RETURN NULL;
  END IF;
  BEGIN
    SELECT * INTO chk FROM docsync.query_check(q);
  EXCEPTION WHEN OTHERS THEN
    RETURN NULL;   -- docsync.queries shows why it does not analyse
  END;
  IF cardinality(chk.unwatched) > 0 THEN
    RAISE NOTICE 'doc query "%" reads %, which no watch covers', qname, array_to_string(chk.unwatched, ', ')
      USING DETAIL = 'A change there never refreshes the query''s docs: they go stale. docsync.queries lists such tables in unwatched_tables, and docsync.status warns while a worker runs the query.',
            HINT = format('Watch each with SELECT docsync.watch(%L, table, params => ARRAY[…]), or with keys_sql => … when its rows do not hold the doc''s params.', qname);
  END IF;
  RETURN NULL;
END
$$;

-- grant_reader (sql/parts/10_roles.sql): in a portable install, no standing membership of the pool
-- role in a reader role (docsync.compute_as lends it one for each compute)
CREATE OR REPLACE FUNCTION docsync.grant_reader(role text) RETURNS SETOF text
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  r pg_roles;
  def docsync.query_defs;
  problem text;
  g record;
  rg docsync.reader_grants;
  sys record;
  granted boolean := false;
BEGIN
  SELECT * INTO r FROM pg_roles WHERE rolname = role;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'role "%" does not exist', role
      USING ERRCODE = 'undefined_object', DETAIL = 'grant_reader grants to an existing role.',
            HINT = format('Create it first: CREATE ROLE %I LOGIN;', role);
  END IF;
  IF EXISTS (SELECT FROM pg_roles x
              WHERE (x.rolsuper OR x.rolreplication OR x.rolbypassrls) AND pg_has_role(r.oid, x.oid, 'MEMBER')) THEN
    RAISE EXCEPTION 'role "%" is not a harmless reader', role
      USING ERRCODE = 'invalid_parameter_value',
            DETAIL = format('It is or is a member of %s. The pool role runs customer SQL; docsync-worker refuses a pool role that is or reaches a SUPERUSER, REPLICATION or BYPASSRLS role.',
                            (SELECT string_agg(quote_ident(x.rolname), ', ' ORDER BY x.rolname) FROM pg_roles x
                              WHERE (x.rolsuper OR x.rolreplication OR x.rolbypassrls) AND pg_has_role(r.oid, x.oid, 'MEMBER'))),
            HINT = 'Use a separate role: CREATE ROLE docsync_reader LOGIN; SELECT docsync.grant_reader(''docsync_reader'');';
  END IF;
  -- first take back what a reader role holds that its definer no longer does (a REVOKE since):
  -- a reader role never keeps more than its definer may read
  FOR rg IN SELECT x.* FROM docsync.reader_grants x JOIN docsync.reader_roles rr ON rr.reader = x.reader
            WHERE x.kind IN ('schema', 'table', 'function')
              AND (to_regrole(quote_ident(rr.definer)) IS NULL
                   OR NOT coalesce(docsync.reader_grant_held(x, to_regrole(quote_ident(rr.definer))), false))
            ORDER BY x.reader, x.kind, x.schema_name, x.table_name LOOP
    problem := docsync.revoke_reader_grant(rg);
    IF problem IS NOT NULL THEN
      RETURN NEXT problem;
    END IF;
  END LOOP;
  -- a portable install lends the pool role one reader role for each compute (docsync.compute_as),
  -- which refuses while it is a member of any: a standing membership (an older install's, one
  -- granted by hand) would let a compute become another definer's reader role, so it goes
  IF docsync.install_kind() = 'portable' THEN
    FOR g IN SELECT x.rolname FROM pg_auth_members m JOIN pg_roles x ON x.oid = m.roleid
              WHERE m.member = r.oid
                AND x.rolname IN (SELECT rr.reader FROM docsync.reader_roles rr)
              ORDER BY x.rolname LOOP
      EXECUTE format('REVOKE %I FROM %I', g.rolname, role);
      RETURN NEXT format('REVOKE %I FROM %I', g.rolname, role);
    END LOOP;
    DELETE FROM docsync.reader_grants x WHERE x.role = grant_reader.role AND x.kind = 'member';
  END IF;
  -- a refused definition is granted nothing (the others are: one definer's refused query never
  -- stops everyone's grants); each is named in a WARNING and in docsync.queries.refused
  CREATE TEMP TABLE docsync_reader_refused ON COMMIT DROP AS
    SELECT d.name, docsync.refusal(d.name) AS problem FROM docsync.query_defs d;
  DELETE FROM docsync_reader_refused x WHERE x.problem IS NULL;
  FOR def IN SELECT d.* FROM docsync.query_defs d JOIN docsync_reader_refused x ON x.name = d.name ORDER BY d.name LOOP
    RAISE WARNING 'docsync query "%" is refused, so nothing is granted for it: %', def.name,
                  (SELECT x.problem FROM docsync_reader_refused x WHERE x.name = def.name)
      USING DETAIL = 'grant_reader grants the pool role only what the definer of each definition may read.',
            HINT = format('Grant the definer what the query reads again, redefine it as a role that may read it (docsync.define_query(%L, …, or_replace => true)), or drop it (docsync.drop_query(%L)); then run grant_reader again.',
                          def.name, def.name);
  END LOOP;
  -- the definitions granted for: queries not refused, and their watches not set aside
  CREATE TEMP TABLE docsync_reader_defs ON COMMIT DROP AS
    SELECT q.name, NULL::bigint AS watch, q.defined_by AS definer
      FROM docsync.query_defs q WHERE q.name NOT IN (SELECT x.name FROM docsync_reader_refused x)
    UNION ALL
    SELECT q.name, w.id, w.defined_by
      FROM docsync.query_defs q JOIN docsync.watch_defs w ON w.query = q.name
     WHERE q.name NOT IN (SELECT x.name FROM docsync_reader_refused x)
       AND w.keys_sql IS NOT NULL AND (w.defined_by = q.defined_by OR docsync.watch_problem(w.id) IS NULL);
  -- what the queries check SELECT on as the pool role, with the definer it was checked for: the
  -- tables they read, and views rather than the tables behind them (checked as the view's owner)
  CREATE TEMP TABLE docsync_reader_needs ON COMMIT DROP AS
    SELECT DISTINCT x.rel, d.definer, d.name AS query
      FROM docsync_reader_defs d
      CROSS JOIN LATERAL unnest((docsync.stored_analysis(d.name, d.watch)).checked) AS x(rel);
  -- the user functions they call, with the definer they were checked for
  CREATE TEMP TABLE docsync_reader_fns ON COMMIT DROP AS
    SELECT DISTINCT x.fn, d.definer
      FROM docsync_reader_defs d
      CROSS JOIN LATERAL unnest((docsync.stored_analysis(d.name, d.watch)).functions) AS x(fn)
      JOIN pg_proc p ON p.oid = x.fn
     WHERE p.pronamespace NOT IN ('pg_catalog'::regnamespace, 'information_schema'::regnamespace);
  -- every schema the checked text's name resolution used (relations, functions, operators, types,
  -- collations, and the param types the batched forms name, $1::s.t[]), where the definer has USAGE
  -- itself: resolved without it, `||` would find another operator, and the doc would not be the one
  -- checked
  CREATE TEMP TABLE docsync_reader_type_schemas ON COMMIT DROP AS
    SELECT DISTINCT x.nsp, d.definer
      FROM docsync_reader_defs d
      CROSS JOIN LATERAL unnest((docsync.stored_analysis(d.name, d.watch)).schemas) AS x(nsp)
     WHERE has_schema_privilege(to_regrole(quote_ident(d.definer)), x.nsp, 'USAGE');
  -- system catalogs: readable by PUBLIC already, or never granted
  FOR sys IN
    SELECT n.rel, min(n.query) AS query
      FROM docsync_reader_needs n
      JOIN pg_class c ON c.oid = n.rel
     WHERE c.relnamespace IN ('pg_catalog'::regnamespace, 'information_schema'::regnamespace)
       AND NOT has_table_privilege('public', n.rel, 'SELECT')
     GROUP BY n.rel
  LOOP
    RAISE EXCEPTION 'docsync query "%" reads %, a system catalog that PUBLIC may not read', sys.query, sys.rel
      USING ERRCODE = 'insufficient_privilege',
            DETAIL = 'grant_reader never grants anything in pg_catalog or information_schema beyond what PUBLIC may read.',
            HINT = 'Read what you need through a view owned by a role that may read it, or drop the query that reads the catalog (see docsync.queries).';
  END LOOP;
  -- each definer's reader role, and what is not yet granted to it (a privilege it holds already,
  -- whoever granted it, is left as it is); each grant made is recorded for docsync.revoke_reader
  CREATE TEMP TABLE docsync_reader_roles ON COMMIT DROP AS
    SELECT d.definer, docsync.ensure_reader_role(d.definer) AS reader
      FROM (SELECT q.defined_by AS definer FROM docsync.query_defs q
            UNION SELECT w.defined_by FROM docsync.watch_defs w) d
     WHERE to_regrole(quote_ident(d.definer)) IS NOT NULL  -- a role dropped since gets none
     ORDER BY d.definer;
  FOR g IN
    WITH t AS (
      SELECT n.rel, c.relnamespace, rr.reader,
             has_table_privilege(to_regrole(quote_ident(n.definer)), n.rel, 'SELECT') AS whole,
             (SELECT array_agg(a.attname ORDER BY a.attnum)
                FROM pg_attribute a
               WHERE a.attrelid = n.rel AND a.attnum > 0 AND NOT a.attisdropped
                 AND NOT EXISTS (SELECT FROM aclexplode(a.attacl) x
                                  WHERE x.grantee = to_regrole(quote_ident(rr.reader)) AND x.privilege_type = 'SELECT')
                 AND has_column_privilege(to_regrole(quote_ident(n.definer)), n.rel, a.attnum, 'SELECT')) AS cols
        FROM (SELECT DISTINCT x.rel, x.definer FROM docsync_reader_needs x) n
        JOIN docsync_reader_roles rr ON rr.definer = n.definer
        JOIN pg_class c ON c.oid = n.rel
       WHERE c.relnamespace NOT IN ('pg_catalog'::regnamespace, 'information_schema'::regnamespace))
    , f AS (
      SELECT p.oid AS fn, p.pronamespace, rr.reader, fd.definer
        FROM docsync_reader_fns fd
        JOIN docsync_reader_roles rr ON rr.definer = fd.definer
        JOIN pg_proc p ON p.oid = fd.fn)
    SELECT 'schema' AS kind, ns.nspname AS schema_name, NULL::text AS table_name, NULL::name[] AS cols,
           format('GRANT USAGE ON SCHEMA %I TO %I', ns.nspname, u.reader) AS stmt, u.reader
      FROM (SELECT t.relnamespace AS nsp, t.reader FROM t UNION SELECT f.pronamespace, f.reader FROM f
            UNION SELECT ts.nsp, rr.reader FROM docsync_reader_type_schemas ts
                    JOIN docsync_reader_roles rr ON rr.definer = ts.definer) u
      JOIN pg_namespace ns ON ns.oid = u.nsp
     WHERE NOT EXISTS (SELECT FROM aclexplode(ns.nspacl) x
                        WHERE x.grantee = to_regrole(quote_ident(u.reader)) AND x.privilege_type = 'USAGE')
    UNION ALL
    -- EXECUTE where PUBLIC lacks it, when the definer has it; never on a function of an extension
    -- that PUBLIC may not execute: an extension revokes it for a reason (dblink_connect_u connects as
    -- anyone without a password, lo_import reads server files), and a superuser definer holds it
    SELECT 'function', ns.nspname, f.fn::regprocedure::text, NULL,
           format('GRANT EXECUTE ON FUNCTION %s TO %I', f.fn::regprocedure, f.reader), f.reader
      FROM f JOIN pg_namespace ns ON ns.oid = f.pronamespace
     WHERE has_function_privilege(to_regrole(quote_ident(f.definer)), f.fn, 'EXECUTE')
       AND NOT has_function_privilege(to_regrole(quote_ident(f.reader)), f.fn, 'EXECUTE')
       AND NOT EXISTS (SELECT FROM pg_depend d
                        WHERE d.classid = 'pg_proc'::regclass AND d.objid = f.fn AND d.deptype = 'e')
    UNION ALL
    SELECT 'table', ns.nspname, c.relname, CASE WHEN t.whole THEN NULL ELSE t.cols END,
           CASE WHEN t.whole THEN format('GRANT SELECT ON TABLE %s TO %I', t.rel, t.reader)
                ELSE format('GRANT SELECT (%s) ON TABLE %s TO %I',
                            (SELECT string_agg(quote_ident(x), ', ') FROM unnest(t.cols) x), t.rel, t.reader) END,
           t.reader
      FROM t JOIN pg_class c ON c.oid = t.rel JOIN pg_namespace ns ON ns.oid = c.relnamespace
     WHERE CASE WHEN t.whole
                THEN NOT EXISTS (SELECT FROM aclexplode(c.relacl) x
                                  WHERE x.grantee = to_regrole(quote_ident(t.reader)) AND x.privilege_type = 'SELECT')
                ELSE t.cols IS NOT NULL END
    UNION ALL
    -- (a portable install lends the membership for each compute instead: docsync.compute_as)
    SELECT 'member', NULL, NULL, NULL, format('GRANT %I TO %I', rr.reader, role), rr.reader
      FROM docsync_reader_roles rr
     WHERE NOT pg_has_role(r.oid, to_regrole(quote_ident(rr.reader)), 'MEMBER')
       AND docsync.install_kind() = 'extension'
    UNION ALL
    -- (the row names the pool role, to which a portable install lends reader roles)
    SELECT 'compute', NULL, NULL, NULL,
           format('GRANT USAGE ON SCHEMA docsync TO %I; GRANT EXECUTE ON FUNCTION docsync.compute_as(name, text) TO %I', role, role),
           NULL
     WHERE NOT has_function_privilege(r.oid, 'docsync.compute_as(name, text)', 'EXECUTE')
        OR NOT has_schema_privilege(r.oid, 'docsync', 'USAGE')
        OR (docsync.install_kind() = 'portable'
            AND NOT EXISTS (SELECT FROM docsync.reader_grants x WHERE x.role = grant_reader.role AND x.kind = 'compute'))
    UNION ALL
    -- the pool role never holds the union of the reader roles' rights itself: it only becomes one
    SELECT 'noinherit', NULL, NULL, NULL, format('ALTER ROLE %I NOINHERIT', role), NULL
     WHERE r.rolinherit
    ORDER BY 5
  LOOP
    EXECUTE g.stmt;
    INSERT INTO docsync.reader_grants (role, kind, schema_name, table_name, columns, reader)
    VALUES (role, g.kind, g.schema_name, g.table_name, g.cols, g.reader);
    granted := true;
    RETURN NEXT g.stmt;
  END LOOP;
  -- computes may now run what failed for want of a grant: the worker reloads the definitions and
  -- tries the batched forms it set aside again (docsync.queries.batched)
  IF granted THEN
    PERFORM docsync.next_generation();
  END IF;
  -- and what a reader role was granted that no definition granted for needs any more (a query
  -- redefined, dropped or refused, a watch removed or set aside)
  FOR rg IN
    SELECT x.* FROM docsync.reader_grants x JOIN docsync.reader_roles rr ON rr.reader = x.reader
     WHERE x.kind IN ('schema', 'table', 'function')
       AND NOT CASE x.kind
             WHEN 'table' THEN EXISTS (
               SELECT FROM docsync_reader_needs n
                WHERE n.definer = rr.definer AND n.rel = to_regclass(format('%I.%I', x.schema_name, x.table_name)))
             WHEN 'function' THEN EXISTS (
               SELECT FROM docsync_reader_fns f
                WHERE f.definer = rr.definer AND f.fn = to_regprocedure(x.table_name))
             ELSE EXISTS (
               SELECT FROM (SELECT c.relnamespace AS nsp FROM docsync_reader_needs n JOIN pg_class c ON c.oid = n.rel
                             WHERE n.definer = rr.definer
                            UNION SELECT p.pronamespace FROM docsync_reader_fns f JOIN pg_proc p ON p.oid = f.fn
                             WHERE f.definer = rr.definer
                            UNION SELECT ts.nsp FROM docsync_reader_type_schemas ts WHERE ts.definer = rr.definer) u
                WHERE u.nsp = to_regnamespace(quote_ident(x.schema_name)))
           END
     ORDER BY x.reader, x.kind, x.schema_name, x.table_name
  LOOP
    problem := docsync.revoke_reader_grant(rg);
    IF problem IS NOT NULL THEN
      RETURN NEXT problem;
    END IF;
  END LOOP;
  DROP TABLE docsync_reader_refused;
  DROP TABLE docsync_reader_defs;
  DROP TABLE docsync_reader_roles;
  DROP TABLE docsync_reader_fns;
  DROP TABLE docsync_reader_needs;
  DROP TABLE docsync_reader_type_schemas;
END
$$;

-- fingerprint (sql/parts/08_worker_contracts.sql): a partition's link to its parent counts
CREATE OR REPLACE FUNCTION docsync.fingerprint(query text) RETURNS text
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

-- stored_batch_problem: its keys queries' problems over an array, not a loop's open cursor
CREATE OR REPLACE FUNCTION docsync.stored_batch_problem(query text) RETURNS text
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

-- function privileges, as a fresh install sets them (sql/parts/13_grants.sql)
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA docsync FROM PUBLIC;
GRANT EXECUTE ON FUNCTION docsync.channel(text, text[]), docsync.channel(text), docsync.install_kind(),
  docsync.define_query(text, text, text[], boolean, text, text, boolean),
  docsync.watch(text, text, text[], text, text[], boolean, text, boolean), docsync.unwatch(text, text, text[], text, text),
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
  docsync.stored_batch_sql(text, bigint), docsync.stored_key_types(text), docsync.uncovered_queries(),
  docsync.explain(text)
  TO docsync_admin;
GRANT EXECUTE ON FUNCTION docsync.derive_watches(text, text, regrole) TO docsync_admin;
GRANT SELECT ON docsync.watch_targets TO docsync_admin;
