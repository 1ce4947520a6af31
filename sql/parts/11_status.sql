-- sql/parts/11_status.sql: status: the status-file functions (plugin/status.c), docsync.workers,
-- docsync.status, docsync.query_stats, forget_slot and pg_monitor's grants.
-- ---------------------------------------------------------------------------------------------------
-- Status: the workers' status files (plugin/status.c) joined with what the server knows of the slots.
-- Readable by pg_monitor. Liveness is the worker's lock file, its heartbeat and the slot's
-- active_pid: an inactive slot whose lock file no process on this host holds means the worker is gone
-- (state `stopped`) at once; where the lock cannot be seen (another host), a heartbeat older than 5 s
-- on an inactive slot does.
-- ---------------------------------------------------------------------------------------------------

CREATE FUNCTION docsync.status_files(
    OUT status_file text, OUT database text, OUT slot_name text, OUT read_error text,
    OUT layout_version integer, OUT worker_pid integer, OUT state text,
    OUT started_at timestamptz, OUT heartbeat_at timestamptz, OUT generation bigint,
    OUT received_lsn pg_lsn, OUT acked_lsn pg_lsn, OUT acked_at timestamptz,
    OUT open_txns bigint, OUT dirty_depth bigint, OUT in_flight bigint, OUT live_docs bigint,
    OUT changes bigint, OUT recomputes bigint, OUT publishes bigint, OUT permanent_failures bigint,
    OUT transient_retries bigint, OUT valve_resets bigint, OUT not_visible_retries bigint,
    OUT audit_samples bigint, OUT audit_divergences bigint,
    OUT recompute text, OUT recompute_done bigint, OUT recompute_total bigint,
    OUT recompute_started_at timestamptz, OUT recompute_finished_at timestamptz,
    OUT last_error text, OUT last_error_at timestamptz, OUT queries_omitted integer,
    OUT lock_held boolean)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'docsync_status_files'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION docsync.status_files() IS
  'one row per status file in docsync.status_dir: the worker''s report, or read_error saying why it is not trusted';

CREATE FUNCTION docsync.status_file_queries(
    OUT database text, OUT slot_name text, OUT query text, OUT recomputes bigint,
    OUT permanent_failures bigint, OUT mean_compute_ms double precision, OUT last_error text,
    OUT last_error_at timestamptz, OUT batch_set_aside text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'docsync_status_file_queries'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION docsync.status_file_queries() IS
  'per-query counters from every trusted status file in docsync.status_dir';

CREATE FUNCTION docsync.status_directory() RETURNS text
AS 'MODULE_PATHNAME', 'docsync_status_directory'
LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION docsync.status_directory() IS 'the directory docsync.status_dir names';

-- The workers of each slot, from their leases (worker/replication/lease.hpp): on a connection of its
-- own, the active worker holds a session-level advisory lock on hashtextextended(slot, 1685288801)
-- and every hot spare (--standby) a shared one on hashtextextended(slot, 1685288819). Their
-- connections' backend_start is when the worker started, or began to wait. Anyone may take an
-- advisory lock: only sessions of roles that can stream a slot (REPLICATION or superuser) are
-- listed, so a session squatting on a key is no worker here (the worker's log names it).
CREATE VIEW docsync.workers AS
SELECT s.database::text AS database,
       s.slot_name::text AS slot_name,
       k.role,
       l.pid AS backend_pid,
       a.application_name,
       a.client_addr,
       a.backend_start AS connected_at,
       CASE WHEN k.role = 'standby'
            THEN round(extract(epoch FROM pg_catalog.statement_timestamp() - a.backend_start)::numeric, 1)::double precision
       END AS waiting_seconds
  FROM pg_catalog.pg_replication_slots s
 CROSS JOIN LATERAL (VALUES ('active', 'ExclusiveLock', pg_catalog.hashtextextended(s.slot_name::text, 1685288801)),
                            ('standby', 'ShareLock', pg_catalog.hashtextextended(s.slot_name::text, 1685288819)))
       AS k(role, mode, key)
  JOIN pg_catalog.pg_locks l
    ON l.locktype = 'advisory' AND l.granted AND l.mode = k.mode AND l.objsubid = 1 AND l.database = s.datoid
   AND l.classid = ((k.key >> 32) & 4294967295)::oid AND l.objid = (k.key & 4294967295)::oid
  JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid
  JOIN pg_catalog.pg_roles r ON r.oid = a.usesysid AND (r.rolreplication OR r.rolsuper)
 WHERE s.plugin = 'docsync' OR (s.slot_type = 'logical' AND docsync.install_kind() = 'portable');
COMMENT ON VIEW docsync.workers IS
  'the workers of each docsync slot: the active one and its hot spares (--standby), from the leases they hold';

CREATE VIEW docsync.status AS
WITH files AS (
    SELECT * FROM docsync.status_files()
), slots AS (
    SELECT s.slot_name::text AS slot_name, s.database::text AS database, s.active, s.active_pid,
           s.restart_lsn, s.confirmed_flush_lsn, s.wal_status
      FROM pg_catalog.pg_replication_slots s
     -- or a slot a worker reports on whatever its plugin (pgoutput, in the portable install)
     WHERE s.plugin = 'docsync' OR s.slot_name::text IN (SELECT f.slot_name FROM files f WHERE f.database = s.database::text)
), server AS (
    SELECT CASE WHEN pg_catalog.pg_is_in_recovery() THEN pg_catalog.pg_last_wal_replay_lsn()
                ELSE pg_catalog.pg_current_wal_lsn() END AS wal_lsn,
           pg_catalog.statement_timestamp() AS now,
           docsync.status_directory() AS dir,
           -- servers with output_plugin_libraries let a role without superuser use only listed plugins
           docsync.output_plugin_problem() AS plugin_problem
), uncovered AS (
    -- this database's doc queries whose docs go stale because a table they read has no watch, and
    -- those whose watches DDL could not derive again (kept, with a broadcast fallback, until DDL
    -- derives them: docsync._rederive)
    SELECT pg_catalog.string_agg(u.message, '; ' ORDER BY u.query) AS problem
      FROM (SELECT x.query, x.message FROM docsync.uncovered_queries() x
            UNION ALL
            SELECT q.name, pg_catalog.format('the watches of doc query "%s" could not be derived again after DDL (%s): the previous ones are kept and every change of a table they cover recomputes every live doc; DDL derives them again, or docsync.define_query(%L, …, or_replace => true)',
                                             q.name, q.derive_problem, q.name)
              FROM docsync.query_defs q
             WHERE q.derive_problem IS NOT NULL) u
), joined AS (
    SELECT coalesce(s.database, f.database) AS database,
           coalesce(s.slot_name, f.slot_name) AS slot_name,
           s.slot_name IS NOT NULL AS slot_exists,
           -- a file's slot name taken by a slot of another database (or another plugin)
           (SELECT coalesce(o.database::text, '(none: a physical slot)') FROM pg_catalog.pg_replication_slots o
             WHERE s.slot_name IS NULL AND o.slot_name = f.slot_name) AS slot_elsewhere,
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
           f.not_visible_retries, f.audit_samples, f.audit_divergences, f.recompute, f.recompute_done,
           f.recompute_total, f.recompute_started_at, f.recompute_finished_at, f.lock_held,
           -- the recompute's mean rate since it started, and the time left at that rate
           CASE WHEN f.recompute IS NOT NULL THEN
                f.recompute_done / nullif(extract(epoch FROM coalesce(f.recompute_finished_at, v.now) - f.recompute_started_at), 0)
           END::double precision AS recompute_rate,
           f.last_error, f.last_error_at, v.dir, v.plugin_problem, v.now,
           CASE WHEN coalesce(s.database, f.database) = pg_catalog.current_database() THEN u.problem END AS uncovered
      FROM slots s
      FULL JOIN files f ON f.slot_name = s.slot_name AND f.database = s.database
     CROSS JOIN server v
     CROSS JOIN uncovered u
), judged AS (
    SELECT j.*,
           CASE WHEN j.recompute_finished_at IS NULL AND j.recompute_rate > 0
                THEN (j.recompute_total - j.recompute_done) / j.recompute_rate
           END AS recompute_seconds_left,
           CASE WHEN NOT j.file_ok THEN NULL
                WHEN j.state = 'stopped' THEN 'stopped'
                -- no process holds the worker's lock file: it is gone, whatever its last heartbeat
                WHEN NOT j.slot_active AND j.lock_held IS FALSE THEN 'stopped'
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
       (SELECT count(*) FROM docsync.workers w
         WHERE w.slot_name = j.slot_name AND w.database = j.database AND w.role = 'standby') AS standby_workers,
       (SELECT min(w.connected_at) FROM docsync.workers w
         WHERE w.slot_name = j.slot_name AND w.database = j.database AND w.role = 'standby') AS standby_since,
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
       j.not_visible_retries,
       j.audit_samples,
       j.audit_divergences,
       j.recompute,
       j.recompute_done,
       j.recompute_total,
       round(j.recompute_rate::numeric, 1)::double precision AS recompute_rate,
       round(j.recompute_seconds_left::numeric)::double precision AS recompute_seconds_left,
       j.recompute_started_at,
       j.recompute_finished_at,
       j.last_error,
       j.last_error_at,
       j.status_file,
       j.read_error
  FROM judged j
  LEFT JOIN pg_catalog.pg_stat_replication r ON r.pid = j.walsender_pid
 CROSS JOIN LATERAL (
    SELECT * FROM (VALUES
      (1, j.plugin_problem IS NOT NULL, 'plugin not allowed', j.plugin_problem),
      (2, NOT j.has_file AND j.slot_active, 'unknown',
       pg_catalog.format('slot is active (walsender pid %s) but no status file for it is in %s: the server reads docsync.status_dir (postgresql.conf, then reload) '
                         'and the worker writes to its --status-dir; set both to one directory the server and the worker share',
                         j.walsender_pid, j.dir)),
      (3, NOT j.has_file, 'stopped',
       pg_catalog.format('no worker: the slot is inactive and no status file for it is in %s (docsync.status_dir, which must name the worker''s --status-dir)', j.dir)),
      (4, j.has_file AND NOT j.file_ok, 'unknown',
       pg_catalog.format('status file %s not trusted: %s', j.status_file, j.read_error)),
      -- a stale file: its slot is gone (a misspelt --slot, a slot dropped for good) or is another database's
      (5, NOT j.slot_exists AND j.worker_state = 'stopped', 'stopped',
       pg_catalog.format('stale status file: slot %s does not exist in database %s%s; worker pid %s was last seen at %s UTC. '
                         'If no worker is to use this slot here (a misspelt --slot, a slot dropped for good), forget it: SELECT docsync.forget_slot(%L%s);',
                         j.slot_name, j.database,
                         CASE WHEN j.slot_elsewhere IS NOT NULL THEN pg_catalog.format(' (a slot of that name belongs to database %s)', j.slot_elsewhere) ELSE '' END,
                         j.worker_pid, pg_catalog.to_char(j.heartbeat_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS'),
                         j.slot_name,
                         CASE WHEN j.database IS DISTINCT FROM pg_catalog.current_database() THEN pg_catalog.format(', %L', j.database) ELSE '' END)),
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
      -- an error of the last minute, unless the doc that failed has been published since (the
      -- worker then shows it as 'recovered: …', worker/status/snapshot.hpp)
      (11, j.last_error_at > j.now - interval '1 minute' AND j.last_error NOT LIKE 'recovered: %', 'failing',
       pg_catalog.format('error %s s ago: %s', round(extract(epoch FROM j.now - j.last_error_at)), j.last_error)),
      (12, j.ack_lag_seconds > 30 OR j.ack_lag_bytes > 256 * 1024 * 1024, 'lagging',
       pg_catalog.format('acknowledged position is %s behind and %s s old, %s docs waiting',
                         pg_catalog.pg_size_pretty(j.ack_lag_bytes), round(j.ack_lag_seconds::numeric), j.dirty_depth)),
      -- a backlog that does not move, whatever the cause (a sink that takes no writes, computes stuck
      -- behind locks): many transactions waiting, or WAL waiting, while nothing was acknowledged
      (13, (j.open_txns >= 1000 AND j.acked_at < j.now - interval '10 seconds')
           OR (j.ack_lag_bytes > 0 AND j.acked_at < j.now - interval '60 seconds'), 'lagging',
       pg_catalog.format('nothing acknowledged for %s s while %s transactions and %s of WAL wait, %s docs dirty (state %s)',
                         round(extract(epoch FROM j.now - j.acked_at)), j.open_txns,
                         pg_catalog.pg_size_pretty(j.ack_lag_bytes), j.dirty_depth, j.state)),
      -- a worker runs a query whose docs go stale: a table it reads has no watch
      (14, j.uncovered IS NOT NULL AND j.file_ok AND j.worker_state NOT IN ('stopped', 'draining'), 'warning', j.uncovered),
      (15, j.recompute IS NOT NULL AND j.recompute_finished_at IS NULL AND j.state IN ('starting', 'connecting', 'streaming'), 'ok',
       pg_catalog.format('%s: %s of %s live docs (%s%%), %s docs/s, %s',
                         CASE j.recompute WHEN 'valve' THEN 'WAL safety valve recompute' ELSE j.recompute || ' recompute' END,
                         j.recompute_done, j.recompute_total,
                         j.recompute_done * 100 / nullif(j.recompute_total, 0),
                         round(coalesce(j.recompute_rate, 0)::numeric),
                         coalesce('about ' || round(j.recompute_seconds_left::numeric) || ' s left', 'time left unknown'))),
      (16, j.state <> 'streaming', 'ok', pg_catalog.format('worker is %s', j.state)),
      (17, true, 'ok',
       pg_catalog.format('streaming; %s behind, %s docs waiting', pg_catalog.pg_size_pretty(j.ack_lag_bytes), j.dirty_depth))
    ) AS c(rank, applies, health, reason)
    WHERE c.applies
    ORDER BY c.rank
    LIMIT 1
 ) h;
COMMENT ON VIEW docsync.status IS
  'one row per docsync slot or status file: is the worker up, how far behind, how much WAL held, what failed last';

CREATE VIEW docsync.query_stats AS
SELECT q.database, q.slot_name, q.query, q.recomputes, q.permanent_failures,
       round(q.mean_compute_ms::numeric, 3)::double precision AS mean_compute_ms,
       q.last_error, q.last_error_at, q.batch_set_aside
  FROM docsync.status_file_queries() q;
COMMENT ON VIEW docsync.query_stats IS 'per doc query counters reported by each running or last-run worker, and why it set a batched form aside';

-- Forgetting a slot removes files: superusers only, unless one grants it.
CREATE FUNCTION docsync.forget_slot(slot name, database name DEFAULT pg_catalog.current_database())
RETURNS SETOF text
AS 'MODULE_PATHNAME', 'docsync_forget_slot'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION docsync.forget_slot(name, name) IS
  'removes the status and lock files of a slot no worker serves (refused while the slot exists or a worker holds it), so docsync.status stops showing it; returns the files removed';
REVOKE ALL ON FUNCTION docsync.forget_slot(name, name) FROM PUBLIC;

REVOKE ALL ON FUNCTION docsync.status_files(), docsync.status_file_queries(), docsync.status_directory() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION docsync.status_files(), docsync.status_file_queries(), docsync.status_directory() TO pg_monitor;
GRANT EXECUTE ON FUNCTION docsync.uncovered_queries() TO pg_monitor;
GRANT USAGE ON SCHEMA docsync TO pg_monitor;
GRANT SELECT ON docsync.status, docsync.query_stats, docsync.workers TO pg_monitor;

