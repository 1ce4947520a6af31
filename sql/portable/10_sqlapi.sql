-- sql/portable/10_sqlapi.sql: portable forms of the small C helpers (plugin/sqlapi.c,
-- plugin/definer.c, plugin/reader.c, plugin/ddl.c): channel names, search paths, the API caller,
-- the definitions generation, compute_as, batching and the replica trigger.

-- portable: function docsync.skip_replicated/0
-- A REPLICA trigger: it fires only under session_replication_role = replica, and skips the row
-- inside a logical replication apply or table-sync worker (plugin/ddl.c).
CREATE FUNCTION docsync.skip_replicated() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF EXISTS (SELECT FROM pg_stat_activity a
              WHERE a.pid = pg_backend_pid() AND a.backend_type = 'logical replication worker') THEN
    RETURN NULL;
  END IF;
  IF TG_OP = 'DELETE' THEN
    RETURN OLD;
  END IF;
  RETURN NEW;
END
$$;

-- portable: function docsync.channel/2
-- Channel names, escaped as the worker and plugin/sqlapi.c do: '%' -> %25, ':' -> %3A, control
-- bytes 0x01-0x1F and 0x7F -> %XX (a text never holds 0x00), NULL -> %00; other bytes as they are.
CREATE FUNCTION docsync.channel_segment(value text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
  SELECT CASE WHEN value !~ '[%:\x01-\x1f\x7f]' THEN value ELSE
    (SELECT string_agg(CASE WHEN c ~ '[%:\x01-\x1f\x7f]'
                            THEN '%' || upper(lpad(to_hex(ascii(c)), 2, '0')) ELSE c END, '' ORDER BY i)
       FROM regexp_split_to_table(value, '') WITH ORDINALITY AS s(c, i)) END
$$;
CREATE FUNCTION docsync.channel(query text, VARIADIC "values" text[])
RETURNS text LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  out text;
  v text;
BEGIN
  IF query IS NULL THEN
    RAISE EXCEPTION 'docsync channel query name must not be null'
      USING ERRCODE = 'null_value_not_allowed', DETAIL = 'Every channel starts with the name of a doc query.',
            HINT = 'Pass the name given to docsync.define_query().';
  END IF;
  IF query !~ '^[A-Za-z0-9_][A-Za-z0-9_.-]*$' OR octet_length(query) > 63 THEN
    RAISE EXCEPTION 'invalid docsync query name "%"', query
      USING ERRCODE = 'invalid_parameter_value',
            DETAIL = 'Query names are 1 to 63 ASCII letters, digits and ''_'', and also ''.'' and ''-'' after the first character.',
            HINT = 'Pass the name given to docsync.define_query().';
  END IF;
  out := 'db:' || query;
  IF "values" IS NULL THEN
    RAISE EXCEPTION 'docsync channel values must not be a null array'
      USING ERRCODE = 'null_value_not_allowed',
            DETAIL = 'A NULL array names no doc; a NULL value inside the array is spelled %00.',
            HINT = 'Pass the values one by one, or VARIADIC ARRAY[...]::text[].';
  END IF;
  IF array_ndims("values") > 1 THEN
    RAISE EXCEPTION 'docsync channel values must be a one-dimensional array'
      USING ERRCODE = 'array_subscript_error', DETAIL = format('The array has %s dimensions.', array_ndims("values")),
            HINT = 'Pass the values one by one, or VARIADIC ARRAY[...]::text[].';
  END IF;
  FOREACH v IN ARRAY coalesce("values", '{}') LOOP
    out := out || ':' || coalesce(docsync.channel_segment(v), '%00');
  END LOOP;
  RETURN out;
END
$$;

-- portable: function docsync.channel/1
CREATE FUNCTION docsync.channel(query text)
RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
  SELECT docsync.channel(query, VARIADIC '{}'::text[])
$$;

-- portable: function docsync.pin_search_path/3
-- The schemas of a search_path, as the server splits it (quoted names kept, others folded to lower
-- case), in order, with "$user" spelled as role's own name; raises on a malformed list.
CREATE FUNCTION docsync.path_schemas(search_path text, role regrole)
RETURNS TABLE (ord integer, schema_name name)
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  rest text := search_path;
  m text[];
  n integer := 0;
  item text;
BEGIN
  LOOP
    rest := ltrim(rest, E' \t\n\r\f');
    EXIT WHEN rest = '' AND n = 0;
    m := regexp_match(rest, '^"((?:[^"]|"")+)"[ \t\n\r\f]*(,|$)(.*)$', 's');
    IF m IS NOT NULL THEN
      item := replace(m[1], '""', '"');
    ELSE
      m := regexp_match(rest, '^([^",\s]+)[ \t\n\r\f]*(,|$)(.*)$', 's');
      IF m IS NULL THEN
        RAISE EXCEPTION 'invalid search_path "%"', search_path
          USING ERRCODE = 'invalid_parameter_value',
                DETAIL = 'A search_path is a comma-separated list of schema names.',
                HINT = 'Double-quote a schema name that holds other characters than letters, digits and _.';
      END IF;
      item := lower(m[1]);
      IF item = '$user' THEN
        item := (SELECT r.rolname FROM pg_roles r WHERE r.oid = role);
      END IF;
    END IF;
    n := n + 1;
    ord := n;
    schema_name := item;
    RETURN NEXT;
    rest := m[3];
    IF m[2] = ',' AND ltrim(rest, E' \t\n\r\f') = '' THEN
      RAISE EXCEPTION 'invalid search_path "%"', search_path
        USING ERRCODE = 'invalid_parameter_value',
              DETAIL = 'A search_path is a comma-separated list of schema names.',
              HINT = 'Double-quote a schema name that holds other characters than letters, digits and _.';
    END IF;
    EXIT WHEN m[2] = '';
  END LOOP;
END
$$;
CREATE FUNCTION docsync.pin_search_path(search_path text, definer regrole DEFAULT NULL,
                                        usable_only boolean DEFAULT true)
RETURNS text LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  role regrole := coalesce(definer, docsync.api_caller());
  raw text := pin_search_path.search_path;
  s record;
  last integer;
  out text := '';
  seen oid[] := '{}';
  nsp oid;
BEGIN
  IF raw IS NULL THEN
    RAISE EXCEPTION 'search_path must not be null'
      USING ERRCODE = 'null_value_not_allowed',
            HINT = 'Pass the schemas the query''s names are looked up in, e.g. search_path => ''app''.';
  END IF;
  SELECT max(p.ord) INTO last FROM docsync.path_schemas(raw, role) p;
  FOR s IN SELECT * FROM docsync.path_schemas(raw, role) p ORDER BY p.ord LOOP
    IF s.schema_name = 'pg_temp' OR s.schema_name LIKE 'pg\_temp\_%' OR s.schema_name LIKE 'pg\_toast\_temp\_%' THEN
      CONTINUE WHEN s.ord = last;
      RAISE EXCEPTION 'search_path "%" names the temporary schema % before others', raw, s.schema_name
        USING ERRCODE = 'invalid_parameter_value',
              DETAIL = 'The worker runs a definition in its own sessions, where another session''s temporary objects do not exist; a temporary object could hide the one the query was checked against.',
              HINT = 'Leave pg_temp out of the search_path (docsync puts it last), and use permanent objects.';
    END IF;
    nsp := (SELECT n.oid FROM pg_namespace n WHERE n.nspname = s.schema_name);
    CONTINUE WHEN nsp IS NULL OR nsp = ANY (seen)
               OR (usable_only AND NOT has_schema_privilege(role, nsp, 'USAGE'));
    seen := seen || nsp;
    out := out || quote_ident(s.schema_name) || ', ';
  END LOOP;
  RETURN out || 'pg_temp';
END
$$;
COMMENT ON FUNCTION docsync.pin_search_path(text, regrole, boolean) IS
  'the search_path a definition is stored with: the schemas the definer may use, "$user" spelled out, pg_temp last';

-- portable: function docsync.resolve_relation/3
-- Looked up in the catalog for the role: the schemas of search_path it may use, in order (a
-- qualified name: that schema, which it must be allowed to use), this session's temporary schema
-- first as the server does; a temporary relation is refused.
CREATE FUNCTION docsync.resolve_relation(name text, search_path text, definer regrole DEFAULT NULL)
RETURNS regclass LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  role regrole := coalesce(definer, docsync.api_caller());
  parts text[];
  nsp oid;
  rel oid;
BEGIN
  IF name IS NULL THEN
    RETURN NULL;
  END IF;
  BEGIN
    parts := parse_ident(name);
  EXCEPTION WHEN OTHERS THEN
    RAISE EXCEPTION 'invalid name syntax' USING ERRCODE = 'invalid_name';
  END;
  IF cardinality(parts) = 3 THEN
    IF parts[1] <> current_database() THEN
      RAISE EXCEPTION 'cross-database references are not implemented: %', name USING ERRCODE = 'feature_not_supported';
    END IF;
    parts := parts[2:3];
  ELSIF cardinality(parts) > 3 THEN
    RAISE EXCEPTION 'improper relation name (too many dotted names): %', name USING ERRCODE = 'syntax_error';
  END IF;
  IF cardinality(parts) = 2 THEN
    nsp := (SELECT n.oid FROM pg_namespace n WHERE n.nspname = parts[1]);
    IF nsp IS NULL THEN
      RETURN NULL;
    END IF;
    IF nsp <> pg_my_temp_schema() AND NOT has_schema_privilege(role, nsp, 'USAGE') THEN
      RAISE EXCEPTION 'permission denied for schema %', parts[1] USING ERRCODE = 'insufficient_privilege';
    END IF;
    rel := (SELECT c.oid FROM pg_class c WHERE c.relnamespace = nsp AND c.relname = parts[2]);
  ELSE
    SELECT c.oid INTO rel
      FROM (SELECT pg_my_temp_schema() AS nsp, 0 AS ord
             WHERE pg_my_temp_schema() <> 0 AND NOT EXISTS (
                   SELECT FROM docsync.path_schemas(search_path, role) p WHERE p.schema_name = 'pg_temp')
            UNION ALL
            SELECT CASE WHEN p.schema_name = 'pg_temp' THEN pg_my_temp_schema() ELSE n.oid END, p.ord
              FROM docsync.path_schemas(coalesce(search_path, current_setting('search_path')), role) p
              LEFT JOIN pg_namespace n ON n.nspname = p.schema_name
             WHERE p.schema_name = 'pg_temp' OR has_schema_privilege(role, n.oid, 'USAGE')) s
      JOIN pg_class c ON c.relnamespace = s.nsp AND c.relname = parts[1]
     ORDER BY s.ord LIMIT 1;
  END IF;
  IF rel IS NULL THEN
    RETURN NULL;
  END IF;
  IF (SELECT c.relpersistence FROM pg_class c WHERE c.oid = rel) = 't' THEN
    RAISE EXCEPTION 'table "%" is temporary', name
      USING ERRCODE = 'wrong_object_type',
            DETAIL = 'Changes to temporary tables are never decoded, and no other session sees them.',
            HINT = 'Watch a permanent table.';
  END IF;
  RETURN rel;
END
$$;

-- portable: function docsync.compute_as/2
-- SET LOCAL ROLE and search_path, as the C function does; it cannot keep the compute from changing
-- the role back (docs/portable.md: what limits that).
CREATE FUNCTION docsync.is_reader_role(reader name) RETURNS boolean
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT EXISTS (SELECT FROM docsync.reader_roles r WHERE r.reader = is_reader_role.reader)
$$;
CREATE FUNCTION docsync.compute_as(reader name, search_path text) RETURNS void
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  IF reader IS NULL OR NOT docsync.is_reader_role(reader) THEN
    RAISE EXCEPTION 'role % is no docsync reader role', coalesce(quote_ident(reader), 'NULL')
      USING ERRCODE = 'insufficient_privilege',
            DETAIL = 'A compute runs as the reader role docsync.grant_reader made for its definer.',
            HINT = 'Name a role of docsync.reader_roles.';
  END IF;
  IF compute_as.search_path IS NULL THEN
    RAISE EXCEPTION 'a docsync definition has no stored search_path'
      USING ERRCODE = 'invalid_parameter_value',
            HINT = 'Pass the search_path stored with the definition.';
  END IF;
  PERFORM pg_catalog.set_config('search_path', compute_as.search_path, true);
  PERFORM pg_catalog.set_config('role', reader, true);
END
$$;

-- portable: function docsync.api_caller/0
-- The role that called the docsync API function now running: the writers (docsync._api_*) set
-- docsync.api_caller, transaction-local, to the caller after checking that the session's user is
-- a member of it; it is believed only for such a role, so naming another gains nothing. Outside a
-- call, the current user.
CREATE FUNCTION docsync.api_caller() RETURNS regrole
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  claimed regrole := to_regrole(nullif(current_setting('docsync.api_caller', true), ''));
BEGIN
  IF claimed IS NOT NULL AND pg_has_role(session_user, claimed, 'MEMBER') THEN
    RETURN claimed;
  END IF;
  RETURN current_user::regrole;
END
$$;
COMMENT ON FUNCTION docsync.api_caller() IS 'the role that called the docsync API function now running';

-- portable: function docsync.next_generation/0
CREATE FUNCTION docsync.next_generation() RETURNS bigint
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  g bigint := nextval('docsync.def_generation_seq');
BEGIN
  PERFORM pg_logical_emit_message(true, 'docsync.definitions', g::text);
  RETURN g;
END
$$;
