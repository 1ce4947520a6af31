/*-------------------------------------------------------------------------
 *
 * decode.c
 *		The docsync logical decoding output plugin.
 *
 * This first version parses and validates its options and emits nothing; the record format it will
 * emit is specified in shared/docsync_wire.h.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "commands/defrem.h"
#include "nodes/pg_list.h"
#include "replication/logical.h"
#include "utils/memutils.h"

#include "docsync.h"
#include "docsync_wire.h"

/* Per-slot-session state. */
typedef struct DocsyncDecodingData
{
	MemoryContext context;		/* per-change context, reset after each change */
	int			proto_version;	/* wire version the client speaks */
	bool		binary;			/* format binary (true) or text (false) */
} DocsyncDecodingData;

/* Callbacks */
static void docsync_startup(LogicalDecodingContext *ctx, OutputPluginOptions *opt, bool is_init);
static void docsync_shutdown(LogicalDecodingContext *ctx);
static void docsync_begin(LogicalDecodingContext *ctx, ReorderBufferTXN *txn);
static void docsync_change(LogicalDecodingContext *ctx, ReorderBufferTXN *txn,
						   Relation relation, ReorderBufferChange *change);
static void docsync_commit(LogicalDecodingContext *ctx, ReorderBufferTXN *txn,
						   XLogRecPtr commit_lsn);

/* Helpers */
static void parse_output_options(DocsyncDecodingData *data, List *options);

void
_PG_output_plugin_init(OutputPluginCallbacks *cb)
{
	cb->startup_cb = docsync_startup;
	cb->begin_cb = docsync_begin;
	cb->change_cb = docsync_change;
	cb->commit_cb = docsync_commit;
	cb->shutdown_cb = docsync_shutdown;
}

/* Slot session start: allocate state and parse the options. */
static void
docsync_startup(LogicalDecodingContext *ctx, OutputPluginOptions *opt, bool is_init)
{
	DocsyncDecodingData *data = palloc0(sizeof(DocsyncDecodingData));

	data->context = AllocSetContextCreate(ctx->context, "docsync change context",
										  ALLOCSET_DEFAULT_SIZES);
	data->proto_version = DOCSYNC_PROTO_VERSION_MAX;
	data->binary = true;
	ctx->output_plugin_private = data;
	if (!is_init)
		parse_output_options(data, ctx->output_plugin_options);
	opt->output_type = data->binary ? OUTPUT_PLUGIN_BINARY_OUTPUT : OUTPUT_PLUGIN_TEXTUAL_OUTPUT;
}

/* Slot session end. */
static void
docsync_shutdown(LogicalDecodingContext *ctx)
{
	DocsyncDecodingData *data = ctx->output_plugin_private;

	MemoryContextDelete(data->context);
}

/* BEGIN: nothing is emitted yet. */
static void
docsync_begin(LogicalDecodingContext *ctx, ReorderBufferTXN *txn)
{
}

/* A row change: nothing is emitted yet. */
static void
docsync_change(LogicalDecodingContext *ctx, ReorderBufferTXN *txn,
			   Relation relation, ReorderBufferChange *change)
{
}

/* COMMIT: nothing is emitted yet. */
static void
docsync_commit(LogicalDecodingContext *ctx, ReorderBufferTXN *txn, XLogRecPtr commit_lsn)
{
}

/* Parses the plugin options once; unknown, duplicate and malformed options are errors. */
static void
parse_output_options(DocsyncDecodingData *data, List *options)
{
	ListCell   *lc;
	bool		seen_proto = false;
	bool		seen_format = false;

	foreach(lc, options)
	{
		DefElem    *elem = lfirst(lc);
		char	   *value = elem->arg ? strVal(elem->arg) : NULL;

		if (strcmp(elem->defname, "proto_version") == 0)
		{
			char	   *end;
			long		v;

			if (seen_proto)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("conflicting or redundant options: \"%s\"", elem->defname)));
			seen_proto = true;
			v = value ? strtol(value, &end, 10) : 0;
			if (value == NULL || *value == '\0' || *end != '\0')
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("invalid value \"%s\" for docsync option \"proto_version\"",
								value ? value : ""),
						 errhint("Pass a whole number between %d and %d.",
								 DOCSYNC_PROTO_VERSION_MIN, DOCSYNC_PROTO_VERSION_MAX)));
			if (v < DOCSYNC_PROTO_VERSION_MIN || v > DOCSYNC_PROTO_VERSION_MAX)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("docsync wire protocol version %ld is not supported", v),
						 errdetail("This server's docsync speaks versions %d to %d.",
								   DOCSYNC_PROTO_VERSION_MIN, DOCSYNC_PROTO_VERSION_MAX),
						 errhint("Upgrade the docsync extension or the worker so that they share a version.")));
			data->proto_version = (int) v;
		}
		else if (strcmp(elem->defname, "format") == 0)
		{
			if (seen_format)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("conflicting or redundant options: \"%s\"", elem->defname)));
			seen_format = true;
			if (value != NULL && strcmp(value, "binary") == 0)
				data->binary = true;
			else if (value != NULL && strcmp(value, "text") == 0)
				data->binary = false;
			else
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("invalid value \"%s\" for docsync option \"format\"", value ? value : ""),
						 errhint("Use \"binary\" or \"text\".")));
		}
		else
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("unrecognized docsync option \"%s\"", elem->defname),
					 errhint("Valid options are tables, format, proto_version, messages and origin.")));
	}
}
