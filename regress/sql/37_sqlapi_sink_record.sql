-- What a sink should hold, outside the sink (docs/design.md, "sink checks"): docsync.sink_state,
-- the UNLOGGED docsync.live_journal, their functions, who may call them, and docsync.sinks
\set VERBOSITY default
\set SHOW_CONTEXT never
SET synchronous_commit = on;

-- the journal has no WAL; the sink record is an ordinary table
SELECT relname, relpersistence FROM pg_class
 WHERE relnamespace = 'docsync'::regnamespace AND relname IN ('live_journal', 'sink_state') ORDER BY relname;

-- nothing recorded yet
SELECT * FROM docsync.sink_recorded('regress_slot', 'Redis at 127.0.0.1:6379/0');
-- recorded, then set again: a later value replaces it, a lower one too (a sink found to have lost
-- docs starts again from what it holds)
SELECT docsync.sink_confirmed('regress_slot', 'Redis at 127.0.0.1:6379/0', 2, '0/16B3F28');
SELECT * FROM docsync.sink_recorded('regress_slot', 'Redis at 127.0.0.1:6379/0');
SELECT docsync.sink_confirmed('regress_slot', 'Redis at 127.0.0.1:6379/0', 1, '0/1000');
SELECT * FROM docsync.sink_recorded('regress_slot', 'Redis at 127.0.0.1:6379/0');
SELECT * FROM docsync.sink_recorded('regress_slot', 'file:/tmp/other.jsonl');
SELECT docsync.sink_confirmed('regress_slot', 'Redis at 127.0.0.1:6379/0', NULL, '0/1000');

-- the journal: a batch names channels once, whatever their keys hold
SELECT docsync.journal_name('regress_slot', '{"db:order:1","db:order:2","db:a:say \"hi\"","db:a:back\\slash","db:a:x,y"}'::text[]) AS named;
SELECT docsync.journal_name('regress_slot', ARRAY['db:order:2', 'db:order:3', NULL]) AS named_again;
SELECT docsync.journal_name('regress_other', ARRAY['db:order:1']) AS other_slot;
SELECT c FROM docsync.journal_channels('regress_slot') c ORDER BY c;
SELECT docsync.journal_forget('regress_slot', ARRAY['db:order:2', 'db:order:9']) AS forgotten;
SELECT c FROM docsync.journal_channels('regress_slot') c ORDER BY c;
SELECT slot, sink, generation, lsn, journaled_channels FROM docsync.sinks ORDER BY slot, sink;

-- rows written here are no definition change
SELECT generation INTO TEMP before FROM docsync.def_generation;
SELECT docsync.journal_name('regress_slot', ARRAY['db:order:4']) AS named;
SELECT (SELECT generation FROM docsync.def_generation) = (SELECT generation FROM before) AS unchanged;

-- only the worker's replication role may call them (grant_replication), never PUBLIC
CREATE ROLE regress_sink_nobody LOGIN;
CREATE ROLE regress_sink_repl LOGIN;
SELECT count(*) > 0 AS granted FROM docsync.grant_replication('regress_sink_repl');
-- even with USAGE on the schema, another role may call none of them
GRANT USAGE ON SCHEMA docsync TO regress_sink_nobody;
SET ROLE regress_sink_nobody;
SELECT docsync.journal_name('regress_slot', ARRAY['db:order:5']);
SELECT * FROM docsync.sink_recorded('regress_slot', 'Redis at 127.0.0.1:6379/0');
SELECT * FROM docsync.live_journal;
RESET ROLE;
SET ROLE regress_sink_repl;
SELECT docsync.journal_name('regress_slot', ARRAY['db:order:5']) AS named;
SELECT docsync.sink_confirmed('regress_slot', 'Redis at 127.0.0.1:6379/0', 3, '0/2000');
SELECT generation, lsn FROM docsync.sink_recorded('regress_slot', 'Redis at 127.0.0.1:6379/0');
SELECT count(*) AS journaled FROM docsync.journal_channels('regress_slot');
SELECT * FROM docsync.sink_state;
RESET ROLE;

-- cleanup
DROP OWNED BY regress_sink_nobody, regress_sink_repl;
DROP ROLE regress_sink_nobody, regress_sink_repl;
DELETE FROM docsync.sink_state;
DELETE FROM docsync.live_journal;
