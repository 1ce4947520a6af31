-- sql/parts/01_schema.sql: the script's guard, the UTF-8 check and the docsync schema. The parts
-- of sql/parts/ are concatenated in name order into the install script docsync--0.1.sql by the
-- Makefile; each opens with a comment like this one.
/* docsync--0.1.sql: the docsync extension's schema, definitions and views. */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION docsync" to load this file. \quit

-- docsync speaks UTF-8 end to end: the plugin's output is the database's bytes, unconverted, and
-- channels, docs and definitions travel as UTF-8. Refuse other databases now rather than publish
-- mangled names or fail at every compute later.
DO $$
BEGIN
  IF pg_catalog.current_setting('server_encoding') <> 'UTF8' THEN
    RAISE EXCEPTION 'docsync needs a UTF8 database; database "%" is %',
                    pg_catalog.current_database(), pg_catalog.current_setting('server_encoding')
      USING ERRCODE = 'feature_not_supported',
            DETAIL = 'Logical decoding emits text in the database''s encoding, and docsync''s channels and docs are UTF-8.',
            HINT = 'Create the database with ENCODING ''UTF8'' (CREATE DATABASE … ENCODING ''UTF8'' TEMPLATE template0), or dump it and restore it into one.';
  END IF;
END
$$;

-- The schema is the extension's own member, so DROP EXTENSION drops it with its privileges and
-- leaves nothing behind (a leftover schema in template1 would break every later restore).
DO $$
BEGIN
  IF EXISTS (SELECT FROM pg_catalog.pg_namespace WHERE nspname = 'docsync') THEN
    RAISE EXCEPTION 'schema "docsync" already exists in database "%"', pg_catalog.current_database()
      USING ERRCODE = 'duplicate_schema',
            DETAIL = 'CREATE EXTENSION docsync creates that schema and owns it; one left from an earlier install, or made by hand, is in the way.',
            HINT = 'If it holds nothing you need, run DROP SCHEMA docsync CASCADE; otherwise rename it: ALTER SCHEMA docsync RENAME TO docsync_old;';
  END IF;
END
$$;
CREATE SCHEMA docsync;
COMMENT ON SCHEMA docsync IS 'docsync: live JSON documents computed from SQL queries';

-- sql/parts/02_tables.sql: the docsync_admin role, the definition and state tables, the trigger
-- that keeps their rows out of a subscriber's apply, their pg_dump registration and
-- docsync_admin's base grants.
-------------------------------------------------------------------------------
-- SQL API: definitions, validation, definition views, role recipes
-------------------------------------------------------------------------------

-- The role allowed to define doc queries and watches. Roles are cluster-wide and outlive the
-- extension: create it only when missing, so a second database or a restore finds it in place.
DO $$
BEGIN
  IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'docsync_admin') THEN
    CREATE ROLE docsync_admin NOLOGIN;
    COMMENT ON ROLE docsync_admin IS 'may define docsync doc queries and watches';
  END IF;
END
$$;

-- Doc queries: a parameterised SELECT returning one json/jsonb value.
CREATE TABLE docsync.query_defs (
  name        text PRIMARY KEY
              CHECK (name ~ '^[A-Za-z0-9_][A-Za-z0-9_.-]*$' AND length(name) <= 63),
  sql         text NOT NULL,
  params      text[] NOT NULL DEFAULT '{}',      -- names of $1, $2, …
  search_path text NOT NULL,                     -- in force at definition; set for each compute
  defined_by  name NOT NULL DEFAULT current_user,
  defined_at  timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE docsync.query_defs IS 'docsync doc queries (use docsync.define_query)';

-- Watches: which row changes of which table affect which docs. A direct watch maps table columns
-- to the doc params in $n order (keys_sql null); a reverse-index watch feeds the changed row's
-- columns to keys_sql, whose rows are doc params. A watch names its table and columns, never by OID
-- or attnum: names are what pg_dump, a restore into another database and logical replication keep,
-- and every reader resolves them in this database (docsync.watch_targets). The DDL event trigger
-- follows renames; a name that no longer resolves is reported, never remapped.
CREATE SEQUENCE docsync.watch_defs_id_seq;
CREATE TABLE docsync.watch_defs (
  id              bigint PRIMARY KEY DEFAULT nextval('docsync.watch_defs_id_seq'),
  query           text NOT NULL REFERENCES docsync.query_defs (name) ON UPDATE CASCADE ON DELETE CASCADE,
  table_schema    name NOT NULL,
  table_name      name NOT NULL,
  columns         name[] NOT NULL,
  keys_sql        text,
  allow_broadcast boolean NOT NULL DEFAULT false,
  defined_by      name NOT NULL DEFAULT current_user,
  defined_at      timestamptz NOT NULL DEFAULT now(),
  -- the search_path keys_sql was checked under, pinned for the watch's definer when it made the
  -- watch: a keys query runs under it, never under its doc query's (which another definer may set).
  -- Null (a row written around the API): a keys watch is refused (docsync.watch_problem).
  search_path     text
);
ALTER SEQUENCE docsync.watch_defs_id_seq OWNED BY docsync.watch_defs.id;
CREATE INDEX ON docsync.watch_defs (table_schema, table_name);
CREATE INDEX ON docsync.watch_defs (query);
COMMENT ON TABLE docsync.watch_defs IS 'docsync watches: table changes that affect docs (use docsync.watch)';

-- Per-slot doc-version generation state (contract: docsync.advance_generation).
CREATE TABLE docsync.worker_state (
  slot              name PRIMARY KEY,
  system_identifier text NOT NULL,
  timeline          integer NOT NULL,
  generation        bigint NOT NULL,
  updated_at        timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE docsync.worker_state IS 'docsync doc-version generation per replication slot';

-- What docsync.grant_reader granted, so docsync.revoke_reader and DROP EXTENSION take back exactly
-- that. Named, not by OID, like watches. role is the pool role grant_reader was run for; reader the
-- role that received the privilege (a definer's reader role; null: the pool role itself).
CREATE TABLE docsync.reader_grants (
  role        name NOT NULL,
  kind        text NOT NULL CHECK (kind IN ('schema', 'table', 'function', 'member', 'compute', 'noinherit')),
  schema_name name,             -- null for member, compute and noinherit
  table_name  text,             -- null for a schema; a function's signature (regprocedure) for a function
  columns     name[],           -- null: the whole table
  granted_at  timestamptz NOT NULL DEFAULT now(),
  reader      name              -- schema, table: the grantee; member: the reader role granted to role
);
COMMENT ON TABLE docsync.reader_grants IS 'grants made by docsync.grant_reader (undo with docsync.revoke_reader)';

-- The reader role docsync made for each definer: NOLOGIN, holding exactly what grant_reader grants
-- for that definer's definitions. The pool role is a member of each, and every compute runs as the
-- reader role of its definition's definer (docsync.compute_as), never with the union of them.
CREATE TABLE docsync.reader_roles (
  definer     name PRIMARY KEY,
  reader      name NOT NULL UNIQUE,
  created_at  timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE docsync.reader_roles IS 'the reader role each definer''s docs are computed as (made by docsync.grant_reader)';

-- docsync's tables hold this database's own state. A FOR ALL TABLES publication includes them (a
-- publication cannot leave tables out), so a subscriber's apply and table-sync workers skip their
-- rows: REPLICA triggers fire only under session_replication_role = replica, and
-- docsync.skip_replicated lets everyone else's rows through.
CREATE FUNCTION docsync.skip_replicated() RETURNS trigger
LANGUAGE c AS 'MODULE_PATHNAME', 'docsync_skip_replicated';
DO $$
DECLARE
  t text;
BEGIN
  FOREACH t IN ARRAY ARRAY['query_defs', 'watch_defs', 'worker_state', 'reader_grants', 'reader_roles'] LOOP
    EXECUTE format('CREATE TRIGGER skip_replicated BEFORE INSERT OR UPDATE OR DELETE ON docsync.%I
                      FOR EACH ROW EXECUTE FUNCTION docsync.skip_replicated()', t);
    EXECUTE format('ALTER TABLE docsync.%I ENABLE REPLICA TRIGGER skip_replicated', t);
  END LOOP;
END
$$;

SELECT pg_catalog.pg_extension_config_dump('docsync.query_defs', '');
SELECT pg_catalog.pg_extension_config_dump('docsync.watch_defs', '');
SELECT pg_catalog.pg_extension_config_dump('docsync.watch_defs_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('docsync.worker_state', '');
SELECT pg_catalog.pg_extension_config_dump('docsync.reader_grants', '');
SELECT pg_catalog.pg_extension_config_dump('docsync.reader_roles', '');

-- The schema is not usable by PUBLIC: grant USAGE to the roles that need it (the role recipes
-- below do; clients that compute channel names with docsync.channel() need only USAGE).
-- docsync_admin reads the definition tables but never writes them: only the API functions do, as
-- the extension's owner, after checking the caller's rights (see docsync_api_call in definer.c).
GRANT USAGE ON SCHEMA docsync TO docsync_admin;
GRANT SELECT ON docsync.query_defs, docsync.watch_defs, docsync.reader_grants, docsync.reader_roles TO docsync_admin;

-- sql/parts/03_c_functions.sql: the C functions of the SQL API (plugin/sqlapi.c,
-- plugin/definer.c, plugin/reader.c): channel names, query analysis and batching, the definer
-- checks, compute_as and api_caller.
-- C helpers (plugin/sqlapi.c).
CREATE FUNCTION docsync.channel(query text, VARIADIC "values" text[])
RETURNS text LANGUAGE c IMMUTABLE PARALLEL SAFE
AS 'MODULE_PATHNAME', 'docsync_channel';
COMMENT ON FUNCTION docsync.channel(text, text[]) IS
  'channel name of a doc: db:<query>:<v1>:…, escaped as the worker does; NULL is %00';

CREATE FUNCTION docsync.channel(query text)
RETURNS text LANGUAGE c IMMUTABLE PARALLEL SAFE
AS 'MODULE_PATHNAME', 'docsync_channel';
COMMENT ON FUNCTION docsync.channel(text) IS 'channel name of the doc of a query without params';

-- Privilege boundary (plugin/definer.c): analyze_query, query_depends and batch_sql parse and
-- analyse the text as definer (by default the caller of the docsync API function now running, or
-- else the current user), under SECURITY_RESTRICTED_OPERATION, and only a member of that role may
-- name it. The SECURITY DEFINER functions below pass the stored definer, via docsync.definer_role.
CREATE FUNCTION docsync.analyze_query(sql text, search_path text DEFAULT NULL, definer regrole DEFAULT NULL,
  OUT param_types regtype[], OUT result_types regtype[], OUT relations regclass[],
  OUT checked regclass[], OUT param_collations regcollation[], OUT result_collations regcollation[])
RETURNS record LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'docsync_analyze_query';
COMMENT ON FUNCTION docsync.analyze_query(text, text, regrole) IS
  'parameter types, result column types, tables read, relations the caller needs SELECT on, the nondeterministic collation each parameter is compared under (or 0) and the collation of each result column, of a SELECT, without running it';

CREATE FUNCTION docsync.query_depends(sql text, search_path text, definer regrole DEFAULT NULL,
                                      OUT relations oid[], OUT functions oid[],
                                      OUT types oid[], OUT collations oid[], OUT operators oid[])
RETURNS record LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'docsync_query_depends';
COMMENT ON FUNCTION docsync.query_depends(text, text, regrole) IS
  'every relation (views and partitioned tables included), function, and expression type and collation a SELECT uses, without running it';

CREATE FUNCTION docsync.check_definer(sql text, search_path text, definer regrole)
RETURNS void LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'docsync_check_definer';
COMMENT ON FUNCTION docsync.check_definer(text, text, regrole) IS
  'raises unless the role may run the query: one SELECT, SELECT on what it reads, EXECUTE on what it calls, no row-level security applying to it';

-- No SET search_path: like analyze_query, a null search_path means the caller's.
CREATE FUNCTION docsync.batch_sql(sql text, search_path text, definer regrole DEFAULT NULL)
RETURNS text LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'docsync_batch_sql';
COMMENT ON FUNCTION docsync.batch_sql(text, text, regrole) IS
  'the batched form of a doc or keys query: one statement running it for arrays of param sets, returning (ord, present, its columns…) in ord order; null when it has none (docsync.batch_problem says why)';

-- No SET search_path, as batch_sql.
CREATE FUNCTION docsync.batch_problem(sql text, search_path text, definer regrole DEFAULT NULL)
RETURNS text LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'docsync_batch_problem';
COMMENT ON FUNCTION docsync.batch_problem(text, text, regrole) IS
  'why a doc or keys query has no batched form (no params, an array param, a param type whose array literal uses another delimiter, …), or null when it has one';

-- The search_path a definition is stored with: what the definer (by default the API caller) resolves
-- from the path it gave, "$user" spelled out, schemas it may not use left out, pg_temp last.
CREATE FUNCTION docsync.pin_search_path(search_path text, definer regrole DEFAULT NULL,
                                        usable_only boolean DEFAULT true)
RETURNS text LANGUAGE c STABLE
AS 'MODULE_PATHNAME', 'docsync_pin_search_path';
COMMENT ON FUNCTION docsync.pin_search_path(text, regrole, boolean) IS
  'the search_path a definition is stored with: the schemas the definer may use, "$user" spelled out, pg_temp last';

-- A watched table's name, looked up as the API caller under its search_path; null when none.
CREATE FUNCTION docsync.resolve_relation(name text, search_path text, definer regrole DEFAULT NULL)
RETURNS regclass LANGUAGE c STABLE
AS 'MODULE_PATHNAME', 'docsync_resolve_relation';

-- The first statement of every compute of the worker (plugin/reader.c): SET LOCAL ROLE to the reader
-- role of the definition's definer and SET LOCAL search_path to its stored one, and until the
-- transaction ends refuse to change the role again (SET ROLE, set_config, a function's SET clause).
-- grant_reader grants EXECUTE on it to the pool role.
CREATE FUNCTION docsync.compute_as(reader name, search_path text) RETURNS void LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'docsync_compute_as';

CREATE FUNCTION docsync.api_caller() RETURNS regrole LANGUAGE c STABLE
AS 'MODULE_PATHNAME', 'docsync_api_caller';
COMMENT ON FUNCTION docsync.api_caller() IS 'the role that called the docsync API function now running';

-- sql/parts/04_generation.sql: the definitions generation (its sequence, view and bump triggers)
-- and docsync.watch_targets, every watch resolved by name.
-- The definitions generation: raised by every definition change and by DDL that can change what a
-- doc query reads. It is a sequence, and the in-stream signal is a transactional logical message
-- (prefix docsync.definitions, content the new generation) that the worker reads at the commit:
-- no row is locked, so a customer's DDL never waits, deadlocks or fails a serializable transaction
-- because of docsync, and the signal is decoded exactly when the transaction commits. Not kept by
-- pg_dump: a restored database starts its own count.
CREATE SEQUENCE docsync.def_generation_seq;
SELECT pg_catalog.setval('docsync.def_generation_seq', 1);
CREATE VIEW docsync.def_generation AS SELECT s.last_value AS generation FROM docsync.def_generation_seq s;
COMMENT ON VIEW docsync.def_generation IS 'the definitions generation, raised by every definition change and by DDL a doc query depends on';
GRANT SELECT ON docsync.def_generation TO docsync_admin;
-- nextval on the sequence, and pg_logical_emit_message(true, 'docsync.definitions', <value>) (plugin/ddl.c)
CREATE FUNCTION docsync.next_generation() RETURNS bigint
LANGUAGE c VOLATILE AS 'MODULE_PATHNAME', 'docsync_next_generation';

-- A definition changed: bump the generation. Row triggers, so a statement that changes no row
-- (the sql_drop trigger's DELETE when no watched table was dropped) bumps nothing; TRUNCATE has
-- only a statement trigger.
CREATE FUNCTION docsync.bump_generation() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM docsync.next_generation();
  RETURN NULL;
END
$$;
CREATE TRIGGER bump_generation AFTER INSERT OR UPDATE OR DELETE ON docsync.query_defs
  FOR EACH ROW EXECUTE FUNCTION docsync.bump_generation();
CREATE TRIGGER bump_generation AFTER INSERT OR UPDATE OR DELETE ON docsync.watch_defs
  FOR EACH ROW EXECUTE FUNCTION docsync.bump_generation();
CREATE TRIGGER bump_generation_truncate AFTER TRUNCATE ON docsync.query_defs
  FOR EACH STATEMENT EXECUTE FUNCTION docsync.bump_generation();
-- a reader role made or dropped changes which role the worker computes a definer's docs as
CREATE TRIGGER bump_generation AFTER INSERT OR UPDATE OR DELETE ON docsync.reader_roles
  FOR EACH ROW EXECUTE FUNCTION docsync.bump_generation();
CREATE TRIGGER bump_generation_truncate AFTER TRUNCATE ON docsync.watch_defs
  FOR EACH STATEMENT EXECUTE FUNCTION docsync.bump_generation();

-- Every watch resolved by name in this database: relid and attnums (what the plugin and the worker
-- use), or the problem when its table or a column does not resolve (dropped or renamed while the
-- event triggers did not fire, a restore of part of a database): such a watch is never used, and
-- docsync.watches, docsync.watched_tables and the worker report it.
CREATE VIEW docsync.watch_targets AS
  SELECT w.id, w.query, w.table_schema, w.table_name, w.columns, w.keys_sql, w.allow_broadcast,
         w.defined_by, w.defined_at, w.search_path, t.relid,
         CASE WHEN t.relid IS NOT NULL AND m.missing IS NULL THEN coalesce(m.nums, '{}') END AS attnums,
         CASE
           WHEN t.relid IS NULL THEN
             format('table %I.%I does not exist: it was dropped or renamed while docsync''s event triggers did not fire (session_replication_role = replica, or a partial restore); run %s and watch the table it is now',
                    w.table_schema, w.table_name, u.unwatch)
           WHEN m.missing IS NOT NULL THEN
             format('column(s) %s of %I.%I do not exist: dropped or renamed while docsync''s event triggers did not fire; run %s and watch the columns it has now',
                    m.missing, w.table_schema, w.table_name, u.unwatch)
         END AS problem
    FROM docsync.watch_defs w
    LEFT JOIN LATERAL (
      SELECT c.oid::regclass AS relid
        FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
       WHERE n.nspname = w.table_schema AND c.relname = w.table_name AND c.relkind IN ('r', 'p')) t ON true
    CROSS JOIN LATERAL (
      SELECT array_agg(a.attnum ORDER BY u.ord) FILTER (WHERE a.attnum IS NOT NULL) AS nums,
             string_agg(quote_ident(u.col), ', ' ORDER BY u.ord) FILTER (WHERE a.attnum IS NULL) AS missing
        FROM unnest(w.columns) WITH ORDINALITY AS u(col, ord)
        LEFT JOIN pg_attribute a
          ON a.attrelid = t.relid AND a.attname = u.col AND a.attnum > 0 AND NOT a.attisdropped) m
    CROSS JOIN LATERAL (
      SELECT format('SELECT docsync.unwatch(%L, %L, %s)', w.query, format('%I.%I', w.table_schema, w.table_name),
                    CASE WHEN w.keys_sql IS NULL THEN format('params => %L', w.columns)
                         ELSE format('keys_sql => %L', w.keys_sql) END) AS unwatch) u;
COMMENT ON VIEW docsync.watch_targets IS
  'every watch resolved by name: its table''s regclass and the columns'' attnums, or why it does not resolve';


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
-- sql/parts/05_validation.sql: the checks behind the API: who may define, what a definer may
-- read, replica identity, stored analyses, and why a watch is set aside or a query refused.
-- Raises unless the role calling the API may change definitions.
CREATE FUNCTION docsync.require_admin(action text) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF NOT pg_has_role(docsync.api_caller(), 'docsync_admin', 'USAGE') THEN
    RAISE EXCEPTION 'permission denied to %', action
      USING ERRCODE = 'insufficient_privilege',
            DETAIL = format('Role "%s" is neither a superuser nor a member of docsync_admin.', docsync.api_caller()),
            HINT = format('A superuser can run: GRANT docsync_admin TO %s; (docsync_admin is cluster-wide: it makes a role a definer in every database of this cluster that has docsync)', docsync.api_caller());
  END IF;
END
$$;

-- The role a stored definition runs as: raises when it no longer exists, so that nothing stored is
-- ever analysed as the role calling (a NULL definer would mean the current user).
CREATE FUNCTION docsync.definer_role(definer name) RETURNS regrole
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  r regrole := pg_catalog.to_regrole(pg_catalog.quote_ident(definer));
BEGIN
  IF r IS NULL THEN
    RAISE EXCEPTION 'definer % no longer exists', pg_catalog.quote_ident(definer)
      USING ERRCODE = 'undefined_object',
            DETAIL = 'A definition is parsed, checked and run only with its definer''s rights.',
            HINT = 'Redefine it as an existing role, or drop it.';
  END IF;
  RETURN r;
END
$$;

-- Raises unless name is a valid channel segment ([A-Za-z0-9_] first, then also '.', '-').
CREATE FUNCTION docsync.check_segment(what text, name text) RETURNS void
LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF name IS NULL OR name !~ '^[A-Za-z0-9_][A-Za-z0-9_.-]*$' OR length(name) > 63 THEN
    RAISE EXCEPTION 'invalid % "%"', what, coalesce(name, 'NULL')
      USING ERRCODE = 'invalid_parameter_value',
            DETAIL = 'Names are channel segments: 1 to 63 ASCII letters, digits and ''_'', and also ''.'' and ''-'' after the first character.',
            HINT = 'Choose a name such as order or game.board.';
  END IF;
END
$$;

-- analyze_query with the failure rephrased for the definition being made.
CREATE FUNCTION docsync.analyze_for(what text, sql text, search_path text,
  OUT param_types regtype[], OUT result_types regtype[], OUT relations regclass[],
  OUT param_collations regcollation[], OUT result_collations regcollation[])
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  state text; msg text; det text; hnt text;
BEGIN
  SELECT a.param_types, a.result_types, a.relations, a.param_collations, a.result_collations
    INTO param_types, result_types, relations, param_collations, result_collations
    FROM docsync.analyze_query(sql, search_path) a;
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

-- The columns a leaf table's REPLICA IDENTITY covers; NULL means FULL (all columns).
CREATE FUNCTION docsync.identity_columns(rel regclass) RETURNS name[]
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
  SELECT CASE c.relreplident
           WHEN 'f' THEN NULL
           WHEN 'n' THEN '{}'::name[]
           ELSE coalesce((SELECT array_agg(a.attname ORDER BY a.attnum)
                            FROM pg_index i
                            JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)
                           WHERE i.indrelid = c.oid
                             AND CASE c.relreplident WHEN 'd' THEN i.indisprimary ELSE i.indisreplident END),
                         '{}'::name[])
         END
    FROM pg_class c WHERE c.oid = rel
$$;

-- The tables whose rows a watch on rel sees: rel itself, or every leaf partition of it.
CREATE FUNCTION docsync.leaf_tables(rel regclass) RETURNS SETOF regclass
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
  SELECT t.relid FROM pg_partition_tree(rel) t WHERE t.isleaf
  UNION ALL
  SELECT rel WHERE NOT EXISTS (SELECT FROM pg_partition_tree(rel))
$$;

-- Per leaf table: the given columns outside its replica identity (only leaves with some).
CREATE FUNCTION docsync.identity_gaps(rel regclass, cols name[],
  OUT leaf regclass, OUT identity text, OUT missing name[])
RETURNS SETOF record
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
  SELECT l.leaf,
         CASE c.relreplident WHEN 'd' THEN 'default' WHEN 'f' THEN 'full'
                             WHEN 'i' THEN 'index' WHEN 'n' THEN 'nothing' END,
         m.missing
    FROM docsync.leaf_tables(rel) AS l(leaf)
    JOIN pg_class c ON c.oid = l.leaf
    CROSS JOIN LATERAL (
      SELECT array_agg(col ORDER BY ord) AS missing
        FROM unnest(cols) WITH ORDINALITY AS u(col, ord)
       WHERE docsync.identity_columns(l.leaf) IS NOT NULL
         AND NOT col = ANY (docsync.identity_columns(l.leaf))) m
   WHERE m.missing IS NOT NULL
$$;

-- A stored search_path, raising when there is none (a row written around the API): a null path
-- would mean the session's, and stored text is never resolved under anyone's but its own.
CREATE FUNCTION docsync.stored_path(path text) RETURNS text
LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF path IS NULL THEN
    RAISE EXCEPTION 'a docsync definition has no stored search_path'
      USING ERRCODE = 'invalid_parameter_value',
            DETAIL = 'Its row was written around the docsync API; text is resolved only under the path pinned when it was defined.',
            HINT = 'Remove the watch with docsync.unwatch() and watch it again.';
  END IF;
  RETURN path;
END
$$;

-- The text of a stored doc query (watch null), or of the keys query of one of its watches, with the
-- definer it runs as and the search_path it is resolved under (a keys query's are its watch's own);
-- no row when the watch does not exist or has no keys query.
CREATE FUNCTION docsync.stored_text(q docsync.query_defs, watch bigint, OUT src text, OUT definer name, OUT path text)
RETURNS SETOF record LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
  SELECT q.sql, q.defined_by, q.search_path WHERE watch IS NULL
  UNION ALL
  SELECT w.keys_sql, w.defined_by, w.search_path FROM docsync.watch_defs w
   WHERE watch IS NOT NULL AND w.id = watch AND w.query = q.name AND w.keys_sql IS NOT NULL
$$;

-- The analysis (docsync.analyze_query) of a stored doc query, or with watch, of that watch's keys
-- query, made as its definer under its stored search_path, whoever asks: the docsync.queries view
-- and grant_reader read it, and neither their reader nor the DBA may run a definer's text.
CREATE FUNCTION docsync.stored_analysis(query text, watch bigint DEFAULT NULL,
  OUT param_types regtype[], OUT result_types regtype[], OUT relations regclass[], OUT checked regclass[],
  OUT functions oid[], OUT schemas oid[], OUT param_collations regcollation[], OUT result_collations regcollation[])
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  q docsync.query_defs;
  src text;
  definer name;
  path text;
BEGIN
  SELECT * INTO q FROM docsync.query_defs d WHERE d.name = stored_analysis.query;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'docsync query "%" does not exist', stored_analysis.query
      USING ERRCODE = 'undefined_object', HINT = 'See the queries in docsync.queries.';
  END IF;
  SELECT t.src, t.definer, t.path INTO src, definer, path FROM docsync.stored_text(q, watch) t;
  IF src IS NULL THEN
    RAISE EXCEPTION 'docsync query "%" has no watch % with a keys query', q.name, watch
      USING ERRCODE = 'undefined_object', HINT = 'See the watches in docsync.watches.';
  END IF;
  SELECT a.param_types, a.result_types, a.relations, a.checked, a.param_collations, a.result_collations
    INTO param_types, result_types, relations, checked, param_collations, result_collations
    FROM docsync.analyze_query(src, docsync.stored_path(path), docsync.definer_role(definer)) a;
  -- schemas: every schema the text's name resolution used (relations, functions, operators,
  -- types, collations), which its reader role needs USAGE on to resolve it the same way
  SELECT d.functions,
         ARRAY(SELECT DISTINCT u.nsp FROM (
                 SELECT c.relnamespace FROM pg_class c WHERE c.oid = ANY (d.relations)
                 UNION SELECT p.pronamespace FROM pg_proc p WHERE p.oid = ANY (d.functions)
                 UNION SELECT o.oprnamespace FROM pg_operator o WHERE o.oid = ANY (d.operators)
                 UNION SELECT t.typnamespace FROM pg_type t WHERE t.oid = ANY (d.types || param_types::oid[])
                 UNION SELECT co.collnamespace FROM pg_collation co WHERE co.oid = ANY (d.collations)) u(nsp)
                WHERE u.nsp NOT IN ('pg_catalog'::regnamespace, 'information_schema'::regnamespace) ORDER BY 1)
    INTO functions, schemas
    FROM docsync.query_depends(src, docsync.stored_path(path), docsync.definer_role(definer)) d;
END
$$;

-- Why the keys of a stored doc query cannot name docs now, or NULL: its params (their types and the
-- collations it compares them under) or, with watch, that watch's keys (the watched columns, or the
-- keys query's result columns). define_query and watch refuse such keys; this sees them again after
-- DDL (a column's type or collation changed, an attribute added to a composite key type), so that
-- docsync.refusal and docsync.watch_problem refuse a definition the DDL made unfit. Analysed as
-- its definer under its stored search_path, as docsync.stored_analysis does (without the
-- dependencies, which this does not need).
CREATE FUNCTION docsync.stored_key_problem(query text, watch bigint DEFAULT NULL) RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  q docsync.query_defs;
  w record;
  a record;
  problem text;
BEGIN
  SELECT * INTO q FROM docsync.query_defs d WHERE d.name = stored_key_problem.query;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  IF watch IS NULL THEN
    SELECT x.* INTO a FROM docsync.stored_text(q, NULL) t
     CROSS JOIN LATERAL docsync.analyze_query(t.src, docsync.stored_path(t.path), docsync.definer_role(t.definer)) x;
    FOR i IN 1 .. coalesce(cardinality(a.param_types), 0) LOOP
      problem := docsync.key_type_problem(a.param_types[i], coalesce(a.param_collations[i]::oid, 0));
      IF problem IS NOT NULL THEN
        RETURN format('%s cannot name docs: %s: redefine it with docsync.define_query(%L, …, or_replace => true) taking the param as $%s::text compared with a canonical text (lower(col::text), col::text COLLATE "C", trim_scale(col)::text)',
                      docsync.param_label(q.params[i], q.name, a.param_types[i], a.param_collations[i]), problem, q.name, i);
      END IF;
    END LOOP;
    RETURN NULL;
  END IF;
  SELECT * INTO w FROM docsync.watch_targets x WHERE x.id = stored_key_problem.watch;
  IF NOT FOUND OR w.problem IS NOT NULL THEN
    RETURN NULL;
  END IF;
  IF w.keys_sql IS NULL THEN
    SELECT format('column %I of %s, which its watch maps to a doc param, cannot name docs: %s: unwatch it and map the column through a keys query that gives its canonical text (docsync.watch(…, keys_sql => …))',
                  p.name, w.relid::regclass, docsync.key_type_problem(t.atttypid, t.attcollation))
      INTO problem
      FROM unnest(w.columns) WITH ORDINALITY p(name, n)
      JOIN pg_attribute t ON t.attrelid = w.relid AND t.attname = p.name AND NOT t.attisdropped
     WHERE docsync.key_type_problem(t.atttypid, t.attcollation) IS NOT NULL
     ORDER BY p.n LIMIT 1;
    RETURN problem;
  END IF;
  SELECT x.* INTO a FROM docsync.stored_text(q, w.id) t
   CROSS JOIN LATERAL docsync.analyze_query(t.src, docsync.stored_path(t.path), docsync.definer_role(t.definer)) x;
  FOR i IN 1 .. coalesce(cardinality(a.result_types), 0) LOOP
    problem := docsync.key_type_problem(a.result_types[i], coalesce(a.result_collations[i]::oid, 0));
    IF problem IS NOT NULL THEN
      RETURN format('column %s of the keys query of its watch on %s cannot name docs: %s: unwatch it and watch it again with a keys query that gives a canonical text (lower(x::text), x::text COLLATE "C", trim_scale(x)::text)',
                    i, w.relid::regclass, problem);
    END IF;
  END LOOP;
  RETURN NULL;
END
$$;

-- The tables a stored doc query reads, partitions reported as their root, only tables (whose
-- changes can be decoded). Raises when the query no longer analyses.
CREATE FUNCTION docsync.tables_read(query text) RETURNS regclass[]
LANGUAGE sql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
  SELECT coalesce(array_agg(DISTINCT root ORDER BY root), '{}')
    FROM unnest((docsync.stored_analysis(query)).relations) AS r(rel)
    CROSS JOIN LATERAL (SELECT coalesce(pg_partition_root(r.rel), r.rel)::regclass AS root) p
    JOIN pg_class c ON c.oid = p.root
   WHERE c.relkind IN ('r', 'p')
$$;

-- Raises unless the definer may run a doc or keys query (docsync.check_definer), saying which
-- definition it is and how to fix it.
CREATE FUNCTION docsync.check_query_rights(what text, sql text, path text, definer regrole)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  msg text; det text; hnt text;
BEGIN
  PERFORM docsync.check_definer(sql, path, definer);
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

-- Raises unless the definer of a watch may read what it sends: the watched columns (their values
-- name docs and travel to the sink in channel names), without row-level security applying to it,
-- and what its keys query reads.
CREATE FUNCTION docsync.check_watch_rights(query text, rel regclass, cols name[], keys_sql text, path text,
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
  PERFORM docsync.check_query_rights(what,
    format('SELECT %s FROM %s', (SELECT string_agg(quote_ident(c), ', ' ORDER BY o) FROM unnest(cols) WITH ORDINALITY u(c, o)), rel),
    NULL, definer);
  IF keys_sql IS NOT NULL THEN
    PERFORM docsync.check_query_rights(format('the keys query of %s', what), keys_sql, path, definer);
  END IF;
END
$$;

-- Raises unless the role calling the API may change a definition that definer made: the definer
-- itself, a member of the definer role, or a superuser. Membership in docsync_admin alone lets a
-- role define its own queries and watches, never redefine, drop or unwatch another definer's.
CREATE FUNCTION docsync.require_owner(action text, what text, definer name) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  caller regrole := docsync.api_caller();
  owner regrole := pg_catalog.to_regrole(pg_catalog.quote_ident(definer));
BEGIN
  IF caller::name = definer
     OR (SELECT r.rolsuper FROM pg_roles r WHERE r.oid = caller)
     OR (owner IS NOT NULL AND pg_has_role(caller, owner, 'MEMBER')) THEN
    RETURN;
  END IF;
  RAISE EXCEPTION 'permission denied to % %: it was defined by %', action, what, quote_ident(definer)
    USING ERRCODE = 'insufficient_privilege',
          DETAIL = format('Only the definer of a definition, a member of its role or a superuser may change or remove it, and %s is none of them.', caller),
          HINT = format('Ask %s (or a superuser) to do it, or define a query or watch of your own.', quote_ident(definer));
END
$$;

-- Why one watch cannot be used now, or NULL: its definer no longer exists or may no longer read
-- what it sends or what its keys query reads, its keys query no longer prepares, or it has no
-- stored search_path (written around the API). Fails closed: an error judging it is the reason.
CREATE FUNCTION docsync.watch_problem(watch bigint) RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  w record;
  msg text;
BEGIN
  SELECT * INTO w FROM docsync.watch_targets x WHERE x.id = watch_problem.watch;
  IF NOT FOUND OR w.problem IS NOT NULL THEN
    RETURN w.problem;
  END IF;
  IF to_regrole(quote_ident(w.defined_by)) IS NULL THEN
    RETURN format('the definer %s of its watch on %I.%I no longer exists: unwatch and watch it again',
                  quote_ident(w.defined_by), w.table_schema, w.table_name);
  END IF;
  IF w.keys_sql IS NOT NULL AND w.search_path IS NULL THEN
    RETURN format('its watch on %I.%I has a keys query with no stored search_path (written around docsync.watch()): unwatch and watch it again',
                  w.table_schema, w.table_name);
  END IF;
  BEGIN
    PERFORM docsync.check_watch_rights(w.query, w.relid, w.columns, w.keys_sql, w.search_path,
                                       to_regrole(quote_ident(w.defined_by)));
    -- keys that DDL made unfit to name docs since the watch was made
    msg := docsync.stored_key_problem(w.query, w.id);
    IF msg IS NOT NULL THEN
      RETURN msg;
    END IF;
    IF w.keys_sql IS NOT NULL THEN
      msg := docsync.reader_stale(w.defined_by);
      IF msg IS NOT NULL THEN
        RETURN msg;
      END IF;
    END IF;
  EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT;
    RETURN msg;
  END;
  RETURN NULL;
END
$$;

-- Why a watch is set aside, or NULL: another definer's watch on the query that no longer checks
-- (docsync.watch_problem). Such a watch is left out of what the worker runs and reported in
-- docsync.watches and docsync.queries.warning; it never refuses the query, so one definer cannot
-- stop another's docs by breaking a watch it attached.
CREATE FUNCTION docsync.watch_set_aside(watch bigint) RETURNS text
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
  SELECT coalesce(docsync.watch_problem(w.id),
                  CASE WHEN w.keys_sql IS NOT NULL AND NOT EXISTS (
                              SELECT FROM docsync.reader_roles rr
                               WHERE rr.definer = w.defined_by AND to_regrole(quote_ident(rr.reader)) IS NOT NULL)
                       THEN format('its definer %s has no reader role yet: run SELECT docsync.grant_reader(<the worker''s pool role>)',
                                   quote_ident(w.defined_by)) END)
    FROM docsync.watch_defs w JOIN docsync.query_defs q ON q.name = w.query
   WHERE w.id = watch_set_aside.watch AND w.defined_by <> q.defined_by
$$;

-- Why the worker must not run a stored query now, or NULL: its definer (or the definer of one of its
-- watches) no longer exists or may no longer read what it reads, or its SQL is not one SELECT (the
-- definition tables were written around the API, say by a restore with triggers disabled), or its
-- search_path no longer resolves as it did when it was checked (a schema dropped, renamed or no
-- longer usable by the definer). It fails closed: any error while judging a definition, such as a
-- query that no longer prepares after DDL, refuses it with that error as the reason.
CREATE FUNCTION docsync.refusal(query text) RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  q docsync.query_defs;
  w record;
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
    FOR w IN SELECT x.id FROM docsync.watch_targets x
              WHERE x.query = q.name AND x.problem IS NULL AND x.defined_by = q.defined_by ORDER BY x.id LOOP
      msg := docsync.watch_problem(w.id);
      IF msg IS NOT NULL THEN
        RETURN msg;
      END IF;
    END LOOP;
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

-- sql/parts/06_define.sql: defining: define_query, watch, unwatch, drop_query (the key type
-- checks behind them are in 05_key_types.sql).
-------------------------------------------------------------------------------
-- Defining
-------------------------------------------------------------------------------

-- The API functions that write definitions are C trampolines (docsync_api_call): each runs
-- docsync._<its name> with the same arguments as the extension's owner, and that implementation
-- reads the caller from docsync.api_caller(), checks its rights and records it as the definer.

CREATE FUNCTION docsync._define_query(name text, sql text, params text[], or_replace boolean, search_path text)
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
  -- stored as the caller resolves it, so that what is checked is what runs (plugin/definer.c)
  path := docsync.pin_search_path(path);
  IF params IS NULL THEN params := '{}'; END IF;
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
           defined_by = caller::name, defined_at = now()
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
    INSERT INTO docsync.query_defs (name, sql, params, search_path, defined_by)
    VALUES (_define_query.name, _define_query.sql, _define_query.params, path, caller::name)
    RETURNING * INTO existing;
  END IF;
  -- Tables the query reads that no watch covers are named at commit (docsync.notice_uncovered),
  -- once the watches that usually follow in the same transaction are in place.
END
$$;
-- search_path defaults to the caller's (a default is evaluated in the calling statement).
CREATE FUNCTION docsync.define_query(name text, sql text, params text[] DEFAULT '{}',
                                     or_replace boolean DEFAULT false,
                                     search_path text DEFAULT pg_catalog.current_setting('search_path'))
RETURNS void LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'docsync_api_call';
COMMENT ON FUNCTION docsync.define_query(text, text, text[], boolean, text) IS
  'define (or, with or_replace => true, redefine) a doc query';

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

CREATE FUNCTION docsync._watch(query text, "table" text, params text[], keys_sql text, keys_args text[],
                               allow_broadcast boolean, search_path text)
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
  info record;
  gap record;
  new_id bigint;
  path text;
BEGIN
  PERFORM docsync.require_admin('define docsync watches');
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

  IF (params IS NULL) = (keys_sql IS NULL) THEN
    RAISE EXCEPTION 'a watch takes either params or keys_sql'
      USING ERRCODE = 'invalid_parameter_value',
            DETAIL = 'params maps the changed row''s columns to the doc params directly; keys_sql looks the doc params up.',
            HINT = 'Pass params => ARRAY[column, …], or keys_sql => ''SELECT …'' with keys_args => ARRAY[column, …].';
  END IF;
  IF params IS NULL AND coalesce(cardinality(keys_args), 0) = 0 THEN
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
  cols := coalesce(params, keys_args);
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

  IF params IS NOT NULL THEN
    IF cardinality(params) <> cardinality(q.params) THEN
      RAISE EXCEPTION 'watch of % supplies % column(s) but docsync query "%" takes % param(s)',
                      rel, cardinality(params), query, cardinality(q.params)
        USING ERRCODE = 'invalid_parameter_value',
              DETAIL = format('Query "%s" takes params %s, in $n order.', query, q.params),
              HINT = 'Name one column per doc param, in order; use keys_sql when the row does not hold them all.';
    END IF;
    PERFORM docsync.check_watch_key_types(q, rel, params::name[], NULL, caller::name, path);
  ELSE
    IF cardinality(q.params) = 0 THEN
      RAISE EXCEPTION 'docsync query "%" takes no params: keys_sql has nothing to look up', query
        USING ERRCODE = 'invalid_parameter_value',
              DETAIL = 'Its only doc is the one without params.',
              HINT = format('Use params => ARRAY[]::text[] to recompute that doc on every change of %s.', rel);
    END IF;
    info := docsync.analyze_for('keys_sql', keys_sql, path);
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
    PERFORM docsync.check_watch_key_types(q, rel, NULL, keys_sql, caller::name, path);
  END IF;
  -- the changed row's old values of the mapped columns (params, or keys_args that feed keys_sql)
  -- must be logged, or a delete or an update of them cannot name the docs the old row fed
  FOR gap IN SELECT * FROM docsync.identity_gaps(rel, cols::name[]) LOOP
    IF NOT allow_broadcast THEN
      RAISE EXCEPTION 'column(s) % of % outside its REPLICA IDENTITY (%)', array_to_string(gap.missing, ', '), gap.leaf, gap.identity
        USING ERRCODE = 'object_not_in_prerequisite_state',
              DETAIL = CASE WHEN params IS NULL
                            THEN 'A delete, or an update that changes these columns, would not log their old values, so keys_sql could not look up the docs the old row fed.'
                            ELSE 'A delete, or an update that changes these columns, would not log their old values, so the old doc could not be named.' END,
              HINT = format('Run ALTER TABLE %s REPLICA IDENTITY FULL. Or pass allow_broadcast => true and accept the cost: every such change of %s then recomputes every live doc of query "%s", all of them, each time.',
                            gap.leaf, rel, query);
    END IF;
  END LOOP;

  PERFORM docsync.check_watch_rights(query, rel, cols::name[], keys_sql, path, caller);

  IF EXISTS (SELECT FROM docsync.watch_defs w
              WHERE w.query = _watch.query AND w.table_schema = nsp AND w.table_name = cls.relname
                AND w.columns = cols::name[] AND w.keys_sql IS NOT DISTINCT FROM _watch.keys_sql) THEN
    RAISE EXCEPTION 'docsync query "%" already watches % this way', query, rel
      USING ERRCODE = 'duplicate_object',
            DETAIL = 'An identical watch exists.',
            HINT = format('To change it, remove it with docsync.unwatch(%L, %L) first.', query, rel::text);
  END IF;

  INSERT INTO docsync.watch_defs (query, table_schema, table_name, columns, keys_sql, allow_broadcast, defined_by,
                                  search_path)
  VALUES (_watch.query, nsp, cls.relname, cols::name[], _watch.keys_sql, coalesce(_watch.allow_broadcast, false),
          caller::name, path)
  RETURNING id INTO new_id;
  RETURN new_id;
END
$$;
CREATE FUNCTION docsync.watch(query text, "table" text, params text[] DEFAULT NULL,
                              keys_sql text DEFAULT NULL, keys_args text[] DEFAULT NULL,
                              allow_broadcast boolean DEFAULT false,
                              search_path text DEFAULT pg_catalog.current_setting('search_path'))
RETURNS bigint LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'docsync_api_call';
COMMENT ON FUNCTION docsync.watch(text, text, text[], text, text[], boolean, text) IS
  'make changes of a table affect docs of a query: directly (params) or through a reverse index (keys_sql)';

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
      ids := ARRAY(SELECT t.id FROM docsync.watch_targets t
                    WHERE t.relid IS NULL AND t.query = _unwatch.query
                      AND t.table_name = parts[cardinality(parts)] AND (cardinality(parts) = 1 OR t.table_schema = parts[1]));
      IF cardinality(ids) > 0 THEN
        RETURN docsync.unwatch_ids(query, ids);
      END IF;
    END IF;
  END;
  rel := coalesce(rel, docsync.resolve_table("table", search_path));
  ids := ARRAY(SELECT t.id FROM docsync.watch_targets t
                WHERE t.query = _unwatch.query AND t.relid = rel
                  AND (_unwatch.params IS NULL OR (t.keys_sql IS NULL AND t.columns = _unwatch.params::name[]))
                  AND (_unwatch.keys_sql IS NULL OR t.keys_sql = _unwatch.keys_sql));
  n := docsync.unwatch_ids(query, ids);
  IF n = 0 THEN
    RAISE EXCEPTION 'docsync query "%" has no such watch of %', query, rel
      USING ERRCODE = 'undefined_object',
            DETAIL = CASE WHEN params IS NULL AND keys_sql IS NULL THEN 'No watch of the query names this table.'
                          ELSE 'No watch of the query on this table has these params or this keys_sql.' END,
            HINT = 'See the watches in docsync.watches.';
  END IF;
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

-- sql/parts/07_ddl.sql: DDL: the helpers the C event triggers (plugin/ddl.c) call, matview
-- refresh counts and the event triggers.
-------------------------------------------------------------------------------
-- DDL
-------------------------------------------------------------------------------

-- DDL can change what a doc query reads (a column's type, a view's definition, a partition) or
-- what a watch names. The event triggers are C (plugin/ddl.c): while docsync has doc queries, DDL in
-- their WHEN TAG lists that touched anything but temporary objects raises the generation, so the
-- worker compares each query's dependencies (docsync.fingerprint) and recomputes the docs of those
-- that changed. They lock no row and run no SQL unless the DDL renames or drops something a watch
-- may name; then they call the helpers below as the extension's owner.

-- Follows a rename the current DDL made (kind: column, table, schema, set schema), by name: the old
-- name comes from the statement itself. A column renamed on a parent is renamed on its inheritance
-- children too. ALTER TABLE … SET SCHEMA written without the old schema moves the watches of the
-- first schema on the statement's search_path (path) whose watched table of that name no longer
-- exists.
CREATE FUNCTION docsync._follow_rename(kind text, rel oid, old_schema text, old_name text, new_name text,
                                       path oid[])
RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  nsp name;
  cur name;
BEGIN
  SELECT n.nspname, c.relname INTO nsp, cur
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = rel;
  CASE kind
    WHEN 'column' THEN
      UPDATE docsync.watch_defs w SET columns = array_replace(w.columns, old_name::name, new_name::name)
        FROM (WITH RECURSIVE tree(relid) AS (
                SELECT rel
                UNION
                SELECT i.inhrelid FROM pg_inherits i JOIN tree t ON i.inhparent = t.relid)
              SELECT n.nspname, c.relname
                FROM tree t JOIN pg_class c ON c.oid = t.relid JOIN pg_namespace n ON n.oid = c.relnamespace) r
       WHERE w.table_schema = r.nspname AND w.table_name = r.relname AND old_name::name = ANY (w.columns);
    WHEN 'table' THEN
      UPDATE docsync.watch_defs w SET table_name = cur
       WHERE w.table_schema = nsp AND w.table_name = old_name::name;
    WHEN 'schema' THEN
      UPDATE docsync.watch_defs w SET table_schema = new_name::name WHERE w.table_schema = old_name::name;
    WHEN 'set schema' THEN
      UPDATE docsync.watch_defs w SET table_schema = nsp
       WHERE w.table_name = cur
         AND w.table_schema = coalesce(old_schema::name, (
               SELECT n.nspname
                 FROM unnest(path) WITH ORDINALITY AS s(oid, ord) JOIN pg_namespace n ON n.oid = s.oid
                WHERE n.nspname <> nsp
                  AND EXISTS (SELECT FROM docsync.watch_defs x WHERE x.table_schema = n.nspname AND x.table_name = cur)
                  AND to_regclass(format('%I.%I', n.nspname, cur)) IS NULL
                ORDER BY s.ord LIMIT 1));
  END CASE;
END
$$;

-- A watched table, or a column a watch maps, was dropped (names: the dropped object's address).
-- Its watches can never fire again: remove them, with a WARNING naming each.
CREATE FUNCTION docsync._forget_dropped(names text[], identity text) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  gone record;
BEGIN
  FOR gone IN
    DELETE FROM docsync.watch_defs w
     WHERE w.table_schema = names[1] AND w.table_name = names[2]
       AND (cardinality(names) = 2 OR names[3]::name = ANY (w.columns))
    RETURNING w.query
  LOOP
    RAISE WARNING 'removed a watch of docsync query "%": % was dropped', gone.query, identity
      USING DETAIL = 'Changes to a dropped table or column can no longer affect its docs.',
            HINT = 'Check the query in docsync.queries, and watch its new tables with docsync.watch().';
  END LOOP;
END
$$;

-- REFRESH MATERIALIZED VIEW CONCURRENTLY changes a matview's rows in place: its storage and
-- definition stay, and no row change of it is decoded. The event trigger counts each such refresh
-- here (one row per matview, written by the refresh's own transaction, which already holds the
-- matview's lock, so no refresh waits on another because of it), and docsync.closure_state()
-- hashes the count of every matview a doc query reads.
CREATE TABLE docsync.matview_refreshes (relid oid PRIMARY KEY, refreshes bigint NOT NULL);
COMMENT ON TABLE docsync.matview_refreshes IS 'how many times each matview was refreshed CONCURRENTLY (docsync.closure_state hashes it)';
-- kept out of a subscriber's apply, like docsync's other tables
CREATE TRIGGER skip_replicated BEFORE INSERT OR UPDATE OR DELETE ON docsync.matview_refreshes
  FOR EACH ROW EXECUTE FUNCTION docsync.skip_replicated();
ALTER TABLE docsync.matview_refreshes ENABLE REPLICA TRIGGER skip_replicated;
CREATE FUNCTION docsync._refreshed(relid oid) RETURNS void
LANGUAGE sql SET search_path = pg_catalog, pg_temp AS $$
  INSERT INTO docsync.matview_refreshes AS r VALUES (relid, 1)
    ON CONFLICT (relid) DO UPDATE SET refreshes = r.refreshes + 1
$$;

CREATE FUNCTION docsync.on_ddl_command_end() RETURNS event_trigger
LANGUAGE c AS 'MODULE_PATHNAME', 'docsync_on_ddl_command_end';
-- Every command that can change what a doc query's names resolve to or what it returns (a new object
-- in an earlier schema of its search_path, a definition, a policy, a text search configuration, a
-- table's storage); docs/design.md "When unsure, recompute" lists those left out and why (GRANT,
-- REVOKE, COMMENT, SECURITY LABEL, indexes, statistics, triggers, sequences' values, roles, event
-- triggers, publications and subscriptions change no result a doc query computes).
CREATE EVENT TRIGGER docsync_ddl_command_end ON ddl_command_end
  WHEN TAG IN ('ALTER TABLE', 'CREATE TABLE', 'CREATE TABLE AS', 'SELECT INTO', 'ALTER VIEW', 'CREATE VIEW',
               'ALTER MATERIALIZED VIEW', 'CREATE MATERIALIZED VIEW', 'REFRESH MATERIALIZED VIEW',
               'CREATE FOREIGN TABLE', 'ALTER FOREIGN TABLE', 'IMPORT FOREIGN SCHEMA', 'CREATE SEQUENCE',
               'ALTER SEQUENCE', 'CREATE FUNCTION', 'ALTER FUNCTION', 'CREATE PROCEDURE', 'ALTER PROCEDURE',
               'ALTER ROUTINE', 'CREATE AGGREGATE', 'ALTER AGGREGATE', 'CREATE TYPE', 'ALTER TYPE',
               'CREATE DOMAIN', 'ALTER DOMAIN', 'CREATE COLLATION', 'ALTER COLLATION', 'CREATE CAST',
               'CREATE OPERATOR', 'ALTER OPERATOR', 'CREATE OPERATOR CLASS', 'ALTER OPERATOR CLASS',
               'CREATE OPERATOR FAMILY', 'ALTER OPERATOR FAMILY', 'CREATE CONVERSION', 'ALTER CONVERSION',
               'CREATE RULE', 'ALTER RULE', 'CREATE POLICY', 'ALTER POLICY', 'CREATE SCHEMA', 'ALTER SCHEMA',
               'CREATE EXTENSION', 'ALTER EXTENSION', 'CREATE TEXT SEARCH CONFIGURATION',
               'ALTER TEXT SEARCH CONFIGURATION', 'CREATE TEXT SEARCH DICTIONARY', 'ALTER TEXT SEARCH DICTIONARY',
               'CREATE TEXT SEARCH PARSER', 'ALTER TEXT SEARCH PARSER', 'CREATE TEXT SEARCH TEMPLATE',
               'ALTER TEXT SEARCH TEMPLATE', 'CREATE SERVER', 'ALTER SERVER', 'CREATE FOREIGN DATA WRAPPER',
               'ALTER FOREIGN DATA WRAPPER', 'CREATE USER MAPPING', 'ALTER USER MAPPING', 'CREATE TRANSFORM',
               'CREATE LANGUAGE', 'ALTER LANGUAGE')
  EXECUTE FUNCTION docsync.on_ddl_command_end();

CREATE FUNCTION docsync.on_sql_drop() RETURNS event_trigger
LANGUAGE c AS 'MODULE_PATHNAME', 'docsync_on_sql_drop';
CREATE EVENT TRIGGER docsync_sql_drop ON sql_drop
  WHEN TAG IN ('DROP TABLE', 'DROP VIEW', 'DROP MATERIALIZED VIEW', 'DROP FOREIGN TABLE', 'DROP SEQUENCE',
               'DROP FUNCTION', 'DROP PROCEDURE', 'DROP ROUTINE', 'DROP AGGREGATE', 'DROP TYPE', 'DROP DOMAIN',
               'DROP COLLATION', 'DROP CAST', 'DROP OPERATOR', 'DROP OPERATOR CLASS', 'DROP OPERATOR FAMILY',
               'DROP CONVERSION', 'DROP RULE', 'DROP POLICY', 'DROP SCHEMA', 'DROP OWNED',
               'DROP TEXT SEARCH CONFIGURATION', 'DROP TEXT SEARCH DICTIONARY', 'DROP TEXT SEARCH PARSER',
               'DROP TEXT SEARCH TEMPLATE', 'DROP SERVER', 'DROP FOREIGN DATA WRAPPER', 'DROP USER MAPPING',
               'DROP TRANSFORM', 'DROP LANGUAGE', 'ALTER TABLE')
  EXECUTE FUNCTION docsync.on_sql_drop();

-- sql/parts/08_worker_contracts.sql: worker contracts: the dependency closure and fingerprint,
-- batched forms, uncovered queries, key types, worker_definitions, plugin_tables and doc-version
-- generations.
-------------------------------------------------------------------------------
-- Worker contracts: definitions, plugin tables option, doc-version generations
-------------------------------------------------------------------------------

-- The dependency closure of a doc query beyond what it names (docsync.query_depends), as text
-- docsync.fingerprint() hashes: when unsure, recompute.
--   relations: every inheritance child below a relation read (ALTER TABLE … INHERIT, ATTACH), with
--     each one's storage (relfilenode: a table rewrite, such as ALTER COLUMN … TYPE … USING with the
--     same type, changes values without a decoded change) and its columns' collations;
--   functions at any depth: a function with a SQL-standard body (BEGIN ATOMIC) records what it
--     calls and reads in pg_depend, followed to its end; a body docsync cannot see into (plpgsql,
--     a SQL function's string, any other procedural language) may call anything, so then the state
--     of every function of the database counts (a CREATE OR REPLACE anywhere recomputes the query);
--   types at any depth: column, argument and result types, array elements, domain bases with their
--     constraints and defaults, composite attributes, range subtypes; enum labels in order;
--   collations: provider, locale, determinism and version of each one used.
-- (Its plan's estimates are far above jit_above_cost while it reads a handful of catalog rows: JIT off.)
CREATE FUNCTION docsync.closure_state(rels oid[], fns oid[], typs oid[], colls oid[]) RETURNS text
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp SET jit = off AS $$
  WITH RECURSIVE
  fn(oid) AS (
    SELECT DISTINCT f FROM unnest(fns) f
    UNION
    SELECT n.next FROM fn CROSS JOIN LATERAL (
           SELECT d.refobjid FROM pg_depend d
            WHERE d.classid = 'pg_proc'::regclass AND d.objid = fn.oid AND d.refclassid = 'pg_proc'::regclass
           UNION ALL
           -- an aggregate's support functions
           SELECT x FROM pg_aggregate a
                CROSS JOIN LATERAL unnest(ARRAY[a.aggtransfn, a.aggfinalfn, a.aggcombinefn, a.aggserialfn,
                                                a.aggdeserialfn, a.aggmtransfn, a.aggminvtransfn, a.aggmfinalfn]::oid[]) x
            WHERE a.aggfnoid = fn.oid AND x <> 0) n(next)),
  tree(relid) AS (
    SELECT DISTINCT r FROM unnest(rels) r
    UNION
    SELECT d.refobjid FROM fn JOIN pg_depend d
        ON d.classid = 'pg_proc'::regclass AND d.objid = fn.oid AND d.refclassid = 'pg_class'::regclass
    UNION
    SELECT i.inhrelid FROM tree t JOIN pg_inherits i ON i.inhparent = t.relid),
  ty(oid) AS (
    SELECT DISTINCT t FROM unnest(typs) t WHERE t >= 16384
    UNION
    SELECT a.atttypid FROM tree t JOIN pg_attribute a ON a.attrelid = t.relid AND a.attnum > 0 AND NOT a.attisdropped
     WHERE a.atttypid >= 16384
    UNION
    SELECT x FROM fn JOIN pg_proc p ON p.oid = fn.oid
         CROSS JOIN LATERAL unnest(p.prorettype || p.proargtypes::oid[] || coalesce(p.proallargtypes, '{}')) x
     WHERE x >= 16384
    UNION
    SELECT d.refobjid FROM fn JOIN pg_depend d
        ON d.classid = 'pg_proc'::regclass AND d.objid = fn.oid AND d.refclassid = 'pg_type'::regclass
     WHERE d.refobjid >= 16384
    UNION
    SELECT n.next FROM ty JOIN pg_type t ON t.oid = ty.oid
         CROSS JOIN LATERAL (
           SELECT t.typelem WHERE t.typelem <> 0
           UNION ALL SELECT t.typbasetype WHERE t.typbasetype <> 0
           UNION ALL SELECT a.atttypid FROM pg_attribute a
                      WHERE a.attrelid = t.typrelid AND a.attnum > 0 AND NOT a.attisdropped
           UNION ALL SELECT r.rngsubtype FROM pg_range r WHERE r.rngtypid = t.oid
           UNION ALL SELECT r.rngtypid FROM pg_range r WHERE r.rngmultitypid = t.oid) n(next)
     WHERE n.next >= 16384),
  co(oid) AS (
    SELECT DISTINCT c FROM unnest(colls) c WHERE c <> 0
    UNION
    SELECT a.attcollation FROM tree t JOIN pg_attribute a ON a.attrelid = t.relid AND a.attnum > 0
     WHERE a.attcollation <> 0
    UNION
    SELECT t.typcollation FROM ty JOIN pg_type t ON t.oid = ty.oid WHERE t.typcollation <> 0
    UNION
    SELECT a.attcollation FROM ty JOIN pg_type t ON t.oid = ty.oid
      JOIN pg_attribute a ON a.attrelid = t.typrelid AND a.attnum > 0 AND NOT a.attisdropped
     WHERE a.attcollation <> 0)
  SELECT concat_ws(E'\n',
    (SELECT string_agg(format('%s %s %s', c.oid::regclass, c.relfilenode,
                              (SELECT string_agg(format('%s:%s:%s', a.attname, format_type(a.atttypid, a.atttypmod),
                                                        a.attcollation::regcollation), ',' ORDER BY a.attnum)
                                 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped)),
                       E'\n' ORDER BY c.oid::regclass::text)
       FROM tree JOIN pg_class c ON c.oid = tree.relid),
    (SELECT string_agg(format('%s %s', p.oid::regprocedure, md5(pg_get_functiondef(p.oid))), E'\n'
                       ORDER BY p.oid::regprocedure::text)
       FROM fn JOIN pg_proc p ON p.oid = fn.oid WHERE p.oid >= 16384 AND p.prokind IN ('f', 'p')),
    -- aggregates: their support functions (followed above), initial states and the rest of pg_aggregate
    (SELECT string_agg(format('%s aggregate %s %s %s %s %s %s %s %s %s %s %s %s %s %s %s', p.oid::regprocedure,
                              a.aggkind, a.aggnumdirectargs, a.aggtransfn, a.aggfinalfn, a.aggcombinefn,
                              a.aggserialfn, a.aggdeserialfn, a.aggmtransfn, a.aggminvtransfn, a.aggmfinalfn,
                              a.aggfinalextra, a.aggfinalmodify, a.aggsortop::regoperator,
                              a.aggtranstype::regtype, a.agginitval) || format(' %s %s', a.aggmtranstype::regtype,
                              a.aggminitval), E'\n' ORDER BY p.oid::regprocedure::text)
       FROM fn JOIN pg_proc p ON p.oid = fn.oid JOIN pg_aggregate a ON a.aggfnoid = p.oid
      WHERE p.oid >= 16384),
    -- a body docsync cannot see into may read anything: the catalog state of every user function,
    -- relation (storage, shape, row security), column, type, policy, schema and text search object
    -- of the database, so any DDL on any of them (a table rewrite, say) recomputes the query
    (SELECT 'opaque ' || md5(string_agg(format('%s %s %s', o.cat, o.id, o.xmin), ',' ORDER BY o.cat, o.id))
       FROM (SELECT 'proc' AS cat, p.oid::text AS id, p.xmin::text AS xmin FROM pg_proc p WHERE p.oid >= 16384
             UNION ALL SELECT 'class', c.oid::text || ' ' || c.relfilenode, c.xmin::text FROM pg_class c
              WHERE c.oid >= 16384 AND c.relkind IN ('r', 'p', 'm', 'f', 'v', 'S')
             UNION ALL SELECT 'attribute', a.attrelid || ':' || a.attnum, a.xmin::text FROM pg_attribute a
               JOIN pg_class c ON c.oid = a.attrelid
              WHERE a.attrelid >= 16384 AND a.attnum > 0 AND c.relkind IN ('r', 'p', 'm', 'f', 'v', 'c')
             UNION ALL SELECT 'type', t.oid::text, t.xmin::text FROM pg_type t WHERE t.oid >= 16384
             UNION ALL SELECT 'enum', e.oid::text, e.xmin::text FROM pg_enum e
             UNION ALL SELECT 'policy', y.oid::text, y.xmin::text FROM pg_policy y
             UNION ALL SELECT 'namespace', n.oid::text, n.xmin::text FROM pg_namespace n WHERE n.oid >= 16384
             UNION ALL SELECT 'collation', l.oid::text, l.xmin::text FROM pg_collation l WHERE l.oid >= 16384
             UNION ALL SELECT 'operator', r.oid::text, r.xmin::text FROM pg_operator r WHERE r.oid >= 16384
             UNION ALL SELECT 'cast', k.oid::text, k.xmin::text FROM pg_cast k WHERE k.oid >= 16384
             UNION ALL SELECT 'inherits', i.inhrelid || ':' || i.inhparent, i.xmin::text FROM pg_inherits i
             UNION ALL SELECT 'rewrite', w.oid::text, w.xmin::text FROM pg_rewrite w WHERE w.oid >= 16384
             UNION ALL SELECT 'tsconfig', x.oid::text, x.xmin::text FROM pg_ts_config x
             UNION ALL SELECT 'tsmap', m.mapcfg || ':' || m.maptokentype || ':' || m.mapseqno, m.xmin::text
                         FROM pg_ts_config_map m
             UNION ALL SELECT 'tsdict', x.oid::text, x.xmin::text FROM pg_ts_dict x
             UNION ALL SELECT 'server', v.oid::text, v.xmin::text FROM pg_foreign_server v
             UNION ALL SELECT 'foreign table', f.ftrelid::text, f.xmin::text FROM pg_foreign_table f
             UNION ALL SELECT 'refreshes', m.relid::text, m.refreshes::text FROM docsync.matview_refreshes m) o
      WHERE EXISTS (SELECT FROM fn JOIN pg_proc q ON q.oid = fn.oid
                     WHERE q.oid >= 16384 AND q.prosqlbody IS NULL
                       AND q.prolang NOT IN (SELECT l.oid FROM pg_language l WHERE l.lanname IN ('internal', 'c')))),
    -- row security and foreign data: what the compute role may see, and where a foreign table reads
    (SELECT string_agg(format('%s rls %s %s {%s} %s %s', c.oid::regclass, c.relrowsecurity, c.relforcerowsecurity,
                              (SELECT string_agg(format('%s %s %s %s %s %s', y.polname, y.polcmd, y.polpermissive,
                                                        y.polroles::regrole[], pg_get_expr(y.polqual, y.polrelid),
                                                        pg_get_expr(y.polwithcheck, y.polrelid)), ','
                                                 ORDER BY y.polname)
                                 FROM pg_policy y WHERE y.polrelid = c.oid),
                              (SELECT format('%s %s %s %s %s', f.ftoptions, v.srvname, v.srvoptions, w.fdwname, w.fdwoptions)
                                 FROM pg_foreign_table f JOIN pg_foreign_server v ON v.oid = f.ftserver
                                 JOIN pg_foreign_data_wrapper w ON w.oid = v.srvfdw WHERE f.ftrelid = c.oid),
                              (SELECT string_agg(format('%s:%s', a.attname, a.attfdwoptions), ',' ORDER BY a.attnum)
                                 FROM pg_attribute a
                                WHERE a.attrelid = c.oid AND a.attnum > 0 AND a.attfdwoptions IS NOT NULL)),
                       E'\n' ORDER BY c.oid::regclass::text)
       FROM tree JOIN pg_class c ON c.oid = tree.relid
      WHERE c.relrowsecurity OR c.relforcerowsecurity OR c.relkind = 'f'
         OR EXISTS (SELECT FROM pg_policy y WHERE y.polrelid = c.oid)),
    -- a matview refreshed CONCURRENTLY keeps its storage: its count of such refreshes
    (SELECT string_agg(format('%s refreshes %s', c.oid::regclass, coalesce(r.refreshes, 0)), E'\n'
                       ORDER BY c.oid::regclass::text)
       FROM tree JOIN pg_class c ON c.oid = tree.relid LEFT JOIN docsync.matview_refreshes r ON r.relid = c.oid
      WHERE c.relkind = 'm'),
    -- text search: a tsvector, tsquery, regconfig or regdictionary anywhere in the query makes the
    -- state of every text search configuration and dictionary count (which one a call uses is a
    -- value, often a setting's)
    (SELECT 'text search ' || md5(concat_ws(E'\n',
              (SELECT string_agg(format('%s %s %s', x.oid::regconfig, x.cfgparser,
                                        (SELECT string_agg(format('%s:%s:%s', m.maptokentype, m.mapseqno,
                                                                  m.mapdict::regdictionary), ',' ORDER BY m.maptokentype, m.mapseqno)
                                           FROM pg_ts_config_map m WHERE m.mapcfg = x.oid)), E'\n' ORDER BY x.oid)
                 FROM pg_ts_config x),
              (SELECT string_agg(format('%s %s %s', x.oid::regdictionary, x.dicttemplate, x.dictinitoption), E'\n'
                                 ORDER BY x.oid)
                 FROM pg_ts_dict x)))
      WHERE EXISTS (SELECT FROM unnest(typs) t WHERE t IN ('tsvector'::regtype, 'tsquery'::regtype,
                                                             'regconfig'::regtype, 'regdictionary'::regtype))),
    (SELECT string_agg(format('%s %s %s %s %s %s %s [%s] {%s} (%s)', t.oid::regtype, t.typtype, t.typbasetype::regtype,
                              t.typtypmod, t.typnotnull, t.typdefault, t.typcollation::regcollation,
                              (SELECT string_agg(e.enumlabel, ',' ORDER BY e.enumsortorder)
                                 FROM pg_enum e WHERE e.enumtypid = t.oid),
                              (SELECT string_agg(format('%s:%s:%s', a.attname, format_type(a.atttypid, a.atttypmod),
                                                        a.attcollation::regcollation), ',' ORDER BY a.attnum)
                                 FROM pg_attribute a
                                WHERE a.attrelid = t.typrelid AND a.attnum > 0 AND NOT a.attisdropped),
                              (SELECT string_agg(format('%s %s', k.conname, pg_get_constraintdef(k.oid)), ','
                                                 ORDER BY k.conname)
                                 FROM pg_constraint k WHERE k.contypid = t.oid)),
                       E'\n' ORDER BY t.oid::regtype::text)
       FROM ty JOIN pg_type t ON t.oid = ty.oid),
    (SELECT string_agg(format('%s %s %s %s %s %s %s', c.oid::regcollation, c.collprovider, c.collisdeterministic,
                              c.collcollate, c.collctype, c.colliculocale, c.collversion),
                       E'\n' ORDER BY c.oid::regcollation::text)
       FROM co JOIN pg_collation c ON c.oid = co.oid))
$$;

-- What a stored query's docs depend on besides its rows, as one hash: the columns (names, types,
-- typmods) of every table and view its doc and keys queries read, views' definitions, partitions
-- and their bounds, and the definitions of the user functions they call. DDL that changes any of
-- it changes the hash, and the worker recomputes the query's live docs; a query that no longer
-- analyses hashes its error, so it is recomputed (and fails visibly) too.
CREATE FUNCTION docsync.fingerprint(query text) RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  q docsync.query_defs;
  rels oid[] := '{}';
  fns oid[] := '{}';
  typs oid[] := '{}';
  colls oid[] := '{}';
  d record;
BEGIN
  SELECT * INTO q FROM docsync.query_defs x WHERE x.name = fingerprint.query;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  BEGIN
    FOR d IN
      SELECT dq.* FROM docsync.query_depends(q.sql, q.search_path, docsync.definer_role(q.defined_by)) dq
      UNION ALL
      SELECT dk.* FROM docsync.watch_defs w
       CROSS JOIN LATERAL docsync.query_depends(w.keys_sql, docsync.stored_path(w.search_path), docsync.definer_role(w.defined_by)) dk
       WHERE w.query = q.name AND w.keys_sql IS NOT NULL
    LOOP
      rels := rels || d.relations;
      fns := fns || d.functions;
      typs := typs || d.types;
      colls := colls || d.collations;
    END LOOP;
  EXCEPTION WHEN OTHERS THEN
    RETURN md5('error: ' || SQLERRM);
  END;
  rels := rels || ARRAY(SELECT t.relid::oid FROM unnest(rels) r(oid) CROSS JOIN LATERAL pg_partition_tree(r.oid) t);
  RETURN md5(concat_ws(E'\n',
    -- names, never OIDs or attnums (closure_state's storage identity aside: a restored copy's
    -- fingerprint differs there, and its docs are recomputed once)
    (SELECT string_agg(format('%s %s %s %s %s', c.oid::regclass, c.relkind,
                              (SELECT string_agg(format('%s:%s', a.attname, format_type(a.atttypid, a.atttypmod)),
                                                 ',' ORDER BY a.attnum)
                                 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped),
                              CASE WHEN c.relkind IN ('v', 'm') THEN pg_get_viewdef(c.oid) END,
                              pg_get_expr(c.relpartbound, c.oid)), E'\n' ORDER BY c.oid::regclass::text)
       FROM pg_class c WHERE c.oid IN (SELECT DISTINCT unnest(rels))),
    (SELECT string_agg(format('%s %s', p.oid::regprocedure, md5(pg_get_functiondef(p.oid))), E'\n'
                       ORDER BY p.oid::regprocedure::text)
       FROM pg_proc p
      WHERE p.oid IN (SELECT DISTINCT unnest(fns)) AND p.oid >= 16384 AND p.prokind IN ('f', 'p')),
    docsync.closure_state(rels, fns, typs, colls)));
END
$$;

-- The batched form (docsync.batch_sql) of a stored doc query, or with watch, of that watch's keys
-- query; null when it has none, and null too when it does not analyse now (a table it reads was
-- dropped, say): the worker then computes one doc at a time, and those computes report the failure.
-- It runs as the extension's owner, like fingerprint(), because the worker's replication role calls
-- it through worker_definitions() and may not even see the schemas the query reads; the text is
-- analysed as its definer (docsync.batch_sql's definer). Only stored queries, never text from the
-- caller.
CREATE FUNCTION docsync.stored_batch_sql(query text, watch bigint DEFAULT NULL) RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  q docsync.query_defs;
  src text;
  definer name;
  path text;
BEGIN
  SELECT * INTO q FROM docsync.query_defs d WHERE d.name = stored_batch_sql.query;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  SELECT t.src, t.definer, t.path INTO src, definer, path FROM docsync.stored_text(q, watch) t;
  IF src IS NULL THEN
    RETURN NULL;
  END IF;
  RETURN docsync.batch_sql(src, docsync.stored_path(path), docsync.definer_role(definer));
EXCEPTION WHEN OTHERS THEN
  RETURN NULL;
END
$$;
COMMENT ON FUNCTION docsync.stored_batch_sql(text, bigint) IS
  'the batched form of a stored doc query, or of the keys query of one of its watches; null when it has none or no longer analyses';

-- The unwatched tables of a query, or the reason they cannot be computed.
CREATE FUNCTION docsync.query_check(q docsync.query_defs, OUT reads regclass[], OUT unwatched regclass[],
                                    OUT problem text)
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  watched regclass[];
  k text;
BEGIN
  SELECT coalesce(array_agg(DISTINCT w.relid), '{}') INTO watched
    FROM docsync.watch_targets w WHERE w.query = q.name AND w.problem IS NULL;
  reads := docsync.tables_read(q.name);
  SELECT coalesce(array_agg(r ORDER BY r), '{}') INTO unwatched
    FROM unnest(reads) r WHERE NOT r = ANY (watched);
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS k = MESSAGE_TEXT;
  problem := k;
END
$$;

-- Each query whose docs go stale because a table it reads has no watch, one line each (for the
-- worker's log and docsync.status); refused queries are not run, so they are left out. Like
-- fingerprint(), it may be called by roles that cannot read the definition tables; each query is
-- analysed as its definer (docsync.stored_analysis, through query_check and tables_read).
-- docsync.status reads it: it must never wait for a customer's lock (a migration holding ACCESS
-- EXCLUSIVE on a table a query reads blocks its analysis), so each lock is waited for 100 ms at most,
-- and a query that cannot be analysed now is left out (query_check and refusal catch the timeout).
CREATE FUNCTION docsync.uncovered_queries(OUT query text, OUT tables text[], OUT message text)
RETURNS SETOF record
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET lock_timeout = '100ms' AS $$
BEGIN
  RETURN QUERY SELECT q.name, chk.unwatched::text[],
         format('doc query "%s" reads %s, which no watch covers: its docs go stale when %s; watch %s with docsync.watch(%L, …)',
                q.name, array_to_string(chk.unwatched, ', '),
                CASE WHEN cardinality(chk.unwatched) = 1 THEN 'it changes' ELSE 'they change' END,
                CASE WHEN cardinality(chk.unwatched) = 1 THEN 'it' ELSE 'each' END, q.name)
    FROM docsync.query_defs q
   CROSS JOIN LATERAL docsync.query_check(q) chk
   WHERE cardinality(chk.unwatched) > 0 AND docsync.refusal(q.name) IS NULL
   ORDER BY q.name;
END
$$;
COMMENT ON FUNCTION docsync.uncovered_queries() IS
  'doc queries that read a table no watch covers (their docs go stale when it changes), with a line saying so';

-- Why a stored doc query's docs, or the lookups of one of its keys queries, are computed one by one
-- (docsync.batch_problem of each, the keys queries named by watch id), or NULL when every one has a
-- batched form. Each text is analysed as its definer, as stored_batch_sql's is.
CREATE FUNCTION docsync.stored_batch_problem(query text) RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  q docsync.query_defs;
  out text[] := '{}';
  w record;
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
  FOR w IN SELECT d.id, d.keys_sql, d.defined_by, d.search_path FROM docsync.watch_defs d
            WHERE d.query = q.name AND d.keys_sql IS NOT NULL ORDER BY d.id LOOP
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
COMMENT ON FUNCTION docsync.stored_batch_problem(text) IS
  'why the docs or keys lookups of a stored doc query are computed one by one (no batched form), or null';

-- The doc queries whose batched forms a worker of this database running now set aside (they failed
-- where their docs alone run), with why: what its status file says (docsync.status_file_queries,
-- declared with the status functions below; plugin/status.c), the files read once. A worker tries
-- them again when the definitions reload (grant_reader raises the generation when it grants).
CREATE FUNCTION docsync.batch_set_aside(OUT query text, OUT why text) RETURNS SETOF record
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  RETURN QUERY
    SELECT f.query, string_agg(DISTINCT f.batch_set_aside, '; ')
      FROM docsync.status_file_queries() f
      JOIN docsync.status_files() s ON s.database = f.database AND s.slot_name = f.slot_name
     WHERE f.database = current_database() AND f.batch_set_aside IS NOT NULL AND s.state <> 'stopped'
       AND (s.lock_held OR s.heartbeat_at > clock_timestamp() - interval '5 seconds')
     GROUP BY f.query;
END
$$;
COMMENT ON FUNCTION docsync.batch_set_aside() IS
  'the doc queries a running worker computes one by one although they have a batched form (the form failed where the docs alone run), and why';

-- The key types of a stored doc query: for each param, the pg_type name of its base type when that
-- lies in pg_catalog, else ''. The worker and docsync-gateway refuse a channel whose key is not in
-- its type's canonical text (worker/engine/key_text.hpp). NULL when the query does not analyse now.
-- Analysed as its definer (docsync.stored_analysis).
CREATE FUNCTION docsync.stored_key_types(query text) RETURNS text[]
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  q docsync.query_defs;
BEGIN
  SELECT * INTO q FROM docsync.query_defs d WHERE d.name = stored_key_types.query;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  -- a domain's size (varchar(3), bpchar(5), timestamp(0), bit(4), varbit(8)) goes with its base
  -- type; any other typmod makes the key unchecked ('')
  RETURN (SELECT coalesce(array_agg(CASE WHEN ty.typnamespace <> 'pg_catalog'::regnamespace THEN ''
                                         WHEN m.typmod IS NULL THEN ty.typname::text
                                         WHEN ty.typname IN ('varchar', 'bpchar') AND m.typmod >= 4
                                           THEN format('%s(%s)', ty.typname, m.typmod - 4)
                                         WHEN ty.typname IN ('timestamp', 'timestamptz', 'bit', 'varbit')
                                           THEN format('%s(%s)', ty.typname, m.typmod)
                                         ELSE '' END ORDER BY p.k), '{}')
            FROM unnest((docsync.stored_analysis(q.name)).param_types) WITH ORDINALITY AS p(t, k)
            JOIN pg_type ty ON ty.oid = docsync.base_type(p.t)
            LEFT JOIN LATERAL (
              WITH RECURSIVE d(oid, typtype, typbasetype, typtypmod) AS (
                SELECT oid, typtype, typbasetype, typtypmod FROM pg_type WHERE oid = p.t
                UNION ALL
                SELECT b.oid, b.typtype, b.typbasetype, b.typtypmod FROM pg_type b JOIN d ON b.oid = d.typbasetype
                 WHERE d.typtype = 'd')
              SELECT max(d.typtypmod) AS typmod FROM d WHERE d.typtype = 'd' AND d.typtypmod >= 0) m ON true);
EXCEPTION WHEN OTHERS THEN
  RETURN NULL;
END
$$;
COMMENT ON FUNCTION docsync.stored_key_types(text) IS
  'the base type (pg_type name, '''' outside pg_catalog) of each param of a stored doc query: how channels spell its keys';

-- Each query carries "refused": why the worker must not run it now (docsync.refusal, or a definer
-- without a reader role: docsync.reader_missing), or null; "reader_role": the role its computes run
-- as (SET LOCAL ROLE through docsync.compute_as; a keys query's is its watch's "keys_reader_role");
-- "fingerprint": what its docs depend on besides rows (docsync.fingerprint); "key_types": the base
-- type of each param (docsync.stored_key_types); and "batch_sql": its
-- batched form (docsync.stored_batch_sql), null when it has none, is refused or no longer analyses.
-- Watches are resolved by name in this database; those that do not resolve are left out of
-- "watches" and listed in "unresolved" with the problem, for the worker to report; "uncovered"
-- names the queries that read a table no watch covers, for the worker to log. A reverse-index
-- watch carries "keys_batch_sql", the batched form of its keys query, null likewise. refusal() runs
-- once per query.
-- Why the worker cannot compute a query's docs with its definers' rights yet, or NULL: the definer of
-- the query or of one of its keys queries has no reader role (grant_reader makes them).
CREATE FUNCTION docsync.reader_missing(query text) RETURNS text
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
  SELECT format('its definer %s has no reader role yet: run SELECT docsync.grant_reader(<the worker''s pool role>), which makes one and grants it what the definer''s queries read',
                quote_ident(d.definer))
    FROM (SELECT q.defined_by AS definer, 0 AS ord FROM docsync.query_defs q WHERE q.name = reader_missing.query
          UNION ALL
          -- another definer's keys watch without a reader role is set aside (docsync.watch_set_aside)
          SELECT w.defined_by, w.id FROM docsync.watch_defs w JOIN docsync.query_defs q ON q.name = w.query
           WHERE w.query = reader_missing.query AND w.keys_sql IS NOT NULL AND w.defined_by = q.defined_by) d
   WHERE NOT EXISTS (SELECT FROM docsync.reader_roles rr
                      WHERE rr.definer = d.definer AND to_regrole(quote_ident(rr.reader)) IS NOT NULL)
   ORDER BY d.ord
   LIMIT 1
$$;

CREATE FUNCTION docsync.worker_definitions() RETURNS jsonb
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
                          'allow_broadcast', w.allow_broadcast) ORDER BY w.query, w.id)
                         FROM docsync.watch_targets w
                         JOIN qs q ON q.name = w.query
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
COMMENT ON FUNCTION docsync.worker_definitions() IS 'all definitions as one jsonb, for docsync-worker';

CREATE FUNCTION docsync.plugin_tables() RETURNS text
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
  SELECT coalesce(string_agg(e.entry, ',' ORDER BY e.relid), '')
    FROM (SELECT r.relid,
                 r.relid::text || coalesce('(' || (SELECT string_agg(n::text, ',' ORDER BY n)
                                                      FROM (SELECT DISTINCT unnest(w.attnums) AS n
                                                              FROM docsync.watch_targets w
                                                             WHERE w.relid::oid = r.relid AND w.problem IS NULL) a) || ')', '') AS entry
            FROM (SELECT DISTINCT w.relid::oid AS relid FROM docsync.watch_targets w WHERE w.problem IS NULL) r) e
$$;
COMMENT ON FUNCTION docsync.plugin_tables() IS
  'the output plugin''s tables option for the current definitions: OID(attnum,…) entries';

CREATE FUNCTION docsync.advance_generation(slot name, system_identifier text, timeline integer,
                                           floor bigint, force boolean)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  st docsync.worker_state;
  gen bigint;
BEGIN
  IF slot IS NULL OR system_identifier IS NULL OR timeline IS NULL OR force IS NULL THEN
    RAISE EXCEPTION 'docsync.advance_generation arguments must not be null'
      USING ERRCODE = 'null_value_not_allowed',
            DETAIL = 'slot, system_identifier, timeline and force identify the stream.',
            HINT = 'Pass every argument; floor may be 0.';
  END IF;
  INSERT INTO docsync.worker_state (slot, system_identifier, timeline, generation)
  VALUES (slot, system_identifier, timeline, 0)
  ON CONFLICT ON CONSTRAINT worker_state_pkey DO NOTHING;
  SELECT * INTO st FROM docsync.worker_state w WHERE w.slot = advance_generation.slot FOR UPDATE;
  IF st.system_identifier = advance_generation.system_identifier AND st.timeline = advance_generation.timeline
     AND NOT force AND st.generation > 0 THEN
    gen := greatest(st.generation, coalesce(floor, 0));
  ELSE
    gen := greatest(st.generation, coalesce(floor, 0)) + 1;
  END IF;
  UPDATE docsync.worker_state w
     SET system_identifier = advance_generation.system_identifier, timeline = advance_generation.timeline,
         generation = gen, updated_at = now()
   WHERE w.slot = advance_generation.slot;
  RETURN gen;
END
$$;
COMMENT ON FUNCTION docsync.advance_generation(name, text, integer, bigint, boolean) IS
  'doc-version generation of a slot: raised when the slot, server identity or timeline changes';

-- sql/parts/09_definition_views.sql: definition views: the uncovered-table NOTICE,
-- docsync.queries, docsync.watches, output_plugin_problem and docsync.watched_tables.
-------------------------------------------------------------------------------
-- Definition views
-------------------------------------------------------------------------------


-- What no watch covers, named once a definition is complete: at the commit of the transaction that
-- defined a query or added a watch, once per query, and only for a query with at least one watch
-- (one with none is still being defined: docsync.queries, the worker's log and docsync.status say
-- so). Defining a query and its watches in one transaction gives no NOTICE unless one is missing.
-- Never an error: the commit it runs in may be a customer's (a rename's event trigger rewrites a
-- watch, but not through these triggers' events). As the extension's owner, who ran the definition
-- (docsync_api_call) and may read the definition tables whoever commits.
CREATE FUNCTION docsync.notice_uncovered() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
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
CREATE CONSTRAINT TRIGGER notice_uncovered AFTER INSERT OR UPDATE OF sql, search_path ON docsync.query_defs
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION docsync.notice_uncovered();
CREATE CONSTRAINT TRIGGER notice_uncovered AFTER INSERT ON docsync.watch_defs
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION docsync.notice_uncovered();


CREATE VIEW docsync.queries AS
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
         b.set_aside AS batch_set_aside
    FROM docsync.query_defs q
    CROSS JOIN LATERAL docsync.query_check(q) chk
    CROSS JOIN LATERAL (SELECT docsync.stored_batch_problem(q.name) AS not_batched,
                               (SELECT sa.why FROM set_aside sa WHERE sa.query = q.name) AS set_aside) b;
COMMENT ON VIEW docsync.queries IS
  'one row per doc query, with its watched tables, what no watch covers, its definer, why the worker refuses it, the reader role its docs are computed as, why its docs are computed one by one (not_batched), and whether a running worker batches them (batched: batched, not batched or set aside; batch_set_aside: why a worker set its batched form aside)';

CREATE VIEW docsync.watches AS
  SELECT w.id, w.query, w.relid AS "table", w.table_schema, w.table_name,
         CASE WHEN w.keys_sql IS NULL THEN 'direct' ELSE 'keys' END AS kind,
         w.columns, w.attnums, w.keys_sql, w.allow_broadcast, w.defined_by, w.defined_at,
         coalesce(w.problem, docsync.watch_set_aside(w.id)) AS problem, w.search_path
    FROM docsync.watch_targets w;
COMMENT ON VIEW docsync.watches IS
  'one row per watch, resolved by name: its table and the columns'' attnums, or the problem when they do not resolve';

-- What keeps the server from decoding with docsync for a role without superuser: NULL when docsync
-- is in output_plugin_libraries (split as the server splits it) or the server has no such setting;
-- otherwise the problem, a list set as one quoted string included, and the ALTER SYSTEM that fixes it.
CREATE FUNCTION docsync.output_plugin_problem() RETURNS text
AS 'MODULE_PATHNAME', 'docsync_output_plugin_problem'
LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION docsync.output_plugin_problem() IS
  'NULL when the server lets REPLICATION roles decode with docsync; otherwise what is wrong with output_plugin_libraries and the fix';
GRANT EXECUTE ON FUNCTION docsync.output_plugin_problem() TO docsync_admin, pg_monitor;

CREATE VIEW docsync.watched_tables AS
  WITH t AS (
    SELECT w.table_schema, w.table_name,
           min(w.relid::oid)::regclass AS relid,
           array_agg(DISTINCT w.query ORDER BY w.query) AS queries,
           (SELECT array_agg(DISTINCT u.col) FROM docsync.watch_defs w2, unnest(w2.columns) u(col)
             WHERE w2.table_schema = w.table_schema AND w2.table_name = w.table_name) AS cols,
           string_agg(DISTINCT w.problem, '; ') AS problems
      FROM docsync.watch_targets w GROUP BY w.table_schema, w.table_name)
  SELECT t.relid AS "table",
         t.table_schema AS schema,
         t.table_name AS name,
         coalesce((SELECT array_agg(a.attname ORDER BY a.attnum) FROM pg_attribute a
                    WHERE a.attrelid = t.relid AND a.attname = ANY (t.cols) AND a.attnum > 0
                      AND NOT a.attisdropped), '{}') AS columns,
         CASE c.relreplident WHEN 'd' THEN 'default' WHEN 'f' THEN 'full'
                             WHEN 'i' THEN 'index' WHEN 'n' THEN 'nothing' END AS replica_identity,
         t.queries,
         nullif(concat_ws('; ',
           t.problems,
           (SELECT string_agg(format('%s of %s %s outside its REPLICA IDENTITY (%s): a delete, or an update changing %s, cannot name the old doc; run ALTER TABLE %s REPLICA IDENTITY FULL',
                                     array_to_string(g.missing, ', '), g.leaf,
                                     CASE WHEN cardinality(g.missing) = 1 THEN 'is' ELSE 'are' END,
                                     g.identity,
                                     CASE WHEN cardinality(g.missing) = 1 THEN 'it' ELSE 'them' END, g.leaf), '; ')
              FROM docsync.identity_gaps(t.relid, t.cols) g WHERE t.relid IS NOT NULL),
           CASE WHEN c.relpersistence = 'u' THEN
             format('%s is UNLOGGED: its changes are never decoded; run ALTER TABLE %s SET LOGGED', t.relid, t.relid) END,
           CASE WHEN t.relid IS NOT NULL AND NOT EXISTS (SELECT FROM pg_index i WHERE i.indrelid = t.relid AND i.indisprimary) THEN
             format('%s has no primary key: add one (or a REPLICA IDENTITY USING INDEX) so changes name their rows', t.relid) END,
           docsync.output_plugin_problem()
         ), '') AS warning
    FROM t
    LEFT JOIN pg_class c ON c.oid = t.relid;
COMMENT ON VIEW docsync.watched_tables IS
  'one row per watched table: the columns the plugin emits, its replica identity, and what is wrong';

GRANT SELECT ON docsync.queries, docsync.watches, docsync.watched_tables TO docsync_admin;

-- sql/parts/10_roles.sql: role recipes: reader roles, grant_reader, revoke_reader,
-- grant_replication, and what runs before DROP EXTENSION.
-------------------------------------------------------------------------------
-- Role recipes
-------------------------------------------------------------------------------

-- The name of a definer's reader role: docsync_reader_<definer>, a long name shortened with a hash.
CREATE FUNCTION docsync.reader_role_name(definer name) RETURNS name
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
  SELECT CASE WHEN octet_length(definer) <= 48 THEN 'docsync_reader_' || definer
              ELSE 'docsync_reader_' || left(definer, 24) || '_' || left(md5(definer), 16) END::name
$$;

-- The reader role of a definer, made NOLOGIN and harmless the first time (recorded in
-- docsync.reader_roles). Roles are cluster-wide, so docsync in another database of the cluster may
-- have made it: its comment says so, and it must still be harmless (no LOGIN, no attribute, member
-- of no role). Any other role of that name is refused.
CREATE FUNCTION docsync.ensure_reader_role(definer name) RETURNS name
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  reader name := docsync.reader_role_name(definer);
  mark text := format('docsync reader role of %s', quote_ident(definer));
  r pg_roles;
BEGIN
  SELECT * INTO r FROM pg_roles x WHERE x.rolname = reader;
  IF NOT FOUND THEN
    EXECUTE format('CREATE ROLE %I NOLOGIN NOINHERIT NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS', reader);
    EXECUTE format('COMMENT ON ROLE %I IS %L', reader, mark);
  ELSIF shobj_description(r.oid, 'pg_authid') IS DISTINCT FROM mark
        OR r.rolcanlogin OR r.rolsuper OR r.rolcreaterole OR r.rolcreatedb OR r.rolreplication OR r.rolbypassrls
        OR EXISTS (SELECT FROM pg_auth_members m WHERE m.member = r.oid) THEN
    RAISE EXCEPTION 'role "%" exists, but is not a harmless docsync reader role', reader
      USING ERRCODE = 'duplicate_object',
            DETAIL = format('grant_reader computes the docs of definer %s as its reader role %s, which the pool role becomes a member of; a role docsync did not make, or one given LOGIN, attributes or memberships since, could hold anything.', quote_ident(definer), quote_ident(reader)),
            HINT = 'Drop or rename that role, then run grant_reader again.';
  END IF;
  INSERT INTO docsync.reader_roles (definer, reader) VALUES (ensure_reader_role.definer, reader)
  ON CONFLICT ON CONSTRAINT reader_roles_pkey DO NOTHING;
  RETURN reader;
END
$$;

-- Whether the definer of a reader role still holds a privilege grant_reader gave that role for it
-- (one docsync.reader_grants row of kind schema, table or function); null when the object is gone.
CREATE FUNCTION docsync.reader_grant_held(g docsync.reader_grants, definer regrole) RETURNS boolean
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
  SELECT CASE g.kind
           WHEN 'schema' THEN
             CASE WHEN to_regnamespace(quote_ident(g.schema_name)) IS NOT NULL
                  THEN has_schema_privilege(definer, to_regnamespace(quote_ident(g.schema_name)), 'USAGE') END
           WHEN 'function' THEN
             CASE WHEN to_regprocedure(g.table_name) IS NOT NULL
                  THEN has_function_privilege(definer, to_regprocedure(g.table_name), 'EXECUTE') END
           WHEN 'table' THEN
             CASE WHEN to_regclass(format('%I.%I', g.schema_name, g.table_name)) IS NULL THEN NULL
                  WHEN g.columns IS NULL
                  THEN has_table_privilege(definer, to_regclass(format('%I.%I', g.schema_name, g.table_name)), 'SELECT')
                  ELSE (SELECT bool_and(has_column_privilege(definer, to_regclass(format('%I.%I', g.schema_name, g.table_name)),
                                                             c, 'SELECT'))
                          FROM unnest(g.columns) c
                         WHERE EXISTS (SELECT FROM pg_attribute a
                                        WHERE a.attrelid = to_regclass(format('%I.%I', g.schema_name, g.table_name))
                                          AND a.attname = c AND a.attnum > 0 AND NOT a.attisdropped)) END
         END
$$;

-- Why a definer's docs must not be computed now, or NULL: its reader role holds a privilege
-- grant_reader gave it that the definer itself no longer holds (a REVOKE since). The worker refuses
-- the definer's queries from the moment the REVOKE commits until grant_reader takes it back.
CREATE FUNCTION docsync.reader_stale(definer name) RETURNS text
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
  SELECT format('its definer %s no longer holds %s, which its reader role %s was granted: run SELECT docsync.grant_reader(<the worker''s pool role>) to take it back',
                quote_ident(definer),
                CASE g.kind WHEN 'schema' THEN format('USAGE on schema %I', g.schema_name)
                            WHEN 'function' THEN format('EXECUTE on function %s', g.table_name)
                            ELSE format('SELECT on %I.%I%s', g.schema_name, g.table_name,
                                        coalesce(' (' || array_to_string(g.columns, ', ') || ')', '')) END,
                quote_ident(rr.reader))
    FROM docsync.reader_roles rr
    JOIN docsync.reader_grants g ON g.reader = rr.reader AND g.kind IN ('schema', 'table', 'function')
   WHERE rr.definer = reader_stale.definer AND to_regrole(quote_ident(definer)) IS NOT NULL
     AND NOT docsync.reader_grant_held(g, to_regrole(quote_ident(definer)))
   ORDER BY g.granted_at, g.kind, g.schema_name, g.table_name
   LIMIT 1
$$;

-- reader_stale for the definer of a reader role: docsync.compute_as calls it (directly, as the
-- extension's owner) before every compute, so a REVOKE from a definer stops its computes at once.
CREATE FUNCTION docsync.reader_stale_for(reader name) RETURNS text
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT docsync.reader_stale(rr.definer) FROM docsync.reader_roles rr WHERE rr.reader = reader_stale_for.reader
$$;

-- Revokes one privilege grant_reader recorded (a docsync.reader_grants row of kind schema, table or
-- function) from its reader role and forgets it; returns the REVOKE run, or null when its object or
-- role is gone (the row is forgotten all the same).
CREATE FUNCTION docsync.revoke_reader_grant(g docsync.reader_grants) RETURNS text
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  stmt text;
BEGIN
  DELETE FROM docsync.reader_grants x
   WHERE x.role = g.role AND x.kind = g.kind AND x.reader IS NOT DISTINCT FROM g.reader
     AND x.schema_name IS NOT DISTINCT FROM g.schema_name AND x.table_name IS NOT DISTINCT FROM g.table_name
     AND x.columns IS NOT DISTINCT FROM g.columns;
  IF to_regrole(quote_ident(g.reader)) IS NULL THEN
    RETURN NULL;
  END IF;
  IF g.kind = 'schema' AND to_regnamespace(quote_ident(g.schema_name)) IS NOT NULL THEN
    stmt := format('REVOKE USAGE ON SCHEMA %I FROM %I', g.schema_name, g.reader);
  ELSIF g.kind = 'function' AND to_regprocedure(g.table_name) IS NOT NULL THEN
    stmt := format('REVOKE EXECUTE ON FUNCTION %s FROM %I', to_regprocedure(g.table_name), g.reader);
  ELSIF g.kind = 'table' AND to_regclass(format('%I.%I', g.schema_name, g.table_name)) IS NOT NULL THEN
    stmt := CASE WHEN g.columns IS NULL
                 THEN format('REVOKE SELECT ON TABLE %I.%I FROM %I', g.schema_name, g.table_name, g.reader)
                 ELSE format('REVOKE SELECT (%s) ON TABLE %I.%I FROM %I',
                             (SELECT string_agg(quote_ident(c), ', ') FROM unnest(g.columns) c
                               WHERE EXISTS (SELECT FROM pg_attribute a
                                              WHERE a.attrelid = to_regclass(format('%I.%I', g.schema_name, g.table_name))
                                                AND a.attname = c AND a.attnum > 0 AND NOT a.attisdropped)),
                             g.schema_name, g.table_name, g.reader) END;
    IF stmt IS NULL THEN
      RETURN NULL;  -- every column dropped
    END IF;
  ELSE
    RETURN NULL;
  END IF;
  EXECUTE stmt;
  RETURN stmt;
END
$$;

-- The worker's pool role: for each definer, a reader role (docsync.ensure_reader_role) holding
-- SELECT on what that definer's doc and keys queries read, never more than it may read, and USAGE
-- on those schemas; the pool role is made a member of each (and NOINHERIT, so that it holds none of
-- their rights itself), and may run docsync.compute_as, which every compute runs first. The pool
-- role itself is granted no table. System catalogs are never granted.
CREATE FUNCTION docsync.grant_reader(role text) RETURNS SETOF text
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
    SELECT 'member', NULL, NULL, NULL, format('GRANT %I TO %I', rr.reader, role), rr.reader
      FROM docsync_reader_roles rr
     WHERE NOT pg_has_role(r.oid, to_regrole(quote_ident(rr.reader)), 'MEMBER')
    UNION ALL
    SELECT 'compute', NULL, NULL, NULL,
           format('GRANT USAGE ON SCHEMA docsync TO %I; GRANT EXECUTE ON FUNCTION docsync.compute_as(name, text) TO %I', role, role),
           NULL
     WHERE NOT has_function_privilege(r.oid, 'docsync.compute_as(name, text)', 'EXECUTE')
        OR NOT has_schema_privilege(r.oid, 'docsync', 'USAGE')
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
COMMENT ON FUNCTION docsync.grant_reader(text) IS
  'grant the worker''s pool role SELECT on what the doc and keys queries read, within what their definers may read; returns the GRANTs run';

-- Undoes what grant_reader granted for a pool role (or for every one, when role is null: DROP
-- EXTENSION), and only that: its memberships in reader roles, its EXECUTE on compute_as, and what
-- the reader roles were granted on its behalf. Privileges held before, from anyone, stay. Objects
-- renamed or dropped since are skipped with a NOTICE. The reader roles themselves stay until DROP
-- EXTENSION.
CREATE FUNCTION docsync.revoke_reader(role text) RETURNS SETOF text
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  g docsync.reader_grants;
  stmt text;
  grantee name;
BEGIN
  FOR g IN DELETE FROM docsync.reader_grants x WHERE revoke_reader.role IS NULL OR x.role = revoke_reader.role
           RETURNING * LOOP
    IF to_regrole(quote_ident(g.role)) IS NULL THEN
      CONTINUE;
    END IF;
    grantee := coalesce(g.reader, g.role);
    IF g.kind IN ('schema', 'table', 'function') AND to_regrole(quote_ident(grantee)) IS NULL THEN
      CONTINUE;
    END IF;
    IF g.kind = 'member' THEN
      IF to_regrole(quote_ident(g.reader)) IS NULL THEN
        CONTINUE;
      END IF;
      stmt := format('REVOKE %I FROM %I', g.reader, g.role);
    ELSIF g.kind = 'function' THEN
      IF to_regprocedure(g.table_name) IS NULL THEN
        RAISE NOTICE 'function % no longer exists under that signature: revoke by hand if it was renamed', g.table_name;
        CONTINUE;
      END IF;
      stmt := format('REVOKE EXECUTE ON FUNCTION %s FROM %I', g.table_name, grantee);
    ELSIF g.kind = 'noinherit' THEN
      stmt := format('ALTER ROLE %I INHERIT', g.role);
    ELSIF g.kind = 'compute' THEN
      stmt := format('REVOKE EXECUTE ON FUNCTION docsync.compute_as(name, text) FROM %I; REVOKE USAGE ON SCHEMA docsync FROM %I',
                     g.role, g.role);
    ELSIF g.kind = 'schema' THEN
      IF to_regnamespace(quote_ident(g.schema_name)) IS NULL THEN
        RAISE NOTICE 'schema % no longer exists: nothing to revoke', quote_ident(g.schema_name);
        CONTINUE;
      END IF;
      stmt := format('REVOKE USAGE ON SCHEMA %I FROM %I', g.schema_name, grantee);
    ELSE
      IF to_regclass(format('%I.%I', g.schema_name, g.table_name)) IS NULL THEN
        RAISE NOTICE 'table %.% no longer exists under that name: revoke by hand if it was renamed',
                     quote_ident(g.schema_name), quote_ident(g.table_name);
        CONTINUE;
      END IF;
      stmt := CASE WHEN g.columns IS NULL
                   THEN format('REVOKE SELECT ON TABLE %I.%I FROM %I', g.schema_name, g.table_name, grantee)
                   ELSE format('REVOKE SELECT (%s) ON TABLE %I.%I FROM %I',
                               (SELECT string_agg(quote_ident(c), ', ') FROM unnest(g.columns) c),
                               g.schema_name, g.table_name, grantee) END;
    END IF;
    EXECUTE stmt;
    RETURN NEXT stmt;
  END LOOP;
  IF role IS NOT NULL AND NOT FOUND AND to_regrole(quote_ident(role)) IS NULL THEN
    RAISE EXCEPTION 'role "%" does not exist', role
      USING ERRCODE = 'undefined_object', DETAIL = 'revoke_reader revokes what grant_reader granted to a role.',
            HINT = 'See the roles granted to in docsync.reader_grants.';
  END IF;
END
$$;
COMMENT ON FUNCTION docsync.revoke_reader(text) IS
  'revoke what docsync.grant_reader granted to a role (null: to every role); returns the REVOKEs run';

-- The worker's replication role (--dsn): reads definitions and advances generations. The
-- REPLICATION attribute itself is the DBA's: ALTER ROLE … REPLICATION.
CREATE FUNCTION docsync.grant_replication(role text) RETURNS SETOF text
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
END
$$;
COMMENT ON FUNCTION docsync.grant_replication(text) IS
  'grant the worker''s replication role what it reads and calls in the docsync schema; returns the GRANTs run';

-- Before DROP EXTENSION docsync: take back what grant_reader granted, and warn about each docsync
-- slot of this database, which outlives the extension and keeps holding WAL until it is dropped.
CREATE FUNCTION docsync._before_drop() RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  stmt text;
  s record;
BEGIN
  FOR stmt IN SELECT docsync.revoke_reader(NULL) LOOP
    RAISE NOTICE 'docsync: %', stmt;
  END LOOP;
  -- the reader roles docsync made; one that still holds privileges elsewhere (another database's
  -- docsync) stays, with a notice
  FOR s IN DELETE FROM docsync.reader_roles r RETURNING r.reader LOOP
    CONTINUE WHEN to_regrole(quote_ident(s.reader)) IS NULL;
    BEGIN
      EXECUTE format('DROP ROLE %I', s.reader);
      RAISE NOTICE 'docsync: DROP ROLE %', quote_ident(s.reader);
    EXCEPTION WHEN dependent_objects_still_exist THEN
      RAISE NOTICE 'docsync: role % stays: %', quote_ident(s.reader), SQLERRM;
    END;
  END LOOP;
  FOR s IN SELECT r.slot_name, r.active_pid,
                  pg_size_pretty(pg_wal_lsn_diff(pg_current_wal_lsn(), r.restart_lsn)) AS held
             FROM pg_replication_slots r
            WHERE r.plugin = 'docsync' AND r.database = current_database()
            ORDER BY r.slot_name LOOP
    RAISE WARNING 'replication slot "%" of docsync stays after DROP EXTENSION and holds % of WAL', s.slot_name, s.held
      USING DETAIL = CASE WHEN s.active_pid IS NOT NULL
                          THEN format('A docsync-worker (pid %s) still streams it.', s.active_pid)
                          ELSE 'The server keeps every WAL segment the slot has not confirmed until the slot is dropped.' END,
            HINT = format('Stop its docsync-worker, then run: SELECT pg_drop_replication_slot(%L);', s.slot_name);
  END LOOP;
END
$$;
CREATE FUNCTION docsync.on_drop_extension() RETURNS event_trigger
LANGUAGE c AS 'MODULE_PATHNAME', 'docsync_on_drop_extension';
CREATE EVENT TRIGGER docsync_drop_extension ON ddl_command_start
  WHEN TAG IN ('DROP EXTENSION')
  EXECUTE FUNCTION docsync.on_drop_extension();

-------------------------------------------------------------------------------
-- end of the SQL API part; status views follow
-------------------------------------------------------------------------------

-- sql/parts/11_status.sql: status: the status-file functions (plugin/status.c), docsync.workers,
-- docsync.status, docsync.query_stats, forget_slot and pg_monitor's grants.
-- ---------------------------------------------------------------------------------------------------
-- Status: the workers' status files (plugin/status.c) joined with what the server knows of the slots.
-- Readable by pg_monitor. Liveness is the worker's lock file, its heartbeat and the slot's
-- active_pid: an inactive slot whose lock file no process on this host holds means the worker is gone
-- (state `stopped`) at once; where the lock cannot be seen (another host), a heartbeat older than 5 s
-- on an inactive slot does.
-- ---------------------------------------------------------------------------------------------------

CREATE FUNCTION docsync.status_files(
    OUT status_file text, OUT database text, OUT slot_name text, OUT read_error text,
    OUT layout_version integer, OUT worker_pid integer, OUT state text,
    OUT started_at timestamptz, OUT heartbeat_at timestamptz, OUT generation bigint,
    OUT received_lsn pg_lsn, OUT acked_lsn pg_lsn, OUT acked_at timestamptz,
    OUT open_txns bigint, OUT dirty_depth bigint, OUT in_flight bigint, OUT live_docs bigint,
    OUT changes bigint, OUT recomputes bigint, OUT publishes bigint, OUT permanent_failures bigint,
    OUT transient_retries bigint, OUT valve_resets bigint, OUT not_visible_retries bigint,
    OUT audit_samples bigint, OUT audit_divergences bigint,
    OUT recompute text, OUT recompute_done bigint, OUT recompute_total bigint,
    OUT recompute_started_at timestamptz, OUT recompute_finished_at timestamptz,
    OUT last_error text, OUT last_error_at timestamptz, OUT queries_omitted integer,
    OUT lock_held boolean)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'docsync_status_files'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION docsync.status_files() IS
  'one row per status file in docsync.status_dir: the worker''s report, or read_error saying why it is not trusted';

CREATE FUNCTION docsync.status_file_queries(
    OUT database text, OUT slot_name text, OUT query text, OUT recomputes bigint,
    OUT permanent_failures bigint, OUT mean_compute_ms double precision, OUT last_error text,
    OUT last_error_at timestamptz, OUT batch_set_aside text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'docsync_status_file_queries'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION docsync.status_file_queries() IS
  'per-query counters from every trusted status file in docsync.status_dir';

CREATE FUNCTION docsync.status_directory() RETURNS text
AS 'MODULE_PATHNAME', 'docsync_status_directory'
LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION docsync.status_directory() IS 'the directory docsync.status_dir names';

-- The workers of each slot, from their leases (worker/replication/lease.hpp): on a connection of its
-- own, the active worker holds a session-level advisory lock on hashtextextended(slot, 1685288801)
-- and every hot spare (--standby) a shared one on hashtextextended(slot, 1685288819). Their
-- connections' backend_start is when the worker started, or began to wait. Anyone may take an
-- advisory lock: only sessions of roles that can stream a slot (REPLICATION or superuser) are
-- listed, so a session squatting on a key is no worker here (the worker's log names it).
CREATE VIEW docsync.workers AS
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
 WHERE s.plugin = 'docsync';
COMMENT ON VIEW docsync.workers IS
  'the workers of each docsync slot: the active one and its hot spares (--standby), from the leases they hold';

CREATE VIEW docsync.status AS
WITH files AS (
    SELECT * FROM docsync.status_files()
), slots AS (
    SELECT s.slot_name::text AS slot_name, s.database::text AS database, s.active, s.active_pid,
           s.restart_lsn, s.confirmed_flush_lsn, s.wal_status
      FROM pg_catalog.pg_replication_slots s
     WHERE s.plugin = 'docsync'
), server AS (
    SELECT CASE WHEN pg_catalog.pg_is_in_recovery() THEN pg_catalog.pg_last_wal_replay_lsn()
                ELSE pg_catalog.pg_current_wal_lsn() END AS wal_lsn,
           pg_catalog.statement_timestamp() AS now,
           docsync.status_directory() AS dir,
           -- servers with output_plugin_libraries let a role without superuser use only listed plugins
           docsync.output_plugin_problem() AS plugin_problem
), uncovered AS (
    -- this database's doc queries whose docs go stale because a table they read has no watch
    SELECT pg_catalog.string_agg(u.message, '; ' ORDER BY u.query) AS problem
      FROM docsync.uncovered_queries() u
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

CREATE VIEW docsync.query_stats AS
SELECT q.database, q.slot_name, q.query, q.recomputes, q.permanent_failures,
       round(q.mean_compute_ms::numeric, 3)::double precision AS mean_compute_ms,
       q.last_error, q.last_error_at, q.batch_set_aside
  FROM docsync.status_file_queries() q;
COMMENT ON VIEW docsync.query_stats IS 'per doc query counters reported by each running or last-run worker, and why it set a batched form aside';

-- Forgetting a slot removes files: superusers only, unless one grants it.
CREATE FUNCTION docsync.forget_slot(slot name, database name DEFAULT pg_catalog.current_database())
RETURNS SETOF text
AS 'MODULE_PATHNAME', 'docsync_forget_slot'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION docsync.forget_slot(name, name) IS
  'removes the status and lock files of a slot no worker serves (refused while the slot exists or a worker holds it), so docsync.status stops showing it; returns the files removed';
REVOKE ALL ON FUNCTION docsync.forget_slot(name, name) FROM PUBLIC;

REVOKE ALL ON FUNCTION docsync.status_files(), docsync.status_file_queries(), docsync.status_directory() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION docsync.status_files(), docsync.status_file_queries(), docsync.status_directory() TO pg_monitor;
GRANT EXECUTE ON FUNCTION docsync.uncovered_queries() TO pg_monitor;
GRANT USAGE ON SCHEMA docsync TO pg_monitor;
GRANT SELECT ON docsync.status, docsync.query_stats, docsync.workers TO pg_monitor;

-- sql/parts/12_wait.sql: read-your-writes: the procedure docsync.wait_published (plugin/wait.c).
-- Read-your-writes: true once the docsync slots of this database (or the one named) have confirmed
-- lsn, i.e. the worker published the docs of every transaction before it and the server processed
-- its acknowledgement; false at the timeout. A procedure (plugin/wait.c), so that a CALL outside a
-- transaction block commits before it waits and holds no snapshot meanwhile.
CREATE PROCEDURE docsync.wait_published(
    lsn pg_lsn DEFAULT pg_catalog.pg_current_wal_insert_lsn(),
    timeout interval DEFAULT '5s',
    slot name DEFAULT NULL,
    INOUT published boolean DEFAULT NULL)
AS 'MODULE_PATHNAME', 'docsync_wait_published'
LANGUAGE C;
COMMENT ON PROCEDURE docsync.wait_published(pg_lsn, interval, name, boolean) IS
  'waits until the docs of every transaction before lsn are published (the docsync slots of this database, or slot, confirmed it); published is false at the timeout';

-- sql/parts/13_grants.sql: function privileges: what PUBLIC and docsync_admin may run.
-- Functions: PUBLIC may run only docsync.channel(), which clients use to name docs, the API
-- functions, which refuse, saying why and how to get the right, anyone who is neither a superuser
-- nor a member of docsync_admin, and the procedure docsync.wait_published, which reveals no more
-- than the slots' positions. docsync_admin runs what the definition views call; the worker's
-- roles get theirs from grant_replication; pg_monitor reads the status views (above).
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA docsync FROM PUBLIC;
GRANT EXECUTE ON FUNCTION docsync.channel(text, text[]), docsync.channel(text),
  docsync.define_query(text, text, text[], boolean, text),
  docsync.watch(text, text, text[], text, text[], boolean, text), docsync.unwatch(text, text, text[], text, text),
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
  docsync.stored_batch_sql(text, bigint), docsync.stored_key_types(text), docsync.uncovered_queries()
  TO docsync_admin;
GRANT SELECT ON docsync.watch_targets TO docsync_admin;
-- sql/parts/14_sink_record.sql: what a sink should hold, kept outside it: docsync.sink_state, the
-- UNLOGGED live journal, the functions the worker writes them with, and the docsync.sinks view.
-- What a sink should hold, kept outside it (docs/design.md, "sink checks"). The worker writes both
-- through its replication role (--dsn: the pool may be a read-only standby), with the functions
-- below, which grant_replication grants.
--
-- sink_state: per slot and sink, the highest version the worker read back from the sink. A sink
-- whose own highest version is below it at the next start lost docs (restored from an older
-- snapshot, flushed, restarted without persistence, a file truncated or replaced). Written at most
-- every few seconds, only when the sink's version moved; left out of pg_dump (another database
-- restored from a dump has other sinks' history).
CREATE TABLE docsync.sink_state (
  slot       name NOT NULL,
  sink       text NOT NULL,
  generation bigint NOT NULL,
  lsn        pg_lsn NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (slot, sink)
);
COMMENT ON TABLE docsync.sink_state IS 'docsync: the highest doc version each slot''s worker saw in each sink';

-- live_journal: the channels a worker with --live all keeps current, written in batches when a
-- change first names a doc (before it is ever published), so a doc the sink never held or lost
-- is still recomputed after a restart, the WAL safety valve or a sink's loss. UNLOGGED: no WAL, so
-- no decoding and no replication cost; after a crash of PostgreSQL or on a standby it is empty, and
-- the next worker writes back what the sink holds (only a sink lost together with it loses docs).
CREATE UNLOGGED TABLE docsync.live_journal (
  slot    name NOT NULL,
  channel text NOT NULL,
  PRIMARY KEY (slot, channel)
);
COMMENT ON TABLE docsync.live_journal IS 'docsync: the channels each slot''s worker keeps current (--live all)';

CREATE FUNCTION docsync.sink_recorded(slot name, sink text, OUT generation bigint, OUT lsn pg_lsn)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT s.generation, s.lsn FROM docsync.sink_state s WHERE s.slot = sink_recorded.slot AND s.sink = sink_recorded.sink
$$;
COMMENT ON FUNCTION docsync.sink_recorded(name, text) IS
  'the highest doc version recorded for a slot''s sink (null: none yet)';

CREATE FUNCTION docsync.sink_confirmed(slot name, sink text, generation bigint, lsn pg_lsn) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF slot IS NULL OR sink IS NULL OR generation IS NULL OR lsn IS NULL THEN
    RAISE EXCEPTION 'docsync.sink_confirmed arguments must not be null'
      USING ERRCODE = 'null_value_not_allowed', DETAIL = 'slot, sink, generation and lsn name a sink''s version.',
            HINT = 'Pass every argument.';
  END IF;
  -- Set, not raised: a sink a worker found to have lost docs starts again from what it holds.
  INSERT INTO docsync.sink_state AS s (slot, sink, generation, lsn)
  VALUES (slot, sink, generation, lsn)
  ON CONFLICT ON CONSTRAINT sink_state_pkey DO UPDATE
    SET generation = excluded.generation, lsn = excluded.lsn, updated_at = now()
    WHERE (s.generation, s.lsn) IS DISTINCT FROM (excluded.generation, excluded.lsn);
END
$$;
COMMENT ON FUNCTION docsync.sink_confirmed(name, text, bigint, pg_lsn) IS
  'records the highest doc version a slot''s worker read back from its sink';

CREATE FUNCTION docsync.journal_name(slot name, channels text[]) RETURNS bigint
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  WITH added AS (
    INSERT INTO docsync.live_journal (slot, channel)
    SELECT journal_name.slot, c FROM pg_catalog.unnest(channels) c WHERE c IS NOT NULL
    ON CONFLICT ON CONSTRAINT live_journal_pkey DO NOTHING
    RETURNING 1)
  SELECT pg_catalog.count(*) FROM added
$$;
COMMENT ON FUNCTION docsync.journal_name(name, text[]) IS
  'adds channels to a slot''s live journal; returns how many were new';

CREATE FUNCTION docsync.journal_forget(slot name, channels text[]) RETURNS bigint
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  WITH gone AS (
    DELETE FROM docsync.live_journal j
     WHERE j.slot = journal_forget.slot AND j.channel = ANY (channels)
    RETURNING 1)
  SELECT pg_catalog.count(*) FROM gone
$$;
COMMENT ON FUNCTION docsync.journal_forget(name, text[]) IS
  'removes channels from a slot''s live journal; returns how many were there';

CREATE FUNCTION docsync.journal_channels(slot name) RETURNS SETOF text
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT j.channel FROM docsync.live_journal j WHERE j.slot = journal_channels.slot
$$;
COMMENT ON FUNCTION docsync.journal_channels(name) IS 'the channels in a slot''s live journal';

-- What docsync.status does not say per sink: the recorded version and the size of the journal.
CREATE VIEW docsync.sinks AS
  SELECT s.slot, s.sink, s.generation, s.lsn, s.updated_at,
         (SELECT pg_catalog.count(*) FROM docsync.live_journal j WHERE j.slot = s.slot) AS journaled_channels
    FROM docsync.sink_state s;
COMMENT ON VIEW docsync.sinks IS
  'docsync: per slot and sink, the highest doc version its worker saw there, and the channels it journals';

REVOKE ALL ON FUNCTION docsync.sink_recorded(name, text), docsync.sink_confirmed(name, text, bigint, pg_lsn),
  docsync.journal_name(name, text[]), docsync.journal_forget(name, text[]), docsync.journal_channels(name)
  FROM PUBLIC;
GRANT SELECT ON docsync.sinks TO pg_monitor, docsync_admin;
