-- sql/portable/21_batch.sql: the portable form of plugin/batch.c, the batched form of a doc or keys
-- query (one statement that computes it for arrays of params), built from the same lexical tokens
-- the portable install reads a definer's text with (docsync.sql_tokens) and the same analysis
-- (docsync.parse_params, docsync.parse_select), into the very statement the extension builds.

-- portable: function docsync.batch_sql/3
-- The body of a U&"…" identifier (its doubled quotes already single) with its escapes decoded: the
-- escape character followed by four hex digits, or by '+' and six, or doubled for itself. Only ASCII
-- matters to the alias check, so any other code point becomes U+0001, which no alias holds. NULL
-- when an escape is malformed (the server refuses the text then anyway).
CREATE FUNCTION docsync.unicode_identifier(body text, escape text) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  out text := '';
  i integer := 1;
  hex text;
  digits integer;
  code integer;
BEGIN
  WHILE i <= length(body) LOOP
    IF substr(body, i, 1) <> escape THEN
      out := out || substr(body, i, 1);
      i := i + 1;
    ELSIF substr(body, i + 1, 1) = escape THEN
      out := out || escape;
      i := i + 2;
    ELSE
      digits := CASE WHEN substr(body, i + 1, 1) = '+' THEN 6 ELSE 4 END;
      hex := CASE WHEN digits = 6 THEN substr(body, i + 2, 6) ELSE substr(body, i + 1, 4) END;
      IF hex !~ ('^[0-9A-Fa-f]{' || digits || '}$') THEN
        RETURN NULL;
      END IF;
      i := i + CASE WHEN digits = 6 THEN 8 ELSE 5 END;
      code := ('x' || lpad(hex, 8, '0'))::bit(32)::integer;
      out := out || CASE WHEN code > 0 AND code < 128 THEN chr(code) ELSE chr(1) END;
    END IF;
  END LOOP;
  RETURN out;
END
$$;

-- The first character of the string literal a UESCAPE names: a plain or dollar-quoted string's
-- first character, or an E'' string's first, its backslash escape decoded.
CREATE FUNCTION docsync.literal_first_char(sql text, kind text, pos integer) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  s text;
  m text[];
BEGIN
  IF kind = 'dollar' THEN
    s := substr(sql, pos + length(substring(substr(sql, pos) FROM '^\$[^$]*\$')));
  ELSE
    s := substr(sql, pos + 1);
  END IF;
  IF kind <> 'estring' OR substr(s, 1, 1) <> '\' THEN
    RETURN substr(s, 1, 1);
  END IF;
  m := regexp_match(s, '^\\(?:([0-7]{1,3})|x([0-9A-Fa-f]{1,2})|u([0-9A-Fa-f]{4})|U([0-9A-Fa-f]{8})|(.))', 's');
  RETURN CASE WHEN m[1] IS NOT NULL
              THEN chr((SELECT sum(substr(m[1], g, 1)::integer * 8 ^ (length(m[1]) - g)) FROM generate_series(1, length(m[1])) g)::integer)
              WHEN coalesce(m[2], m[3], m[4]) IS NOT NULL THEN chr(('x' || lpad(coalesce(m[2], m[3], m[4]), 8, '0'))::bit(32)::integer)
              WHEN m[5] = 'b' THEN chr(8) WHEN m[5] = 'f' THEN chr(12) WHEN m[5] = 'n' THEN chr(10)
              WHEN m[5] = 'r' THEN chr(13) WHEN m[5] = 't' THEN chr(9)
              ELSE m[5] END;
END
$$;

-- The batched form of a doc or keys query (stmt), or why it has none (problem); raises for a text
-- that is no doc query, as the analysis does. The statement is plugin/batch.c's, character for
-- character:
--
--   SELECT A.ord, d.* FROM ROWS FROM (pg_catalog.unnest($1::s1.t1[]), …) WITH ORDINALITY AS A(p1, …, pn, ord)
--     LEFT JOIN LATERAL (SELECT 1 AS present, q.* FROM (
--   <the query, every $k replaced by (A.pk)>
--   ) AS q) AS d ON true
--    ORDER BY A.ord
--
-- A is docsync_batch, or docsync_batch_<i> when the text or any of its U&"…" identifiers (decoded)
-- spells that name in any case. A composite param (or a domain over one) is reached by subscript:
-- its item is pg_catalog.generate_subscripts($k::s.t[], 1) and $k becomes (($k::s.t[])[A.pk]).
-- The types are schema-qualified quoted names without modifiers; the query's text is the statement
-- the server reads, up to its ';'. Each $k is a 'param' token of docsync.sql_tokens, the scan that
-- also proved the text one statement, and the server's analysis checks that reading (below): a text
-- whose params the scan reads otherwise than the server has no batched form, and says so. A
-- problem's type is named as under the caller's search_path (caller_path), as the extension's is.
CREATE FUNCTION docsync.batch_form(sql text, search_path text, caller_path text, OUT stmt text, OUT problem text)
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  path text := coalesce(search_path, caller_path);
  types regtype[];
  n integer;
  k integer;
  ty record;
  base oid;
  arrays text[] := '{}';
  by_subscript boolean[] := '{}';
  kinds text[];
  poss integer[];
  lens integer[];
  semi integer;
  seen integer[] := '{}';
  idents text[] := '{}';
  escape text;
  decoded text;
  low text;
  alias text := 'docsync_batch';
  suffix integer := 0;
  body text := '';
  copied integer := 1;
  x integer;
  y integer;
  shown text;
  tree text;
  variant text := '';
  reread text;
  fn oid;
BEGIN
  IF sql IS NULL THEN
    RAISE EXCEPTION 'query text must not be null'
      USING ERRCODE = 'null_value_not_allowed', DETAIL = 'A docsync doc or keys query is one SELECT statement.',
            HINT = 'Pass the query text.';
  END IF;
  -- the analysis, which refuses what a doc query may not be, as the extension's; a pseudo-type
  -- param has no probe to make there, and is a problem instead
  BEGIN
    SELECT p.param_types, p.tree INTO types, tree FROM docsync.parse_select(sql, path) p;
  EXCEPTION WHEN OTHERS THEN
    BEGIN
      types := (docsync.parse_params(sql, path)).param_types;
    EXCEPTION WHEN OTHERS THEN
      types := NULL;
    END;
    IF NOT EXISTS (SELECT FROM unnest(types) u JOIN pg_type t ON t.oid = u WHERE t.typtype = 'p') THEN
      RAISE;
    END IF;
  END;
  n := coalesce(cardinality(types), 0);
  IF n = 0 THEN
    problem := 'it has no params: it computes one doc';
    RETURN;
  END IF;
  FOR k IN 1 .. n LOOP
    SELECT t.oid, t.typtype, t.typelem, t.typsubscript, t.typarray, t.typdelim, t.typname, s.nspname INTO ty
      FROM pg_type t JOIN pg_namespace s ON s.oid = t.typnamespace
     WHERE t.oid = CASE WHEN types[k] = 'unknown'::regtype THEN 'text'::regtype ELSE types[k] END;
    base := ty.oid;
    WHILE (SELECT t.typtype = 'd' FROM pg_type t WHERE t.oid = base) LOOP
      base := (SELECT t.typbasetype FROM pg_type t WHERE t.oid = base);
    END LOOP;
    PERFORM pg_catalog.set_config('search_path', caller_path, true);
    shown := pg_catalog.format_type(ty.oid, NULL);
    PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
    IF ty.typtype = 'p' THEN
      problem := format('param $%s is of pseudo-type %s', k, shown);
    ELSIF EXISTS (SELECT FROM pg_type t WHERE t.oid = base AND t.typelem <> 0
                     AND t.typsubscript = 'pg_catalog.array_subscript_handler'::regproc) THEN
      problem := format('param $%s is an array (%s): a batch of arrays is a two-dimensional array, which the batched form would flatten', k, shown);
    ELSIF ty.typarray = 0 THEN
      problem := format('param $%s is of type %s, which has no array type', k, shown);
    ELSIF ty.typdelim <> ',' THEN
      problem := format('param $%s is of type %s, whose array elements are separated by ''%s'', not '',''', k, shown, ty.typdelim);
    END IF;
    IF problem IS NOT NULL THEN
      RETURN;
    END IF;
    arrays[k] := format('%I.%I[]', ty.nspname, ty.typname);
    by_subscript[k] := ty.oid = 'record'::regtype OR ty.typtype = 'c'
                       OR (ty.typtype = 'd' AND (SELECT t.typtype = 'c' FROM pg_type t WHERE t.oid = base));
  END LOOP;

  SELECT array_agg(t.kind ORDER BY t.pos), array_agg(t.pos ORDER BY t.pos), array_agg(t.len ORDER BY t.pos)
    INTO kinds, poss, lens FROM docsync.sql_tokens(sql) t;
  semi := poss[array_position(kinds, ';')];
  -- the U&"…" identifiers, decoded with the escape a UESCAPE '…' after one names
  FOR x IN 1 .. coalesce(cardinality(kinds), 0) LOOP
    CONTINUE WHEN kinds[x] <> 'uident';
    escape := '\';
    IF lower(substr(sql, poss[x + 1], lens[x + 1])) = 'uescape' THEN
      y := x + 2;
      WHILE kinds[y] = 'word' LOOP
        y := y + 1;
      END LOOP;
      IF kinds[y] IN ('string', 'estring', 'dollar') THEN
        escape := docsync.literal_first_char(sql, kinds[y], poss[y]);
      END IF;
    END IF;
    decoded := docsync.unicode_identifier(replace(substr(sql, poss[x] + 1, lens[x] - 2), '""', '"'), escape);
    IF decoded IS NULL THEN
      problem := 'a U&"…" identifier of the query has an escape that cannot be read';
      RETURN;
    END IF;
    idents := idents || decoded;
  END LOOP;
  -- an alias no identifier spells, ASCII letters compared in any case
  low := translate(sql || chr(1) || array_to_string(idents, chr(1)), 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz');
  WHILE strpos(low, alias) > 0 LOOP
    suffix := suffix + 1;
    alias := 'docsync_batch_' || suffix;
  END LOOP;

  -- the statement up to its ';', each $k replaced
  FOR x IN 1 .. coalesce(cardinality(kinds), 0) LOOP
    CONTINUE WHEN kinds[x] <> 'param' OR poss[x] > coalesce(semi, poss[x]);
    IF substr(sql, poss[x] + 1, lens[x] - 1)::numeric NOT BETWEEN 1 AND n THEN
      problem := format('its text holds %s where the server reads %s params', substr(sql, poss[x], lens[x]), n);
      RETURN;
    END IF;
    k := substr(sql, poss[x] + 1, lens[x] - 1)::integer;
    seen := seen || k;
    body := body || substr(sql, copied, poss[x] - copied)
            || CASE WHEN by_subscript[k] THEN format('(($%s::%s)[%s.p%s])', k, arrays[k], alias, k)
                    ELSE format('(%s.p%s)', alias, k) END;
    variant := variant || substr(sql, copied, poss[x] - copied) || '$' || (n + k);
    copied := poss[x] + lens[x];
  END LOOP;
  IF EXISTS (SELECT FROM generate_series(1, n) g WHERE NOT g = ANY (seen)) THEN
    problem := format('the server reads %s params in its text, which are not all where its scan finds them', n);
    RETURN;
  END IF;
  body := body || CASE WHEN semi IS NULL THEN substr(sql, copied) ELSE substr(sql, copied, semi - copied) END;

  -- The server's reading of the params against the scan's: the text with each $k the scan found
  -- renumbered $(n+k) must analyse to the same query tree, its params renumbered back, with no
  -- $k of 1..n left. A $k the scan read in a string, an identifier or a dollar quote changes a
  -- constant or a name of that tree; one it missed stays $k. (A comment it misread changes
  -- nothing the query means.) A function takes 100 arguments at most: no more than 50 params.
  IF n > 50 THEN
    problem := format('it has %s params, more than the 50 the portable install checks its reading of', n);
    RETURN;
  END IF;
  variant := variant || CASE WHEN semi IS NULL THEN substr(sql, copied) ELSE substr(sql, copied, semi - copied) END;
  BEGIN
    variant := docsync.one_statement(variant);
    PERFORM docsync.parse_under(path,
      format('CREATE FUNCTION pg_temp.docsync_batch_check(%s) RETURNS SETOF record LANGUAGE sql BEGIN ATOMIC %s%s; END',
             (SELECT string_agg(format('%I.%I', s.nspname, t.typname), ', ' ORDER BY u.o)
                FROM unnest(types || types) WITH ORDINALITY u(p, o) JOIN pg_type t ON t.oid = u.p
                JOIN pg_namespace s ON s.oid = t.typnamespace),
             variant, E'\n'));
    SELECT p.oid, p.prosqlbody::text INTO fn, reread FROM pg_proc p
     WHERE p.proname = 'docsync_batch_check' AND p.pronamespace = pg_my_temp_schema();
    EXECUTE format('DROP FUNCTION %s', fn::regprocedure);
  EXCEPTION WHEN OTHERS THEN
    reread := NULL;
  END;
  -- (a query's own params are PARAM_EXTERN, kind 0; a sublink's, kind 2, are numbered apart)
  IF reread IS NULL OR reread ~ (':paramkind 0 :paramid (' || (SELECT string_agg(g::text, '|') FROM generate_series(1, n) g) || ') ') THEN
    problem := 'the server reads its params elsewhere than its scan finds them';
    RETURN;
  END IF;
  FOR k IN 1 .. n LOOP
    reread := replace(reread, ':paramkind 0 :paramid ' || (n + k) || ' ', ':paramkind 0 :paramid ' || k || ' ');
  END LOOP;
  IF regexp_replace(reread, ':(location|stmt_location|stmt_len) -?\d+', '', 'g')
     IS DISTINCT FROM regexp_replace(tree, ':(location|stmt_location|stmt_len) -?\d+', '', 'g') THEN
    problem := 'the server reads its params elsewhere than its scan finds them';
    RETURN;
  END IF;


  stmt := format('SELECT %s.ord, d.* FROM ROWS FROM (', alias)
          || (SELECT string_agg(CASE WHEN by_subscript[g] THEN format('pg_catalog.generate_subscripts($%s::%s, 1)', g, arrays[g])
                                     ELSE format('pg_catalog.unnest($%s::%s)', g, arrays[g]) END, ', ' ORDER BY g)
                FROM generate_series(1, n) g)
          || format(') WITH ORDINALITY AS %s(', alias)
          || (SELECT string_agg(format('p%s, ', g), '' ORDER BY g) FROM generate_series(1, n) g)
          || E'ord)\n  LEFT JOIN LATERAL (SELECT 1 AS present, q.* FROM (\n'
          || body
          || format(E'\n) AS q) AS d ON true\n ORDER BY %s.ord', alias);
  -- nothing pasted ends the statement: the server reads it as one
  PERFORM docsync.prove_one_statement(stmt);
END
$$;

-- No SET search_path: a problem names a type as under the caller's, as the extension's does. The
-- text is parsed as its definer (docsync.parse_as).
CREATE FUNCTION docsync.batch_sql(sql text, search_path text, definer regrole DEFAULT NULL)
RETURNS text LANGUAGE sql VOLATILE AS $$
  SELECT (docsync.parse_as(definer, 'batch', sql, search_path, pg_catalog.current_setting('search_path'))).stmt
$$;
COMMENT ON FUNCTION docsync.batch_sql(text, text, regrole) IS
  'the batched form of a doc or keys query: one statement running it for arrays of param sets, returning (ord, present, its columns…) in ord order; null when it has none (docsync.batch_problem says why)';

-- portable: function docsync.batch_problem/3
CREATE FUNCTION docsync.batch_problem(sql text, search_path text, definer regrole DEFAULT NULL)
RETURNS text LANGUAGE sql VOLATILE AS $$
  SELECT (docsync.parse_as(definer, 'batch', sql, search_path, pg_catalog.current_setting('search_path'))).problem
$$;
COMMENT ON FUNCTION docsync.batch_problem(text, text, regrole) IS
  'why a doc or keys query has no batched form (no params, an array param, a param type whose array literal uses another delimiter, …), or null when it has one';
