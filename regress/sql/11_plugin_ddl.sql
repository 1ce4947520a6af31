-- docsync output plugin: the stream stays right across DDL (RENAME, ADD/DROP COLUMN, DROP TABLE)
\set VERBOSITY terse
SET synchronous_commit = on;

CREATE TABLE ddl_a (id int PRIMARY KEY, name text, extra text);
CREATE TABLE ddl_b (id int PRIMARY KEY, v int);
-- the worker's form: OID entries with attnums, stable across RENAME
SELECT format('%s(1,2),%s', 'ddl_a'::regclass::oid, 'ddl_b'::regclass::oid) AS oid_tables \gset
SELECT 'init' FROM pg_create_logical_replication_slot('regress_ddl', 'docsync');

INSERT INTO ddl_a VALUES (1, 'one', 'x');
ALTER TABLE ddl_a RENAME TO ddl_renamed;
INSERT INTO ddl_renamed VALUES (2, 'two', 'x');
ALTER TABLE ddl_renamed RENAME COLUMN name TO label;
UPDATE ddl_renamed SET label = 'deux' WHERE id = 2;
-- DDL in the middle of a transaction: the records after it use the new shape
BEGIN;
INSERT INTO ddl_renamed VALUES (3, 'three', 'x');
ALTER TABLE ddl_renamed RENAME COLUMN label TO title;
INSERT INTO ddl_renamed VALUES (4, 'four', 'x');
COMMIT;
-- a new column with a default: old rows get it from the catalog, not from the tuple
ALTER TABLE ddl_b ADD COLUMN added text DEFAULT 'dflt';
INSERT INTO ddl_b (id, v) VALUES (1, 1);
-- a listed column that is dropped becomes unknown (the stream does not wedge)
ALTER TABLE ddl_renamed DROP COLUMN title;
INSERT INTO ddl_renamed (id, extra) VALUES (5, 'y');
DELETE FROM ddl_renamed WHERE id = 5;

SELECT data FROM pg_logical_slot_get_changes('regress_ddl', NULL, NULL, 'format', 'text', 'tables', :'oid_tables');

-- a named entry follows the name: a dropped table's successor under the same name is watched
CREATE TABLE ddl_named (id int PRIMARY KEY, v text);
INSERT INTO ddl_named VALUES (1, 'first');
DROP TABLE ddl_named;
CREATE TABLE ddl_named (v text, id int PRIMARY KEY);
INSERT INTO ddl_named VALUES ('second', 2);
ALTER TABLE ddl_named RENAME TO ddl_named_old;
INSERT INTO ddl_named_old VALUES ('not watched any more', 3);
SELECT data FROM pg_logical_slot_get_changes('regress_ddl', NULL, NULL, 'format', 'text',
  'tables', 'ddl_named(id, v)');

-- a watched table dropped, then a listed OID that no longer exists: nothing to emit, no error
DROP TABLE ddl_b;
INSERT INTO ddl_renamed (id) VALUES (6);
SELECT data FROM pg_logical_slot_get_changes('regress_ddl', NULL, NULL, 'format', 'text', 'tables', :'oid_tables');

SELECT pg_drop_replication_slot('regress_ddl');
DROP TABLE ddl_renamed, ddl_named_old;
