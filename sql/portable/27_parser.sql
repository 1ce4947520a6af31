-- sql/portable/27_parser.sql: the definer's parser role, as which a portable install parses a
-- definer's text wherever it runs as the installing role (docs/portable.md, "Analysing a query").
-- Parse analysis runs code (a type's input function for a literal, a domain's CHECK through an
-- array or composite literal), and the installing role cannot become the definer. So each definer
-- gets a parser role: NOLOGIN, a member of the definer alone (so it holds the definer's rights, no
-- more), which no role is a member of, owning docsync_parse.<parser>(…), a SECURITY DEFINER function
-- of a fixed body that runs the analysis. Inside it the server refuses any change of role, and code
-- of the definer's runs with the definer's rights, in the session that parses, as the extension's
-- runs as the definer. Each parse runs in a subtransaction that is rolled back after it, which
-- undoes what such code did for the statements that follow it in the session (a setting, a
-- temporary object, an object the parser role owns or an edit of its parser, a row written); a
-- prepared statement it made or replaced, or an advisory lock, which a rollback keeps, fails the
-- parse, naming it, and is removed; and no text is parsed while the session has an open cursor.

-- portable: replaces /CREATE FUNCTION docsync\.reader_role_name\(/
@ORIGINAL@;
CREATE SCHEMA docsync_parse;
COMMENT ON SCHEMA docsync_parse IS 'docsync: each definer''s parser, owned by its parser role (docsync.ensure_parser)';

-- A row per parse running as a parser role in a session, never committed (the parse's
-- subtransaction is always rolled back): while one is there, the writers refuse (docsync.api_enter),
-- so that code the parse runs cannot define as the session's user, whose rights it does not hold.
CREATE UNLOGGED TABLE docsync.parsing (
  pid     integer NOT NULL,
  definer regrole NOT NULL
);
COMMENT ON TABLE docsync.parsing IS
  'the parses running as a parser role (portable install); never committed';

-- What a parse returns: docsync.parse_select's analysis, or docsync.batch_form's batched form.
CREATE TYPE docsync.parse_result AS (
  param_types regtype[], result_types regtype[], result_collations regcollation[], direct oid[],
  columns text[], relations oid[], functions oid[], types oid[], collations oid[], operators oid[],
  tree text, stmt text, problem text);

-- The name of a definer's parser role: docsync_parser_<definer>, a name of over 48 bytes shortened
-- to its first 24 bytes and a hash.
CREATE FUNCTION docsync.parser_role_name(definer name) RETURNS name
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
  SELECT CASE WHEN octet_length(definer) <= 48 THEN 'docsync_parser_' || definer
              -- the longest start of at most 24 bytes (not characters: the hash must fit in 63)
              ELSE 'docsync_parser_' || (SELECT left(definer, max(n)) FROM generate_series(0, 24) n
                                          WHERE octet_length(left(definer, n)) <= 24)
                   || '_' || left(md5(definer), 16) END::name
$$;

-- The analysis of one text as the current user: 'select' analyses one SELECT
-- (docsync.parse_select), 'batch' writes its batched form (docsync.batch_form, which analyses it
-- too).
CREATE FUNCTION docsync.parse_here(what text, sql text, search_path text, caller_path text)
RETURNS docsync.parse_result LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  r docsync.parse_result;
BEGIN
  IF what = 'batch' THEN
    SELECT b.stmt, b.problem INTO r.stmt, r.problem FROM docsync.batch_form(sql, search_path, caller_path) b;
  ELSE
    SELECT p.*, NULL, NULL INTO r FROM docsync.parse_select(sql, search_path) p;
  END IF;
  RETURN r;
END
$$;

-- The body of every parser: docsync.parse_here, as the parser role.
CREATE FUNCTION docsync.parser_body() RETURNS text
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $f$
SELECT $b$
BEGIN
  RETURN docsync.parse_here(what, sql, search_path, caller_path);
END
$b$::text
$f$;

-- Whether fn is the parser of role parser as ensure_parser makes it: owned by it, SECURITY DEFINER,
-- of the fixed body and search_path, executable by it and the installing role alone.
CREATE FUNCTION docsync.parser_intact(fn regprocedure, parser oid) RETURNS boolean
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
  SELECT EXISTS (
    SELECT FROM pg_proc p
     WHERE p.oid = fn AND p.proowner = parser AND p.prosecdef AND NOT p.proisstrict AND NOT p.proretset
       AND p.prokind = 'f' AND p.prorettype = 'docsync.parse_result'::regtype AND p.prosrc = docsync.parser_body()
       AND p.proconfig = ARRAY['search_path=pg_catalog, pg_temp']
       AND p.prolang = (SELECT l.oid FROM pg_language l WHERE l.lanname = 'plpgsql')
       AND p.pronamespace = 'docsync_parse'::regnamespace
       AND p.proacl @> ARRAY[makeaclitem(parser, parser, 'EXECUTE', false),
                             makeaclitem(current_user::regrole, parser, 'EXECUTE', false)]
       AND cardinality(p.proacl) = 2)
$$;

-- The parser role of definer, made (or made right) with its parser, or null when the definer holds
-- the current user's rights already (it is that role, a member of it, or a superuser), so that
-- parsing as the current user gives it nothing. A role of that name that docsync did not make, or
-- that was given a login, an attribute, a member or another membership since, is refused.
CREATE FUNCTION docsync.ensure_parser(definer regrole) RETURNS name
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  d pg_roles;
  parser name;
  mark text;
  r pg_roles;
  fn regprocedure;
BEGIN
  SELECT * INTO d FROM pg_roles x WHERE x.oid = definer;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'role with OID % does not exist', definer::oid USING ERRCODE = 'undefined_object';
  END IF;
  IF d.rolsuper OR pg_has_role(definer, current_user::regrole, 'USAGE') THEN
    RETURN NULL;
  END IF;
  parser := docsync.parser_role_name(d.rolname);
  mark := format('docsync parser role of %s', quote_ident(d.rolname));
  SELECT * INTO r FROM pg_roles x WHERE x.rolname = parser;
  IF NOT FOUND THEN
    EXECUTE format('CREATE ROLE %I NOLOGIN INHERIT NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS', parser);
    EXECUTE format('COMMENT ON ROLE %I IS %L', parser, mark);
    EXECUTE format('GRANT %I TO %I', d.rolname, parser);
    SELECT * INTO r FROM pg_roles x WHERE x.rolname = parser;
  ELSIF shobj_description(r.oid, 'pg_authid') IS DISTINCT FROM mark
        OR r.rolcanlogin OR r.rolsuper OR r.rolcreaterole OR r.rolcreatedb OR r.rolreplication OR r.rolbypassrls
        OR NOT r.rolinherit
        OR EXISTS (SELECT FROM pg_auth_members m WHERE m.member = r.oid AND m.roleid <> definer)
        OR EXISTS (SELECT FROM pg_auth_members m WHERE m.roleid = r.oid) THEN
    RAISE EXCEPTION 'role "%" exists, but is not a harmless docsync parser role', parser
      USING ERRCODE = 'duplicate_object',
            DETAIL = format('The portable install parses the texts of definer %s as its parser role %s, which holds the definer''s rights through a membership in it and nothing else; a role docsync did not make, or one given LOGIN, attributes, members or memberships since, could hold anything.',
                            quote_ident(d.rolname), quote_ident(parser)),
            HINT = 'Drop or rename that role; docsync makes it again at the next parse.';
  ELSIF NOT EXISTS (SELECT FROM pg_auth_members m WHERE m.member = r.oid AND m.roleid = definer) THEN
    EXECUTE format('GRANT %I TO %I', d.rolname, parser);
  END IF;
  -- its parser calls docsync's analysis, and makes temporary objects
  IF NOT has_schema_privilege(r.oid, 'docsync', 'USAGE') THEN
    EXECUTE format('GRANT USAGE ON SCHEMA docsync TO %I', parser);
  END IF;
  IF NOT has_database_privilege(r.oid, current_database(), 'TEMPORARY') THEN
    EXECUTE format('GRANT TEMPORARY ON DATABASE %I TO %I', current_database(), parser);
  END IF;
  fn := to_regprocedure(format('docsync_parse.%I(text, text, text, text)', parser));
  IF fn IS NOT NULL AND docsync.parser_intact(fn, r.oid) THEN
    RETURN parser;
  END IF;
  PERFORM docsync.make_owned_function(parser, 'docsync_parse', format('docsync_parse.%I(text, text, text, text)', parser),
    format('CREATE FUNCTION docsync_parse.%I(what text, sql text, search_path text, caller_path text) '
           'RETURNS docsync.parse_result LANGUAGE plpgsql VOLATILE SECURITY DEFINER '
           'SET search_path = pg_catalog, pg_temp AS %L', parser, docsync.parser_body()),
    true, false);
  RETURN parser;
END
$$;

-- The session's prepared statements, each as a whole (its name, text, parameter types and the time
-- it was prepared), its advisory locks and its open cursors: what a parse could change that a
-- rollback keeps (a cursor opened before it and closed in it stays closed).
CREATE FUNCTION docsync.parse_leftovers(OUT prepared text[], OUT locks text[], OUT cursors text[])
LANGUAGE sql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
  -- (not how often each ran: code the parse runs may EXECUTE one, which changes nothing it does)
  SELECT ARRAY(SELECT (p.name, p.statement, p.prepare_time, p.parameter_types, p.from_sql)::text
                 FROM pg_prepared_statements p ORDER BY p.name),
         ARRAY(SELECT concat_ws(':', l.classid, l.objid, l.objsubid, l.mode) FROM pg_locks l
                WHERE l.pid = pg_backend_pid() AND l.locktype = 'advisory' ORDER BY 1),
         -- (not the unnamed portal of the statement running now, which SQL cannot name)
         ARRAY(SELECT c::text FROM pg_cursors c WHERE c.name <> '' ORDER BY c.name)
$$;

-- Parses as the definer's parser role (what: 'select' or 'batch', as the parser's body reads it), in
-- a subtransaction always rolled back, and raises when the parse left what a rollback keeps
-- (docsync.parse_leftovers), which it removes. Called by the installing role's own functions
-- alone, each naming the definer of the text it parses.
CREATE FUNCTION docsync._parse_as_parser(definer regrole, what text, sql text, search_path text, caller_path text)
RETURNS docsync.parse_result LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  parser name := docsync.ensure_parser(definer);
  made_now text;
  before record;
  after record;
  r docsync.parse_result;
  stmt text;
  parsed boolean := false;
  state text;
  msg text;
  det text;
  hnt text;
BEGIN
  IF parser IS NULL THEN
    -- the definer holds the installing role's rights: parsing as it gives the text nothing
    RETURN docsync.parse_here(what, sql, search_path, caller_path);
  END IF;
  before := docsync.parse_leftovers();
  -- a session's advisory lock is held a number of times no catalog shows, and a cursor's position
  -- is not shown at all: code the parse runs could read or move a cursor (FETCH checks no
  -- privilege) or release a lock, and nothing would tell. A statement prepared in the statement
  -- running now has the prepare_time one the parse prepares would have: replaced in the parse by
  -- one of the same text parsed under other settings, it would look unchanged. So none may be
  -- open, held or prepared here.
  made_now := (SELECT p.name FROM pg_prepared_statements p WHERE p.prepare_time >= statement_timestamp() LIMIT 1);
  IF cardinality(before.locks) > 0 OR cardinality(before.cursors) > 0 OR made_now IS NOT NULL THEN
    RAISE EXCEPTION 'docsync parses no definition of % in a session that %', definer,
                    CASE WHEN cardinality(before.cursors) > 0
                         THEN format('has an open cursor (%s)', (SELECT left(c.name || ': ' || c.statement, 200) FROM pg_cursors c
                                                                   WHERE c.name <> '' LIMIT 1))
                         WHEN made_now IS NOT NULL
                         THEN format('prepared statement %s in the statement running now', quote_ident(made_now))
                         ELSE 'holds an advisory lock' END
      USING ERRCODE = 'object_in_use',
            DETAIL = 'Code that parse analysis runs (a type''s input function, a domain''s CHECK) runs in this session, with the definer''s rights: it could read or move a cursor, release or take a lock, or replace a statement prepared in this statement, unseen.',
            HINT = 'Close the session''s cursors (psql: \unset FETCH_COUNT), release its advisory locks (pg_advisory_unlock_all()) and PREPARE in a statement of its own first, or read the definitions from another session.';
  END IF;
  -- the parse runs in a subtransaction that is always rolled back, which takes back whatever it did
  -- (a setting, an object, a row) but a prepared statement or a session's advisory lock; its row
  -- in docsync.parsing, which no other role may write, tells the writers a parse is running
  BEGIN
    INSERT INTO docsync.parsing (pid, definer) VALUES (pg_backend_pid(), definer);
    EXECUTE format('SELECT * FROM docsync_parse.%I($1, $2, $3, $4)', parser) INTO r USING what, sql, search_path, caller_path;
    parsed := true;
    RAISE SQLSTATE 'DSY02';
  EXCEPTION
    WHEN SQLSTATE 'DSY02' THEN
      -- (raised by code the parse ran, it is an error of the parse)
      IF NOT parsed THEN
        state := 'P0001';
        msg := format('code that parse analysis ran raised docsync''s own SQLSTATE DSY02 while a text of %s was parsed', definer);
      END IF;
    WHEN query_canceled OR assert_failure THEN
      -- (which OTHERS leaves out: code the parse runs can raise them as well as a cancel can)
      GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL,
                              hnt = PG_EXCEPTION_HINT;
    WHEN OTHERS THEN
      -- a parse that fails is looked at too, then its error raised again
      GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL,
                              hnt = PG_EXCEPTION_HINT;
  END;
  after := docsync.parse_leftovers();
  -- (a cursor the parse opened was closed by its rollback, and none was open before it)
  IF after.prepared IS DISTINCT FROM before.prepared OR after.locks IS DISTINCT FROM before.locks THEN
    -- a statement made, or replaced (dropped and prepared again, under any text), goes: the
    -- session's next EXECUTE of that name fails rather than run what the parse prepared
    FOR stmt IN SELECT p.name FROM pg_prepared_statements p
                 WHERE (p.name, p.statement, p.prepare_time, p.parameter_types, p.from_sql)::text <> ALL (before.prepared) LOOP
      EXECUTE format('DEALLOCATE %I', stmt);
    END LOOP;
    PERFORM pg_advisory_unlock_all();
    RAISE EXCEPTION 'parsing a definition of % left %', definer,
                    CASE WHEN after.prepared IS DISTINCT FROM before.prepared
                         THEN 'the session''s prepared statements changed' ELSE 'an advisory lock behind' END
      USING ERRCODE = 'insufficient_privilege',
            DETAIL = format('The text is parsed as %s, which holds its definer''s rights; code that parse analysis ran (a type''s input function or a domain''s CHECK reached by a literal) changed the session. What it prepared or replaced is deallocated, and its locks are released; a statement it removed is gone.', quote_ident(parser)),
            HINT = 'Make the functions a domain''s CHECK or a type''s input calls only compute their result.';
  END IF;
  -- A cancel or a failed assertion ends the statement whatever catches errors above (a definitions
  -- read, docsync.queries): raised by the definer's code it would fail every definer's read. It is
  -- an error of this parse unless the statement timeout has passed, which only a real one reaches.
  IF state IN ('57014', 'P0004') AND NOT (state = '57014' AND current_setting('statement_timeout')::interval > '0'
                                          AND clock_timestamp() - statement_timestamp() >= current_setting('statement_timeout')::interval) THEN
    msg := format('parsing a definition of %s raised SQLSTATE %s: %s', definer, state, msg);
    state := 'P0001';
  END IF;
  IF state IS NOT NULL THEN
    RAISE EXCEPTION USING ERRCODE = state, MESSAGE = msg, DETAIL = coalesce(det, ''), HINT = coalesce(hnt, '');
  END IF;
  RETURN r;
END
$$;

-- The analysis of sql (what: 'select') or its batched form ('batch') as its definer (null: the API
-- caller, docsync.api_caller): as the current user when that is the definer or the definer holds
-- its rights, otherwise as the definer's parser role, which only the installing role's functions
-- can reach.
CREATE FUNCTION docsync.parse_as(definer regrole, what text, sql text, search_path text, caller_path text)
RETURNS docsync.parse_result LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  definer := coalesce(definer, docsync.api_caller());
  IF definer = current_user::regrole THEN
    RETURN docsync.parse_here(what, sql, search_path, caller_path);
  END IF;
  RETURN docsync._parse_as_parser(definer, what, sql, search_path, caller_path);
END
$$;
