/* docsync--0.1.sql: the docsync extension's schema, definitions and views. */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION docsync" to load this file. \quit

COMMENT ON SCHEMA docsync IS 'docsync: live JSON documents computed from SQL queries';

-- ---------------------------------------------------------------------------------------------------
-- Status: the workers' status files (plugin/status.c) joined with what the server knows of the slots.
-- Readable by pg_monitor. Liveness is the worker's heartbeat together with the slot's active_pid:
-- a heartbeat older than 5 s on an inactive slot means the worker is gone (state `stopped`).
-- ---------------------------------------------------------------------------------------------------

CREATE FUNCTION docsync.status_files(
    OUT status_file text, OUT database text, OUT slot_name text, OUT read_error text,
    OUT layout_version integer, OUT worker_pid integer, OUT state text,
    OUT started_at timestamptz, OUT heartbeat_at timestamptz, OUT generation bigint,
    OUT received_lsn pg_lsn, OUT acked_lsn pg_lsn, OUT acked_at timestamptz,
    OUT open_txns bigint, OUT dirty_depth bigint, OUT in_flight bigint, OUT live_docs bigint,
    OUT changes bigint, OUT recomputes bigint, OUT publishes bigint, OUT permanent_failures bigint,
    OUT transient_retries bigint, OUT valve_resets bigint,
    OUT last_error text, OUT last_error_at timestamptz, OUT queries_omitted integer)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'docsync_status_files'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION docsync.status_files() IS
  'one row per status file in docsync.status_dir: the worker''s report, or read_error saying why it is not trusted';

CREATE FUNCTION docsync.status_file_queries(
    OUT database text, OUT slot_name text, OUT query text, OUT recomputes bigint,
    OUT failures bigint, OUT mean_compute_ms double precision, OUT last_error text,
    OUT last_error_at timestamptz)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'docsync_status_file_queries'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION docsync.status_file_queries() IS
  'per-query counters from every trusted status file in docsync.status_dir';

CREATE FUNCTION docsync.status_directory() RETURNS text
AS 'MODULE_PATHNAME', 'docsync_status_directory'
LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION docsync.status_directory() IS 'the directory docsync.status_dir names';

CREATE VIEW docsync.status AS
WITH files AS (
    SELECT * FROM docsync.status_files()
), slots AS (
    SELECT s.slot_name::text AS slot_name, s.database::text AS database, s.active, s.active_pid,
           s.restart_lsn, s.confirmed_flush_lsn, s.wal_status
      FROM pg_catalog.pg_replication_slots s
     WHERE s.plugin = 'docsync'
), server AS (
    SELECT CASE WHEN pg_catalog.pg_is_in_recovery() THEN pg_catalog.pg_last_wal_replay_lsn()
                ELSE pg_catalog.pg_current_wal_lsn() END AS wal_lsn,
           pg_catalog.statement_timestamp() AS now,
           docsync.status_directory() AS dir,
           -- servers with output_plugin_libraries let a role without superuser use only listed plugins
           coalesce('docsync' = ANY (pg_catalog.string_to_array(
                        pg_catalog.replace(pg_catalog.current_setting('output_plugin_libraries', true), ' ', ''), ',')),
                    true) AS plugin_allowed
), joined AS (
    SELECT coalesce(s.database, f.database) AS database,
           coalesce(s.slot_name, f.slot_name) AS slot_name,
           s.slot_name IS NOT NULL AS slot_exists,
           coalesce(s.active, false) AS slot_active,
           s.active_pid AS walsender_pid,
           s.wal_status,
           s.confirmed_flush_lsn,
           pg_catalog.pg_wal_lsn_diff(v.wal_lsn, s.restart_lsn)::bigint AS retained_wal_bytes,
           greatest(pg_catalog.pg_wal_lsn_diff(v.wal_lsn, s.confirmed_flush_lsn), 0)::bigint AS ack_lag_bytes,
           CASE WHEN f.received_lsn > coalesce(f.acked_lsn, '0/0'::pg_lsn)
                THEN greatest(extract(epoch FROM v.now - coalesce(f.acked_at, f.started_at)), 0)::double precision
                WHEN f.status_file IS NOT NULL AND f.read_error IS NULL THEN 0::double precision
           END AS ack_lag_seconds,
           f.status_file IS NOT NULL AS has_file,
           f.read_error IS NULL AND f.status_file IS NOT NULL AS file_ok,
           f.heartbeat_at > v.now - interval '5 seconds' AS fresh,
           extract(epoch FROM v.now - f.heartbeat_at)::double precision AS heartbeat_age_seconds,
           f.status_file, f.read_error, f.worker_pid, f.state, f.started_at, f.heartbeat_at, f.generation,
           f.received_lsn, f.acked_lsn, f.acked_at, f.open_txns, f.dirty_depth, f.in_flight, f.live_docs,
           f.changes, f.recomputes, f.publishes, f.permanent_failures, f.transient_retries, f.valve_resets,
           f.last_error, f.last_error_at, v.dir, v.plugin_allowed, v.now
      FROM slots s
      FULL JOIN files f ON f.slot_name = s.slot_name AND f.database = s.database
     CROSS JOIN server v
), judged AS (
    SELECT j.*,
           CASE WHEN NOT j.file_ok THEN NULL
                WHEN j.state = 'stopped' THEN 'stopped'
                WHEN NOT j.fresh AND NOT j.slot_active THEN 'stopped'
                ELSE j.state
           END AS worker_state
      FROM joined j
)
SELECT j.database,
       j.slot_name,
       j.slot_active,
       j.walsender_pid,
       j.worker_pid,
       j.worker_state,
       h.health,
       h.reason,
       j.heartbeat_at,
       round(j.heartbeat_age_seconds::numeric, 1)::double precision AS heartbeat_age_seconds,
       j.started_at,
       j.generation,
       j.received_lsn,
       j.acked_lsn,
       j.acked_at,
       j.confirmed_flush_lsn,
       j.retained_wal_bytes,
       j.ack_lag_bytes,
       round(j.ack_lag_seconds::numeric, 1)::double precision AS ack_lag_seconds,
       r.flush_lag AS replication_flush_lag,
       j.open_txns,
       j.dirty_depth,
       j.in_flight,
       j.live_docs,
       j.changes,
       j.recomputes,
       j.publishes,
       j.permanent_failures,
       j.transient_retries,
       j.valve_resets,
       j.last_error,
       j.last_error_at,
       j.status_file,
       j.read_error
  FROM judged j
  LEFT JOIN pg_catalog.pg_stat_replication r ON r.pid = j.walsender_pid
 CROSS JOIN LATERAL (
    SELECT * FROM (VALUES
      (1, NOT j.plugin_allowed, 'plugin not allowed',
       'docsync is not listed in output_plugin_libraries, so a worker role without superuser cannot stream; add it there and reload'),
      (2, NOT j.has_file AND j.slot_active, 'unknown',
       pg_catalog.format('slot is active (walsender pid %s) but no status file for it is in %s: run the worker with --status-dir on a directory the server shares',
                         j.walsender_pid, j.dir)),
      (3, NOT j.has_file, 'stopped',
       pg_catalog.format('no worker: the slot is inactive and no status file for it is in %s', j.dir)),
      (4, j.has_file AND NOT j.file_ok, 'unknown',
       pg_catalog.format('status file %s not trusted: %s', j.status_file, j.read_error)),
      (5, NOT j.slot_exists AND j.worker_state = 'stopped', 'stopped',
       pg_catalog.format('slot %s does not exist; worker pid %s was last seen at %s UTC', j.slot_name, j.worker_pid,
                         pg_catalog.to_char(j.heartbeat_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS'))),
      (6, NOT j.slot_exists, 'failing',
       pg_catalog.format('worker pid %s reports on slot %s, which does not exist', j.worker_pid, j.slot_name)),
      (7, j.worker_state = 'stopped' AND j.state = 'stopped', 'stopped',
       pg_catalog.format('worker pid %s exited at %s UTC', j.worker_pid,
                         pg_catalog.to_char(j.heartbeat_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS'))),
      (8, j.worker_state = 'stopped', 'stopped',
       pg_catalog.format('worker pid %s last seen %s s ago (state %s) and the slot is inactive: it is gone',
                         j.worker_pid, round(j.heartbeat_age_seconds::numeric), j.state)),
      (9, NOT j.fresh, 'failing',
       pg_catalog.format('worker heartbeat is %s s old while the slot is active (walsender pid %s): the worker is hung, or another client holds the slot',
                         round(j.heartbeat_age_seconds::numeric), j.walsender_pid)),
      (10, j.state = 'reconnecting', 'failing',
       pg_catalog.format('worker is reconnecting; last error: %s', coalesce(j.last_error, 'none'))),
      (11, j.last_error_at > j.now - interval '1 minute', 'failing',
       pg_catalog.format('error %s s ago: %s', round(extract(epoch FROM j.now - j.last_error_at)), j.last_error)),
      (12, j.ack_lag_seconds > 30 OR j.ack_lag_bytes > 256 * 1024 * 1024, 'lagging',
       pg_catalog.format('acknowledged position is %s behind and %s s old, %s docs waiting',
                         pg_catalog.pg_size_pretty(j.ack_lag_bytes), round(j.ack_lag_seconds::numeric), j.dirty_depth)),
      (13, j.state <> 'streaming', 'ok', pg_catalog.format('worker is %s', j.state)),
      (14, true, 'ok',
       pg_catalog.format('streaming; %s behind, %s docs waiting', pg_catalog.pg_size_pretty(j.ack_lag_bytes), j.dirty_depth))
    ) AS c(rank, applies, health, reason)
    WHERE c.applies
    ORDER BY c.rank
    LIMIT 1
 ) h;
COMMENT ON VIEW docsync.status IS
  'one row per docsync slot or status file: is the worker up, how far behind, how much WAL held, what failed last';

CREATE VIEW docsync.query_stats AS
SELECT q.database, q.slot_name, q.query, q.recomputes, q.failures,
       round(q.mean_compute_ms::numeric, 3)::double precision AS mean_compute_ms,
       q.last_error, q.last_error_at
  FROM docsync.status_file_queries() q;
COMMENT ON VIEW docsync.query_stats IS 'per doc query counters reported by each running or last-run worker';

REVOKE ALL ON FUNCTION docsync.status_files(), docsync.status_file_queries(), docsync.status_directory() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION docsync.status_files(), docsync.status_file_queries(), docsync.status_directory() TO pg_monitor;
GRANT USAGE ON SCHEMA docsync TO pg_monitor;
GRANT SELECT ON docsync.status, docsync.query_stats TO pg_monitor;
