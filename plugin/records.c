/*-------------------------------------------------------------------------
 *
 * records.c
 *		The record writers: the binary and the text form of each record the plugin emits, both
 *		specified in shared/docsync_wire.h. decode.c decides which records a transaction gets and
 *		brackets each with OutputPluginPrepareWrite/OutputPluginWrite; the writer of the slot's
 *		format, picked once at startup, appends the record's bytes to ctx->out. Nothing here reads
 *		the catalogs or the options, or decides whether a record is written.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/transam.h"

#include "docsync_wire.h"
#include "records.h"

/* Binary records */
static void binary_begin(StringInfo out, ReorderBufferTXN *txn);
static void binary_relation(StringInfo out, const DocsyncRelEntry *entry);
static void binary_row(StringInfo out, char type, const DocsyncRelEntry *entry,
					   const DocsyncValue *newvals, const DocsyncValue *oldvals);
static void binary_truncate(StringInfo out, DocsyncRelEntry *const *entries, int nentries, uint8 flags);
static void binary_message(StringInfo out, bool transactional, const char *prefix,
						   const char *content, Size content_size);
static void binary_commit(StringInfo out, ReorderBufferTXN *txn, XLogRecPtr commit_lsn);
static void binary_tuple(StringInfo out, const DocsyncRelEntry *entry, const DocsyncValue *values);

/* Text records */
static void text_begin(StringInfo out, ReorderBufferTXN *txn);
static void text_relation(StringInfo out, const DocsyncRelEntry *entry);
static void text_row(StringInfo out, char type, const DocsyncRelEntry *entry,
					 const DocsyncValue *newvals, const DocsyncValue *oldvals);
static void text_truncate(StringInfo out, DocsyncRelEntry *const *entries, int nentries, uint8 flags);
static void text_message(StringInfo out, bool transactional, const char *prefix,
						 const char *content, Size content_size);
static void text_commit(StringInfo out, ReorderBufferTXN *txn, XLogRecPtr commit_lsn);
static void text_tuple(StringInfo out, const char *label, const DocsyncRelEntry *entry,
					   const DocsyncValue *values);

/* Encoding helpers */
static uint64 full_xid(TransactionId xid);
static void put_uv(StringInfo out, uint64 v);
static void put_str(StringInfo out, const char *s, size_t len);
static void append_ident(StringInfo out, const char *name);
static void append_qualified(StringInfo out, const char *schema, const char *name);
static void append_column_label(StringInfo out, const DocsyncColumn *col);
static void append_literal(StringInfo out, const char *s, size_t len);

static const DocsyncWriter binary_writer = {
	.begin = binary_begin,
	.relation = binary_relation,
	.row = binary_row,
	.truncate = binary_truncate,
	.message = binary_message,
	.commit = binary_commit,
};

static const DocsyncWriter text_writer = {
	.begin = text_begin,
	.relation = text_relation,
	.row = text_row,
	.truncate = text_truncate,
	.message = text_message,
	.commit = text_commit,
};

const DocsyncWriter *
docsync_writer(bool binary)
{
	return binary ? &binary_writer : &text_writer;
}

/* ---- binary ---- */

/* 'B': uv xid (64-bit), uv commit_lsn, sv commit_time. */
static void
binary_begin(StringInfo out, ReorderBufferTXN *txn)
{
	appendStringInfoChar(out, DOCSYNC_REC_BEGIN);
	put_uv(out, full_xid(txn->xid));
	put_uv(out, txn->final_lsn);
	put_uv(out, docsync_zigzag_encode(txn->xact_time.commit_time));
}

/* 'R': uv relid, str schema, str name, u8 replident, uv natts, then each column. */
static void
binary_relation(StringInfo out, const DocsyncRelEntry *entry)
{
	int			i;

	appendStringInfoChar(out, DOCSYNC_REC_RELATION);
	put_uv(out, entry->root_relid);
	put_str(out, entry->schema, strlen(entry->schema));
	put_str(out, entry->name, strlen(entry->name));
	appendStringInfoChar(out, entry->replident);
	put_uv(out, (uint64) entry->ncolumns);
	for (i = 0; i < entry->ncolumns; i++)
	{
		DocsyncColumn *col = &entry->columns[i];

		put_uv(out, (uint64) col->attnum);
		put_str(out, col->name, strlen(col->name));
		put_uv(out, col->typid);
		appendStringInfoChar(out, (char) col->flags);
	}
}

/* 'I', 'U', 'D': uv relid, then the new tuple (not for DELETE) and the old one (not for INSERT). */
static void
binary_row(StringInfo out, char type, const DocsyncRelEntry *entry,
		   const DocsyncValue *newvals, const DocsyncValue *oldvals)
{
	appendStringInfoChar(out, type);
	put_uv(out, entry->root_relid);
	if (type != DOCSYNC_REC_DELETE)
		binary_tuple(out, entry, newvals);
	if (type != DOCSYNC_REC_INSERT)
		binary_tuple(out, entry, oldvals);
}

/* 'T': u8 flags, uv nrels, each relid. */
static void
binary_truncate(StringInfo out, DocsyncRelEntry *const *entries, int nentries, uint8 flags)
{
	int			i;

	appendStringInfoChar(out, DOCSYNC_REC_TRUNCATE);
	appendStringInfoChar(out, (char) flags);
	put_uv(out, (uint64) nentries);
	for (i = 0; i < nentries; i++)
		put_uv(out, entries[i]->root_relid);
}

/* 'M': u8 transactional, str prefix, str content. */
static void
binary_message(StringInfo out, bool transactional, const char *prefix,
			   const char *content, Size content_size)
{
	appendStringInfoChar(out, DOCSYNC_REC_MESSAGE);
	appendStringInfoChar(out, transactional ? 1 : 0);
	put_str(out, prefix, strlen(prefix));
	put_str(out, content, content_size);
}

/* 'C': uv commit_lsn, uv end_lsn. */
static void
binary_commit(StringInfo out, ReorderBufferTXN *txn, XLogRecPtr commit_lsn)
{
	appendStringInfoChar(out, DOCSYNC_REC_COMMIT);
	put_uv(out, commit_lsn);
	put_uv(out, txn->end_lsn);
}

/* A tuple: uv natts, then each value's kind, followed by its text for DOCSYNC_VAL_TEXT. */
static void
binary_tuple(StringInfo out, const DocsyncRelEntry *entry, const DocsyncValue *values)
{
	int			i;

	put_uv(out, (uint64) entry->ncolumns);
	for (i = 0; i < entry->ncolumns; i++)
	{
		appendStringInfoChar(out, values[i].kind);
		if (values[i].kind == DOCSYNC_VAL_TEXT)
			put_str(out, values[i].text, values[i].len);
	}
}

/* ---- text: one readable line each ---- */

static void
text_begin(StringInfo out, ReorderBufferTXN *txn)
{
	appendStringInfoString(out, "BEGIN");
}

/* RELATION schema.name replident X: col type [identity] [missing], … */
static void
text_relation(StringInfo out, const DocsyncRelEntry *entry)
{
	int			i;

	appendStringInfoString(out, "RELATION ");
	append_qualified(out, entry->schema, entry->name);
	appendStringInfo(out, " replident %c:", entry->replident);
	for (i = 0; i < entry->ncolumns; i++)
	{
		DocsyncColumn *col = &entry->columns[i];

		appendStringInfoString(out, i == 0 ? " " : ", ");
		append_column_label(out, col);
		appendStringInfo(out, " %u", col->typid);
		if (col->flags & DOCSYNC_COL_IDENTITY)
			appendStringInfoString(out, " identity");
		if (col->flags & DOCSYNC_COL_MISSING)
			appendStringInfoString(out, " missing");
	}
}

/* INSERT|UPDATE|DELETE schema.name new(…) old(…) */
static void
text_row(StringInfo out, char type, const DocsyncRelEntry *entry,
		 const DocsyncValue *newvals, const DocsyncValue *oldvals)
{
	switch (type)
	{
		case DOCSYNC_REC_INSERT:
			appendStringInfoString(out, "INSERT ");
			break;
		case DOCSYNC_REC_UPDATE:
			appendStringInfoString(out, "UPDATE ");
			break;
		case DOCSYNC_REC_DELETE:
			appendStringInfoString(out, "DELETE ");
			break;
		default:
			elog(ERROR, "docsync: unexpected row record type %d", (int) type);
	}
	append_qualified(out, entry->schema, entry->name);
	if (type != DOCSYNC_REC_DELETE)
		text_tuple(out, "new", entry, newvals);
	if (type != DOCSYNC_REC_INSERT)
		text_tuple(out, "old", entry, oldvals);
}

/* TRUNCATE schema.name, … [CASCADE] [RESTART IDENTITY] */
static void
text_truncate(StringInfo out, DocsyncRelEntry *const *entries, int nentries, uint8 flags)
{
	int			i;

	appendStringInfoString(out, "TRUNCATE ");
	for (i = 0; i < nentries; i++)
	{
		if (i > 0)
			appendStringInfoString(out, ", ");
		append_qualified(out, entries[i]->schema, entries[i]->name);
	}
	if (flags & DOCSYNC_TRUNCATE_CASCADE)
		appendStringInfoString(out, " CASCADE");
	if (flags & DOCSYNC_TRUNCATE_RESTART_IDENTITY)
		appendStringInfoString(out, " RESTART IDENTITY");
}

/* MESSAGE transactional|nontransactional 'prefix' 'content' */
static void
text_message(StringInfo out, bool transactional, const char *prefix,
			 const char *content, Size content_size)
{
	appendStringInfoString(out, transactional ? "MESSAGE transactional " : "MESSAGE nontransactional ");
	append_literal(out, prefix, strlen(prefix));
	appendStringInfoChar(out, ' ');
	append_literal(out, content, content_size);
}

static void
text_commit(StringInfo out, ReorderBufferTXN *txn, XLogRecPtr commit_lsn)
{
	appendStringInfoString(out, "COMMIT");
}

/* A tuple: label(col=value …), a value being a literal, NULL, TOAST, SAME or UNKNOWN. */
static void
text_tuple(StringInfo out, const char *label, const DocsyncRelEntry *entry, const DocsyncValue *values)
{
	int			i;

	appendStringInfo(out, " %s(", label);
	for (i = 0; i < entry->ncolumns; i++)
	{
		if (i > 0)
			appendStringInfoChar(out, ' ');
		append_column_label(out, &entry->columns[i]);
		appendStringInfoChar(out, '=');
		switch (values[i].kind)
		{
			case DOCSYNC_VAL_TEXT:
				append_literal(out, values[i].text, values[i].len);
				break;
			case DOCSYNC_VAL_NULL:
				appendStringInfoString(out, "NULL");
				break;
			case DOCSYNC_VAL_TOAST:
				appendStringInfoString(out, "TOAST");
				break;
			case DOCSYNC_VAL_SAME:
				appendStringInfoString(out, "SAME");
				break;
			default:
				appendStringInfoString(out, "UNKNOWN");
				break;
		}
	}
	appendStringInfoChar(out, ')');
}

/* ---- encoding helpers ---- */

/* Widens a decoded xid to 64 bits with the epoch of the server's next xid. */
static uint64
full_xid(TransactionId xid)
{
	FullTransactionId next = ReadNextFullTransactionId();
	uint64		epoch = EpochFromFullTransactionId(next);

	/* The decoded transaction is older than next: a larger 32-bit value means the previous epoch. */
	if (xid > XidFromFullTransactionId(next) && epoch > 0)
		epoch--;
	return (epoch << 32) | xid;
}

static void
put_uv(StringInfo out, uint64 v)
{
	if (out->maxlen - out->len <= DOCSYNC_UV_MAX_BYTES)
		enlargeStringInfo(out, DOCSYNC_UV_MAX_BYTES);
	out->len += (int) docsync_uv_encode(v, (uint8 *) out->data + out->len);
	out->data[out->len] = '\0';
}

static void
put_str(StringInfo out, const char *s, size_t len)
{
	put_uv(out, (uint64) len);
	appendBinaryStringInfo(out, s, (int) len);
}

/* An identifier, double-quoted unless it matches [a-z_][a-z0-9_]*. */
static void
append_ident(StringInfo out, const char *name)
{
	const char *p;
	bool		plain = name[0] != '\0' && ((name[0] >= 'a' && name[0] <= 'z') || name[0] == '_');

	for (p = name; plain && *p; p++)
		plain = (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_';
	if (plain)
	{
		appendStringInfoString(out, name);
		return;
	}
	appendStringInfoChar(out, '"');
	for (p = name; *p; p++)
	{
		if (*p == '"')
			appendStringInfoChar(out, '"');
		appendStringInfoChar(out, *p);
	}
	appendStringInfoChar(out, '"');
}

static void
append_qualified(StringInfo out, const char *schema, const char *name)
{
	append_ident(out, schema);
	appendStringInfoChar(out, '.');
	append_ident(out, name);
}

/* A column's name, or "#attnum" for a listed attnum the relation does not have. */
static void
append_column_label(StringInfo out, const DocsyncColumn *col)
{
	if (col->name[0] != '\0')
		append_ident(out, col->name);
	else
		appendStringInfo(out, "\"#%d\"", col->attnum);
}

/* A quoted literal on one line: '' for a quote, \\ \n \r \t and \xNN for other control bytes. */
static void
append_literal(StringInfo out, const char *s, size_t len)
{
	size_t		i;

	enlargeStringInfo(out, (int) len + 2);
	appendStringInfoChar(out, '\'');
	for (i = 0; i < len; i++)
	{
		unsigned char c = (unsigned char) s[i];

		switch (c)
		{
			case '\'':
				appendStringInfoString(out, "''");
				break;
			case '\\':
				appendStringInfoString(out, "\\\\");
				break;
			case '\n':
				appendStringInfoString(out, "\\n");
				break;
			case '\r':
				appendStringInfoString(out, "\\r");
				break;
			case '\t':
				appendStringInfoString(out, "\\t");
				break;
			default:
				if (c < 0x20 || c == 0x7f)
					appendStringInfo(out, "\\x%02x", c);
				else
					appendStringInfoCharMacro(out, (char) c);
				break;
		}
	}
	appendStringInfoChar(out, '\'');
}
