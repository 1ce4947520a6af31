\set VERBOSITY terse
SET synchronous_commit = on;

CREATE EXTENSION docsync;
SELECT extname, extversion, nspname
  FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
 WHERE extname = 'docsync';

-- the output plugin loads for a slot and decodes a committed change
CREATE TABLE setup_t (id int PRIMARY KEY, v text);
SELECT 'init' FROM pg_create_logical_replication_slot('regress_setup', 'docsync');
INSERT INTO setup_t VALUES (1, 'a');
SELECT count(*) AS records
  FROM pg_logical_slot_get_binary_changes('regress_setup', NULL, NULL, 'format', 'binary');

-- bad options fail at slot start, naming the option
SELECT count(*) FROM pg_logical_slot_get_changes('regress_setup', NULL, NULL, 'no_such_option', '1');
SELECT count(*) FROM pg_logical_slot_get_changes('regress_setup', NULL, NULL, 'proto_version', '99');
SELECT count(*) FROM pg_logical_slot_get_changes('regress_setup', NULL, NULL, 'format', 'xml');

SELECT pg_drop_replication_slot('regress_setup');
DROP TABLE setup_t;
