-- sql/parts/05_key_types.sql: key identity: which types may name docs (at any depth), the error
-- and the hints behind a refusal.
-------------------------------------------------------------------------------
-- Key types
-------------------------------------------------------------------------------

-- The base type of a type: domains resolved.
CREATE FUNCTION docsync.base_type(t regtype) RETURNS regtype
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
  WITH RECURSIVE d(oid, typtype, typbasetype) AS (
    SELECT oid, typtype, typbasetype FROM pg_type WHERE oid = t
    UNION ALL
    SELECT p.oid, p.typtype, p.typbasetype FROM pg_type p JOIN d ON p.oid = d.typbasetype WHERE d.typtype = 'd')
  SELECT oid::regtype FROM d WHERE typtype <> 'd'
$$;

-- Why values of a type (under a collation) cannot name docs, or NULL. A channel spells a key as its
-- text and a doc query matches keys by equality: a type whose equal values print differently would
-- let one doc answer to several channels, of which only the one a change names is kept current. The
-- session settings that change how values print (TimeZone, DateStyle, IntervalStyle,
-- extra_float_digits, bytea_output) are pinned on every worker connection instead.
-- The type is walked at any depth (docsync.key_part_problem): an array of numeric, a composite with
-- a citext attribute or a range over float8 has equal values that print differently too.
CREATE FUNCTION docsync.key_type_problem(t regtype, coll oid DEFAULT 0) RETURNS text
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
  SELECT docsync.key_part_problem(t, -1, coll, false, 0)
$$;

-- Whether a type is a domain over bpchar (character) without a width at any of its levels.
CREATE FUNCTION docsync.widthless_bpchar_domain(t oid) RETURNS boolean
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
  WITH RECURSIVE d(oid, typtype, typbasetype, typtypmod) AS (
    SELECT oid, typtype, typbasetype, typtypmod FROM pg_type WHERE oid = t
    UNION ALL
    SELECT b.oid, b.typtype, b.typbasetype, b.typtypmod FROM pg_type b JOIN d ON b.oid = d.typbasetype WHERE d.typtype = 'd')
  SELECT coalesce((SELECT typtype FROM pg_type WHERE oid = t) = 'd'
                  AND docsync.base_type(t) = 'bpchar'::regtype
                  AND NOT EXISTS (SELECT FROM d WHERE d.typtype = 'd' AND d.typtypmod >= 0), false)
$$;

-- key_type_problem of one part of a key: a value of type t with modifier typmod under collation coll
-- (0: the type's own), nested inside a composite or a range (where a width-less bpchar keeps the
-- blanks it was given: at the top level, and as an array's element there, the worker cuts them),
-- depth levels down. The problem names where it is, outermost first.
CREATE FUNCTION docsync.key_part_problem(t oid, typmod integer, coll oid, nested boolean, depth integer)
RETURNS text
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  ty pg_type;
  c oid;
  a record;
  rng pg_range;
  problem text;
BEGIN
  IF depth > 32 THEN
    -- composites cannot contain themselves, but a type this deep is not a key anyone means
    RETURN format('%s is nested more than 32 types deep, too deep to be checked', t::regtype);
  END IF;
  SELECT * INTO ty FROM pg_type WHERE oid = t;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  c := coalesce(nullif(coll, 0), nullif(ty.typcollation, 0));
  IF ty.typtype = 'd' THEN
    -- a domain is its base type, with its own modifier and, unless the column has one, collation
    RETURN docsync.key_part_problem(ty.typbasetype, ty.typtypmod, c, nested, depth + 1);
  ELSIF ty.typsubscript = 'array_subscript_handler'::regproc AND ty.typelem <> 0 THEN
    IF NOT nested AND docsync.widthless_bpchar_domain(ty.typelem) THEN
      -- the worker cuts the blanks of a top-level bpchar[] only: an array of a domain has no
      -- pg_catalog name (docsync.stored_key_types gives ''), so its elements would keep them
      RETURN format('the elements of %s: domain %s is a character type without a width, which keeps the trailing blanks it was given, so equal values print differently ({FR} and {"FR "})',
                    t::regtype, ty.typelem::regtype);
    END IF;
    problem := docsync.key_part_problem(ty.typelem, typmod, c, nested, depth + 1);
    RETURN 'the elements of ' || t::regtype || ': ' || problem;
  ELSIF ty.typtype = 'c' THEN
    FOR a IN SELECT attname, atttypid, atttypmod, attcollation FROM pg_attribute
              WHERE attrelid = ty.typrelid AND attnum > 0 AND NOT attisdropped ORDER BY attnum LOOP
      problem := docsync.key_part_problem(a.atttypid, a.atttypmod, a.attcollation, true, depth + 1);
      IF problem IS NOT NULL THEN
        RETURN format('attribute "%s" of type %s: ', a.attname, t::regtype) || problem;
      END IF;
    END LOOP;
    RETURN NULL;
  ELSIF ty.typtype = 'r' THEN
    SELECT * INTO rng FROM pg_range WHERE rngtypid = t;
    problem := docsync.key_part_problem(rng.rngsubtype, -1, rng.rngcollation, true, depth + 1);
    RETURN 'the bounds of ' || t::regtype || ': ' || problem;
  ELSIF ty.typtype = 'm' THEN
    SELECT * INTO rng FROM pg_range WHERE rngmultitypid = t;
    problem := docsync.key_part_problem(rng.rngtypid, -1, c, nested, depth + 1);
    RETURN 'the ranges of ' || t::regtype || ': ' || problem;
  END IF;
  RETURN CASE
           WHEN t = 'numeric'::regtype THEN 'equal numeric values print differently (1.0 and 1.00)'
           WHEN t IN ('real'::regtype, 'double precision'::regtype)
             THEN 'equal floating-point values print differently (0 and -0)'
           WHEN t = 'interval'::regtype THEN 'equal intervals print differently (1 day and 24:00:00)'
           WHEN ty.typname = 'citext' THEN 'equal citext values print differently (A and a)'
           WHEN t = 'jsonb'::regtype
             THEN 'equal jsonb values print differently ({"size": 1} and {"size": 1.0})'
           WHEN t = 'box'::regtype THEN 'boxes are equal when their areas are (''(1,1),(0,0)'' and ''(2,0.5),(0,0)'')'
           WHEN t = 'circle'::regtype THEN 'circles are equal when their areas are (''<(0,0),1>'' and ''<(5,5),1>'')'
           WHEN t = 'path'::regtype THEN 'paths are equal when they have as many points (''[(0,0),(1,1)]'' and ''[(5,5),(7,9)]'')'
           WHEN t IN ('point'::regtype, 'lseg'::regtype, 'line'::regtype, 'polygon'::regtype)
             THEN format('%s values are made of floating-point numbers, compared with a tolerance, whose equal values print differently (0 and -0)', t::regtype)
           WHEN t = 'bpchar'::regtype AND typmod < 0 AND nested
             THEN 'a character value without a width keeps the trailing blanks it was given, so equal values print differently (FR and "FR ")'
           WHEN NOT coalesce((SELECT collisdeterministic FROM pg_collation WHERE oid = c), true)
             THEN format('collation %s is nondeterministic: strings equal under it print differently', c::regcollation)
         END;
END
$$;

-- Whether a type's values are made of parts (an array, a composite, a range or a multirange, seen
-- through domains): the hints for such a key build its canonical text from its parts.
CREATE FUNCTION docsync.key_has_parts(t regtype) RETURNS boolean
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
  SELECT ty.typtype IN ('c', 'r', 'm') OR (ty.typsubscript = 'array_subscript_handler'::regproc AND ty.typelem <> 0)
    FROM pg_type ty WHERE ty.oid = docsync.base_type(t)
$$;

-- Raises unless values of a type (under a collation) may name docs (docsync.key_type_problem).
-- A watched column (watch_hint) cannot take the query side's route ($n::text): its hint names the
-- route that works for a watch instead.
CREATE FUNCTION docsync.check_key_type(what text, t regtype, coll oid DEFAULT 0, watch_hint text DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  problem text := docsync.key_type_problem(t, coll);
BEGIN
  IF problem IS NOT NULL THEN
    RAISE EXCEPTION '% cannot name docs: %', what, problem
      USING ERRCODE = 'datatype_mismatch',
            DETAIL = 'A doc''s channel spells each key as its value prints, while the doc query matches keys by equality: two equal keys that print differently would be two channels for one doc, and only one of them would be kept current.',
            HINT = coalesce(watch_hint, CASE
              WHEN docsync.base_type(t) = 'jsonb'::regtype
                THEN 'Make each member the key names a param of its own, of a type whose equal values print alike (col->>''code'' = $1, (col->>''size'')::int = $2), or write the param as $n::text and compare it with a canonical text of the document built from such members.'
              WHEN (SELECT e.typtype = 'd' FROM pg_type a JOIN pg_type e ON e.oid = a.typelem
                     WHERE a.oid = docsync.base_type(t) AND a.typsubscript = 'array_subscript_handler'::regproc)
                   AND docsync.widthless_bpchar_domain((SELECT typelem FROM pg_type WHERE oid = docsync.base_type(t)))
                THEN 'Give the column the type bpchar[] (character[]) or a domain over bpchar[], whose keys the worker trims, or a width (a domain over character(n)).'
              WHEN docsync.key_has_parts(t)
                THEN 'Use a key whose parts print alike when equal (integers, text, uuid, date, timestamp or timestamptz, and arrays, composites and ranges of them), make each part a param of its own (a composite''s attributes, a range''s bounds), or write the param as $n::text and compare it with a text built from canonical parts, such as ARRAY(SELECT trim_scale(e) FROM unnest(col) WITH ORDINALITY u(e, i) ORDER BY i)::text for an array or ROW((col).code::text, trim_scale((col).price))::text for a composite.'
              ELSE 'Use a key of a type whose equal values print alike (an integer, text, uuid, date, timestamp or timestamptz), or a canonical form: write the param as $n::text and compare it with trim_scale(col)::text, lower(col::text) or col::text COLLATE "C".'
            END);
  END IF;
END
$$;

-- The hint for a direct watch on a column whose type cannot name docs: a reverse index whose keys
-- query gives the column's canonical text, matched by a doc query that takes the param as text.
CREATE FUNCTION docsync.watch_key_hint(query text, rel regclass, col name, t regtype) RETURNS text
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
  SELECT CASE WHEN docsync.key_has_parts(t) THEN
           format('A watch maps the column''s value as it prints, so map it through a keys query that gives a text built from its canonical parts: '
                  'SELECT docsync.watch(%L, %L, keys_sql => ''SELECT <that text of $1>'', keys_args => ARRAY[%L]); the doc query then takes that param '
                  'as $n::text and compares it with the same text built from %s (for an array, ARRAY(SELECT trim_scale(e) FROM unnest(col) WITH ORDINALITY u(e, i) ORDER BY i)::text; '
                  'for a composite, ROW((col).code::text, trim_scale((col).price))::text).',
                  query, rel::text, col, quote_ident(col))
         ELSE
           format('A watch maps the column''s value as it prints, so map it through a keys query that gives its canonical text: '
                  'SELECT docsync.watch(%L, %L, keys_sql => %L, keys_args => ARRAY[%L]); the doc query then takes that param '
                  'as $n::text and compares it with %s.',
                  query, rel::text, format('SELECT %s', replace(e.canon, 'col', CASE WHEN e.canon LIKE 'trim_scale%' THEN '$1::numeric' ELSE '$1' END)), col,
                  replace(e.canon, 'col', quote_ident(col)))
         END
    FROM (SELECT CASE
                   WHEN docsync.base_type(t) = 'numeric'::regtype THEN 'trim_scale(col)::text'
                   WHEN (SELECT typname FROM pg_type WHERE oid = docsync.base_type(t)) = 'citext' THEN 'lower(col::text)'
                   ELSE 'col::text COLLATE "C"'
                 END AS canon) e
   WHERE docsync.key_has_parts(t)
      OR docsync.base_type(t) NOT IN ('real'::regtype, 'double precision'::regtype, 'interval'::regtype, 'jsonb'::regtype,
                                      'box'::regtype, 'circle'::regtype, 'path'::regtype, 'point'::regtype,
                                      'lseg'::regtype, 'line'::regtype, 'polygon'::regtype)
$$;

-- How a refusal names a doc query's param: with the nondeterministic collation the query compares it
-- under (docsync.analyze_query's param_collations), when there is one.
CREATE FUNCTION docsync.param_label(param text, query text, t regtype, coll regcollation) RETURNS text
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
  SELECT format('param "%s" of doc query "%s" (%s', param, query, t)
         || CASE WHEN coalesce(coll::oid, 0) <> 0 THEN format(', compared under collation %s', coll) ELSE '' END || ')'
$$;
