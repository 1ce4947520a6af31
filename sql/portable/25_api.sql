-- sql/portable/25_api.sql: portable forms of the API functions that write definitions. Each runs as
-- its caller (SECURITY INVOKER) and calls its writer, docsync._api_<name>, a SECURITY DEFINER
-- function of the installing role, which alone may write the definition tables. The writer takes
-- the caller's role as an argument and believes it only when the session's user is a member of it
-- (a role it could become anyway); it then runs the same implementation as the extension
-- (docsync._<name>), whose checks read the catalog for that role. Back in the caller's rights, the
-- API function has the server check that the caller may run the query (docsync.check_definer).

-- portable: function docsync.define_query/7
-- Enters a writer: raises while a parse runs in the session (docsync.parsing) and unless the
-- session's user is a member of caller; sets docsync.api_caller for docsync.api_caller() and returns
-- what it was, for docsync.api_leave.
CREATE FUNCTION docsync.api_enter(caller regrole) RETURNS text
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  prev text := coalesce(current_setting('docsync.api_caller', true), '');
  parsing regrole := (SELECT p.definer FROM docsync.parsing p WHERE p.pid = pg_backend_pid() LIMIT 1);
BEGIN
  -- code that a parse runs (a domain's CHECK) runs as that definer's parser role in whatever
  -- session parses: it must not write definitions as the session's user
  IF parsing IS NOT NULL THEN
    RAISE EXCEPTION 'docsync definitions cannot be written while a definition of % is parsed', parsing
      USING ERRCODE = 'insufficient_privilege',
            DETAIL = 'Code that parse analysis ran (a type''s input function or a domain''s CHECK) called a docsync writer; it holds the definer''s rights, not the session''s user''s.';
  END IF;
  IF caller IS NULL OR NOT pg_has_role(session_user, caller, 'MEMBER') THEN
    RAISE EXCEPTION 'permission denied to write docsync definitions as role %', coalesce(caller::text, 'NULL')
      USING ERRCODE = 'insufficient_privilege',
            DETAIL = format('The session''s user %s is not a member of that role; a definition is recorded only for a role its author may become.', session_user),
            HINT = 'Call docsync.define_query(), docsync.watch(), docsync.unwatch() or docsync.drop_query() as that role.';
  END IF;
  PERFORM set_config('docsync.api_caller', caller::text, true);
  RETURN prev;
END
$$;

CREATE FUNCTION docsync._api_define_query(caller regrole, name text, sql text, params text[], or_replace boolean,
                                          search_path text, watches text, allow_uncovered boolean)
RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  prev text := docsync.api_enter(caller);
BEGIN
  PERFORM docsync._define_query(name, sql, params, or_replace, search_path, watches, allow_uncovered);
  PERFORM set_config('docsync.api_caller', prev, true);
END
$$;
-- watches defaults to 'manual' here: deriving watches needs the extension's C analysis of the
-- query (docsync.derive_watches), so a query's watches are written by hand with docsync.watch.
CREATE FUNCTION docsync.define_query(name text, sql text, params text[] DEFAULT '{}',
                                     or_replace boolean DEFAULT false,
                                     search_path text DEFAULT pg_catalog.current_setting('search_path'),
                                     watches text DEFAULT 'manual', allow_uncovered boolean DEFAULT false)
RETURNS void LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  me regrole := current_user::regrole;
BEGIN
  IF watches = 'derived' THEN
    PERFORM docsync.derive_watches(sql, search_path, me);
  END IF;
  PERFORM docsync._api_define_query(me, name, sql, params, or_replace, search_path, watches, allow_uncovered);
  PERFORM docsync.check_definer(sql, docsync.pin_search_path(search_path, me), me);
END
$$;
COMMENT ON FUNCTION docsync.define_query(text, text, text[], boolean, text, text, boolean) IS
  'define (or, with or_replace => true, redefine) a doc query; in the portable install its watches are written by hand (watches => ''manual'')';

-- portable: function docsync.watch/8
CREATE FUNCTION docsync._api_watch(caller regrole, query text, "table" text, params text[], keys_sql text,
                                   keys_args text[], allow_broadcast boolean, search_path text, broadcast boolean)
RETURNS bigint LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  prev text := docsync.api_enter(caller);
  id bigint;
BEGIN
  id := docsync._watch(query, "table", params, keys_sql, keys_args, allow_broadcast, search_path, broadcast);
  PERFORM set_config('docsync.api_caller', prev, true);
  RETURN id;
END
$$;
CREATE FUNCTION docsync.watch(query text, "table" text, params text[] DEFAULT NULL,
                              keys_sql text DEFAULT NULL, keys_args text[] DEFAULT NULL,
                              allow_broadcast boolean DEFAULT false,
                              search_path text DEFAULT pg_catalog.current_setting('search_path'),
                              broadcast boolean DEFAULT false)
RETURNS bigint LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  me regrole := current_user::regrole;
  new_id bigint;
  w docsync.watch_defs;
BEGIN
  new_id := docsync._api_watch(me, query, "table", params, keys_sql, keys_args, allow_broadcast, search_path,
                              broadcast);
  SELECT * INTO w FROM docsync.watch_defs x WHERE x.id = new_id;
  PERFORM docsync.check_definer(format('SELECT %s FROM %I.%I',
                                       (SELECT string_agg(quote_ident(c), ', ' ORDER BY o) FROM unnest(w.columns) WITH ORDINALITY u(c, o)),
                                       w.table_schema, w.table_name), NULL, me);
  IF keys_sql IS NOT NULL THEN
    PERFORM docsync.check_definer(keys_sql, w.search_path, me);
  END IF;
  RETURN new_id;
END
$$;
COMMENT ON FUNCTION docsync.watch(text, text, text[], text, text[], boolean, text, boolean) IS
  'make changes of a table affect docs of a query: directly (params), through a reverse index (keys_sql) or every live doc (broadcast)';

-- portable: function docsync.unwatch/5
CREATE FUNCTION docsync._api_unwatch(caller regrole, query text, "table" text, params text[], keys_sql text,
                                     search_path text)
RETURNS integer LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  prev text := docsync.api_enter(caller);
  n integer;
BEGIN
  n := docsync._unwatch(query, "table", params, keys_sql, search_path);
  PERFORM set_config('docsync.api_caller', prev, true);
  RETURN n;
END
$$;
CREATE FUNCTION docsync.unwatch(query text, "table" text, params text[] DEFAULT NULL,
                                keys_sql text DEFAULT NULL,
                                search_path text DEFAULT pg_catalog.current_setting('search_path'))
RETURNS integer LANGUAGE sql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
  SELECT docsync._api_unwatch(current_user::regrole, query, "table", params, keys_sql, search_path)
$$;
COMMENT ON FUNCTION docsync.unwatch(text, text, text[], text, text) IS
  'remove the watches of a query on a table (all of them, or the one with these params or keys_sql); returns how many';

-- portable: function docsync.drop_query/1
CREATE FUNCTION docsync._api_drop_query(caller regrole, name text)
RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  prev text := docsync.api_enter(caller);
BEGIN
  PERFORM docsync._drop_query(name);
  PERFORM set_config('docsync.api_caller', prev, true);
END
$$;
CREATE FUNCTION docsync.drop_query(name text) RETURNS void
LANGUAGE sql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
  SELECT docsync._api_drop_query(current_user::regrole, name)
$$;
COMMENT ON FUNCTION docsync.drop_query(text) IS 'drop a doc query and its watches';
