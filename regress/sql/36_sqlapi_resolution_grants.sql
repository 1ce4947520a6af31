-- What is checked is what runs, for every object name resolution finds: grant_reader grants the
-- reader role USAGE on each schema the definer's query resolved a name through (operators, sort
-- operators, types, collations, functions, relations), where the definer has it, so a compute as the
-- reader role under the stored search_path resolves the same objects and gives the same doc.
SET client_min_messages = warning;
CREATE ROLE regress_rw LOGIN IN ROLE docsync_admin;
CREATE ROLE regress_rpool LOGIN;
CREATE SCHEMA res_ops;   -- operators || (text, int) and <<< (int, int)
CREATE SCHEMA res_opf;   -- the operator's function
CREATE SCHEMA res_typ;   -- a domain named in a cast
CREATE SCHEMA res_col;   -- a collation named in COLLATE
CREATE SCHEMA res_ws AUTHORIZATION regress_rw;
CREATE FUNCTION res_opf.cat_int(a text, b int) RETURNS text LANGUAGE sql IMMUTABLE
  AS $$ SELECT pg_catalog.textcat(a, pg_catalog.textcat('<', pg_catalog.textcat(b::text, '>'))) $$;
CREATE OPERATOR res_ops.|| (LEFTARG = text, RIGHTARG = int, FUNCTION = res_opf.cat_int);
CREATE FUNCTION res_opf.int_lt(a int, b int) RETURNS boolean LANGUAGE sql IMMUTABLE AS $$ SELECT a > b $$;
CREATE OPERATOR res_ops.<<< (LEFTARG = int, RIGHTARG = int, FUNCTION = res_opf.int_lt);
CREATE DOMAIN res_typ.code AS text CHECK (VALUE <> '');
CREATE COLLATION res_col.c_copy (locale = 'C');
GRANT USAGE ON SCHEMA res_ops, res_opf, res_typ, res_col TO regress_rw;
SET ROLE regress_rw;
CREATE TABLE res_ws.t (id int PRIMARY KEY, name text);
INSERT INTO res_ws.t VALUES (1, 'b'), (2, 'a');
SELECT docsync.define_query('res_op', $$SELECT to_jsonb('id' || $1::int)$$, ARRAY['id'], search_path => 'res_ops, res_ws', watches => 'manual');
SELECT docsync.define_query('res_cmp', $$SELECT to_jsonb(count(*)) FROM t WHERE id <<< $1$$, ARRAY['id'],
                            search_path => 'res_ops, res_ws', watches => 'manual');
SELECT docsync.define_query('res_type', $$SELECT to_jsonb(name::code) FROM t WHERE id = $1$$, ARRAY['id'],
                            search_path => 'res_typ, res_ws', watches => 'manual');
SELECT docsync.define_query('res_coll', $$SELECT to_jsonb(max(name COLLATE c_copy)) FROM t WHERE id <= $1$$, ARRAY['id'],
                            search_path => 'res_col, res_ws', watches => 'manual');
SELECT docsync.watch(q, 'res_ws.t', params => ARRAY['id'], search_path => 'res_ws') > 0 AS watched
  FROM unnest(ARRAY['res_op', 'res_cmp', 'res_type', 'res_coll']) q;
RESET ROLE;
SELECT stmt FROM docsync.grant_reader('regress_rpool') AS g(stmt) WHERE stmt LIKE '%USAGE ON SCHEMA res_%' ORDER BY 1;
SELECT n AS schema, has_schema_privilege('docsync_reader_regress_rw', n, 'USAGE') AS reader_usage
  FROM unnest(ARRAY['res_ops', 'res_opf', 'res_typ', 'res_col', 'res_ws']) n ORDER BY 1;

-- each doc as the definer checked it, and as the worker computes it (pool role, compute_as)
CREATE TEMP TABLE res_defs AS
  SELECT x.name, x.sql, x.search_path, rr.reader FROM docsync.query_defs x
    JOIN docsync.reader_roles rr ON rr.definer = x.defined_by WHERE x.name LIKE 'res\_%';
GRANT SELECT ON res_defs TO PUBLIC;
CREATE FUNCTION pg_temp.res_compute(q text, id int) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  d record;
  r text;
BEGIN
  SELECT x.sql, x.search_path, x.reader INTO d FROM pg_temp.res_defs x WHERE x.name = q;
  PERFORM docsync.compute_as(d.reader, d.search_path);
  EXECUTE d.sql INTO r USING id;
  RETURN r;
END
$$;
CREATE FUNCTION pg_temp.res_checked(q text, id int) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  d record;
  r text;
BEGIN
  SELECT x.sql, x.search_path INTO d FROM pg_temp.res_defs x WHERE x.name = q;
  PERFORM set_config('search_path', d.search_path, true);
  SET LOCAL ROLE regress_rw;
  EXECUTE d.sql INTO r USING id;
  RETURN r;
END
$$;
BEGIN; SELECT pg_temp.res_checked('res_op', 7) AS op, pg_temp.res_checked('res_cmp', 2) AS cmp,
              pg_temp.res_checked('res_type', 1) AS type, pg_temp.res_checked('res_coll', 2) AS coll; ROLLBACK;
BEGIN READ ONLY; SET LOCAL ROLE regress_rpool; SELECT pg_temp.res_compute('res_op', 7) AS op; ROLLBACK;
BEGIN READ ONLY; SET LOCAL ROLE regress_rpool; SELECT pg_temp.res_compute('res_cmp', 2) AS cmp; ROLLBACK;
BEGIN READ ONLY; SET LOCAL ROLE regress_rpool; SELECT pg_temp.res_compute('res_type', 1) AS type; ROLLBACK;
BEGIN READ ONLY; SET LOCAL ROLE regress_rpool; SELECT pg_temp.res_compute('res_coll', 2) AS coll; ROLLBACK;

-- clean up
SELECT docsync.drop_query(name) FROM docsync.query_defs WHERE name LIKE 'res\_%' ORDER BY name;
SELECT count(*) > 0 AS revoked FROM docsync.revoke_reader('regress_rpool');
DROP TABLE res_defs;
DROP SCHEMA res_ops, res_opf, res_typ, res_col, res_ws CASCADE;
DROP ROLE regress_rpool;
DROP OWNED BY docsync_reader_regress_rw;
DELETE FROM docsync.reader_roles WHERE definer = 'regress_rw';
DROP ROLE docsync_reader_regress_rw;
DROP ROLE regress_rw;
