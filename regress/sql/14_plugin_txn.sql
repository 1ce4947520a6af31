-- docsync output plugin: transaction grouping, filtering, subtransactions, messages, origins
\set VERBOSITY terse
SET synchronous_commit = on;

CREATE TABLE txn_w (id int PRIMARY KEY, v text);
CREATE TABLE txn_u (id int PRIMARY KEY, v text);
CREATE TABLE docsync.regress_defs (id int PRIMARY KEY, body text);
SELECT 'init' FROM pg_create_logical_replication_slot('regress_txn', 'docsync');

-- an empty transaction and a filtered one emit nothing
BEGIN; COMMIT;
INSERT INTO txn_u VALUES (1, 'unwatched');
-- a huge filtered transaction emits nothing either
INSERT INTO txn_u SELECT g, 'x' FROM generate_series(2, 5000) g;
-- a mixed transaction emits only the watched change, inside BEGIN … COMMIT
BEGIN;
INSERT INTO txn_u VALUES (5001, 'unwatched');
INSERT INTO txn_w VALUES (1, 'watched');
INSERT INTO txn_u VALUES (5002, 'unwatched');
COMMIT;
-- subtransactions: a rolled-back one emits nothing, a released one is part of its transaction
BEGIN;
INSERT INTO txn_w VALUES (2, 'top');
SAVEPOINT s1;
INSERT INTO txn_w VALUES (3, 'rolled back');
ROLLBACK TO SAVEPOINT s1;
SAVEPOINT s2;
INSERT INTO txn_w VALUES (4, 'released');
RELEASE SAVEPOINT s2;
COMMIT;
-- a rolled-back transaction emits nothing
BEGIN;
INSERT INTO txn_w VALUES (5, 'aborted');
ROLLBACK;
-- the extension's own tables are always emitted, with every column, listed or not
INSERT INTO docsync.regress_defs VALUES (1, 'definition');
-- messages: only prefixes starting with "docsync" pass; non-transactional ones stand alone
SELECT 'msg' FROM pg_logical_emit_message(false, 'docsync.reload', 'now');
SELECT 'msg' FROM pg_logical_emit_message(false, 'other.prefix', 'never');
BEGIN;
SELECT 'msg' FROM pg_logical_emit_message(true, 'docsync', E'in\ta transaction');
COMMIT;
BEGIN;
SELECT 'msg' FROM pg_logical_emit_message(true, 'docsync.aborted', 'never');
ROLLBACK;

SELECT data FROM pg_logical_slot_peek_changes('regress_txn', NULL, NULL, 'format', 'text',
  'tables', 'txn_w');
-- messages off
SELECT data FROM pg_logical_slot_peek_changes('regress_txn', NULL, NULL, 'format', 'text',
  'tables', 'txn_w', 'messages', 'false');

-- the slot advances even when everything is filtered out
SELECT confirmed_flush_lsn AS before_lsn FROM pg_replication_slots WHERE slot_name = 'regress_txn' \gset
SELECT count(*) AS emitted FROM pg_logical_slot_get_changes('regress_txn', NULL, NULL, 'format', 'text',
  'tables', 'no_such_table', 'messages', 'off');
SELECT confirmed_flush_lsn > :'before_lsn'::pg_lsn AS advanced
  FROM pg_replication_slots WHERE slot_name = 'regress_txn';

-- origin 'none' skips changes replicated from elsewhere (they carry a replication origin)
SELECT 'origin' FROM pg_replication_origin_create('regress_upstream');
SELECT pg_replication_origin_session_setup('regress_upstream');
INSERT INTO txn_w VALUES (10, 'from upstream');
SELECT pg_replication_origin_session_reset();
INSERT INTO txn_w VALUES (11, 'local');
SELECT data FROM pg_logical_slot_peek_changes('regress_txn', NULL, NULL, 'format', 'text',
  'tables', 'txn_w', 'origin', 'none');
SELECT data FROM pg_logical_slot_get_changes('regress_txn', NULL, NULL, 'format', 'text',
  'tables', 'txn_w', 'origin', 'any');
SELECT pg_replication_origin_drop('regress_upstream');

SELECT pg_drop_replication_slot('regress_txn');
DROP TABLE txn_w, txn_u, docsync.regress_defs;
