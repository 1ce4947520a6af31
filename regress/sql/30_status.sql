-- docsync.status and docsync.query_stats over status files written byte by byte
-- (regress/tools/status_fixture.pl): fresh, stale, stopped, corrupt, foreign-version, half-written,
-- truncated and alien files, slots without files and files without slots.
\set VERBOSITY terse
SET synchronous_commit = on;
CREATE EXTENSION IF NOT EXISTS docsync;

-- the reader looks where docsync.status_dir says, a reload-time setting
SELECT docsync.status_directory() = current_setting('docsync.status_dir') AS directory_is_the_setting;
SELECT context FROM pg_settings WHERE name = 'docsync.status_dir';
-- the docsync prefix is reserved: a misspelt setting is an error, not a silent placeholder
SET docsync.status_directory = '/tmp';
SELECT current_setting('docsync.status_dir') AS status_dir \gset
\setenv STATUS_DIR :status_dir
\setenv DB :DBNAME
\setenv FIXTURE 'perl regress/tools/status_fixture.pl'
\! rm -f "$STATUS_DIR"/*.regress_status_*.status

SELECT 'init' FROM pg_create_logical_replication_slot('regress_status_fresh', 'docsync');
SELECT 'init' FROM pg_create_logical_replication_slot('regress_status_gone', 'docsync');
SELECT 'init' FROM pg_create_logical_replication_slot('regress_status_exited', 'docsync');
SELECT 'init' FROM pg_create_logical_replication_slot('regress_status_nofile', 'docsync');
SELECT 'init' FROM pg_create_logical_replication_slot('regress_status_corrupt', 'docsync');
SELECT 'init' FROM pg_create_logical_replication_slot('regress_status_foreign', 'docsync');
SELECT 'init' FROM pg_create_logical_replication_slot('regress_status_halfdone', 'docsync');
SELECT 'init' FROM pg_create_logical_replication_slot('regress_status_torn', 'docsync');
SELECT 'init' FROM pg_create_logical_replication_slot('regress_status_short', 'docsync');
SELECT 'init' FROM pg_create_logical_replication_slot('regress_status_alien', 'docsync');
SELECT 'init' FROM pg_create_logical_replication_slot('regress_status_erring', 'docsync');
SELECT 'init' FROM pg_create_logical_replication_slot('regress_status_recomputing', 'docsync');
SELECT 'init' FROM pg_create_logical_replication_slot('regress_status_recomputed', 'docsync');

\! $FIXTURE --dir "$STATUS_DIR" --database "$DB" --slot regress_status_fresh --pid 1001 --live 12 --dirty 3 --received 100000 --acked 90000 --query 'order:10:2:5000:division by zero (SQLSTATE 22012)' --query 'customer:4:0:2000' --audit 40:2 --set-aside 'customer=doc query "customer": its batched form failed where each doc alone runs (permission denied for schema regress_types, SQLSTATE 42501), so its docs are computed one statement each'
\! $FIXTURE --dir "$STATUS_DIR" --database "$DB" --slot regress_status_gone --pid 1002 --heartbeat-age 60 --live 7
\! $FIXTURE --dir "$STATUS_DIR" --database "$DB" --slot regress_status_exited --pid 1003 --state stopped --heartbeat-age 2 --query 'order:1:0:10' --set-aside 'order=a worker that has stopped'
\! $FIXTURE --dir "$STATUS_DIR" --database "$DB" --slot regress_status_corrupt --pid 1004 --live 5 --corrupt
\! $FIXTURE --dir "$STATUS_DIR" --database "$DB" --slot regress_status_foreign --layout-version 5
\! $FIXTURE --dir "$STATUS_DIR" --database "$DB" --slot regress_status_halfdone --pid 1005 --odd-seq
\! $FIXTURE --dir "$STATUS_DIR" --database "$DB" --slot regress_status_torn --pid 1006 --odd-seq --corrupt
\! $FIXTURE --dir "$STATUS_DIR" --database "$DB" --slot regress_status_short --truncate 12
\! $FIXTURE --dir "$STATUS_DIR" --database "$DB" --slot regress_status_alien --garbage
\! $FIXTURE --dir "$STATUS_DIR" --database "$DB" --slot regress_status_erring --pid 1007 --error 'publisher: connection refused' --error-age 5
\! $FIXTURE --dir "$STATUS_DIR" --database "$DB" --slot regress_status_noslot --pid 1008
\! $FIXTURE --dir "$STATUS_DIR" --database "$DB" --slot regress_status_recomputing --pid 1009 --live 10000 --recompute startup:4000:10000:10
\! $FIXTURE --dir "$STATUS_DIR" --database "$DB" --slot regress_status_recomputed --pid 1010 --live 500 --recompute valve:500:500:30:28
-- a worker started on a misspelt slot, and one whose slot name belongs to another database
\! $FIXTURE --dir "$STATUS_DIR" --database "$DB" --slot regress_status_typo --pid 1011 --state stopped --heartbeat-age 30
\! $FIXTURE --dir "$STATUS_DIR" --database regress_status_elsewhere --slot regress_status_exited --pid 1012 --state stopped --heartbeat-age 30

-- one row per slot or file; liveness from heartbeat age and the slot's active_pid
SELECT slot_name, slot_active, worker_pid, worker_state, health, live_docs, read_error IS NOT NULL AS untrusted
  FROM docsync.status
 WHERE slot_name LIKE 'regress_status%' AND database = current_database()
 ORDER BY slot_name;

-- the reasons say what is wrong and what to do
SELECT slot_name, regexp_replace(reason, '[0-9]+ s ago|at [0-9-]+ [0-9:]+ UTC|in /\S+|[0-9.]+ (bytes|kB|MB) behind|[0-9]+ docs/s|about [0-9]+ s left', '…', 'g') AS reason
  FROM docsync.status
 WHERE slot_name LIKE 'regress_status%' AND database = current_database()
 ORDER BY slot_name;

-- a corrupted or foreign file is reported, and none of its values are trusted
SELECT slot_name, layout_version, worker_pid, state, live_docs, read_error
  FROM docsync.status_files()
 WHERE slot_name IN ('regress_status_corrupt', 'regress_status_foreign', 'regress_status_torn',
                     'regress_status_short', 'regress_status_alien')
 ORDER BY slot_name;

-- a trusted file's values, unstable ones as booleans
SELECT worker_pid, received_lsn, acked_lsn, dirty_depth, live_docs, changes, recomputes, publishes,
       permanent_failures, heartbeat_age_seconds < 30 AS heartbeat_recent,
       retained_wal_bytes >= 0 AS retained_wal_known, ack_lag_seconds >= 0 AS lag_known,
       started_at < heartbeat_at AS started_before_heartbeat
  FROM docsync.status
 WHERE slot_name = 'regress_status_fresh';

-- the recompute of every live doc: done of total, the mean rate and the time left at that rate
-- (4000 of 10000 in about 10 s: about 400 docs/s and 15 s left), and once finished its duration
SELECT slot_name, recompute, recompute_done, recompute_total,
       recompute_rate BETWEEN 300 AND 400 AS rate_about_400,
       recompute_seconds_left BETWEEN 15 AND 20 AS about_15_s_left,
       recompute_finished_at - recompute_started_at AS took,
       not_visible_retries, audit_samples, audit_divergences
  FROM docsync.status
 WHERE slot_name IN ('regress_status_recomputing', 'regress_status_recomputed', 'regress_status_fresh')
 ORDER BY slot_name;
SELECT health, regexp_replace(reason, '[0-9]+ docs/s, about [0-9]+ s left', '… docs/s, about … s left') AS reason
  FROM docsync.status WHERE slot_name = 'regress_status_recomputing';

-- per-query counters, a failing query with its error, a query whose batched form was set aside
SELECT query, recomputes, permanent_failures, mean_compute_ms, last_error, last_error_at IS NOT NULL AS error_time_known,
       batch_set_aside
  FROM docsync.query_stats
 WHERE slot_name = 'regress_status_fresh'
 ORDER BY query;

-- docsync.queries shows a batched form a running worker set aside, and why; a stopped worker's
-- report is not shown; once the worker runs the form again (its file no longer names it), batched
SELECT docsync.define_query('customer', 'SELECT to_jsonb($1::int)', params => ARRAY['id'], watches => 'manual');
SELECT docsync.define_query('order', 'SELECT to_jsonb($1::int)', params => ARRAY['id'], watches => 'manual');
SELECT name, not_batched, batched, batch_set_aside FROM docsync.queries WHERE name IN ('customer', 'order') ORDER BY name;
\! $FIXTURE --dir "$STATUS_DIR" --database "$DB" --slot regress_status_fresh --pid 1001 --live 12 --dirty 3 --received 100000 --acked 90000 --query 'order:10:2:5000:division by zero (SQLSTATE 22012)' --query 'customer:5:0:2100' --audit 40:2
SELECT name, not_batched, batched, batch_set_aside FROM docsync.queries WHERE name IN ('customer', 'order') ORDER BY name;
SELECT docsync.drop_query('customer'), docsync.drop_query('order');

-- a server that restricts output plugins and does not list docsync, or lists it in one quoted string
SET output_plugin_libraries = 'pgoutput';
SELECT health, reason FROM docsync.status WHERE slot_name = 'regress_status_fresh';
SET output_plugin_libraries = 'pgoutput, test_decoding, docsync';
SELECT health, reason FROM docsync.status WHERE slot_name = 'regress_status_fresh';
RESET output_plugin_libraries;

-- a stale file: its slot does not exist in its database, and the reason gives the fix
SELECT database, slot_name, health, regexp_replace(reason, 'at [0-9-]+ [0-9:]+ UTC', 'at … UTC') AS reason
  FROM docsync.status
 WHERE slot_name IN ('regress_status_typo', 'regress_status_exited')
 ORDER BY database, slot_name;

-- forgetting a slot removes its files, and only when no worker can be serving it
SELECT docsync.forget_slot('regress_status_exited');
SELECT docsync.forget_slot('regress_status_noslot');
SELECT docsync.forget_slot('regress_status_missing');
SELECT docsync.forget_slot('../regress_status_typo');
SELECT docsync.forget_slot(NULL);
SELECT regexp_replace(f, '^/\S+/', '…/') AS removed FROM docsync.forget_slot('regress_status_typo') f;
SELECT regexp_replace(f, '^/\S+/', '…/') AS removed FROM docsync.forget_slot('regress_status_exited', 'regress_status_elsewhere') f;
SELECT count(*) AS forgotten_rows_left FROM docsync.status
 WHERE slot_name = 'regress_status_typo' OR database = 'regress_status_elsewhere';
SELECT has_function_privilege('public', 'docsync.forget_slot(name, name)', 'EXECUTE') AS public_forgets,
       has_function_privilege('pg_monitor', 'docsync.forget_slot(name, name)', 'EXECUTE') AS monitor_forgets;

-- pg_monitor reads the views; others do not
SELECT has_table_privilege('pg_monitor', 'docsync.status', 'SELECT') AS monitor_status,
       has_table_privilege('pg_monitor', 'docsync.query_stats', 'SELECT') AS monitor_query_stats,
       has_function_privilege('pg_monitor', 'docsync.status_files()', 'EXECUTE') AS monitor_files,
       has_function_privilege('public', 'docsync.status_files()', 'EXECUTE') AS public_files;
CREATE ROLE regress_status_monitor IN ROLE pg_monitor;
CREATE ROLE regress_status_nobody;
SET ROLE regress_status_monitor;
SELECT count(*) > 0 AS monitor_sees_rows FROM docsync.status WHERE slot_name LIKE 'regress_status%';
SELECT docsync.forget_slot('regress_status_gone');
SET ROLE regress_status_nobody;
SELECT count(*) FROM docsync.status;
RESET ROLE;
DROP ROLE regress_status_monitor;
DROP ROLE regress_status_nobody;

-- a missing directory shows what the server knows
SET docsync.status_dir = '/nonexistent/docsync';
ALTER SYSTEM SET docsync.status_dir = '/nonexistent/docsync';
SELECT pg_reload_conf();
SELECT pg_sleep(0.5);
\c
SELECT docsync.status_directory();
SELECT health, regexp_replace(reason, 'in /\S+', 'in …') AS reason FROM docsync.status WHERE slot_name = 'regress_status_fresh';
ALTER SYSTEM RESET docsync.status_dir;
SELECT pg_reload_conf();
SELECT pg_sleep(0.5);
\c
SELECT docsync.status_directory() = :'status_dir' AS directory_restored;

\! rm -f "$STATUS_DIR"/*.regress_status_*.status
SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots
 WHERE slot_name LIKE 'regress_status%' ORDER BY slot_name;
