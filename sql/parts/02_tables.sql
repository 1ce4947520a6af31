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
  defined_at  timestamptz NOT NULL DEFAULT now(),
  -- derived: define_query derives its watches from the analysed query (docsync.derive_watches) and
  -- derives them again after DDL; manual: only docsync.watch makes them
  watches     text NOT NULL DEFAULT 'manual' CHECK (watches IN ('manual', 'derived')),
  -- accepted though it calls functions whose reads cannot be analysed (uncovered)
  allow_uncovered boolean NOT NULL DEFAULT false,
  -- why the watches could not be derived again after DDL (the previous ones were kept, and every
  -- table they covered recomputes every live doc); null when they were
  derive_problem text,
  -- the relations (views included) the derived watches were derived from: DDL on one of them, or
  -- a relation made or renamed with the name of one, derives them again (any other DDL, on a
  -- function or a type say, derives every query's again); regclass, so a dump restores it by name
  derived_from regclass[]
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
  -- derived: made by define_query from the analysed query (replaced by a hand-written watch on its
  -- table); manual: made by docsync.watch
  origin          text NOT NULL DEFAULT 'manual' CHECK (origin IN ('manual', 'derived')),
  -- every change of the table recomputes every live doc of the query (no key path)
  broadcast       boolean NOT NULL DEFAULT false,
  -- the columns of the table the query reads; null: all of them (a whole-row reference, or unknown)
  read_columns    name[],
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
-- for that definer's definitions. The pool role is a member of each (a portable install lends it
-- one for each compute), and every compute runs as the reader role of its definition's definer
-- (docsync.compute_as), never with the union of them.
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

