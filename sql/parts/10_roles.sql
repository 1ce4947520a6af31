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
-- their rights itself; a portable install lends it one for each compute instead, and takes standing
-- memberships back), and may run docsync.compute_as, which every compute runs first. The pool
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

