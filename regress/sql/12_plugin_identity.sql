-- docsync output plugin: old values under each REPLICA IDENTITY
\set VERBOSITY terse
SET synchronous_commit = on;

CREATE TABLE id_default (id int PRIMARY KEY, k2 int, v text);
CREATE TABLE id_full (id int, v text, w text);
ALTER TABLE id_full REPLICA IDENTITY FULL;
CREATE TABLE id_nothing (id int PRIMARY KEY, v text);
ALTER TABLE id_nothing REPLICA IDENTITY NOTHING;
CREATE TABLE id_index (id int PRIMARY KEY, code text NOT NULL, v text);
CREATE UNIQUE INDEX id_index_code ON id_index (code);
ALTER TABLE id_index REPLICA IDENTITY USING INDEX id_index_code;
CREATE TABLE id_nokey (id int, v text);
SELECT 'init' FROM pg_create_logical_replication_slot('regress_identity', 'docsync');

INSERT INTO id_default VALUES (1, 10, 'a');
UPDATE id_default SET v = 'b';            -- key unchanged: no old tuple, id is SAME, v UNKNOWN
UPDATE id_default SET id = 2;             -- key changed: old key logged
DELETE FROM id_default;

INSERT INTO id_full VALUES (1, 'a', 'w');
UPDATE id_full SET v = 'b';               -- everything logged: unchanged ones are SAME
UPDATE id_full SET v = NULL, w = NULL;
UPDATE id_full SET v = 'c';               -- old NULL differs from the new value
DELETE FROM id_full;

INSERT INTO id_nothing VALUES (1, 'a');
UPDATE id_nothing SET v = 'b';            -- nothing logged: all UNKNOWN
DELETE FROM id_nothing;

INSERT INTO id_index VALUES (1, 'c1', 'a');
UPDATE id_index SET v = 'b';              -- the index column is SAME, the primary key is not identity
UPDATE id_index SET code = 'c2';
DELETE FROM id_index;

INSERT INTO id_nokey VALUES (1, 'a');     -- no primary key: like NOTHING
UPDATE id_nokey SET v = 'b';

SELECT data FROM pg_logical_slot_get_changes('regress_identity', NULL, NULL, 'format', 'text',
  'tables', 'id_default, id_full, id_nothing, id_index, id_nokey');

-- changing the identity mid-stream rebuilds the relation's description
ALTER TABLE id_default REPLICA IDENTITY FULL;
INSERT INTO id_default VALUES (3, 30, 'c');
UPDATE id_default SET v = 'd';
SELECT data FROM pg_logical_slot_get_changes('regress_identity', NULL, NULL, 'format', 'text',
  'tables', 'id_default(id, v)');

SELECT pg_drop_replication_slot('regress_identity');
DROP TABLE id_default, id_full, id_nothing, id_index, id_nokey;
