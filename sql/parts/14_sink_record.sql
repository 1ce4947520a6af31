-- sql/parts/14_sink_record.sql: what a sink should hold, kept outside it: docsync.sink_state, the
-- UNLOGGED live journal, the functions the worker writes them with, and the docsync.sinks view.
-- What a sink should hold, kept outside it (docs/design.md, "sink checks"). The worker writes both
-- through its replication role (--dsn: the pool may be a read-only standby), with the functions
-- below, which grant_replication grants.
--
-- sink_state: per slot and sink, the highest version the worker read back from the sink. A sink
-- whose own highest version is below it at the next start lost docs (restored from an older
-- snapshot, flushed, restarted without persistence, a file truncated or replaced). Written at most
-- every few seconds, only when the sink's version moved; left out of pg_dump (another database
-- restored from a dump has other sinks' history).
CREATE TABLE docsync.sink_state (
  slot       name NOT NULL,
  sink       text NOT NULL,
  generation bigint NOT NULL,
  lsn        pg_lsn NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (slot, sink)
);
COMMENT ON TABLE docsync.sink_state IS 'docsync: the highest doc version each slot''s worker saw in each sink';

-- live_journal: the channels a worker with --live all keeps current, written in batches when a
-- change first names a doc (before it is ever published), so a doc the sink never held or lost
-- is still recomputed after a restart, the WAL safety valve or a sink's loss. UNLOGGED: no WAL, so
-- no decoding and no replication cost; after a crash of PostgreSQL or on a standby it is empty, and
-- the next worker writes back what the sink holds (only a sink lost together with it loses docs).
CREATE UNLOGGED TABLE docsync.live_journal (
  slot    name NOT NULL,
  channel text NOT NULL,
  PRIMARY KEY (slot, channel)
);
COMMENT ON TABLE docsync.live_journal IS 'docsync: the channels each slot''s worker keeps current (--live all)';

CREATE FUNCTION docsync.sink_recorded(slot name, sink text, OUT generation bigint, OUT lsn pg_lsn)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT s.generation, s.lsn FROM docsync.sink_state s WHERE s.slot = sink_recorded.slot AND s.sink = sink_recorded.sink
$$;
COMMENT ON FUNCTION docsync.sink_recorded(name, text) IS
  'the highest doc version recorded for a slot''s sink (null: none yet)';

CREATE FUNCTION docsync.sink_confirmed(slot name, sink text, generation bigint, lsn pg_lsn) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF slot IS NULL OR sink IS NULL OR generation IS NULL OR lsn IS NULL THEN
    RAISE EXCEPTION 'docsync.sink_confirmed arguments must not be null'
      USING ERRCODE = 'null_value_not_allowed', DETAIL = 'slot, sink, generation and lsn name a sink''s version.',
            HINT = 'Pass every argument.';
  END IF;
  -- Set, not raised: a sink a worker found to have lost docs starts again from what it holds.
  INSERT INTO docsync.sink_state AS s (slot, sink, generation, lsn)
  VALUES (slot, sink, generation, lsn)
  ON CONFLICT ON CONSTRAINT sink_state_pkey DO UPDATE
    SET generation = excluded.generation, lsn = excluded.lsn, updated_at = now()
    WHERE (s.generation, s.lsn) IS DISTINCT FROM (excluded.generation, excluded.lsn);
END
$$;
COMMENT ON FUNCTION docsync.sink_confirmed(name, text, bigint, pg_lsn) IS
  'records the highest doc version a slot''s worker read back from its sink';

CREATE FUNCTION docsync.journal_name(slot name, channels text[]) RETURNS bigint
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  WITH added AS (
    INSERT INTO docsync.live_journal (slot, channel)
    SELECT journal_name.slot, c FROM pg_catalog.unnest(channels) c WHERE c IS NOT NULL
    ON CONFLICT ON CONSTRAINT live_journal_pkey DO NOTHING
    RETURNING 1)
  SELECT pg_catalog.count(*) FROM added
$$;
COMMENT ON FUNCTION docsync.journal_name(name, text[]) IS
  'adds channels to a slot''s live journal; returns how many were new';

CREATE FUNCTION docsync.journal_forget(slot name, channels text[]) RETURNS bigint
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  WITH gone AS (
    DELETE FROM docsync.live_journal j
     WHERE j.slot = journal_forget.slot AND j.channel = ANY (channels)
    RETURNING 1)
  SELECT pg_catalog.count(*) FROM gone
$$;
COMMENT ON FUNCTION docsync.journal_forget(name, text[]) IS
  'removes channels from a slot''s live journal; returns how many were there';

CREATE FUNCTION docsync.journal_channels(slot name) RETURNS SETOF text
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT j.channel FROM docsync.live_journal j WHERE j.slot = journal_channels.slot
$$;
COMMENT ON FUNCTION docsync.journal_channels(name) IS 'the channels in a slot''s live journal';

-- What docsync.status does not say per sink: the recorded version and the size of the journal.
CREATE VIEW docsync.sinks AS
  SELECT s.slot, s.sink, s.generation, s.lsn, s.updated_at,
         (SELECT pg_catalog.count(*) FROM docsync.live_journal j WHERE j.slot = s.slot) AS journaled_channels
    FROM docsync.sink_state s;
COMMENT ON VIEW docsync.sinks IS
  'docsync: per slot and sink, the highest doc version its worker saw there, and the channels it journals';

REVOKE ALL ON FUNCTION docsync.sink_recorded(name, text), docsync.sink_confirmed(name, text, bigint, pg_lsn),
  docsync.journal_name(name, text[]), docsync.journal_forget(name, text[]), docsync.journal_channels(name)
  FROM PUBLIC;
GRANT SELECT ON docsync.sinks TO pg_monitor, docsync_admin;
