/*-------------------------------------------------------------------------
 *
 * decode.c
 *		The docsync logical decoding output plugin: compact, filtered, transaction-grouped change
 *		records for the docsync worker.
 *
 * Only watched relations (the `tables` option, plus the extension's own tables) emit anything, and
 * only their listed columns. A transaction's BEGIN is written before its first emitted record and its
 * COMMIT after the last, so a transaction whose changes are all filtered out emits nothing. This file
 * decides what is written and when; the records themselves, in the binary format or, with format
 * 'text', as one readable line each (both specified in shared/docsync_wire.h), are encoded by the
 * writer of records.c. Each record is built in ctx->out and written at once; values are converted in
 * a per-change memory context reset after every change, so plugin memory stays bounded whatever the
 * size of a transaction.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/detoast.h"
#include "fmgr.h"
#include "access/htup_details.h"
#include "replication/logical.h"
#include "replication/origin.h"
#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "compat.h"
#include "docsync.h"
#include "docsync_wire.h"
#include "plugin.h"
#include "records.h"

/* Per-slot-session state. */
typedef struct DocsyncDecodingData
{
	MemoryContext context;		/* per-change context, reset after each change */
	MemoryContext options_context;	/* holds the parsed options for the session */
	DocsyncOptions options;		/* the parsed plugin options */
	const DocsyncWriter *writer;	/* encodes the records in the options' format */
	int			changes_since_progress; /* changes seen since the last progress report */
} DocsyncDecodingData;

/* Per-transaction state, in txn->output_plugin_private. */
typedef struct DocsyncTxnData
{
	bool		begin_sent;		/* BEGIN written: a COMMIT must follow */
} DocsyncTxnData;

/*
 * Reads the columns of one tuple: deformed all at once when many are emitted, fetched one by one
 * when few are (cheaper on wide rows), with values of columns added later taken from the catalog.
 */
typedef struct TupleReader
{
	HeapTuple	tuple;			/* the tuple being read */
	TupleDesc	desc;			/* the changed relation's descriptor */
	bool		deformed;		/* datums and nulls hold every column */
	int			natts;			/* columns physically in the tuple */
	Datum	   *datums;			/* deformed values, when deformed */
	bool	   *nulls;			/* deformed null flags, when deformed */
} TupleReader;

/* At most this many emitted columns are fetched one by one rather than by deforming the tuple. */
#define DOCSYNC_DIRECT_FETCH_MAX 4

/* Callbacks */
static void docsync_startup(LogicalDecodingContext *ctx, OutputPluginOptions *opt, bool is_init);
static void docsync_shutdown(LogicalDecodingContext *ctx);
static void docsync_begin(LogicalDecodingContext *ctx, ReorderBufferTXN *txn);
static void docsync_change(LogicalDecodingContext *ctx, ReorderBufferTXN *txn,
						   Relation relation, ReorderBufferChange *change);
static void docsync_truncate(LogicalDecodingContext *ctx, ReorderBufferTXN *txn,
							 int nrelations, Relation relations[], ReorderBufferChange *change);
static void docsync_message(LogicalDecodingContext *ctx, ReorderBufferTXN *txn,
							XLogRecPtr message_lsn, bool transactional, const char *prefix,
							Size message_size, const char *message);
static bool docsync_filter_by_origin(LogicalDecodingContext *ctx, RepOriginId origin_id);
static void docsync_commit(LogicalDecodingContext *ctx, ReorderBufferTXN *txn,
						   XLogRecPtr commit_lsn);

/* Records */
static void ensure_begin(LogicalDecodingContext *ctx, ReorderBufferTXN *txn);
static void ensure_relation(LogicalDecodingContext *ctx, DocsyncRelEntry *entry);
static void write_row(LogicalDecodingContext *ctx, DocsyncRelEntry *entry, Relation relation,
					  ReorderBufferChange *change);
static void collect_new(DocsyncRelEntry *entry, TupleDesc desc, HeapTuple tuple, DocsyncValue *values);
static void collect_old(DocsyncRelEntry *entry, TupleDesc desc, HeapTuple tuple,
						const DocsyncValue *newvals, DocsyncValue *values);
static void value_text(DocsyncColumn *col, Datum d, DocsyncValue *value);
static void reader_init(TupleReader *reader, DocsyncRelEntry *entry, TupleDesc desc, HeapTuple tuple);
static Datum reader_get(TupleReader *reader, AttrNumber attnum, bool *isnull);
static void progress_tick(LogicalDecodingContext *ctx);

void
_PG_output_plugin_init(OutputPluginCallbacks *cb)
{
	cb->startup_cb = docsync_startup;
	cb->begin_cb = docsync_begin;
	cb->change_cb = docsync_change;
	cb->truncate_cb = docsync_truncate;
	cb->message_cb = docsync_message;
	cb->filter_by_origin_cb = docsync_filter_by_origin;
	cb->commit_cb = docsync_commit;
	cb->shutdown_cb = docsync_shutdown;
}

/* Slot session start: allocate state, parse the options, set up the relation cache. */
static void
docsync_startup(LogicalDecodingContext *ctx, OutputPluginOptions *opt, bool is_init)
{
	DocsyncDecodingData *data = palloc0(sizeof(DocsyncDecodingData));
	MemoryContext old;

	data->context = AllocSetContextCreate(ctx->context, "docsync change context",
										  ALLOCSET_DEFAULT_SIZES);
	data->options_context = AllocSetContextCreate(ctx->context, "docsync options",
												  ALLOCSET_SMALL_SIZES);
	ctx->output_plugin_private = data;

	old = MemoryContextSwitchTo(data->options_context);
	if (is_init)
		docsync_parse_options(&data->options, NIL); /* slot creation: defaults only */
	else
		docsync_parse_options(&data->options, ctx->output_plugin_options);
	MemoryContextSwitchTo(old);

	opt->output_type = data->options.binary ? OUTPUT_PLUGIN_BINARY_OUTPUT
		: OUTPUT_PLUGIN_TEXTUAL_OUTPUT;
	data->writer = docsync_writer(data->options.binary);
	opt->receive_rewrites = false;
	docsync_relmap_init(ctx->context, data->options.tables);
}

/* Slot session end. */
static void
docsync_shutdown(LogicalDecodingContext *ctx)
{
	DocsyncDecodingData *data = ctx->output_plugin_private;

	docsync_relmap_reset();
	if (data == NULL)
		return;
	MemoryContextDelete(data->context);
	MemoryContextDelete(data->options_context);
}

/* BEGIN: nothing is written until a change passes the filter. */
static void
docsync_begin(LogicalDecodingContext *ctx, ReorderBufferTXN *txn)
{
	DocsyncTxnData *txndata = MemoryContextAllocZero(ctx->context, sizeof(DocsyncTxnData));

	txn->output_plugin_private = txndata;
}

/* A row change: written when its relation is watched. */
static void
docsync_change(LogicalDecodingContext *ctx, ReorderBufferTXN *txn,
			   Relation relation, ReorderBufferChange *change)
{
	DocsyncDecodingData *data = ctx->output_plugin_private;
	DocsyncRelEntry *entry;
	MemoryContext old;

	progress_tick(ctx);

	switch (change->action)
	{
		case REORDER_BUFFER_CHANGE_INSERT:
		case REORDER_BUFFER_CHANGE_UPDATE:
		case REORDER_BUFFER_CHANGE_DELETE:
			break;
		default:
			return;
	}

	old = MemoryContextSwitchTo(data->context);
	entry = docsync_relmap_get(relation);
	if (entry->watched)
	{
		ensure_begin(ctx, txn);
		ensure_relation(ctx, entry);
		write_row(ctx, entry, relation, change);
	}
	docsync_relmap_release();
	MemoryContextSwitchTo(old);
	MemoryContextReset(data->context);
}

/* TRUNCATE: lists the watched relations it hit (reported as their roots), each once. */
static void
docsync_truncate(LogicalDecodingContext *ctx, ReorderBufferTXN *txn,
				 int nrelations, Relation relations[], ReorderBufferChange *change)
{
	DocsyncDecodingData *data = ctx->output_plugin_private;
	DocsyncRelEntry **hit;
	int			nhit = 0;
	int			i;
	int			j;
	uint8		flags = 0;
	MemoryContext old;

	progress_tick(ctx);
	old = MemoryContextSwitchTo(data->context);
	hit = palloc(sizeof(DocsyncRelEntry *) * nrelations);
	for (i = 0; i < nrelations; i++)
	{
		DocsyncRelEntry *entry = docsync_relmap_get(relations[i]);
		bool		dup = false;

		if (!entry->watched)
			continue;
		for (j = 0; j < nhit; j++)
			if (hit[j]->root_relid == entry->root_relid)
				dup = true;
		if (!dup)
			hit[nhit++] = entry;
	}
	if (nhit > 0)
	{
		ensure_begin(ctx, txn);
		for (i = 0; i < nhit; i++)
			ensure_relation(ctx, hit[i]);
		if (change->data.truncate.cascade)
			flags |= DOCSYNC_TRUNCATE_CASCADE;
		if (change->data.truncate.restart_seqs)
			flags |= DOCSYNC_TRUNCATE_RESTART_IDENTITY;

		OutputPluginPrepareWrite(ctx, true);
		data->writer->truncate(ctx->out, hit, nhit, flags);
		OutputPluginWrite(ctx, true);
	}
	docsync_relmap_release();
	MemoryContextSwitchTo(old);
	MemoryContextReset(data->context);
}

/* A logical message: passed through when its prefix starts with "docsync" and messages are on. */
static void
docsync_message(LogicalDecodingContext *ctx, ReorderBufferTXN *txn,
				XLogRecPtr message_lsn, bool transactional, const char *prefix,
				Size message_size, const char *message)
{
	DocsyncDecodingData *data = ctx->output_plugin_private;

	if (!data->options.messages || strncmp(prefix, "docsync", strlen("docsync")) != 0)
		return;
	if (transactional)
		ensure_begin(ctx, txn);

	OutputPluginPrepareWrite(ctx, true);
	data->writer->message(ctx->out, transactional, prefix, message, message_size);
	OutputPluginWrite(ctx, true);
}

/* With origin 'none', changes replicated from elsewhere (they carry an origin) are skipped. */
static bool
docsync_filter_by_origin(LogicalDecodingContext *ctx, RepOriginId origin_id)
{
	DocsyncDecodingData *data = ctx->output_plugin_private;

	return data->options.origin_none && origin_id != InvalidRepOriginId;
}

/* COMMIT: written only when BEGIN was; a skipped transaction still reports progress. */
static void
docsync_commit(LogicalDecodingContext *ctx, ReorderBufferTXN *txn, XLogRecPtr commit_lsn)
{
	DocsyncDecodingData *data = ctx->output_plugin_private;
	DocsyncTxnData *txndata = txn->output_plugin_private;
	bool		sent = txndata != NULL && txndata->begin_sent;

	if (txndata != NULL)
		pfree(txndata);
	txn->output_plugin_private = NULL;
	data->changes_since_progress = 0;
	docsync_update_progress(ctx, !sent);
	if (!sent)
		return;

	OutputPluginPrepareWrite(ctx, true);
	data->writer->commit(ctx->out, txn, commit_lsn);
	OutputPluginWrite(ctx, true);
}

/* Writes the transaction's BEGIN if it has not been written yet. */
static void
ensure_begin(LogicalDecodingContext *ctx, ReorderBufferTXN *txn)
{
	DocsyncDecodingData *data = ctx->output_plugin_private;
	DocsyncTxnData *txndata = txn->output_plugin_private;

	Assert(txndata != NULL);
	if (txndata->begin_sent)
		return;
	txndata->begin_sent = true;

	OutputPluginPrepareWrite(ctx, false);
	data->writer->begin(ctx->out, txn);
	OutputPluginWrite(ctx, false);
}

/* Writes the RELATION record of a watched relation unless the current one was already sent. */
static void
ensure_relation(LogicalDecodingContext *ctx, DocsyncRelEntry *entry)
{
	DocsyncDecodingData *data = ctx->output_plugin_private;

	if (entry->relation_sent)
		return;
	if (!docsync_relmap_needs_relation(entry))
	{
		entry->relation_sent = true;
		return;
	}

	OutputPluginPrepareWrite(ctx, false);
	data->writer->relation(ctx->out, entry);
	OutputPluginWrite(ctx, false);
	docsync_relmap_relation_written(entry);
	entry->relation_sent = true;
}

/* Writes an INSERT, UPDATE or DELETE of a watched relation. */
static void
write_row(LogicalDecodingContext *ctx, DocsyncRelEntry *entry, Relation relation,
		  ReorderBufferChange *change)
{
	DocsyncDecodingData *data = ctx->output_plugin_private;
	TupleDesc	desc = RelationGetDescr(relation);
	HeapTuple	newtuple = DOCSYNC_CHANGE_NEWTUPLE(change);
	HeapTuple	oldtuple = DOCSYNC_CHANGE_OLDTUPLE(change);
	DocsyncValue *newvals = palloc(sizeof(DocsyncValue) * (entry->ncolumns + 1));
	DocsyncValue *oldvals = palloc(sizeof(DocsyncValue) * (entry->ncolumns + 1));
	char		type;

	switch (change->action)
	{
		case REORDER_BUFFER_CHANGE_INSERT:
			type = DOCSYNC_REC_INSERT;
			collect_new(entry, desc, newtuple, newvals);
			break;
		case REORDER_BUFFER_CHANGE_UPDATE:
			type = DOCSYNC_REC_UPDATE;
			collect_new(entry, desc, newtuple, newvals);
			collect_old(entry, desc, oldtuple, newvals, oldvals);
			break;
		case REORDER_BUFFER_CHANGE_DELETE:
			type = DOCSYNC_REC_DELETE;
			collect_old(entry, desc, oldtuple, NULL, oldvals);
			break;
		default:
			elog(ERROR, "docsync: unexpected change action %d", (int) change->action);
	}

	OutputPluginPrepareWrite(ctx, true);
	data->writer->row(ctx->out, type, entry, newvals, oldvals);
	OutputPluginWrite(ctx, true);
}

/* The new values of the emitted columns: TEXT, NULL, TOAST (unchanged, not logged) or UNKNOWN. */
static void
collect_new(DocsyncRelEntry *entry, TupleDesc desc, HeapTuple tuple, DocsyncValue *values)
{
	TupleReader reader;
	int			i;

	if (tuple == NULL)
	{
		for (i = 0; i < entry->ncolumns; i++)
			values[i].kind = DOCSYNC_VAL_UNKNOWN;
		return;
	}
	reader_init(&reader, entry, desc, tuple);
	for (i = 0; i < entry->ncolumns; i++)
	{
		DocsyncColumn *col = &entry->columns[i];
		AttrNumber	a = col->leaf_attnum;
		Datum		d;
		bool		isnull;

		if ((col->flags & DOCSYNC_COL_MISSING) || a == InvalidAttrNumber || a > desc->natts)
		{
			values[i].kind = DOCSYNC_VAL_UNKNOWN;
			continue;
		}
		d = reader_get(&reader, a, &isnull);
		values[i].datum = d;
		if (isnull)
			values[i].kind = DOCSYNC_VAL_NULL;
		else if (col->varlena && VARATT_IS_EXTERNAL_ONDISK(DatumGetPointer(d)))
			values[i].kind = DOCSYNC_VAL_TOAST;
		else
			value_text(col, d, &values[i]);
	}
}

/*
 * The old values of the emitted columns. Only columns in the changed relation's replica identity are
 * logged (all of them for FULL); the rest are UNKNOWN. For an UPDATE (newvals given) a logged value
 * equal to the new one is SAME, and when the server logged no old tuple at all the key did not change,
 * so identity columns are SAME too.
 */
static void
collect_old(DocsyncRelEntry *entry, TupleDesc desc, HeapTuple tuple,
			const DocsyncValue *newvals, DocsyncValue *values)
{
	TupleReader reader;
	int			i;

	if (tuple != NULL)
		reader_init(&reader, entry, desc, tuple);
	for (i = 0; i < entry->ncolumns; i++)
	{
		DocsyncColumn *col = &entry->columns[i];
		AttrNumber	a = col->leaf_attnum;
		Datum		d;
		bool		isnull;

		values[i].kind = DOCSYNC_VAL_UNKNOWN;
		if ((col->flags & DOCSYNC_COL_MISSING) || a == InvalidAttrNumber || a > desc->natts ||
			!col->leaf_identity)
			continue;
		if (tuple == NULL)
		{
			if (newvals != NULL)
				values[i].kind = DOCSYNC_VAL_SAME;
			continue;
		}
		d = reader_get(&reader, a, &isnull);
		if (isnull)
		{
			values[i].kind = (newvals != NULL && newvals[i].kind == DOCSYNC_VAL_NULL)
				? DOCSYNC_VAL_SAME : DOCSYNC_VAL_NULL;
			continue;
		}
		if (col->varlena && VARATT_IS_EXTERNAL_ONDISK(DatumGetPointer(d)))
		{
			/* Not expected (the server inlines logged old values), but never read it. */
			values[i].kind = (newvals != NULL && newvals[i].kind == DOCSYNC_VAL_TOAST)
				? DOCSYNC_VAL_SAME : DOCSYNC_VAL_UNKNOWN;
			continue;
		}
		if (newvals != NULL)
		{
			if (newvals[i].kind == DOCSYNC_VAL_TOAST)
			{
				values[i].kind = DOCSYNC_VAL_SAME;	/* unchanged, hence not logged anew */
				continue;
			}
			if (newvals[i].kind == DOCSYNC_VAL_TEXT &&
				datumIsEqual(d, newvals[i].datum, col->byval, col->typlen))
			{
				values[i].kind = DOCSYNC_VAL_SAME;
				continue;
			}
		}
		value_text(col, d, &values[i]);
		if (newvals != NULL && newvals[i].kind == DOCSYNC_VAL_TEXT && values[i].len == newvals[i].len &&
			memcmp(values[i].text, newvals[i].text, values[i].len) == 0)
			values[i].kind = DOCSYNC_VAL_SAME;
	}
}

static void
reader_init(TupleReader *reader, DocsyncRelEntry *entry, TupleDesc desc, HeapTuple tuple)
{
	reader->tuple = tuple;
	reader->desc = desc;
	reader->natts = HeapTupleHeaderGetNatts(tuple->t_data);
	reader->deformed = entry->ncolumns > DOCSYNC_DIRECT_FETCH_MAX || entry->ncolumns * 2 > desc->natts;
	reader->datums = NULL;
	reader->nulls = NULL;
	if (reader->deformed)
	{
		reader->datums = palloc(sizeof(Datum) * desc->natts);
		reader->nulls = palloc(sizeof(bool) * desc->natts);
		heap_deform_tuple(tuple, desc, reader->datums, reader->nulls);
	}
}

static Datum
reader_get(TupleReader *reader, AttrNumber attnum, bool *isnull)
{
	if (!reader->deformed)
		return heap_getattr(reader->tuple, attnum, reader->desc, isnull);
	if (attnum > reader->natts)
		return getmissingattr(reader->desc, attnum, isnull);	/* added later with a default */
	*isnull = reader->nulls[attnum - 1];
	return reader->datums[attnum - 1];
}

/*
 * A value's text form, as the type's output function gives it. The commonest types take a short
 * cut with the same result: integers are formatted in place, and text-like values are used where
 * they lie (decompressed if needed) instead of being copied into a C string.
 */
static void
value_text(DocsyncColumn *col, Datum d, DocsyncValue *value)
{
	value->kind = DOCSYNC_VAL_TEXT;
	switch (col->typid)
	{
		case INT2OID:
			value->len = pg_itoa(DatumGetInt16(d), value->digits);
			value->text = value->digits;
			return;
		case INT4OID:
			value->len = pg_ltoa(DatumGetInt32(d), value->digits);
			value->text = value->digits;
			return;
		case INT8OID:
			value->len = pg_lltoa(DatumGetInt64(d), value->digits);
			value->text = value->digits;
			return;
		case TEXTOID:
		case VARCHAROID:
		case BPCHAROID:
			{
				struct varlena *v = pg_detoast_datum_packed((struct varlena *) DatumGetPointer(d));

				value->text = VARDATA_ANY(v);
				value->len = VARSIZE_ANY_EXHDR(v);
				return;
			}
		default:
			value->text = OutputFunctionCall(&col->output, d);
			value->len = strlen(value->text);
			return;
	}
}

/*
 * Counts a change, filtered or not, and reports progress every DOCSYNC_PROGRESS_EVERY_CHANGES so a
 * huge transaction whose changes are filtered out cannot trip wal_sender_timeout (before 16).
 */
static void
progress_tick(LogicalDecodingContext *ctx)
{
	DocsyncDecodingData *data = ctx->output_plugin_private;

	if (!DOCSYNC_REPORT_PROGRESS)
		return;
	if (++data->changes_since_progress >= DOCSYNC_PROGRESS_EVERY_CHANGES)
	{
		data->changes_since_progress = 0;
		docsync_update_progress(ctx, false);
	}
}
