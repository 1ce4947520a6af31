-- sql/portable/26_runner.sql: each reader role's runner, in which a portable install's computes
-- run (docs/portable.md, compute_as). The extension's compute_as makes a local user id change that
-- refuses every role change until the transaction ends; a plain SQL function cannot. But the server
-- refuses any change of role inside a SECURITY DEFINER function, whatever it calls: so each reader
-- role owns a SECURITY DEFINER function, docsync_run.<reader>(stmt, args), which runs the compute's
-- statement as that role, and a doc or keys query can no longer switch back to the pool role (RESET
-- ROLE, set_config('role', …)) for a moment and return.

-- portable: replaces /CREATE FUNCTION docsync\.ensure_reader_role\(/
@ORIGINAL@;
CREATE SCHEMA docsync_run;
COMMENT ON SCHEMA docsync_run IS 'docsync: each reader role''s runner, owned by that role (docsync.ensure_runner)';

-- The body of every runner: PREPARE types each $n as the unnamed statement the worker would send
-- does; EXECUTE passes the values as literals, which the params' input functions read as they read
-- a bound value; each row comes back as its record's text (record_out: the columns' output
-- functions, as the worker reads them), whatever the statement's columns. Every function and
-- operator is pg_catalog's: it runs under the query's search_path. The worker deallocates every
-- statement after each compute; one left by the query itself is replaced.
CREATE FUNCTION docsync.runner_body() RETURNS text
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $f$
SELECT $b$
DECLARE
  r record;
BEGIN
  IF EXISTS (SELECT FROM pg_catalog.pg_prepared_statements p WHERE p.name OPERATOR(pg_catalog.=) 'docsync_run') THEN
    EXECUTE 'DEALLOCATE docsync_run';
  END IF;
  EXECUTE 'PREPARE docsync_run AS ' OPERATOR(pg_catalog.||) stmt;
  FOR r IN EXECUTE 'EXECUTE docsync_run' OPERATOR(pg_catalog.||) COALESCE(
      (SELECT '(' OPERATOR(pg_catalog.||) pg_catalog.string_agg(pg_catalog.quote_nullable(a), ', ' ORDER BY o)
                  OPERATOR(pg_catalog.||) ')'
         FROM pg_catalog.unnest(args) WITH ORDINALITY AS u(a, o)), '') LOOP
    RETURN NEXT r::pg_catalog.text;
  END LOOP;
END
$b$::text
$f$;

-- Makes the function signature (its name and argument types, as ALTER FUNCTION reads them) anew
-- with the statement create, in schema, owned by role owner: executable by the owner alone, and by the
-- installing role when installer_calls; owner keeps USAGE on schema when owner_calls. The installing
-- role becomes a member of owner for the ALTER FUNCTION … OWNER TO (CREATEROLE), and owner may create
-- in schema, only meanwhile: both end before it returns.
CREATE FUNCTION docsync.make_owned_function(owner name, schema name, signature text, "create" text,
                                            installer_calls boolean, owner_calls boolean) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  member boolean := pg_has_role(current_user, to_regrole(quote_ident(owner)), 'MEMBER');
BEGIN
  IF to_regprocedure(signature) IS NOT NULL THEN
    EXECUTE format('DROP FUNCTION %s', signature);
  END IF;
  IF NOT member THEN
    EXECUTE format('GRANT %I TO %I', owner, current_user);
  END IF;
  EXECUTE format('GRANT USAGE, CREATE ON SCHEMA %I TO %I', schema, owner);
  EXECUTE "create";
  EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', signature);
  EXECUTE format('ALTER FUNCTION %s OWNER TO %I', signature, owner);
  IF installer_calls THEN
    -- granted by owner, as whose member the installing role grants
    EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %I', signature, current_user);
  END IF;
  EXECUTE format('REVOKE %s ON SCHEMA %I FROM %I', CASE WHEN owner_calls THEN 'CREATE' ELSE 'USAGE, CREATE' END,
                 schema, owner);
  IF NOT member THEN
    EXECUTE format('REVOKE %I FROM %I', owner, current_user);
  END IF;
END
$$;

-- Makes (or makes right) docsync_run.<reader>(stmt text, args text[]), owned by the reader role,
-- executable by it alone, and returns the reader role (docsync.make_owned_function). A reader
-- role's computes are read-only transactions, so it never alters its runner.
CREATE FUNCTION docsync.ensure_runner(reader name) RETURNS name
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  fn regprocedure := to_regprocedure(format('docsync_run.%I(text, text[])', reader));
  role_oid oid := to_regrole(quote_ident(reader));
BEGIN
  IF role_oid IS NULL THEN
    RAISE EXCEPTION 'role "%" does not exist', reader USING ERRCODE = 'undefined_object';
  END IF;
  IF fn IS NOT NULL AND EXISTS (
       SELECT FROM pg_proc p
        WHERE p.oid = fn AND p.proowner = role_oid AND p.prosecdef AND p.proconfig IS NULL AND p.proretset
          AND p.prorettype = 'text'::regtype AND p.prosrc = docsync.runner_body()
          AND p.prolang = (SELECT l.oid FROM pg_language l WHERE l.lanname = 'plpgsql')
          AND p.proacl = ARRAY[makeaclitem(role_oid, role_oid, 'EXECUTE', false)]) THEN
    RETURN reader;
  END IF;
  PERFORM docsync.make_owned_function(reader, 'docsync_run', format('docsync_run.%I(text, text[])', reader),
    format('CREATE FUNCTION docsync_run.%I(stmt text, args text[]) RETURNS SETOF text '
           'LANGUAGE plpgsql VOLATILE SECURITY DEFINER AS %L', reader, docsync.runner_body()),
    false, true);
  RETURN reader;
END
$$;

-- Every reader role gets its runner as ensure_reader_role records it (each grant_reader makes the
-- runner of each reader role right again): a BEFORE INSERT trigger fires for the row it proposes,
-- whether or not ON CONFLICT then keeps it. A row of a role that does not exist (a restore before
-- the roles) gets none.
CREATE FUNCTION docsync.reader_role_runner() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF to_regrole(quote_ident(NEW.reader)) IS NOT NULL THEN
    PERFORM docsync.ensure_runner(NEW.reader);
  END IF;
  RETURN NEW;
END
$$;
CREATE TRIGGER reader_role_runner BEFORE INSERT ON docsync.reader_roles
  FOR EACH ROW EXECUTE FUNCTION docsync.reader_role_runner();

-- portable: replaces /CREATE FUNCTION docsync\._before_drop\(\)/
@ORIGINAL@;
ALTER FUNCTION docsync._before_drop() RENAME TO before_drop_roles;
-- The runners and parsers first: a role that owns one cannot be dropped. Then the parser roles
-- (docsync.ensure_parser), with what they were granted here; one that still holds something in
-- another database (docsync installed there too) stays, with a notice.
CREATE FUNCTION docsync._before_drop() RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  parsers name[] := ARRAY(SELECT DISTINCT r.rolname FROM pg_proc p JOIN pg_roles r ON r.oid = p.proowner
                           WHERE p.pronamespace = to_regnamespace('docsync_parse'));
  parser name;
BEGIN
  DROP SCHEMA IF EXISTS docsync_run CASCADE;
  DROP SCHEMA IF EXISTS docsync_parse CASCADE;
  PERFORM docsync.before_drop_roles();
  FOREACH parser IN ARRAY parsers LOOP
    CONTINUE WHEN shobj_description(to_regrole(quote_ident(parser)), 'pg_authid') NOT LIKE 'docsync parser role of %';
    EXECUTE format('REVOKE USAGE ON SCHEMA docsync FROM %I', parser);
    EXECUTE format('REVOKE TEMPORARY ON DATABASE %I FROM %I', current_database(), parser);
    BEGIN
      EXECUTE format('DROP ROLE %I', parser);
      RAISE NOTICE 'docsync: DROP ROLE %', quote_ident(parser);
    EXCEPTION WHEN dependent_objects_still_exist THEN
      RAISE NOTICE 'docsync: role % stays: %', quote_ident(parser), SQLERRM;
    END;
  END LOOP;
END
$$;
