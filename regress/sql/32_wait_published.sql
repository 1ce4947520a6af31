-- docsync.wait_published without a worker: argument errors, the slot it waits for, and the slot's
-- confirmed position moved by the SQL decoding functions, which confirm what they consume as the
-- worker's acknowledgements do. The two-session checks (no snapshot held while waiting, the wait
-- ending when a real worker publishes) are in tests/scenarios/worker_read_your_writes.sh.
SET synchronous_commit = on;
CREATE EXTENSION IF NOT EXISTS docsync;

-- a procedure: CALL only, every argument optional, published comes back as a row
SELECT p.oid::regprocedure AS procedure, p.prokind, pg_get_function_arguments(p.oid) AS arguments
  FROM pg_proc p WHERE p.oid = 'docsync.wait_published'::regproc;
SELECT docsync.wait_published();

-- no docsync slot in this database: nothing would ever publish
CALL docsync.wait_published();

SELECT 'init' FROM pg_create_logical_replication_slot('regress_wait', 'docsync');
SELECT 'init' FROM pg_create_logical_replication_slot('regress_wait_other_plugin', 'test_decoding');
SELECT 'init' FROM pg_create_physical_replication_slot('regress_wait_physical');

-- argument errors
CALL docsync.wait_published(NULL);
CALL docsync.wait_published(timeout => NULL);
CALL docsync.wait_published(timeout => '-1s');
CALL docsync.wait_published(timeout => '1 day -25 hours');
CALL docsync.wait_published(slot => 'regress_wait_missing');
CALL docsync.wait_published(slot => 'regress_wait_other_plugin');
CALL docsync.wait_published(slot => 'regress_wait_physical');

-- a position every slot has passed: at once, named or not; the INOUT argument's value is not read
CALL docsync.wait_published('0/0');
CALL docsync.wait_published('0/0', '0s', 'regress_wait', true);
CALL docsync.wait_published(lsn => '0/0', slot => 'regress_wait', published => false);

-- a change nothing has consumed: false at the timeout ('0s' looks once). The position is the
-- flushed one, which the commit before it reached: what the decoding functions read up to.
CREATE TABLE wait_t (id int PRIMARY KEY, v int);
INSERT INTO wait_t VALUES (1, 1);
SELECT pg_current_wal_flush_lsn() AS after_insert \gset
CALL docsync.wait_published(:'after_insert', '0s');
CALL docsync.wait_published(:'after_insert', '50ms', 'regress_wait');
-- peeking confirms nothing (no table is watched: no records, but the slot reads the WAL)
SELECT count(*) AS records FROM pg_logical_slot_peek_binary_changes('regress_wait', NULL, NULL, 'format', 'binary');
CALL docsync.wait_published(:'after_insert', '0s');
-- consuming confirms what was decoded, as the worker's acknowledgement does: true at once
SELECT count(*) AS records FROM pg_logical_slot_get_binary_changes('regress_wait', NULL, NULL, 'format', 'binary');
CALL docsync.wait_published(:'after_insert', '0s');
CALL docsync.wait_published(:'after_insert', '0s', 'regress_wait');

-- every docsync slot of the database must have passed it: a second, behind slot holds the wait
SELECT 'init' FROM pg_create_logical_replication_slot('regress_wait_behind', 'docsync');
INSERT INTO wait_t VALUES (2, 2);
SELECT pg_current_wal_flush_lsn() AS after_second \gset
SELECT count(*) AS records FROM pg_logical_slot_get_binary_changes('regress_wait', NULL, NULL, 'format', 'binary');
CALL docsync.wait_published(:'after_second', '0s', 'regress_wait');
CALL docsync.wait_published(:'after_second', '0s', 'regress_wait_behind');
CALL docsync.wait_published(:'after_second', '0s');
SELECT pg_drop_replication_slot('regress_wait_behind');
CALL docsync.wait_published(:'after_second', '0s');

-- a worker recomputing every live doc to cover a gap in its stream (a recreated slot, another
-- server, a sink that lost docs; regress/tools/status_fixture.pl writes its status file): the slot's
-- confirmed position says nothing of docs the recompute has not reached, so the wait holds until
-- the recompute is done. A recompute that covers no gap (at a start that continues the stream)
-- holds nothing.
SELECT current_setting('docsync.status_dir') AS status_dir \gset
\setenv STATUS_DIR :status_dir
\setenv DB :DBNAME
\setenv FIXTURE 'perl regress/tools/status_fixture.pl'
\! $FIXTURE --dir "$STATUS_DIR" --database "$DB" --slot regress_wait --recompute valve:40:100:3 --gap
CALL docsync.wait_published(:'after_second', '0s', 'regress_wait');
CALL docsync.wait_published(:'after_second', '30ms');
\! $FIXTURE --dir "$STATUS_DIR" --database "$DB" --slot regress_wait --recompute valve:100:100:3:1 --gap
CALL docsync.wait_published(:'after_second', '0s', 'regress_wait');
\! $FIXTURE --dir "$STATUS_DIR" --database "$DB" --slot regress_wait --recompute startup:40:100:3
CALL docsync.wait_published(:'after_second', '0s', 'regress_wait');
-- a sink whose connection broke and was not checked since may have lost docs: the wait holds,
-- whatever the recompute; once checked, nothing holds
\! $FIXTURE --dir "$STATUS_DIR" --database "$DB" --slot regress_wait --sink-unchecked
CALL docsync.wait_published(:'after_second', '0s', 'regress_wait');
\! $FIXTURE --dir "$STATUS_DIR" --database "$DB" --slot regress_wait --recompute startup:100:100:3:1 --sink-unchecked
CALL docsync.wait_published(:'after_second', '0s', 'regress_wait');
\! $FIXTURE --dir "$STATUS_DIR" --database "$DB" --slot regress_wait --recompute startup:100:100:3:1
CALL docsync.wait_published(:'after_second', '0s', 'regress_wait');
-- an untrusted file shows no gap
\! $FIXTURE --dir "$STATUS_DIR" --database "$DB" --slot regress_wait --recompute valve:40:100:3 --gap --corrupt
CALL docsync.wait_published(:'after_second', '0s', 'regress_wait');
\! rm -f "$STATUS_DIR"/*.regress_wait.status

-- inside a transaction block the CALL is atomic: it waits without committing, and the block goes on
BEGIN;
INSERT INTO wait_t VALUES (3, 3);
CALL docsync.wait_published('0/0');
ROLLBACK;
SELECT count(*) AS rows_after_rollback FROM wait_t WHERE id = 3;

-- called from a procedure outside a transaction block, it commits what came before it, as any
-- procedure that commits does; inside an exception block it cannot, and does not. PL/pgSQL takes
-- the result in a variable.
CREATE PROCEDURE wait_then_rollback(id int) LANGUAGE plpgsql AS $$
DECLARE
  ok boolean;
BEGIN
  INSERT INTO wait_t VALUES (id, id);
  CALL docsync.wait_published(lsn => '0/0', published => ok);
  RAISE NOTICE 'published: %', ok;
  ROLLBACK;
END $$;
CALL wait_then_rollback(4);
SELECT count(*) AS committed_before_the_wait FROM wait_t WHERE id = 4;
CREATE PROCEDURE wait_in_exception_block(id int) LANGUAGE plpgsql AS $$
DECLARE
  ok boolean;
BEGIN
  BEGIN
    INSERT INTO wait_t VALUES (id, id);
    CALL docsync.wait_published(lsn => '0/0', published => ok);
    RAISE NOTICE 'published: %', ok;
  EXCEPTION WHEN OTHERS THEN
    RAISE;
  END;
  ROLLBACK;
END $$;
CALL wait_in_exception_block(5);
SELECT count(*) AS rolled_back_with_the_block FROM wait_t WHERE id = 5;

-- PUBLIC may call it (it reveals only positions); the schema's USAGE is still needed
CREATE ROLE regress_wait_app;
SET ROLE regress_wait_app;
CALL docsync.wait_published('0/0');
RESET ROLE;
GRANT USAGE ON SCHEMA docsync TO regress_wait_app;
SET ROLE regress_wait_app;
CALL docsync.wait_published('0/0');
RESET ROLE;
REVOKE USAGE ON SCHEMA docsync FROM regress_wait_app;
DROP ROLE regress_wait_app;

DROP PROCEDURE wait_then_rollback(int);
DROP PROCEDURE wait_in_exception_block(int);
DROP TABLE wait_t;
SELECT pg_drop_replication_slot('regress_wait');
SELECT pg_drop_replication_slot('regress_wait_other_plugin');
SELECT pg_drop_replication_slot('regress_wait_physical');
-- the slot dropped: nothing to wait for again
CALL docsync.wait_published(slot => 'regress_wait');
