-- sql/portable/20_definer.sql: portable forms of the privilege boundary (plugin/definer.c,
-- plugin/sqlapi.c): query analysis and the definer checks, by parse analysis and
-- the catalog instead of becoming the definer, and the API functions, which run as their caller and
-- hand the writing to a SECURITY DEFINER writer that believes nothing the caller claims.

-- portable: function docsync.analyze_query/3
-- The lexical tokens of a text as the server's scanner reads them, whitespace and comments left
-- out, each with its kind and its position and length in characters: ';', 'param' ($n), 'string'
-- (a quoted string), 'estring' (one whose backslashes escape: E'', or any when
-- standard_conforming_strings is off), 'dollar' (a dollar-quoted string), 'ident' (a quoted
-- identifier), 'uident' (a U&"…" one) or 'word' (anything else: an identifier, keyword, number or
-- operator, up to the next character that starts something else; the prefix E, B, X or U& of a
-- string or identifier ends the word before it). A character that continues an identifier (a
-- letter, digit, '_', '$' or any non-ASCII character) before a quote or '$' makes that quote no
-- E'' string and that '$' no dollar quote or param, as in the server. A -- comment ends at a line
-- feed or a carriage return; a string followed by whitespace holding a newline (-- comments
-- allowed) and a quote goes on after that quote, in the same mode (SQL's string continuation).
-- Raises on an unterminated quote.
CREATE FUNCTION docsync.sql_tokens(sql text) RETURNS TABLE (kind text, pos integer, len integer)
LANGUAGE plpgsql STABLE STRICT SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  n integer := length(sql);
  i integer := 1;
  j integer;
  c text;
  depth integer;
  esc boolean;
  prefix text;
  tag text;
  std boolean := current_setting('standard_conforming_strings') = 'on';
BEGIN
  WHILE i <= n LOOP
    c := substr(sql, i, 1);
    IF c ~ '\s' THEN
      i := i + 1;
      CONTINUE;
    END IF;
    IF substr(sql, i, 2) = '--' THEN
      i := i + length(substring(substr(sql, i) FROM '^--[^\n\r]*'));
      CONTINUE;
    END IF;
    IF substr(sql, i, 2) = '/*' THEN
      depth := 1;
      i := i + 2;
      WHILE i <= n AND depth > 0 LOOP
        IF substr(sql, i, 2) = '/*' THEN depth := depth + 1; i := i + 2;
        ELSIF substr(sql, i, 2) = '*/' THEN depth := depth - 1; i := i + 2;
        ELSE i := i + 1; END IF;
      END LOOP;
      CONTINUE;
    END IF;
    pos := i;
    IF c = ';' THEN
      kind := ';';
      i := i + 1;
    ELSIF c = '''' THEN
      -- the prefix of the quote, when it starts a token: E, B, X, N or U&
      prefix := CASE WHEN i > 2 AND lower(substr(sql, i - 2, 2)) = 'u&'
                          AND (i = 3 OR NOT docsync.ident_char(substr(sql, i - 3, 1))) THEN 'u&'
                     WHEN i > 1 AND (i = 2 OR NOT docsync.ident_char(substr(sql, i - 2, 1)))
                     THEN lower(substr(sql, i - 1, 1)) END;
      -- bit strings and Unicode-escaped strings never read a backslash as an escape
      esc := prefix = 'e' OR (NOT std AND coalesce(prefix NOT IN ('b', 'x', 'u&'), true));
      kind := CASE WHEN esc THEN 'estring' ELSE 'string' END;
      i := i + 1;
      LOOP
        IF i > n THEN
          RAISE EXCEPTION 'unterminated quoted string in query' USING ERRCODE = 'syntax_error';
        END IF;
        c := substr(sql, i, 1);
        IF esc AND c = '\' THEN
          i := i + 2;
        ELSIF c = '''' THEN
          IF substr(sql, i + 1, 1) = '''' THEN
            i := i + 2;
          ELSE
            i := i + 1;
            j := length(substring(substr(sql, i) FROM '^(?:[ \t\f]|--[^\n\r]*)*[\n\r](?:[ \t\n\r\f]|--[^\n\r]*[\n\r])*'''));
            EXIT WHEN j IS NULL;
            i := i + j;
          END IF;
        ELSE
          i := i + 1;
        END IF;
      END LOOP;
    ELSIF c = '"' THEN
      kind := CASE WHEN i > 2 AND lower(substr(sql, i - 2, 2)) = 'u&'
                        AND (i = 3 OR NOT docsync.ident_char(substr(sql, i - 3, 1))) THEN 'uident' ELSE 'ident' END;
      i := i + 1;
      LOOP
        IF i > n THEN
          RAISE EXCEPTION 'unterminated quoted identifier in query' USING ERRCODE = 'syntax_error';
        END IF;
        IF substr(sql, i, 1) = '"' THEN
          IF substr(sql, i + 1, 1) = '"' THEN i := i + 2; ELSE i := i + 1; EXIT; END IF;
        ELSE
          i := i + 1;
        END IF;
      END LOOP;
    ELSIF c = '$' AND (i = 1 OR NOT docsync.ident_char(substr(sql, i - 1, 1))) THEN
      tag := substring(substr(sql, i) FROM '^\$(?:(?:[A-Za-z_]|[^\x01-\x7f])(?:[A-Za-z_0-9]|[^\x01-\x7f])*)?\$');
      IF tag IS NOT NULL THEN
        kind := 'dollar';
        j := strpos(substr(sql, i + length(tag)), tag);
        IF j = 0 THEN
          RAISE EXCEPTION 'unterminated dollar-quoted string in query' USING ERRCODE = 'syntax_error';
        END IF;
        i := i + length(tag) + j - 1 + length(tag);
      ELSE
        j := coalesce(length(substring(substr(sql, i + 1) FROM '^[0-9]+')), 0);
        kind := CASE WHEN j > 0 THEN 'param' ELSE 'word' END;
        i := i + 1 + j;
      END IF;
    ELSE
      kind := 'word';
      j := coalesce(length(substring(substr(sql, i) FROM '^[^\s;''"$/-]+')), 0);
      i := i + greatest(j, 1);
    END IF;
    len := i - pos;
    RETURN NEXT;
  END LOOP;
END
$$;

-- The text of sql when it is exactly one statement (a final ';' and comments allowed), else raises.
-- The server's lexical rules (docsync.sql_tokens) find the final ';'; then the server's own parser
-- proves the text one statement before anything pastes it into a command that runs every statement
-- it holds (docsync.prove_one_statement).
CREATE FUNCTION docsync.one_statement(sql text) RETURNS text
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  t record;
  semi integer;
BEGIN
  IF sql IS NULL THEN
    RAISE EXCEPTION 'query text must not be null' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  FOR t IN SELECT * FROM docsync.sql_tokens(sql) LOOP
    IF semi IS NOT NULL THEN
      RAISE EXCEPTION 'query must be exactly one statement'
        USING ERRCODE = 'invalid_parameter_value',
              DETAIL = 'A doc or keys query is one SELECT; text follows its '';''.',
              HINT = 'Remove everything after the first statement.';
    END IF;
    IF t.kind = ';' THEN
      semi := t.pos;
    END IF;
  END LOOP;
  sql := rtrim(CASE WHEN semi IS NULL THEN sql ELSE substr(sql, 1, semi - 1) END);
  PERFORM docsync.prove_one_statement(sql);
  RETURN sql;
END
$$;

-- Whether c continues an identifier in the server's scanner (ident_cont: [A-Za-z0-9_$] and every
-- byte of a non-ASCII character).
CREATE FUNCTION docsync.ident_char(c text) RETURNS boolean
LANGUAGE sql IMMUTABLE STRICT SET search_path = pg_catalog, pg_temp AS $$
  SELECT c ~ '^[A-Za-z0-9_$]$' OR ascii(c) >= 128
$$;

-- Raises unless the server's parser reads 'PREPARE … AS ' || sql as one statement. A cursor opened
-- on a dynamic command is refused for a plan of several statements ("multi-query") and, for one
-- PREPARE, because PREPARE returns no rows; both before anything is planned or run, so the text is
-- parsed (raw and analysed, never executed) and the refusal says how many statements it held. The
-- refusal of a known single PREPARE, raised first, is the reference (the message may be translated).
CREATE FUNCTION docsync.prove_one_statement(sql text) RETURNS void
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  c refcursor;
  one text;
  got text;
  ctx text;
  one_ctx text;
BEGIN
  BEGIN
    OPEN c FOR EXECUTE 'PREPARE docsync_one AS SELECT 1';
    CLOSE c;
    RAISE EXCEPTION 'docsync.prove_one_statement: a cursor opened on a PREPARE' USING ERRCODE = 'internal_error';
  EXCEPTION WHEN invalid_cursor_definition THEN
    GET STACKED DIAGNOSTICS one = MESSAGE_TEXT, one_ctx = PG_EXCEPTION_CONTEXT;
  END;
  BEGIN
    OPEN c FOR EXECUTE 'PREPARE docsync_one AS ' || sql || E'\n';
    CLOSE c;
    got := NULL;
  EXCEPTION WHEN invalid_cursor_definition THEN
    -- the refusal of the OPEN itself has the context of the reference's (but for its line); code
    -- that the analysis of a second statement ran (a domain's CHECK) and that raised it has its own
    GET STACKED DIAGNOSTICS got = MESSAGE_TEXT, ctx = PG_EXCEPTION_CONTEXT;
    IF regexp_replace(ctx, 'line \d+', 'line', 'g') IS DISTINCT FROM regexp_replace(one_ctx, 'line \d+', 'line', 'g') THEN
      got := NULL;
    END IF;
  END;
  IF got IS DISTINCT FROM one THEN
    RAISE EXCEPTION 'query must be exactly one statement'
      USING ERRCODE = 'invalid_parameter_value',
            DETAIL = 'The server reads more than one statement in the text (a quoted string or identifier may end where it seems not to).',
            HINT = 'Write one SELECT; quote identifiers that hold non-ASCII characters next to a quote.';
  END IF;
END
$$;

-- Runs one statement that parses a definition's text under that text's search_path, and only it:
-- the statement is built before, and the caller's own statements run after, under pg_catalog's
-- path, so that no function or operator of a schema the definer controls resolves in them.
CREATE FUNCTION docsync.parse_under(search_path text, stmt text) RETURNS void
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  IF search_path IS NOT NULL THEN
    PERFORM pg_catalog.set_config('search_path', search_path, true);
  END IF;
  EXECUTE stmt;
  PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
END
$$;

-- The parameter types of one SELECT as the current user, under search_path, from PREPARE (parsed
-- and analysed, never planned or run), and its text as docsync.one_statement returns it; raises
-- for a text that is not one SELECT.
CREATE FUNCTION docsync.parse_params(sql text, search_path text, OUT param_types regtype[], OUT body text)
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  head text;
BEGIN
  body := docsync.one_statement(sql);
  head := lower(substring(regexp_replace(body, '^(\s|--[^\n]*\n|/\*.*?\*/|\()*', '', 's') FROM '^[A-Za-z]+'));
  IF head IS NULL OR head NOT IN ('select', 'with', 'values', 'table') THEN
    RAISE EXCEPTION 'query must be a SELECT'
      USING ERRCODE = 'wrong_object_type', DETAIL = 'A doc or keys query only reads.',
            HINT = 'Write one SELECT statement.';
  END IF;
  IF EXISTS (SELECT FROM pg_prepared_statements WHERE name = 'docsync_analysis') THEN
    DEALLOCATE docsync_analysis;
  END IF;
  -- the text is parsed under its search_path; nothing else is (docsync.parse_under)
  PERFORM docsync.parse_under(search_path, 'PREPARE docsync_analysis AS ' || body || E'\n');
  SELECT p.parameter_types INTO param_types FROM pg_prepared_statements p WHERE p.name = 'docsync_analysis';
  DEALLOCATE docsync_analysis;
END
$$;

-- The analysis of one SELECT as the current user, under search_path, never planned or run: PREPARE
-- gives the parameter types; a CREATE TEMP TABLE … AS … WITH NO DATA inside a temporary function
-- (whose parameters stand for $1, $2, …) gives the result columns' types and collations; a temporary
-- SQL function with a BEGIN ATOMIC body of the text records in pg_depend every relation, column,
-- function, operator, type and collation it uses, and its stored query tree shows whether it locks
-- rows or modifies data (tree: that tree). Views are followed to the relations they read. Every
-- temporary object is dropped before it returns.
CREATE FUNCTION docsync.parse_select(sql text, search_path text,
  OUT param_types regtype[], OUT result_types regtype[], OUT result_collations regcollation[],
  OUT direct oid[], OUT columns text[], OUT relations oid[], OUT functions oid[], OUT types oid[],
  OUT collations oid[], OUT operators oid[], OUT tree text)
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  body text;
  args text;
  nulls text;
  fn oid;
BEGIN
  SELECT p.param_types, p.body INTO param_types, body FROM docsync.parse_params(sql, search_path) p;
  SELECT coalesce(string_agg(format('%I.%I', n.nspname, t.typname), ', ' ORDER BY u.o), ''),
         coalesce(string_agg(format('NULL::%I.%I', n.nspname, t.typname), ', ' ORDER BY u.o), '')
    INTO args, nulls
    FROM unnest(param_types) WITH ORDINALITY u(p, o) JOIN pg_type t ON t.oid = u.p JOIN pg_namespace n ON n.oid = t.typnamespace;

  -- result columns
  IF to_regclass('pg_temp.docsync_analysis_result') IS NOT NULL THEN
    DROP TABLE pg_temp.docsync_analysis_result;
  END IF;
  EXECUTE format('CREATE FUNCTION pg_temp.docsync_analysis_probe(%s) RETURNS void LANGUAGE plpgsql AS %L',
                 args, 'BEGIN CREATE TEMP TABLE docsync_analysis_result AS ' || body || E'\n WITH NO DATA; END');
  BEGIN
    PERFORM docsync.parse_under(search_path, format('SELECT pg_temp.docsync_analysis_probe(%s)', nulls));
  EXCEPTION WHEN duplicate_column THEN
    RAISE EXCEPTION 'query returns two columns of the same name'
      USING ERRCODE = 'duplicate_column',
            DETAIL = 'The portable install reads a query''s result types from a table made of its columns.',
            HINT = 'Give each result column its own name (… AS name).';
  END;
  SELECT array_agg(a.atttypid::regtype ORDER BY a.attnum), array_agg(a.attcollation::regcollation ORDER BY a.attnum)
    INTO result_types, result_collations
    FROM pg_attribute a WHERE a.attrelid = 'pg_temp.docsync_analysis_result'::regclass AND a.attnum > 0;
  DROP TABLE pg_temp.docsync_analysis_result;
  EXECUTE format('DROP FUNCTION pg_temp.docsync_analysis_probe(%s)', args);

  -- dependencies, and the read-only rules
  PERFORM docsync.parse_under(search_path,
    format('CREATE FUNCTION pg_temp.docsync_analysis_deps(%s) RETURNS SETOF record LANGUAGE sql BEGIN ATOMIC %s%s; END',
           args, body, E'\n'));
  fn := to_regprocedure(format('pg_temp.docsync_analysis_deps(%s)', args));
  tree := (SELECT p.prosqlbody::text FROM pg_proc p WHERE p.oid = fn);
  IF tree ~ ':hasForUpdate true' THEN
    RAISE EXCEPTION 'query must not lock rows (FOR UPDATE/SHARE)'
      USING ERRCODE = 'feature_not_supported', HINT = 'Remove the locking clause.';
  END IF;
  IF tree ~ ':hasModifyingCTE true' OR tree ~ ':commandType [234]' THEN
    RAISE EXCEPTION 'query must only read: it contains a data-modifying statement'
      USING ERRCODE = 'wrong_object_type', HINT = 'Remove the INSERT, UPDATE or DELETE.';
  END IF;
  WITH RECURSIVE d AS (
    SELECT x.refclassid, x.refobjid, x.refobjsubid FROM pg_depend x
     WHERE x.classid = 'pg_proc'::regclass AND x.objid = fn
  ), v(rel) AS (
    SELECT DISTINCT d.refobjid FROM d WHERE d.refclassid = 'pg_class'::regclass
    UNION
    SELECT x.refobjid FROM v
      JOIN pg_rewrite r ON r.ev_class = v.rel
      JOIN pg_depend x ON x.classid = 'pg_rewrite'::regclass AND x.objid = r.oid AND x.refclassid = 'pg_class'::regclass
     WHERE x.refobjid <> v.rel
  ), vd AS (
    SELECT x.refclassid, x.refobjid FROM v
      JOIN pg_rewrite r ON r.ev_class = v.rel
      JOIN pg_depend x ON x.classid = 'pg_rewrite'::regclass AND x.objid = r.oid
  )
  SELECT ARRAY(SELECT DISTINCT d.refobjid FROM d WHERE d.refclassid = 'pg_class'::regclass ORDER BY 1),
         ARRAY(SELECT DISTINCT d.refobjid || ':' || d.refobjsubid FROM d
                WHERE d.refclassid = 'pg_class'::regclass AND d.refobjsubid > 0 ORDER BY 1),
         ARRAY(SELECT DISTINCT v.rel FROM v ORDER BY 1),
         ARRAY(SELECT DISTINCT o FROM (SELECT d.refobjid AS o FROM d WHERE d.refclassid = 'pg_proc'::regclass
                                       UNION SELECT vd.refobjid FROM vd WHERE vd.refclassid = 'pg_proc'::regclass) f ORDER BY 1),
         ARRAY(SELECT DISTINCT o FROM (SELECT d.refobjid AS o FROM d WHERE d.refclassid = 'pg_type'::regclass
                                       UNION SELECT vd.refobjid FROM vd WHERE vd.refclassid = 'pg_type'::regclass) f
                WHERE o <> 'record'::regtype ORDER BY 1),
         ARRAY(SELECT DISTINCT o FROM (SELECT d.refobjid AS o FROM d WHERE d.refclassid = 'pg_collation'::regclass
                                       UNION SELECT vd.refobjid FROM vd WHERE vd.refclassid = 'pg_collation'::regclass) f ORDER BY 1),
         ARRAY(SELECT DISTINCT o FROM (SELECT d.refobjid AS o FROM d WHERE d.refclassid = 'pg_operator'::regclass
                                       UNION SELECT vd.refobjid FROM vd WHERE vd.refclassid = 'pg_operator'::regclass) f ORDER BY 1)
    INTO direct, columns, relations, functions, types, collations, operators;
  EXECUTE format('DROP FUNCTION pg_temp.docsync_analysis_deps(%s)', args);
  -- a temporary object resolves in no other session (the worker's)
  PERFORM docsync.refuse_temporary(relations, functions, types);
END
$$;

CREATE FUNCTION docsync.refuse_temporary(relations oid[], functions oid[], types oid[]) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  what text;
BEGIN
  SELECT x INTO what FROM (
    SELECT format('relation %s', c.oid::regclass) AS x FROM pg_class c
     WHERE c.oid = ANY (relations) AND c.relpersistence = 't'
    UNION ALL
    SELECT format('function %s', p.oid::regprocedure) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
     WHERE p.oid = ANY (functions) AND n.nspname ~ '^pg_temp_'
    UNION ALL
    SELECT format('type %s', t.oid::regtype) FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
     WHERE t.oid = ANY (types) AND n.nspname ~ '^pg_temp_') s LIMIT 1;
  IF what IS NOT NULL THEN
    RAISE EXCEPTION 'query uses temporary %', what
      USING ERRCODE = 'invalid_parameter_value',
            DETAIL = 'The worker runs a definition in its own sessions, where this session''s temporary objects do not exist.',
            HINT = 'Use permanent objects.';
  END IF;
END
$$;

CREATE FUNCTION docsync.analyze_query(sql text, search_path text DEFAULT NULL, definer regrole DEFAULT NULL,
  OUT param_types regtype[], OUT result_types regtype[], OUT relations regclass[],
  OUT checked regclass[], OUT param_collations regcollation[], OUT result_collations regcollation[])
RETURNS record LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  p record;
BEGIN
  -- no SET clause: a null search_path means the caller's
  p := docsync.parse_as(definer, 'select', sql, coalesce(search_path, pg_catalog.current_setting('search_path')), NULL);
  param_types := p.param_types;
  result_types := p.result_types;
  result_collations := p.result_collations;
  relations := p.relations::regclass[];
  checked := docsync.checked_relations(p.direct)::regclass[];
  -- the collation a parameter is compared under is not visible from SQL: none is reported
  param_collations := array_fill(0::oid, ARRAY[cardinality(p.param_types)])::regcollation[];
END
$$;
COMMENT ON FUNCTION docsync.analyze_query(text, text, regrole) IS
  'parameter types, result column types, tables read, relations the caller needs SELECT on, the nondeterministic collation each parameter is compared under (or 0) and the collation of each result column, of a SELECT, without running it';

-- The relations a reader needs SELECT on: those the query names, and through a security_invoker
-- view those it reads (an ordinary view reads with its owner's rights).
CREATE FUNCTION docsync.checked_relations(direct oid[]) RETURNS oid[]
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
  WITH RECURSIVE v(rel) AS (
    SELECT unnest(direct)
    UNION
    SELECT x.refobjid FROM v
      JOIN pg_class c ON c.oid = v.rel AND c.relkind = 'v'
       AND coalesce(c.reloptions::text[] && ARRAY['security_invoker=true', 'security_invoker=on', 'security_invoker=1'], false)
      JOIN pg_rewrite r ON r.ev_class = v.rel
      JOIN pg_depend x ON x.classid = 'pg_rewrite'::regclass AND x.objid = r.oid AND x.refclassid = 'pg_class'::regclass
     WHERE x.refobjid <> v.rel)
  SELECT coalesce(array_agg(DISTINCT rel ORDER BY rel), '{}') FROM v
$$;

-- portable: function docsync.query_depends/3
CREATE FUNCTION docsync.query_depends(sql text, search_path text, definer regrole DEFAULT NULL,
                                      OUT relations oid[], OUT functions oid[],
                                      OUT types oid[], OUT collations oid[], OUT operators oid[])
RETURNS record LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  p record;
BEGIN
  p := docsync.parse_as(definer, 'select', sql, coalesce(search_path, pg_catalog.current_setting('search_path')), NULL);
  relations := p.relations;
  functions := p.functions;
  types := p.types || p.param_types::oid[];
  collations := p.collations;
  operators := p.operators;
END
$$;
COMMENT ON FUNCTION docsync.query_depends(text, text, regrole) IS
  'every relation (views and partitioned tables included), function, and expression type and collation a SELECT uses, without running it';

-- portable: function docsync.check_definer/3
-- Checked in the catalog for the definer, whoever asks: USAGE on the schemas of what the query uses,
-- SELECT on each column it reads (on some column, for a relation it reads no column of), EXECUTE
-- on each function, no row-level security applying to it. Asked by the definer itself (the API
-- functions ask as their caller), the server's own check follows: EXPLAIN of the query's generic
-- plan, which checks every privilege as the executor would, without running it.
CREATE FUNCTION docsync.check_definer(sql text, search_path text, definer regrole)
RETURNS void LANGUAGE sql VOLATILE AS $$
  -- no SET clause: a null search_path means the caller's
  SELECT docsync.check_definer_in(sql, coalesce(search_path, pg_catalog.current_setting('search_path')), definer)
$$;
CREATE FUNCTION docsync.check_definer_in(sql text, search_path text, definer regrole)
RETURNS void LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  p record;
  bad text;
  nulls text;
BEGIN
  IF sql IS NULL OR definer IS NULL THEN
    RAISE EXCEPTION 'docsync.check_definer needs a query and a definer' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  p := docsync.parse_as(definer, 'select', sql, search_path, NULL);
  SELECT format('permission denied for schema %s', n.nspname) INTO bad
    FROM pg_namespace n
   WHERE n.oid IN (SELECT c.relnamespace FROM pg_class c WHERE c.oid = ANY (p.direct)
                   UNION SELECT f.pronamespace FROM pg_proc f WHERE f.oid = ANY (p.functions)
                   UNION SELECT t.typnamespace FROM pg_type t WHERE t.oid = ANY (p.types || p.param_types::oid[])
                   UNION SELECT o.oprnamespace FROM pg_operator o WHERE o.oid = ANY (p.operators))
     AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname !~ '^pg_temp_'
     AND NOT has_schema_privilege(definer, n.oid, 'USAGE')
   LIMIT 1;
  IF bad IS NULL THEN
    SELECT format('permission denied for %s %s', CASE c.relkind WHEN 'v' THEN 'view' WHEN 'm' THEN 'materialized view'
                                                               WHEN 'S' THEN 'sequence' ELSE 'table' END, c.oid::regclass)
      INTO bad
      FROM pg_class c
     WHERE c.oid = ANY (docsync.checked_relations(p.direct))
       AND CASE WHEN EXISTS (SELECT FROM unnest(p.columns) col WHERE split_part(col, ':', 1)::oid = c.oid)
                THEN EXISTS (SELECT FROM unnest(p.columns) col
                              WHERE split_part(col, ':', 1)::oid = c.oid
                                AND NOT has_column_privilege(definer, c.oid, split_part(col, ':', 2)::smallint, 'SELECT'))
                ELSE NOT has_any_column_privilege(definer, c.oid, 'SELECT') END
     LIMIT 1;
  END IF;
  IF bad IS NULL THEN
    SELECT format('permission denied for function %s', f.proname) INTO bad
      FROM pg_proc f WHERE f.oid = ANY (p.functions) AND NOT has_function_privilege(definer, f.oid, 'EXECUTE') LIMIT 1;
  END IF;
  IF bad IS NOT NULL THEN
    RAISE EXCEPTION '%', bad USING ERRCODE = 'insufficient_privilege';
  END IF;
  SELECT c.oid::regclass::text INTO bad
    FROM pg_class c JOIN pg_roles r ON r.oid = definer
   WHERE c.oid = ANY (docsync.checked_relations(p.direct)) AND c.relrowsecurity
     AND NOT r.rolsuper AND NOT r.rolbypassrls
     AND (c.relforcerowsecurity OR NOT pg_has_role(definer, c.relowner, 'USAGE'))
   LIMIT 1;
  IF bad IS NOT NULL THEN
    RAISE EXCEPTION 'row-level security of table % applies to role %', bad, definer
      USING ERRCODE = 'insufficient_privilege',
            DETAIL = 'A doc is one value shared by every subscriber of its channel, so it cannot honour per-row policies.',
            HINT = 'Read the rows every subscriber may see through a security_barrier view owned by a role the policies do not apply to, and grant SELECT on the view.';
  END IF;
  IF definer::oid = current_user::regrole::oid THEN
    -- the server's own check, as the definer: EXPLAIN plans and starts the executor, never runs it
    SELECT coalesce(string_agg('NULL::' || t::text, ', ' ORDER BY o), '') INTO nulls
      FROM unnest(p.param_types) WITH ORDINALITY u(t, o);
    IF EXISTS (SELECT FROM pg_prepared_statements WHERE name = 'docsync_check') THEN
      DEALLOCATE docsync_check;
    END IF;
    PERFORM pg_catalog.set_config('plan_cache_mode', 'force_generic_plan', true);
    IF search_path IS NOT NULL THEN
      PERFORM pg_catalog.set_config('search_path', search_path, true);
    END IF;
    EXECUTE 'PREPARE docsync_check AS ' || docsync.one_statement(sql) || E'\n';
    BEGIN
      EXECUTE format('EXPLAIN (VERBOSE, FORMAT JSON) EXECUTE docsync_check%s',
                     CASE WHEN nulls = '' THEN '' ELSE '(' || nulls || ')' END);
    EXCEPTION WHEN OTHERS THEN
      DEALLOCATE docsync_check;
      RAISE;
    END;
    DEALLOCATE docsync_check;
  END IF;
END
$$;
COMMENT ON FUNCTION docsync.check_definer(text, text, regrole) IS
  'raises unless the role may run the query: one SELECT, SELECT on what it reads, EXECUTE on what it calls, no row-level security applying to it';

-- portable: function docsync.check_definer/4
-- computed false (a watch's columns, sent from the stream): the same check, which in this form
-- judges row-level security for the definer only.
CREATE FUNCTION docsync.check_definer(sql text, search_path text, definer regrole, computed boolean)
RETURNS void LANGUAGE sql VOLATILE AS $$
  SELECT docsync.check_definer(sql, search_path, definer)
$$;
COMMENT ON FUNCTION docsync.check_definer(text, text, regrole, boolean) IS
  'check_definer; computed false for a query never computed as the definer''s reader role (a watch''s columns)';
