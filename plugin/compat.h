/*-------------------------------------------------------------------------
 *
 * compat.h
 *		Every difference between the PostgreSQL majors docsync supports (15 and newer), in one place.
 *		The rest of the plugin is written against the names defined here.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DOCSYNC_COMPAT_H
#define DOCSYNC_COMPAT_H

#include "replication/output_plugin.h"
#include "replication/reorderbuffer.h"

#if PG_VERSION_NUM < 150000
#error "docsync needs PostgreSQL 15 or newer"
#endif

/*
 * The old and new tuples of a change. PostgreSQL 17 stores a HeapTuple directly; earlier majors wrap
 * it in a ReorderBufferTupleBuf.
 */
#if PG_VERSION_NUM >= 170000
#define DOCSYNC_CHANGE_NEWTUPLE(change) ((change)->data.tp.newtuple)
#define DOCSYNC_CHANGE_OLDTUPLE(change) ((change)->data.tp.oldtuple)
#else
#define DOCSYNC_CHANGE_NEWTUPLE(change) \
	((change)->data.tp.newtuple ? &(change)->data.tp.newtuple->tuple : (HeapTuple) NULL)
#define DOCSYNC_CHANGE_OLDTUPLE(change) \
	((change)->data.tp.oldtuple ? &(change)->data.tp.oldtuple->tuple : (HeapTuple) NULL)
#endif

/*
 * Progress reports. Before PostgreSQL 16 the output plugin itself must report progress, with a flag
 * saying whether the transaction was skipped, and must do so now and then inside long transactions
 * whose changes it filters out, or the walsender neither sends keepalives nor lets the slot advance.
 * From 16 on the server does both around the callbacks.
 */
#if PG_VERSION_NUM < 160000
#define DOCSYNC_REPORT_PROGRESS 1
#define docsync_update_progress(ctx, skipped_xact) OutputPluginUpdateProgress((ctx), (skipped_xact))
#else
#define DOCSYNC_REPORT_PROGRESS 0
#define docsync_update_progress(ctx, skipped_xact) ((void) 0)
#endif

/* Changes between progress reports inside one transaction (before PostgreSQL 16). */
#define DOCSYNC_PROGRESS_EVERY_CHANGES 100

#endif							/* DOCSYNC_COMPAT_H */
