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
-- The first statement of every compute of the worker, as the C function is, but the membership it
-- switches through is lent for the compute's transaction alone: the pool role is a member of no
-- reader role (grant_reader makes it none in a portable install), and docsync._lend_reader grants it
-- the one reader role of the compute's definer, a catalog change of that transaction which its
-- ROLLBACK undoes. So while the compute runs the session can become that reader role or the pool
-- role, never another definer's reader role: set_config('role', …) to one is refused by the server
-- ("permission denied to set role"). Then SET LOCAL ROLE and search_path, and the transaction is
-- made read-only (the lending needs a read-write one; the worker begins it READ WRITE, and the
-- compute cannot turn it back once a query ran).
CREATE FUNCTION docsync.is_reader_role(reader name) RETURNS boolean
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT EXISTS (SELECT FROM docsync.reader_roles r WHERE r.reader = is_reader_role.reader)
$$;
-- A row per lending, never committed: the deferred trigger fails a commit (or PREPARE TRANSACTION)
-- of a transaction that borrowed a reader role, so a lending made outside a transaction block, or
-- in one that would commit, is undone with it.
CREATE UNLOGGED TABLE docsync.reader_loans (
  pool_role name NOT NULL,
  reader    name NOT NULL
);
COMMENT ON TABLE docsync.reader_loans IS
  'the reader role lent to the pool role by the compute now running (portable install); never committed';
CREATE FUNCTION docsync._refuse_loan_commit() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  RAISE EXCEPTION 'a transaction that borrowed reader role % cannot commit', quote_ident(NEW.reader)
    USING ERRCODE = 'invalid_transaction_termination',
          DETAIL = 'docsync.compute_as lends a reader role to the pool role for one compute; the membership must end with it.',
          HINT = 'End a compute''s transaction with ROLLBACK; call docsync.compute_as only inside BEGIN … ROLLBACK.';
END
$$;
CREATE CONSTRAINT TRIGGER refuse_commit AFTER INSERT ON docsync.reader_loans
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION docsync._refuse_loan_commit();
-- Lends reader to the session's user for the rest of the transaction: GRANT reader TO session_user,
-- as the installing role (CREATEROLE), undone by the transaction's ROLLBACK. Refused on a hot
-- standby and in a read-only transaction (no catalog change is possible there), to a session whose
-- user is no pool role of grant_reader, for a role that is no reader role, and when the session's
-- user is a member of any reader role already: a second lending in the transaction (the compute
-- calling it again, whatever role it switched to), or a standing membership, which grant_reader
-- takes back; and for a reader role holding a privilege its definer lost (reader_stale_for).
CREATE FUNCTION docsync._lend_reader(reader name) RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  held name;
  stale text;
BEGIN
  IF pg_is_in_recovery() THEN
    RAISE EXCEPTION 'docsync.compute_as cannot lend reader role % on a hot standby', quote_ident(reader)
      USING ERRCODE = 'read_only_sql_transaction',
            DETAIL = 'A portable install lends a compute its reader role by a GRANT in the compute''s transaction, which a standby cannot run.',
            HINT = 'Point the worker''s --pool-dsn at the primary.';
  END IF;
  IF current_setting('transaction_read_only') = 'on' THEN
    RAISE EXCEPTION 'docsync.compute_as cannot lend reader role % in a read-only transaction', quote_ident(reader)
      USING ERRCODE = 'read_only_sql_transaction',
            DETAIL = 'A portable install lends a compute its reader role by a GRANT in the compute''s transaction; compute_as makes the transaction read-only after it.',
            HINT = 'Begin the compute with BEGIN ISOLATION LEVEL REPEATABLE READ READ WRITE (docsync-worker does).';
  END IF;
  IF NOT EXISTS (SELECT FROM docsync.reader_grants g WHERE g.role = session_user AND g.kind = 'compute') THEN
    RAISE EXCEPTION 'role % is no docsync pool role', quote_ident(session_user)
      USING ERRCODE = 'insufficient_privilege',
            DETAIL = 'A reader role is lent only to a role docsync.grant_reader made a pool role, in a session it logged in as.',
            HINT = format('Run SELECT docsync.grant_reader(%L); as the installing role.', session_user);
  END IF;
  IF reader IS NULL OR NOT EXISTS (SELECT FROM docsync.reader_roles r WHERE r.reader = _lend_reader.reader) THEN
    RAISE EXCEPTION 'role % is no docsync reader role', coalesce(quote_ident(reader), 'NULL')
      USING ERRCODE = 'insufficient_privilege',
            DETAIL = 'A compute runs as the reader role docsync.grant_reader made for its definer.',
            HINT = 'Name a role of docsync.reader_roles.';
  END IF;
  SELECT g.rolname INTO held
    FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid
   WHERE m.member = (SELECT u.oid FROM pg_roles u WHERE u.rolname = session_user)
     AND g.rolname IN (SELECT r.reader FROM docsync.reader_roles r)
   ORDER BY g.rolname LIMIT 1;
  IF FOUND THEN
    RAISE EXCEPTION 'role % is a member of reader role % already: refusing to lend it reader role %',
                    quote_ident(session_user), quote_ident(held), quote_ident(reader)
      USING ERRCODE = 'insufficient_privilege',
            DETAIL = CASE WHEN EXISTS (SELECT FROM docsync.reader_loans l WHERE l.pool_role = session_user)
                          THEN 'A compute borrows one reader role, once, for its whole transaction: lending another would let it read as another definer.'
                          ELSE 'A portable install lends the pool role one reader role per compute; a standing membership in a reader role would let any compute become it.' END,
            HINT = CASE WHEN EXISTS (SELECT FROM docsync.reader_loans l WHERE l.pool_role = session_user)
                        THEN 'A doc or keys query must not call docsync.compute_as.'
                        ELSE format('Run SELECT docsync.grant_reader(%L); as the installing role: it takes standing memberships back.', session_user) END;
  END IF;
  -- A REVOKE from the definer stops its computes at once, as the extension's compute_as does,
  -- before grant_reader takes the reader role's grant back.
  stale := docsync.reader_stale_for(reader);
  IF stale IS NOT NULL THEN
    RAISE EXCEPTION 'docsync compute as "%" refused: %', reader, stale
      USING ERRCODE = 'insufficient_privilege',
            DETAIL = 'A reader role never reads with a privilege its definer no longer holds.',
            HINT = 'Run SELECT docsync.grant_reader(<the worker''s pool role>); as the installing role.';
  END IF;
  INSERT INTO docsync.reader_loans (pool_role, reader) VALUES (session_user, reader);
  EXECUTE format('GRANT %I TO %I', reader, session_user);
END
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
  IF current_user <> session_user THEN
    RAISE EXCEPTION 'docsync.compute_as cannot be called inside a compute or a security-definer function'
      USING ERRCODE = 'insufficient_privilege',
            DETAIL = format('It runs as %s, not as the session''s user %s: a compute runs as one reader role from its first statement to its end.',
                            quote_ident(current_user), quote_ident(session_user));
  END IF;
  PERFORM docsync._lend_reader(reader);
  PERFORM pg_catalog.set_config('search_path', compute_as.search_path, true);
  PERFORM pg_catalog.set_config('role', reader, true);
  PERFORM pg_catalog.set_config('transaction_read_only', 'on', true);
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
