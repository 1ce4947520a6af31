-- docsync output plugin: every bad option is an ERROR at slot start that names it; none crashes
\set VERBOSITY default
SET synchronous_commit = on;

CREATE TABLE opt_t (id int PRIMARY KEY, "Quoted Col" text);
SELECT 'init' FROM pg_create_logical_replication_slot('regress_options', 'docsync');
INSERT INTO opt_t VALUES (1, 'a');

-- unknown and duplicate options
SELECT count(*) FROM pg_logical_slot_peek_binary_changes('regress_options', NULL, NULL, 'colour', 'red');
SELECT count(*) FROM pg_logical_slot_peek_binary_changes('regress_options', NULL, NULL, 'format', 'binary', 'format', 'binary');
SELECT count(*) FROM pg_logical_slot_peek_binary_changes('regress_options', NULL, NULL, 'tables', 'opt_t', 'tables', 'opt_t');
-- bad values
SELECT count(*) FROM pg_logical_slot_peek_binary_changes('regress_options', NULL, NULL, 'format', 'json');
SELECT count(*) FROM pg_logical_slot_peek_binary_changes('regress_options', NULL, NULL, 'proto_version', '0');
SELECT count(*) FROM pg_logical_slot_peek_binary_changes('regress_options', NULL, NULL, 'proto_version', '2');
SELECT count(*) FROM pg_logical_slot_peek_binary_changes('regress_options', NULL, NULL, 'proto_version', 'one');
SELECT count(*) FROM pg_logical_slot_peek_binary_changes('regress_options', NULL, NULL, 'proto_version', '99999999999999999999');
SELECT count(*) FROM pg_logical_slot_peek_binary_changes('regress_options', NULL, NULL, 'messages', 'perhaps');
SELECT count(*) FROM pg_logical_slot_peek_binary_changes('regress_options', NULL, NULL, 'origin', 'some');
-- malformed tables values
SELECT count(*) FROM pg_logical_slot_peek_binary_changes('regress_options', NULL, NULL, 'tables', 'opt_t(');
SELECT count(*) FROM pg_logical_slot_peek_binary_changes('regress_options', NULL, NULL, 'tables', 'opt_t()');
SELECT count(*) FROM pg_logical_slot_peek_binary_changes('regress_options', NULL, NULL, 'tables', 'opt_t(id');
SELECT count(*) FROM pg_logical_slot_peek_binary_changes('regress_options', NULL, NULL, 'tables', 'opt_t id');
SELECT count(*) FROM pg_logical_slot_peek_binary_changes('regress_options', NULL, NULL, 'tables', 'opt_t,,x');
SELECT count(*) FROM pg_logical_slot_peek_binary_changes('regress_options', NULL, NULL, 'tables', 'opt_t,');
SELECT count(*) FROM pg_logical_slot_peek_binary_changes('regress_options', NULL, NULL, 'tables', '"unterminated');
SELECT count(*) FROM pg_logical_slot_peek_binary_changes('regress_options', NULL, NULL, 'tables', '""');
SELECT count(*) FROM pg_logical_slot_peek_binary_changes('regress_options', NULL, NULL, 'tables', 'a.b.c');
SELECT count(*) FROM pg_logical_slot_peek_binary_changes('regress_options', NULL, NULL, 'tables', '16384(id)');
SELECT count(*) FROM pg_logical_slot_peek_binary_changes('regress_options', NULL, NULL, 'tables', '16384(0)');
SELECT count(*) FROM pg_logical_slot_peek_binary_changes('regress_options', NULL, NULL, 'tables', '0');
SELECT count(*) FROM pg_logical_slot_peek_binary_changes('regress_options', NULL, NULL, 'tables', '99999999999');
SELECT count(*) FROM pg_logical_slot_peek_binary_changes('regress_options', NULL, NULL, 'tables', 'opt_t(1)');
SELECT count(*) FROM pg_logical_slot_peek_binary_changes('regress_options', NULL, NULL, 'tables', 'opt_t(id) x');
SELECT count(*) FROM pg_logical_slot_peek_binary_changes('regress_options', NULL, NULL, 'tables', '-1');

-- good spellings: whitespace, case folding, quoting, an empty list; the slot was not harmed
SELECT data FROM pg_logical_slot_peek_changes('regress_options', NULL, NULL, 'format', 'text',
  'tables', '  PUBLIC . OPT_T ( ID , "Quoted Col" )  ', 'messages', 'on', 'origin', 'any', 'proto_version', '1');
SELECT count(*) FROM pg_logical_slot_peek_changes('regress_options', NULL, NULL, 'format', 'text', 'tables', '  ');
SELECT count(*) FROM pg_logical_slot_peek_changes('regress_options', NULL, NULL, 'format', 'text', 'tables', '"Opt_T"');

SELECT pg_drop_replication_slot('regress_options');
DROP TABLE opt_t;
