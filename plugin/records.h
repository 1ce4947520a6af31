/*-------------------------------------------------------------------------
 *
 * records.h
 *		The record writers (records.c): one binary and one text form of each record of
 *		shared/docsync_wire.h. decode.c decides what to write and when; a writer only encodes.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DOCSYNC_RECORDS_H
#define DOCSYNC_RECORDS_H

#include "lib/stringinfo.h"
#include "replication/reorderbuffer.h"

#include "plugin.h"

/* One column value of a tuple being written. */
typedef struct DocsyncValue
{
	char		kind;			/* DOCSYNC_VAL_* */
	const char *text;			/* DOCSYNC_VAL_TEXT: the type's text output (not terminated) */
	int			len;			/* DOCSYNC_VAL_TEXT: its length in bytes */
	Datum		datum;			/* the raw value (valid for TEXT, and for TOAST as a pointer) */
	char		digits[24];		/* room for an integer's text form */
} DocsyncValue;

/*
 * The records of one format, each appended to out (the caller brackets it with
 * OutputPluginPrepareWrite and OutputPluginWrite). row writes an INSERT, UPDATE or DELETE (type
 * DOCSYNC_REC_*): newvals for INSERT and UPDATE, oldvals for UPDATE and DELETE, each one value per
 * emitted column of entry.
 */
typedef struct DocsyncWriter
{
	void		(*begin) (StringInfo out, ReorderBufferTXN *txn);
	void		(*relation) (StringInfo out, const DocsyncRelEntry *entry);
	void		(*row) (StringInfo out, char type, const DocsyncRelEntry *entry,
						const DocsyncValue *newvals, const DocsyncValue *oldvals);
	void		(*truncate) (StringInfo out, DocsyncRelEntry *const *entries, int nentries, uint8 flags);
	void		(*message) (StringInfo out, bool transactional, const char *prefix,
							const char *content, Size content_size);
	void		(*commit) (StringInfo out, ReorderBufferTXN *txn, XLogRecPtr commit_lsn);
} DocsyncWriter;

/* The writer of the binary format (binary true) or of the text format. */
extern const DocsyncWriter *docsync_writer(bool binary);

#endif							/* DOCSYNC_RECORDS_H */
