-- sql/portable/40_status.sql: portable forms of the status-file functions (plugin/status.c,
-- plugin/status_file.c) and output_plugin_problem. A worker of a portable install reports in the
-- tables docsync.worker_status and docsync.worker_query_status (their columns are a contract:
-- docs/portable.md) instead of files on the server's host; the status views read them through the
-- same functions.

-- portable: function docsync.output_plugin_problem/0
-- The portable worker decodes with pgoutput, which every server allows: the only problem is a
-- server that does not decode at all.
CREATE FUNCTION docsync.output_plugin_problem() RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
  SELECT CASE WHEN current_setting('wal_level') <> 'logical' THEN
    format('wal_level is %s, not logical: the server decodes no change; set wal_level = logical (on RDS and Aurora: rds.logical_replication = 1; on Cloud SQL: cloudsql.logical_decoding = on; on Azure: wal_level = logical) and restart',
           current_setting('wal_level')) END
$$;
COMMENT ON FUNCTION docsync.output_plugin_problem() IS
  'NULL when the server decodes changes for the portable worker (pgoutput); otherwise what is wrong and the fix';

-- portable: function docsync.status_files/0
-- One row per worker, written by the worker (its slot's row, replaced at each heartbeat, about once
-- a second; state 'stopped' when it exits).
CREATE TABLE docsync.worker_status (
  slot_name             name PRIMARY KEY,
  database              name NOT NULL DEFAULT current_database(),
  layout_version        integer NOT NULL,
  worker_pid            integer NOT NULL,
  state                 text NOT NULL CHECK (state IN ('starting', 'connecting', 'streaming', 'reconnecting', 'draining', 'stopped')),
  started_at            timestamptz NOT NULL,
  heartbeat_at          timestamptz NOT NULL,
  generation            bigint,
  received_lsn          pg_lsn,
  acked_lsn             pg_lsn,
  acked_at              timestamptz,
  open_txns             bigint NOT NULL DEFAULT 0,
  dirty_depth           bigint NOT NULL DEFAULT 0,
  in_flight             bigint NOT NULL DEFAULT 0,
  live_docs             bigint NOT NULL DEFAULT 0,
  changes               bigint NOT NULL DEFAULT 0,
  recomputes            bigint NOT NULL DEFAULT 0,
  publishes             bigint NOT NULL DEFAULT 0,
  permanent_failures    bigint NOT NULL DEFAULT 0,
  transient_retries     bigint NOT NULL DEFAULT 0,
  valve_resets          bigint NOT NULL DEFAULT 0,
  not_visible_retries   bigint NOT NULL DEFAULT 0,
  audit_samples         bigint NOT NULL DEFAULT 0,
  audit_divergences     bigint NOT NULL DEFAULT 0,
  recompute             text CHECK (recompute IN ('startup', 'gap', 'valve', 'definitions', 'sink')),
  recompute_gap         boolean NOT NULL DEFAULT false,
  recompute_done        bigint,
  recompute_total       bigint,
  recompute_started_at  timestamptz,
  recompute_finished_at timestamptz,
  sink_unchecked        boolean NOT NULL DEFAULT false,
  last_error            text,
  last_error_at         timestamptz,
  queries_omitted       integer NOT NULL DEFAULT 0
);
COMMENT ON TABLE docsync.worker_status IS 'what each docsync worker of a portable install reports (docs/portable.md), one row per slot';
CREATE TABLE docsync.worker_query_status (
  slot_name          name NOT NULL REFERENCES docsync.worker_status ON DELETE CASCADE,
  query              text NOT NULL,
  recomputes         bigint NOT NULL DEFAULT 0,
  permanent_failures bigint NOT NULL DEFAULT 0,
  mean_compute_ms    double precision,
  last_error         text,
  last_error_at      timestamptz,
  batch_set_aside    text,
  PRIMARY KEY (slot_name, query)
);
COMMENT ON TABLE docsync.worker_query_status IS 'per doc query counters each docsync worker of a portable install reports';
-- like docsync's other tables, kept out of a subscriber's apply
CREATE TRIGGER skip_replicated BEFORE INSERT OR UPDATE OR DELETE ON docsync.worker_status
  FOR EACH ROW EXECUTE FUNCTION docsync.skip_replicated();
ALTER TABLE docsync.worker_status ENABLE REPLICA TRIGGER skip_replicated;
CREATE TRIGGER skip_replicated BEFORE INSERT OR UPDATE OR DELETE ON docsync.worker_query_status
  FOR EACH ROW EXECUTE FUNCTION docsync.skip_replicated();
ALTER TABLE docsync.worker_query_status ENABLE REPLICA TRIGGER skip_replicated;

-- Whether a worker holds the lease of slot (worker/replication/lease.hpp): the advisory lock the
-- active worker keeps on a connection of its own.
CREATE FUNCTION docsync.lease_held(slot name) RETURNS boolean
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
  SELECT EXISTS (
    SELECT FROM pg_locks l, (SELECT hashtextextended(slot::text, 1685288801) AS key) k
     WHERE l.locktype = 'advisory' AND l.granted AND l.mode = 'ExclusiveLock' AND l.objsubid = 1
       AND l.database = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database())
       AND l.classid = ((k.key >> 32) & 4294967295)::oid AND l.objid = (k.key & 4294967295)::oid)
$$;

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
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT format('docsync.worker_status row %s', quote_literal(w.slot_name)), w.database::text, w.slot_name::text,
         CASE WHEN w.layout_version <> 1 THEN
           format('layout version %s, not 1: the worker is of another docsync version', w.layout_version) END,
         w.layout_version, w.worker_pid, w.state, w.started_at, w.heartbeat_at, w.generation,
         w.received_lsn, w.acked_lsn, w.acked_at, w.open_txns, w.dirty_depth, w.in_flight, w.live_docs,
         w.changes, w.recomputes, w.publishes, w.permanent_failures, w.transient_retries, w.valve_resets,
         w.not_visible_retries, w.audit_samples, w.audit_divergences, w.recompute, w.recompute_done,
         w.recompute_total, w.recompute_started_at, w.recompute_finished_at, w.last_error, w.last_error_at,
         w.queries_omitted, docsync.lease_held(w.slot_name)
    FROM docsync.worker_status w
   ORDER BY w.slot_name
$$;
COMMENT ON FUNCTION docsync.status_files() IS
  'one row per worker of this database: its report in docsync.worker_status';

-- portable: function docsync.status_file_queries/0
CREATE FUNCTION docsync.status_file_queries(
    OUT database text, OUT slot_name text, OUT query text, OUT recomputes bigint,
    OUT permanent_failures bigint, OUT mean_compute_ms double precision, OUT last_error text,
    OUT last_error_at timestamptz, OUT batch_set_aside text)
RETURNS SETOF record
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT w.database::text, q.slot_name::text, q.query, q.recomputes, q.permanent_failures, q.mean_compute_ms,
         q.last_error, q.last_error_at, q.batch_set_aside
    FROM docsync.worker_query_status q JOIN docsync.worker_status w ON w.slot_name = q.slot_name
   WHERE w.layout_version = 1
   ORDER BY q.slot_name, q.query
$$;
COMMENT ON FUNCTION docsync.status_file_queries() IS
  'per-query counters the workers of this database report in docsync.worker_query_status';

-- portable: function docsync.status_directory/0
CREATE FUNCTION docsync.status_directory() RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT 'the table docsync.worker_status'::text $$;
COMMENT ON FUNCTION docsync.status_directory() IS 'where the workers report: the table docsync.worker_status';

-- portable: function docsync.forget_slot/2
-- Removes the report of a slot no worker serves (refused while the slot exists or a worker holds
-- its lease); returns what it removed.
CREATE FUNCTION docsync.forget_slot(slot name, database name DEFAULT pg_catalog.current_database())
RETURNS SETOF text
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF database IS DISTINCT FROM current_database() THEN
    RAISE EXCEPTION 'docsync.forget_slot forgets the workers of this database, not of "%"', database
      USING ERRCODE = 'invalid_parameter_value', HINT = 'Connect to that database and call it there.';
  END IF;
  IF EXISTS (SELECT FROM pg_replication_slots s WHERE s.slot_name = slot) THEN
    RAISE EXCEPTION 'replication slot "%" exists', slot
      USING ERRCODE = 'object_in_use', DETAIL = 'A worker may still report on it.',
            HINT = format('Drop the slot first if no worker is to use it: SELECT pg_drop_replication_slot(%L);', slot);
  END IF;
  IF docsync.lease_held(slot) THEN
    RAISE EXCEPTION 'a docsync worker holds slot "%"', slot
      USING ERRCODE = 'object_in_use', HINT = 'Stop the worker first.';
  END IF;
  RETURN QUERY DELETE FROM docsync.worker_status w WHERE w.slot_name = slot
    RETURNING format('docsync.worker_status row %s', quote_literal(w.slot_name));
END
$$;
COMMENT ON FUNCTION docsync.forget_slot(name, name) IS
  'removes the report of a slot no worker serves (refused while the slot exists or a worker holds it), so docsync.status stops showing it';
