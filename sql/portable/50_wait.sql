-- sql/portable/50_wait.sql: the portable form of docsync.wait_published (plugin/wait.c).

-- portable: function docsync.wait_published/4
-- The same contract, polled: pg_replication_slots.confirmed_flush_lsn of the docsync slots of this
-- database (plugin docsync, or a slot a worker reports on in docsync.worker_status) or of the one
-- named, and the gap state the worker reports, looked at every 1 ms at first, then less often, down
-- to every 10 ms, with pg_sleep. A CALL outside a transaction block commits first, so the wait holds
-- no snapshot between looks (a CALL of it from inside a function, where no commit is allowed, is
-- refused: call it with CALL). WAL is not flushed first as the C procedure does (SQL has no flush),
-- so a target past the last flush waits for the next commit's flush.
CREATE FUNCTION docsync.docsync_slots(slot name, OUT slot_name name, OUT confirmed pg_lsn)
RETURNS SETOF record LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  s record;
BEGIN
  IF slot IS NOT NULL THEN
    SELECT * INTO s FROM pg_replication_slots r WHERE r.slot_name = slot;
    IF NOT FOUND THEN
      RAISE EXCEPTION 'replication slot "%" does not exist', slot
        USING ERRCODE = 'undefined_object',
              HINT = 'Name the slot docsync-worker streams (its --slot), or pass slot => NULL to wait for every docsync slot of this database.';
    ELSIF s.slot_type <> 'logical' THEN
      RAISE EXCEPTION 'replication slot "%" is a physical slot, not a docsync slot', slot
        USING ERRCODE = 'wrong_object_type',
              HINT = 'Name the slot docsync-worker streams (its --slot), or pass slot => NULL to wait for every docsync slot of this database.';
    ELSIF s.database <> current_database() THEN
      RAISE EXCEPTION 'replication slot "%" belongs to database "%", not "%"', slot, s.database, current_database()
        USING ERRCODE = 'wrong_object_type', HINT = 'Call docsync.wait_published in the database the slot decodes.';
    ELSIF s.plugin <> 'docsync' AND NOT EXISTS (SELECT FROM docsync.worker_status w WHERE w.slot_name = slot) THEN
      RAISE EXCEPTION 'replication slot "%" uses plugin "%" and no docsync worker reports on it', slot, s.plugin
        USING ERRCODE = 'wrong_object_type',
              HINT = 'Name the slot docsync-worker streams (its --slot), or pass slot => NULL to wait for every docsync slot of this database.';
    END IF;
  END IF;
  RETURN QUERY
    SELECT r.slot_name,
           -- a worker recomputing every doc to cover a gap in its stream has published nothing of it yet
           CASE WHEN w.sink_unchecked OR (w.recompute IS NOT NULL AND w.recompute_gap AND w.recompute_finished_at IS NULL)
                THEN '0/0'::pg_lsn ELSE coalesce(r.confirmed_flush_lsn, '0/0'::pg_lsn) END
      FROM pg_replication_slots r
      LEFT JOIN docsync.worker_status w ON w.slot_name = r.slot_name
     WHERE r.database = current_database() AND r.slot_type = 'logical'
       AND (r.plugin = 'docsync' OR w.slot_name IS NOT NULL)
       AND (slot IS NULL OR r.slot_name = slot);
  IF NOT FOUND AND slot IS NULL THEN
    RAISE EXCEPTION 'database "%" has no docsync replication slot', current_database()
      USING ERRCODE = 'undefined_object',
            DETAIL = 'docsync.wait_published waits for the docsync-worker streaming a slot of this database to publish what was committed.',
            HINT = 'Start docsync-worker on this database (--create-slot creates its slot the first time).';
  END IF;
END
$$;

CREATE PROCEDURE docsync.wait_published(
    lsn pg_lsn DEFAULT pg_catalog.pg_current_wal_insert_lsn(),
    timeout interval DEFAULT '5s',
    slot name DEFAULT NULL,
    INOUT published boolean DEFAULT NULL)
LANGUAGE plpgsql AS $$
DECLARE
  deadline timestamptz;
  looks integer := 0;
  lowest pg_lsn;
BEGIN
  IF lsn IS NULL THEN
    RAISE EXCEPTION 'docsync.wait_published lsn must not be null'
      USING ERRCODE = 'null_value_not_allowed',
            HINT = 'Leave lsn out to wait for everything written so far (pg_current_wal_insert_lsn()).';
  END IF;
  IF timeout IS NULL THEN
    RAISE EXCEPTION 'docsync.wait_published timeout must not be null'
      USING ERRCODE = 'null_value_not_allowed',
            HINT = 'Leave timeout out for 5 seconds, or pass how long to wait, e.g. ''30s''.';
  END IF;
  IF timeout < interval '0' THEN
    RAISE EXCEPTION 'docsync.wait_published timeout must not be negative: %', timeout
      USING ERRCODE = 'invalid_parameter_value', HINT = 'Pass how long to wait, e.g. ''5s''; ''0s'' looks once.';
  END IF;
  -- a slot to wait for must exist now
  PERFORM docsync.docsync_slots(slot);
  -- A CALL that started its own transaction (outside a transaction block, where the transaction's
  -- start is the statement's) commits, releasing its snapshot; in a transaction block it waits
  -- holding the surrounding transaction's snapshot.
  IF now() = statement_timestamp() THEN
    COMMIT;
  END IF;
  deadline := clock_timestamp() + least(timeout, interval '1 day');
  LOOP
    SELECT min(s.confirmed) INTO lowest FROM docsync.docsync_slots(slot) s;
    IF lowest >= lsn THEN
      published := true;
      RETURN;
    END IF;
    EXIT WHEN clock_timestamp() >= deadline;
    PERFORM pg_sleep(least(0.010, 0.001 * (1 + looks / 8),
                           greatest(extract(epoch FROM deadline - clock_timestamp()), 0)));
    looks := looks + 1;
  END LOOP;
  published := false;
END
$$;
COMMENT ON PROCEDURE docsync.wait_published(pg_lsn, interval, name, boolean) IS
  'waits until the docs of every transaction before lsn are published (the docsync slots of this database, or slot, confirmed it); published is false at the timeout';
