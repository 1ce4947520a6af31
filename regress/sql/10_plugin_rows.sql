-- docsync output plugin: every record type and every common value type, in text and binary format
\set VERBOSITY terse
SET synchronous_commit = on;
SET TIME ZONE 'UTC';

CREATE TABLE rows_all (id int PRIMARY KEY, b bigint, n numeric, t text, flag bool, ts timestamptz,
                       u uuid, j jsonb, arr text[], raw bytea, big text);
ALTER TABLE rows_all ALTER big SET STORAGE EXTERNAL;
CREATE TABLE rows_unwatched (id int PRIMARY KEY, v text);
CREATE TABLE "Odd ""Name""" ("Key" int PRIMARY KEY, "sp ace" text, "ünï" text, "select" int);
SELECT 'init' FROM pg_create_logical_replication_slot('regress_rows', 'docsync');

INSERT INTO rows_all VALUES
  (1, 9223372036854775807, -12345.678901234567890123, E'it''s a "test" \\ with\nnewline\ttab and ünicode ✓',
   true, '2024-02-29 23:59:59.123456+00', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11',
   '{"k": [1, "two", null, {"x": 1.5}]}', ARRAY['a,b', NULL, 'c"d'], '\x00ff7f', repeat('x', 4000));
INSERT INTO rows_all (id, t) VALUES (2, '');
INSERT INTO rows_unwatched VALUES (1, 'never emitted');
-- a TOASTed value unchanged by an UPDATE is marked, not resent
UPDATE rows_all SET t = 'changed', b = NULL WHERE id = 1;
-- the key changes: the old key is logged, other old values are unknown
UPDATE rows_all SET id = 3 WHERE id = 2;
DELETE FROM rows_all WHERE id = 3;
INSERT INTO "Odd ""Name""" VALUES (1, 'space', 'ü', 7);
UPDATE "Odd ""Name""" SET "ünï" = 'v' WHERE "Key" = 1;
TRUNCATE rows_all, rows_unwatched;
TRUNCATE "Odd ""Name""" RESTART IDENTITY CASCADE;

SELECT data FROM pg_logical_slot_peek_changes('regress_rows', NULL, NULL, 'format', 'text',
  'tables', 'public.rows_all(id, b, n, t, flag, ts, u, j, arr, raw), "Odd ""Name"""("Key", "ünï", "select", "sp ace")');

-- the out-of-line value: sent whole by INSERT, marked TOAST when an UPDATE leaves it alone
SELECT regexp_replace(data, 'x{200}x*', '<4000 x>') AS data
  FROM pg_logical_slot_peek_changes('regress_rows', NULL, NULL, 'format', 'text', 'tables', 'rows_all(id, big)');

-- a listed column that does not exist is emitted as unknown, with one warning
SELECT data FROM pg_logical_slot_peek_changes('regress_rows', NULL, NULL, 'format', 'text',
  'tables', '"Odd ""Name"""("Key", "SELECT")');

-- a column list projects: only id and t, in attnum order, whatever the listed order
SELECT data FROM pg_logical_slot_peek_changes('regress_rows', NULL, NULL, 'format', 'text',
  'tables', 'rows_all (t, id, t)');

-- binary is the default. Helpers to read the varints of shared/docsync_wire.h from SQL:
CREATE FUNCTION regress_uv(v bigint) RETURNS bytea LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  result bytea := '';
BEGIN
  LOOP
    IF v < 128 THEN
      RETURN result || set_byte('\x00'::bytea, 0, v::int);
    END IF;
    result := result || set_byte('\x00'::bytea, 0, ((v & 127) | 128)::int);
    v := v >> 7;
  END LOOP;
END $$;
CREATE FUNCTION regress_uvs(data bytea, pos int, n int) RETURNS numeric[] LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  result numeric[] := '{}';
  v numeric;
  shift int;
  b int;
BEGIN
  FOR i IN 1..n LOOP
    v := 0; shift := 0;
    LOOP
      b := get_byte(data, pos);
      pos := pos + 1;
      v := v + (b & 127) * (2::numeric ^ shift);
      EXIT WHEN b < 128;
      shift := shift + 7;
    END LOOP;
    result := result || v;
  END LOOP;
  RETURN result;
END $$;

-- every record but BEGIN and COMMIT has fixed bytes once the relid (a varint after the type) is cut out
SELECT chr(get_byte(data, 0)) AS type,
       substr(data, 2, length(regress_uv('rows_all'::regclass::oid::bigint))) = regress_uv('rows_all'::regclass::oid::bigint) AS relid_ok,
       encode(substr(data, 2 + length(regress_uv('rows_all'::regclass::oid::bigint))), 'hex') AS rest
  FROM pg_logical_slot_peek_binary_changes('regress_rows', NULL, NULL,
    'tables', 'rows_all(id, t, flag)', 'proto_version', '1')
 WHERE get_byte(data, 0) NOT IN (ascii('B'), ascii('C'), ascii('T'));
-- TRUNCATE: flags, count, relids
SELECT encode(data, 'hex') = '5400' || '01' || encode(regress_uv('rows_all'::regclass::oid::bigint), 'hex') AS truncate_ok
  FROM pg_logical_slot_peek_binary_changes('regress_rows', NULL, NULL, 'tables', 'rows_all(id)')
 WHERE get_byte(data, 0) = ascii('T');

-- BEGIN: the xid is the transaction's, its commit LSN is the COMMIT's, the commit time is recent;
-- COMMIT: the end LSN is the position the row reports (what a client acknowledges)
WITH recs AS (
  SELECT row_number() OVER () AS n, lsn, xid, data, chr(get_byte(data, 0)) AS type
    FROM pg_logical_slot_peek_binary_changes('regress_rows', NULL, NULL, 'tables', 'rows_all(id)')),
 b AS (SELECT n, xid, regress_uvs(data, 1, 3) AS v FROM recs WHERE type = 'B'),
 c AS (SELECT n, lsn, regress_uvs(data, 1, 2) AS v FROM recs WHERE type = 'C')
SELECT count(*) AS transactions,
       bool_and(b.v[1] = b.xid::text::numeric) AS xid_ok,
       bool_and(b.v[2] = c.v[1]) AS commit_lsn_ok,
       bool_and(c.v[2] = c.lsn - '0/0'::pg_lsn) AS end_lsn_ok,
       bool_and(c.v[2] > c.v[1]) AS end_after_commit,
       bool_and('2000-01-01 00:00 UTC'::timestamptz + (b.v[3] / 2) * interval '1 microsecond'
                BETWEEN now() - interval '1 hour' AND clock_timestamp()) AS commit_time_ok
  FROM b JOIN c ON c.n = (SELECT min(n) FROM recs WHERE type = 'C' AND recs.n > b.n);

-- getting the changes consumes them
SELECT count(*) > 0 AS consumed FROM pg_logical_slot_get_binary_changes('regress_rows', NULL, NULL, 'tables', 'rows_all');
SELECT count(*) AS left_over FROM pg_logical_slot_get_binary_changes('regress_rows', NULL, NULL, 'tables', 'rows_all');
-- text output needs format 'text': a clear error, and the next session still works
SELECT count(*) FROM pg_logical_slot_peek_changes('regress_rows', NULL, NULL, 'tables', 'rows_all');
SELECT count(*) FROM pg_logical_slot_peek_changes('regress_rows', NULL, NULL, 'tables', 'rows_all', 'format', 'text');

SELECT pg_drop_replication_slot('regress_rows');
DROP TABLE rows_all, rows_unwatched, "Odd ""Name""";
DROP FUNCTION regress_uvs(bytea, int, int);
DROP FUNCTION regress_uv(bigint);
