/*-------------------------------------------------------------------------
 *
 * wait.c
 *		docsync.wait_published(): read-your-writes for applications. The procedure returns true once
 *		every docsync slot of the current database (or the one named) has confirmed a position at or
 *		past the given LSN, and false when the timeout comes first.
 *
 * A slot's confirmed_flush is the worker's acknowledgement as the server has processed it, and the
 * worker acknowledges a position only once the docs of every transaction before it are published,
 * as invariant 1 (docs/design.md) requires. So once it passes the LSN of a commit, every doc that
 * commit affected is in the sink.
 *
 * A statement's snapshot lives as long as the statement, and a snapshot held while waiting would
 * hold back VACUUM's horizon (backend_xmin) as long: hence a procedure. In a CALL outside a
 * transaction block (non-atomic) it commits before it waits, which releases the CALL's snapshot, and
 * then holds none. Inside a transaction block, or in an exception block of a calling procedure, it
 * cannot commit, and waits holding the surrounding transaction's snapshot. The slots are read from
 * shared memory, never with SQL, and the backend sleeps on its latch between looks: every
 * millisecond at first, then gradually less often, down to every 10 ms. WAL up to the target is
 * flushed first, as a commit would, since walsenders decode only flushed WAL.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/htup_details.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "access/xlog_internal.h"
#include "commands/dbcommands.h"
#include "docsync.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "replication/slot.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/spin.h"
#include "utils/builtins.h"
#include "utils/pg_lsn.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

PG_FUNCTION_INFO_V1(docsync_wait_published);

#define WAIT_PLUGIN "docsync"

/*
 * Sleeps between looks: 1 ms for the first WAIT_LOOKS_PER_STEP looks, then 1 ms longer every
 * WAIT_LOOKS_PER_STEP looks, up to WAIT_MAX_SLEEP_MS. A worker keeping up acknowledges within a few
 * milliseconds; a wait that lasts costs one look every 10 ms.
 */
#define WAIT_MAX_SLEEP_MS 10
#define WAIT_LOOKS_PER_STEP 8

/*
 * Longest wait honoured, in microseconds (about 31 700 years): keeps the deadline's arithmetic
 * within a timestamp whatever interval is given.
 */
#define WAIT_MAX_TIMEOUT_US ((double) INT64CONST(1000000000000000000))

/* What one look at the slots found. */
typedef struct SlotLook
{
	int			slots;			/* docsync slots of this database looked at (the named one: 0 or 1) */
	XLogRecPtr	lowest;			/* the lowest confirmed_flush among them */
	NameData   *names;			/* NULL, or their names (max_replication_slots entries, the caller's) */
	/* the named slot when it is not a docsync slot of this database */
	bool		named_found;
	Oid			named_database;
	NameData	named_plugin;
} SlotLook;

/*
 * One look at every replication slot, under ReplicationSlotControlLock (shared) and each slot's
 * spinlock, as pg_get_replication_slots() reads them. `slot_name` NULL: every docsync slot of this
 * database. Raises no error itself: nothing may be raised while the lock is held.
 */
static void
look_at_slots(const char *slot_name, SlotLook *look)
{
	NameData   *names = look->names;
	int			i;

	memset(look, 0, sizeof(SlotLook));
	look->names = names;
	look->lowest = PG_UINT64_MAX;
	LWLockAcquire(ReplicationSlotControlLock, LW_SHARED);
	for (i = 0; i < max_replication_slots; i++)
	{
		ReplicationSlot *s = &ReplicationSlotCtl->replication_slots[i];
		NameData	name;
		NameData	plugin;
		Oid			database;
		XLogRecPtr	confirmed_flush;

		if (!s->in_use)
			continue;
		SpinLockAcquire(&s->mutex);
		name = s->data.name;
		plugin = s->data.plugin;
		database = s->data.database;
		confirmed_flush = s->data.confirmed_flush;
		SpinLockRelease(&s->mutex);

		if (slot_name != NULL && strcmp(NameStr(name), slot_name) != 0)
			continue;
		if (database != MyDatabaseId || strcmp(NameStr(plugin), WAIT_PLUGIN) != 0)
		{
			if (slot_name != NULL)
			{
				look->named_found = true;
				look->named_database = database;
				look->named_plugin = plugin;
			}
			continue;
		}
		if (look->names != NULL)
			look->names[look->slots] = name;
		look->slots++;
		look->lowest = Min(look->lowest, confirmed_flush);
	}
	LWLockRelease(ReplicationSlotControlLock);
}

/*
 * Whether a slot of the look has a worker recomputing every live doc to cover a gap in its stream (a
 * recreated slot, another server, a sink that lost docs): its confirmed position then says nothing
 * of docs the recompute has not reached yet (docsync_status_gap_open).
 */
static bool
gap_open(const SlotLook *look)
{
	int			i;

	for (i = 0; i < look->slots; i++)
		if (docsync_status_gap_open(NameStr(look->names[i])))
			return true;
	return false;
}

/* Errors for a look that found no slot to wait for, naming the problem and the fix. */
static void
check_look(const char *slot_name, const SlotLook *look)
{
	char	   *database;

	if (look->slots > 0)
		return;
	database = get_database_name(MyDatabaseId);
	if (slot_name == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("database \"%s\" has no docsync replication slot", database),
				 errdetail("docsync.wait_published waits for the docsync-worker streaming a slot of this database to publish what was committed."),
				 errhint("Start docsync-worker on this database (--create-slot creates its slot the first time).")));
	if (!look->named_found)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("replication slot \"%s\" does not exist", slot_name),
				 errhint("Name the slot docsync-worker streams (its --slot), or pass slot => NULL to wait for every docsync slot of this database.")));
	if (look->named_database == InvalidOid)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("replication slot \"%s\" is a physical slot, not a docsync slot", slot_name),
				 errhint("Name the slot docsync-worker streams (its --slot), or pass slot => NULL to wait for every docsync slot of this database.")));
	if (strcmp(NameStr(look->named_plugin), WAIT_PLUGIN) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("replication slot \"%s\" uses plugin \"%s\", not docsync", slot_name, NameStr(look->named_plugin)),
				 errhint("Name the slot docsync-worker streams (its --slot), or pass slot => NULL to wait for every docsync slot of this database.")));
	{
		char	   *other = get_database_name(look->named_database);

		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("replication slot \"%s\" belongs to database \"%s\", not \"%s\"",
						slot_name, other ? other : "(dropped)", database),
				 errhint("Call docsync.wait_published in the database the slot decodes.")));
	}
}

/*
 * The position to wait for. A record never starts or ends inside a page header, so a position just
 * past one (where pg_current_wal_insert_lsn() points after a record that filled its page) is the
 * page's start: the end of that record, which is what the worker acknowledges.
 */
static XLogRecPtr
wait_target(XLogRecPtr lsn)
{
	uint32		offset = lsn % XLOG_BLCKSZ;
	uint32		header = XLogSegmentOffset(lsn, wal_segment_size) < XLOG_BLCKSZ ? SizeOfXLogLongPHD : SizeOfXLogShortPHD;

	return offset > 0 && offset <= header ? lsn - offset : lsn;
}

/* The timeout in microseconds, a month counting 30 days as elsewhere in PostgreSQL. */
static int64
timeout_us(const Interval *timeout)
{
	double		us = (double) timeout->time +
		((double) timeout->day + (double) timeout->month * DAYS_PER_MONTH) * (double) USECS_PER_DAY;

	if (us < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("docsync.wait_published timeout must not be negative: %s",
						DatumGetCString(DirectFunctionCall1(interval_out, IntervalPGetDatum(timeout)))),
				 errhint("Pass how long to wait, e.g. '5s'; '0s' looks once.")));
	return (int64) Min(us, WAIT_MAX_TIMEOUT_US);
}

/*
 * CALL docsync.wait_published(lsn, timeout, slot, INOUT published): true once the docsync slots of
 * this database (or `slot`) have confirmed `lsn`, false at the timeout.
 */
Datum
docsync_wait_published(PG_FUNCTION_ARGS)
{
	XLogRecPtr	target;
	int64		wait_us;
	NameData	slot_name;
	const char *slot = NULL;
	SlotLook	look;
	bool		published = false;
	TimestampTz deadline;
	int			looks;
	CallContext *call;
	TupleDesc	tupdesc;
	Datum		values[1];
	bool		nulls[1] = {false};

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("docsync.wait_published lsn must not be null"),
				 errhint("Leave lsn out to wait for everything written so far (pg_current_wal_insert_lsn()).")));
	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("docsync.wait_published timeout must not be null"),
				 errhint("Leave timeout out for 5 seconds, or pass how long to wait, e.g. '30s'.")));
	target = wait_target(PG_GETARG_LSN(0));
	wait_us = timeout_us(PG_GETARG_INTERVAL_P(1));
	if (!PG_ARGISNULL(2))
	{
		/* a copy: the argument need not outlive the commit below */
		slot_name = *PG_GETARG_NAME(2);
		slot = NameStr(slot_name);
	}

	/* A slot to wait for must exist now; a wait for nothing would only time out. */
	look.names = NULL;
	look_at_slots(slot, &look);
	check_look(slot, &look);

	/*
	 * Walsenders decode only flushed WAL, and WAL that no commit flushed (written with
	 * synchronous_commit off, or by a transaction that rolled back, such as a read-only one that
	 * pruned a page) may stay on a partial page until the next commit. Flush up to the target, as a
	 * commit would, so that the wait does not last until then.
	 */
	if (!RecoveryInProgress())
		XLogFlush(Min(target, GetXLogInsertRecPtr()));

	/*
	 * Release the CALL's snapshot: commit, as a procedure may when it is called outside a transaction
	 * block. A transaction block, or a subtransaction (an exception block of a calling procedure),
	 * cannot be committed here: then the wait holds the surrounding transaction's snapshot.
	 */
	call = (fcinfo->context != NULL && IsA(fcinfo->context, CallContext)) ? (CallContext *) fcinfo->context : NULL;
	if (call != NULL && !call->atomic && !IsSubTransaction())
	{
		if (SPI_connect_ext(SPI_OPT_NONATOMIC) != SPI_OK_CONNECT)
			elog(ERROR, "SPI_connect_ext failed");
		SPI_commit();
		SPI_finish();
	}

	/* Allocated after the commit, in the memory it leaves current. */
	look.names = palloc(sizeof(NameData) * Max(max_replication_slots, 1));
	deadline = GetCurrentTimestamp() + wait_us;
	for (looks = 0;; looks++)
	{
		TimestampTz now;
		long		sleep_ms;

		look_at_slots(slot, &look);
		/* a slot dropped while waiting */
		check_look(slot, &look);
		if (look.lowest >= target && !gap_open(&look))
		{
			published = true;
			break;
		}
		now = GetCurrentTimestamp();
		if (now >= deadline)
			break;
		sleep_ms = Min(WAIT_MAX_SLEEP_MS, 1 + looks / WAIT_LOOKS_PER_STEP);
		sleep_ms = Min(sleep_ms, (long) ceil((double) (deadline - now) / 1000.0));
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, sleep_ms, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}

	/* The INOUT parameter: a procedure's output parameters come back as one record. */
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "docsync.wait_published must be declared with an INOUT published boolean");
	tupdesc = BlessTupleDesc(tupdesc);
	values[0] = BoolGetDatum(published);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}
